//! The per-part send loop every HTTP connector shares: bounded tries, a bounded wait, the
//! surface's rate-limit answer honoured, and the part handed back when it still fails.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use tokio::time::Instant;

use super::{ChannelError, ChannelErrorKind, Surface, Token};
use crate::channel::{PartReceipt, SendError};
use crate::outbound::CommittedPart;
use crate::retry::{Backoff, parse_retry_after};

/// How hard a connector tries to send one part before handing it back.
///
/// For each part, at most [`max_tries`](Self::max_tries) requests are made, and the waits
/// between them add up to at most [`max_wait`](Self::max_wait). A wait is the surface's own
/// rate-limit answer when it gives one (Discord's `retry_after` body field, Telegram's
/// `parameters.retry_after`, otherwise the `retry-after-ms`, `x-ms-retry-after-ms` or
/// `Retry-After` header, in seconds or as an HTTP-date, read by
/// [`parse_retry_after`](crate::retry::parse_retry_after)), otherwise exponential backoff for
/// 5xx answers and connection failures: a [`Backoff`] from [`backoff`](Self::backoff), doubling
/// with each try and capped at the wait budget. Every wait is cut to what is left of the part's
/// budget; once the budget or the tries are spent, the part comes back in a [`SendError`] (with
/// the surface's requested wait in [`retry_after`](SendError::retry_after) when there was one).
/// A requested wait is clamped to [`MAX_RETRY_AFTER`] (24 hours), whatever number the surface
/// sent.
///
/// A rate limit also pauses the connector: later parts (and clones of the connector) wait until
/// the surface's requested instant, still within their own budget. A bot-wide limit (Discord's
/// `global: true`) pauses every connector made from the same one with `for_channel`/`for_chat`.
///
/// Every answer's body is read incrementally under [`max_response_bytes`](Self::max_response_bytes)
/// (default [`DEFAULT_MAX_RESPONSE_BYTES`], 64 KiB: the surfaces' answers to a send are a few
/// KiB); a longer one is never buffered and ends that request as
/// [`ChannelErrorKind::ResponseTooLarge`](super::ChannelErrorKind::ResponseTooLarge).
///
/// Defaults: 5 tries, 30 s of waiting per part, 250 ms initial backoff, 10 s per request,
/// 64 KiB per answer. No jitter: a connector sends one part at a time and the surface's own
/// wait, when it gives one, is what the wait follows.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::channel::http::SendPolicy;
///
/// let policy = SendPolicy::default().max_tries(3).max_wait(Duration::from_secs(5));
/// assert_eq!(policy.tries(), 3);
/// assert_eq!(policy.response_limit(), 64 * 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendPolicy {
    max_tries: u32,
    max_wait: Duration,
    backoff: Duration,
    timeout: Duration,
    max_response_bytes: usize,
}

/// The most a connector waits for a surface's requested wait, and reports in
/// [`SendError::retry_after`]: a surface may send any number, and a day is plenty.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The default cap on one answer's body: 64 KiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024;

impl Default for SendPolicy {
    fn default() -> Self {
        Self {
            max_tries: 5,
            max_wait: Duration::from_secs(30),
            backoff: Duration::from_millis(250),
            timeout: Duration::from_secs(10),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

impl SendPolicy {
    /// The default policy (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `tries` requests per part (at least 1; `1` disables retries).
    pub fn max_tries(mut self, tries: u32) -> Self {
        self.max_tries = tries.max(1);
        self
    }

    /// At most `wait` of waiting, in total, per part (`Duration::ZERO` disables retries).
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// The first backoff after a 5xx or a connection failure; it doubles with each try.
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long one request may take before it counts as a transport failure.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Reads at most `bytes` of each answer's body; a longer answer fails that request with
    /// [`ChannelErrorKind::ResponseTooLarge`](super::ChannelErrorKind::ResponseTooLarge).
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// The configured cap on one answer's body, in bytes.
    pub fn response_limit(&self) -> usize {
        self.max_response_bytes
    }

    /// The configured number of tries per part.
    pub fn tries(&self) -> u32 {
        self.max_tries
    }

    /// The configured wait budget per part.
    pub fn wait_budget(&self) -> Duration {
        self.max_wait
    }

    /// The backoff after the `tries`-th failed try: doubling from the configured start, never
    /// past the wait budget (a longer step could not be waited out anyway).
    fn backoff_for(&self, tries: u32) -> Duration {
        Backoff::new(self.backoff, self.max_wait).step(tries)
    }
}

/// What one request ended with, as a connector reads its surface's answer.
pub(crate) enum Outcome {
    /// Posted; the surface's id for it.
    Sent(String),
    /// Rate limited, with the surface's requested wait.
    RateLimited {
        wait: Option<Duration>,
        global: bool,
    },
    /// A failure that sending again may fix (5xx, a transient API error).
    Retry(ChannelErrorKind),
    /// A failure not retried here; `retryable` says whether delivering again later could work.
    Fail {
        kind: ChannelErrorKind,
        retryable: bool,
    },
}

/// One request, ready to send as many times as it takes.
pub(crate) struct Request {
    pub(crate) url: String,
    pub(crate) authorization: Option<String>,
    pub(crate) body: serde_json::Value,
}

/// Reads a surface's answer: status, headers and body bytes.
pub(crate) type Classify = fn(StatusCode, &HeaderMap, &[u8], &Token) -> Outcome;

/// The HTTP side of a connector: client, policy, token and the shared rate-limit pause.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) surface: Surface,
    pub(crate) client: reqwest::Client,
    pub(crate) policy: SendPolicy,
    pub(crate) token: Token,
    /// Until when this route is rate limited; clones share it.
    route_paused: Pause,
    /// Until when the whole bot is rate limited (Discord's global limit); clones and siblings
    /// share it.
    bot_paused: Pause,
}

/// An instant before which no request should be sent, shared by whoever holds a clone.
#[derive(Clone, Default)]
struct Pause(Arc<Mutex<Option<Instant>>>);

impl Pause {
    fn left(&self) -> Duration {
        let until = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        until.map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(Instant::now())
        })
    }

    fn extend(&self, wait: Duration) {
        // A surface may ask for any wait; the clamp cannot overflow an instant.
        let until = Instant::now() + wait.min(MAX_RETRY_AFTER);
        let mut paused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if paused.is_none_or(|p| p < until) {
            *paused = Some(until);
        }
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("surface", &self.surface)
            .field("policy", &self.policy)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Transport {
    pub(crate) fn new(surface: Surface, token: Token) -> Self {
        Self {
            surface,
            client: reqwest::Client::new(),
            policy: SendPolicy::default(),
            token,
            route_paused: Pause::default(),
            bot_paused: Pause::default(),
        }
    }

    /// The same bot on another route (channel, chat): shares the client, token, policy and the
    /// bot-wide pause, with a route pause of its own.
    pub(crate) fn sibling(&self) -> Self {
        Self {
            route_paused: Pause::default(),
            ..self.clone()
        }
    }

    fn pause_left(&self) -> Duration {
        self.route_paused.left().max(self.bot_paused.left())
    }

    fn pause_for(&self, wait: Duration, global: bool) {
        if global {
            self.bot_paused.extend(wait);
        } else {
            self.route_paused.extend(wait);
        }
    }

    /// Sends `part` as `request`, retrying within the policy; hands the part back on failure.
    pub(crate) async fn send(
        &self,
        part: CommittedPart,
        request: Request,
        classify: Classify,
    ) -> Result<PartReceipt, SendError> {
        self.retry(part, || self.attempt(&request, classify)).await
    }

    /// The retry loop, apart from HTTP so its timing can be tested on paused time.
    async fn retry<F, Fut>(
        &self,
        part: CommittedPart,
        mut attempt: F,
    ) -> Result<PartReceipt, SendError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let policy = self.policy;
        let surface = self.surface.as_str();
        let delivery = part.delivery_id().to_string();
        let index = part.index();
        let mut spent = Duration::ZERO;
        let mut tries = 0u32;
        loop {
            let pause = self.pause_left().min(policy.max_wait.saturating_sub(spent));
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
                spent += pause;
            }
            tries += 1;
            let outcome = attempt().await;
            let (kind, wait, asked) = match outcome {
                Outcome::Sent(id) => {
                    tracing::debug!(target: "mesh_egress::channel", surface, delivery, part = index, tries, "part sent");
                    return Ok(PartReceipt::new(id));
                }
                Outcome::RateLimited { wait, global } => {
                    let wait = wait.map(|w| w.min(MAX_RETRY_AFTER));
                    let pause = wait.unwrap_or_else(|| policy.backoff_for(tries));
                    self.pause_for(pause, global);
                    tracing::debug!(target: "mesh_egress::channel", surface, delivery, part = index, tries, global, retry_after_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)), "rate limited");
                    (
                        ChannelErrorKind::RateLimited {
                            retry_after: wait,
                            global,
                        },
                        pause,
                        wait,
                    )
                }
                Outcome::Retry(kind) => {
                    tracing::debug!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure = kind_name(&kind), "send failed; retrying");
                    (kind, policy.backoff_for(tries), None)
                }
                Outcome::Fail { kind, retryable } => {
                    tracing::warn!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure = kind_name(&kind), "part refused");
                    let error = ChannelError::new(self.surface, tries, kind);
                    return Err(SendError::new(part, error).with_retryable(retryable));
                }
            };
            let left = policy.max_wait.saturating_sub(spent);
            if tries >= policy.max_tries || left.is_zero() {
                tracing::warn!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure = kind_name(&kind), "gave up on part");
                let error = SendError::new(part, ChannelError::new(self.surface, tries, kind));
                return Err(match asked {
                    Some(wait) => error.with_retry_after(wait),
                    None => error,
                });
            }
            let wait = wait.min(left);
            tokio::time::sleep(wait).await;
            spent += wait;
        }
    }

    async fn attempt(&self, request: &Request, classify: Classify) -> Outcome {
        let mut builder = self
            .client
            .post(&request.url)
            .timeout(self.policy.timeout)
            .json(&request.body);
        if let Some(auth) = &request.authorization {
            let Ok(mut value) = HeaderValue::from_str(auth) else {
                return Outcome::Fail {
                    kind: ChannelErrorKind::InvalidToken,
                    retryable: false,
                };
            };
            // Kept out of any Debug output of the request.
            value.set_sensitive(true);
            builder = builder.header(reqwest::header::AUTHORIZATION, value);
        }
        let response = match builder.send().await {
            Ok(response) => response,
            // A request that could not be built (a base URL or token that makes no valid URL)
            // will not build next time either.
            Err(error) if error.is_builder() => {
                return Outcome::Fail {
                    kind: self.transport_failure(error),
                    retryable: false,
                };
            }
            Err(error) => return Outcome::Retry(self.transport_failure(error)),
        };
        let status = response.status();
        let headers = response.headers().clone();
        match read_capped(response, self.policy.max_response_bytes).await {
            Ok(body) => classify(status, &headers, &body, &self.token),
            Err(BodyError::TooLarge) => too_large(status, &headers, self.policy.max_response_bytes),
            Err(BodyError::Transport(error)) => Outcome::Retry(self.transport_failure(error)),
        }
    }

    /// A transport failure's description, without the request URL (which may hold the token).
    fn transport_failure(&self, error: reqwest::Error) -> ChannelErrorKind {
        let what = if error.is_builder() {
            "the request could not be built"
        } else if error.is_timeout() {
            "timed out"
        } else if error.is_connect() {
            "could not connect"
        } else {
            "connection failed"
        };
        let error = error.without_url();
        let mut detail = what.to_owned();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            detail.push_str(": ");
            detail.push_str(&cause.to_string());
            source = cause.source();
        }
        ChannelErrorKind::Transport {
            detail: self.token.scrub(&detail),
        }
    }
}

fn kind_name(kind: &ChannelErrorKind) -> &'static str {
    match kind {
        ChannelErrorKind::RateLimited { .. } => "rate_limited",
        ChannelErrorKind::Server { .. } => "server",
        ChannelErrorKind::Refused { .. } => "refused",
        ChannelErrorKind::Malformed { .. } => "malformed",
        ChannelErrorKind::Transport { .. } => "transport",
        ChannelErrorKind::InvalidToken => "invalid_token",
        ChannelErrorKind::ResponseTooLarge { .. } => "response_too_large",
    }
}

/// Why an answer's body could not be read.
enum BodyError {
    /// It is longer than the cap.
    TooLarge,
    /// The connection failed mid-body.
    Transport(reqwest::Error),
}

/// Reads `response`'s body chunk by chunk, stopping as soon as it would pass `limit` bytes (or
/// at once, when the declared length already does): an answer is never buffered whole.
async fn read_capped(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    let declared = response
        .content_length()
        .map(|len| usize::try_from(len).unwrap_or(usize::MAX));
    if declared.is_some_and(|len| len > limit) {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if chunk.len() > limit.saturating_sub(body.len()) {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What an answer longer than the cap means for `status`: the same as an unreadable body (a 2xx
/// may have posted the part, so it is not sent again), with the surface's header wait for a 429.
fn too_large(status: StatusCode, headers: &HeaderMap, limit: usize) -> Outcome {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Outcome::RateLimited {
            wait: retry_after_header(headers),
            global: false,
        };
    }
    let kind = ChannelErrorKind::ResponseTooLarge {
        status: status.as_u16(),
        limit,
    };
    if status.is_server_error() {
        Outcome::Retry(kind)
    } else {
        Outcome::Fail {
            kind,
            retryable: status.is_success(),
        }
    }
}

/// The wait a surface asked for in its headers (`retry-after-ms`, `x-ms-retry-after-ms`, or
/// `Retry-After` in seconds or as an HTTP-date), if present and sane.
pub(crate) fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    parse_retry_after(
        |name| headers.get(name).and_then(|v| v.to_str().ok()),
        SystemTime::now(),
    )
}

/// A wait in seconds from a JSON body field (Discord's `retry_after`, Telegram's
/// `parameters.retry_after`): any finite, non-negative number, clamped to [`MAX_RETRY_AFTER`];
/// anything else (a string, a negative number) is no wait at all.
pub(crate) fn seconds_field(value: Option<&serde_json::Value>) -> Option<Duration> {
    let secs = value?.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs_f64(
        secs.min(MAX_RETRY_AFTER.as_secs_f64()),
    ))
}

/// What a non-JSON or unexpected body means for `status`: a 5xx is a server failure worth
/// retrying; anything else is ambiguous or a refusal.
pub(crate) fn unexpected_body(status: StatusCode) -> Outcome {
    if status.is_server_error() {
        Outcome::Retry(ChannelErrorKind::Server {
            status: status.as_u16(),
        })
    } else if status == StatusCode::TOO_MANY_REQUESTS {
        Outcome::RateLimited {
            wait: None,
            global: false,
        }
    } else if status.is_success() {
        // The part may have been posted: sending it again could duplicate it.
        Outcome::Fail {
            kind: ChannelErrorKind::Malformed {
                status: status.as_u16(),
            },
            retryable: true,
        }
    } else {
        Outcome::Fail {
            kind: ChannelErrorKind::Malformed {
                status: status.as_u16(),
            },
            retryable: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::channel::PlainText;
    use crate::egress::{AgentMessage, Attribution};
    use crate::outbound::Outbound;
    use crate::ownership::Ownership;

    async fn committed(n: usize) -> Vec<CommittedPart> {
        let text = "x".repeat(n);
        let message = AgentMessage::new(text, Attribution::new("a", "c", "r"));
        let rendered = Outbound::new(message)
            .render(&PlainText::new().with_limit(1))
            .unwrap();
        rendered
            .commit(&Ownership::held())
            .await
            .unwrap()
            .into_parts()
            .collect()
    }

    fn transport(policy: SendPolicy) -> Transport {
        let mut transport = Transport::new(Surface::Slack, Token::new("t"));
        transport.policy = policy;
        transport
    }

    /// Sends `part` through the loop, answering each try from `script` (then `Sent`), and
    /// returns the result with the instant of every try, measured from the start.
    async fn run(
        transport: &Transport,
        part: CommittedPart,
        script: Vec<Outcome>,
    ) -> (Result<PartReceipt, SendError>, Vec<Duration>) {
        let start = Instant::now();
        let script = Mutex::new(VecDeque::from(script));
        let tries = Mutex::new(Vec::new());
        let result = transport
            .retry(part, || {
                tries.lock().unwrap().push(start.elapsed());
                let next = script.lock().unwrap().pop_front();
                std::future::ready(next.unwrap_or_else(|| Outcome::Sent("ok".into())))
            })
            .await;
        (result, tries.into_inner().unwrap())
    }

    fn limited(secs: u64) -> Outcome {
        Outcome::RateLimited {
            wait: Some(Duration::from_secs(secs)),
            global: false,
        }
    }

    fn server() -> Outcome {
        Outcome::Retry(ChannelErrorKind::Server { status: 503 })
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_is_waited_out_exactly_as_the_surface_asked() {
        let t = transport(SendPolicy::new());
        let part = committed(1).await.pop().unwrap();
        let (result, at) = run(&t, part, vec![limited(2)]).await;
        assert_eq!(result.unwrap().id(), "ok");
        assert_eq!(at, [Duration::ZERO, Duration::from_secs(2)]);
    }

    #[tokio::test(start_paused = true)]
    async fn server_errors_back_off_exponentially_from_the_configured_start() {
        let t = transport(SendPolicy::new().backoff(Duration::from_millis(250)));
        let part = committed(1).await.pop().unwrap();
        let (result, at) = run(&t, part, vec![server(), server(), server()]).await;
        assert!(result.is_ok());
        let ms = Duration::from_millis;
        assert_eq!(at, [ms(0), ms(250), ms(750), ms(1750)]);
    }

    #[tokio::test(start_paused = true)]
    async fn waits_are_cut_to_the_parts_budget_and_the_part_comes_back_with_the_asked_wait() {
        let t = transport(SendPolicy::new().max_wait(Duration::from_secs(30)));
        let part = committed(1).await.pop().unwrap();
        let (result, at) = run(&t, part, vec![limited(60), limited(60)]).await;
        let error = result.unwrap_err();
        assert_eq!(at, [Duration::ZERO, Duration::from_secs(30)]);
        assert_eq!(error.retry_after(), Some(Duration::from_secs(60)));
        assert!(error.retryable());
        assert_eq!(error.part().map(CommittedPart::index), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_part_comes_back_after_the_last_try() {
        let t = transport(
            SendPolicy::new()
                .max_tries(2)
                .backoff(Duration::from_millis(10)),
        );
        let part = committed(1).await.pop().unwrap();
        let (result, at) = run(&t, part, vec![server(), server(), server()]).await;
        let error = result.unwrap_err();
        let cause = std::error::Error::source(&error)
            .and_then(|e| e.downcast_ref::<ChannelError>())
            .unwrap();
        assert_eq!(cause.tries(), 2);
        assert_eq!(at.len(), 2);
        assert_eq!(error.retry_after(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_is_returned_at_once_without_waiting() {
        let t = transport(SendPolicy::new());
        let part = committed(1).await.pop().unwrap();
        let refused = Outcome::Fail {
            kind: ChannelErrorKind::Refused {
                status: 200,
                detail: "invalid_auth".into(),
            },
            retryable: false,
        };
        let (result, at) = run(&t, part, vec![refused]).await;
        assert!(!result.unwrap_err().retryable());
        assert_eq!(at, [Duration::ZERO]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_also_holds_back_the_next_part_until_the_asked_instant() {
        let t = transport(SendPolicy::new().max_wait(Duration::from_secs(1)));
        let mut parts = committed(2).await.into_iter();
        let start = Instant::now();
        // The surface asks for 3 s; the first part may wait only 1 s and gives up.
        let (first, _) = run(&t, parts.next().unwrap(), vec![limited(3), limited(3)]).await;
        assert!(first.is_err());
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        // The next part waits what is left of the pause, within its own 1 s budget.
        let (second, at) = run(&t, parts.next().unwrap(), vec![]).await;
        assert!(second.is_ok());
        assert_eq!(at, [Duration::from_secs(1)]);
    }

    #[test]
    fn backoff_doubles_from_the_configured_start_up_to_the_wait_budget() {
        let policy = SendPolicy::new()
            .backoff(Duration::from_millis(100))
            .max_wait(Duration::from_secs(30));
        assert_eq!(policy.backoff_for(1), Duration::from_millis(100));
        assert_eq!(policy.backoff_for(3), Duration::from_millis(400));
        assert_eq!(policy.backoff_for(200), Duration::from_secs(30));
        let huge = SendPolicy::new()
            .backoff(Duration::MAX)
            .max_wait(Duration::MAX);
        assert_eq!(huge.backoff_for(u32::MAX), Duration::MAX);
    }

    #[test]
    fn retry_after_reads_seconds_http_dates_and_the_ms_headers_and_refuses_nonsense() {
        let header = |name: &'static str, value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(name, value.parse().unwrap());
            retry_after_header(&headers)
        };
        assert_eq!(header("retry-after", "2"), Some(Duration::from_secs(2)));
        assert_eq!(
            header("retry-after", "0.25"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            header("retry-after-ms", "40"),
            Some(Duration::from_millis(40))
        );
        assert_eq!(
            header("x-ms-retry-after-ms", "7"),
            Some(Duration::from_millis(7))
        );
        let in_a_minute = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let wait = header("retry-after", &in_a_minute).expect("an HTTP-date is read");
        assert!(wait > Duration::from_secs(55) && wait <= Duration::from_secs(60));
        assert_eq!(header("retry-after", "-1"), None);
        assert_eq!(header("retry-after", "soon"), None);
    }

    #[test]
    fn a_body_wait_is_read_from_any_number_and_clamped() {
        let secs = |v: serde_json::Value| seconds_field(Some(&v));
        assert_eq!(
            secs(serde_json::json!(0.125)),
            Some(Duration::from_millis(125))
        );
        assert_eq!(secs(serde_json::json!(3)), Some(Duration::from_secs(3)));
        assert_eq!(secs(serde_json::json!(1e300)), Some(MAX_RETRY_AFTER));
        assert_eq!(secs(serde_json::json!(u64::MAX)), Some(MAX_RETRY_AFTER));
        assert_eq!(secs(serde_json::json!(-1)), None);
        assert_eq!(secs(serde_json::json!("3")), None);
        assert_eq!(seconds_field(None), None);
    }

    #[test]
    fn zero_tries_is_raised_to_one() {
        assert_eq!(SendPolicy::new().max_tries(0).tries(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_global_limit_holds_back_sibling_routes_and_a_route_limit_does_not() {
        let t = transport(SendPolicy::new().max_tries(1));
        let other_route = t.sibling();
        let mut parts = committed(4).await.into_iter();
        let global = Outcome::RateLimited {
            wait: Some(Duration::from_secs(2)),
            global: true,
        };
        let (limited_globally, _) = run(&t, parts.next().unwrap(), vec![global]).await;
        assert!(limited_globally.is_err());
        let (sent, at) = run(&other_route, parts.next().unwrap(), vec![]).await;
        assert!(sent.is_ok());
        assert_eq!(
            at,
            [Duration::from_secs(2)],
            "the sibling waited out the global limit"
        );

        let (limited_here, _) = run(&t, parts.next().unwrap(), vec![limited(5)]).await;
        assert!(limited_here.is_err());
        let (sent, at) = run(&other_route, parts.next().unwrap(), vec![]).await;
        assert!(sent.is_ok());
        assert_eq!(at, [Duration::ZERO], "a route limit stays on its route");
    }

    #[tokio::test(start_paused = true)]
    async fn an_absurd_requested_wait_is_cut_to_the_budget_and_reported_clamped() {
        let t = transport(SendPolicy::new().max_wait(Duration::from_secs(1)));
        let part = committed(1).await.pop().unwrap();
        let absurd = || Outcome::RateLimited {
            wait: Some(Duration::MAX),
            global: true,
        };
        let (result, at) = run(&t, part, vec![absurd(), absurd()]).await;
        assert_eq!(result.unwrap_err().retry_after(), Some(MAX_RETRY_AFTER));
        assert_eq!(at, [Duration::ZERO, Duration::from_secs(1)]);
    }
}
