//! The per-part send loop every HTTP connector shares: bounded tries, a bounded wait, the
//! surface's rate-limit answer honoured, and the part handed back when it still fails.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use tokio::time::Instant;

use super::answer::{BodyError, Outcome, read_capped, too_large};
use super::policy::{MAX_RETRY_AFTER, SendPolicy};
use super::{ChannelError, ChannelErrorKind, Surface, Token};
use crate::channel::{PartReceipt, SendError};
use crate::outbound::CommittedPart;

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

    /// The retry loop, apart from HTTP so its timing can be tested on paused time (and so a
    /// connector can put a lookup before a try: Slack's reconciliation).
    pub(crate) async fn retry<F, Fut>(
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

    /// One try of `request`, read by `classify`.
    pub(crate) async fn attempt(&self, request: &Request, classify: Classify) -> Outcome {
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
    pub(crate) fn transport_failure(&self, error: reqwest::Error) -> ChannelErrorKind {
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

    #[tokio::test(start_paused = true)]
    async fn the_largest_policy_values_neither_panic_nor_overflow() {
        let t = transport(
            SendPolicy::new()
                .max_tries(u32::MAX)
                .max_wait(Duration::MAX)
                .backoff(Duration::MAX)
                .request_timeout(Duration::MAX),
        );
        let part = committed(1).await.pop().unwrap();
        let absurd = Outcome::RateLimited {
            wait: Some(Duration::MAX),
            global: true,
        };
        let (result, at) = run(&t, part, vec![absurd, server()]).await;
        assert!(result.is_ok());
        assert_eq!(at.len(), 3);
        assert_eq!(at[1], MAX_RETRY_AFTER, "the asked wait, clamped");
        assert!(at[2] > at[1], "{at:?}");
    }
}
