//! The per-part send loop every HTTP connector shares: bounded tries, a bounded wait, the
//! conversation's [`RateBudget`] spent and the surface's rate-limit answer put on it, and the
//! part handed back when it still fails.

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
use crate::channel::stream::{CallKind, RateBudget};
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

/// The HTTP side of a connector: client, policy, token and the bot-wide rate-limit pause.
///
/// A route's (one conversation's) own pause is not here: it is the conversation's
/// [`RateBudget`], which the streaming sessions spend too, so a 429 on a plain send holds back
/// a stream on the same conversation and the other way round.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) surface: Surface,
    pub(crate) client: reqwest::Client,
    pub(crate) policy: SendPolicy,
    pub(crate) token: Token,
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
            bot_paused: Pause::default(),
        }
    }

    /// How long from now until the bot-wide pause (Discord's global limit) ends.
    pub(crate) fn bot_pause_left(&self) -> Duration {
        self.bot_paused.left()
    }

    /// Pauses the whole bot for `wait` (Discord's `global: true`).
    pub(crate) fn pause_bot_for(&self, wait: Duration) {
        self.bot_paused.extend(wait);
    }

    /// Sends `part` as `request`, spending `budget` (the conversation's) and retrying within
    /// the policy; hands the part back on failure.
    pub(crate) async fn send(
        &self,
        budget: &RateBudget,
        part: CommittedPart,
        request: Request,
        classify: Classify,
    ) -> Result<PartReceipt, SendError> {
        self.retry(budget, part, || self.attempt(&request, classify))
            .await
    }

    /// The retry loop, apart from HTTP so its timing can be tested on paused time (and so a
    /// connector can put a lookup before a try: Slack's reconciliation).
    ///
    /// Before each try it waits for the bot-wide pause and for `budget` as a
    /// [`CallKind::Final`] call without the spacing ([`RateBudget::acquire_unspaced_within`]):
    /// the conversation's pause and window, never its `min_interval`, since Slack and Telegram
    /// document short bursts of messages as allowed and a ten-part reply must not take nine
    /// seconds. The try is recorded in the budget (a stream's next preview is spaced after it,
    /// the window counts it), and a rate-limit answer pauses the budget (a stream on the same
    /// conversation pauses too) or, when bot-wide, the bot. Every such wait comes out of the
    /// policy's `max_wait`: when the next slot is further than what is left of it, the part
    /// comes back at once, rate limited with that wait as its `retry_after`, and nothing
    /// sleeps past the cap.
    pub(crate) async fn retry<F, Fut>(
        &self,
        budget: &RateBudget,
        part: CommittedPart,
        mut attempt: F,
    ) -> Result<PartReceipt, SendError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let policy = self.policy;
        let surface = self.surface.name();
        let delivery = part.delivery_id().to_string();
        let index = part.index();
        let mut spent = Duration::ZERO;
        let mut tries = 0u32;
        // The wait the surface asked for in this send's last try, if it was rate limited: what
        // a part handed back on that pause reports (the docs of `SendPolicy`).
        let mut asked_last: Option<Duration> = None;
        loop {
            let bot = self.bot_pause_left();
            let waited = if bot > policy.max_wait.saturating_sub(spent) {
                Err((bot, true))
            } else {
                tokio::time::sleep(bot).await;
                spent = spent.saturating_add(bot);
                let left = policy.max_wait.saturating_sub(spent);
                budget
                    .acquire_unspaced_within(CallKind::Final, left)
                    .await
                    .map_err(|wait| (wait, false))
            };
            match waited {
                Ok(waited) => spent = spent.saturating_add(waited),
                Err((wait, global)) => {
                    let wait = asked_last.map_or(wait, |asked| asked.max(wait));
                    tracing::warn!(target: "mesh_egress::channel", surface, delivery, part = index, tries, global, retry_after_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), "rate budget exhausted past the wait cap; part handed back");
                    let kind = ChannelErrorKind::RateLimited {
                        retry_after: Some(wait),
                        global,
                    };
                    let error = SendError::new(part, ChannelError::new(self.surface, tries, kind));
                    return Err(error.with_retry_after(wait));
                }
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
                    if global {
                        self.pause_bot_for(pause);
                    } else {
                        budget.pause_for(pause);
                    }
                    tracing::debug!(target: "mesh_egress::channel", surface, delivery, part = index, tries, global, retry_after_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)), "rate limited");
                    // The pause is waited out (or found too long) before the next try.
                    (
                        ChannelErrorKind::RateLimited {
                            retry_after: wait,
                            global,
                        },
                        Duration::ZERO,
                        wait,
                    )
                }
                Outcome::Retry(kind) => {
                    tracing::debug!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure = kind_name(&kind), "send failed; retrying");
                    (kind, policy.backoff_for(tries), None)
                }
                Outcome::Unknown(kind) => {
                    tracing::warn!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure = kind_name(&kind), "no answer, and a repeat could post twice; the part's outcome is unknown");
                    let error = ChannelError::new(self.surface, tries, kind);
                    return Err(SendError::new(part, error).with_retryable(true));
                }
                Outcome::Fail { kind, retryable } => {
                    tracing::warn!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure = kind_name(&kind), "part refused");
                    let error = ChannelError::new(self.surface, tries, kind);
                    return Err(SendError::new(part, error).with_retryable(retryable));
                }
            };
            asked_last = asked;
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
            Err(error) => {
                let reached = !error.is_connect();
                return self.unanswered(self.transport_failure(error), reached);
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        match read_capped(response, self.policy.max_response_bytes).await {
            Ok(body) => classify(status, &headers, &body, &self.token),
            Err(BodyError::TooLarge) => too_large(status, &headers, self.policy.max_response_bytes),
            // The surface answered, so it had the request: the outcome is unknown.
            Err(BodyError::Transport(error)) => {
                self.unanswered(self.transport_failure(error), true)
            }
        }
    }

    /// A try that got no answer. One that never reached the surface (no connection) is tried
    /// again; one that may have reached it only where the surface
    /// [repeats it safely](repeats_unanswered_safely). Elsewhere the part comes back
    /// at once, retryable and without a wait: the outcome unknown, for the caller (or the
    /// durable outbox's `UnknownOutcome` knob) to decide.
    pub(crate) fn unanswered(&self, kind: ChannelErrorKind, maybe_reached: bool) -> Outcome {
        if maybe_reached && !repeats_unanswered_safely(self.surface) {
            Outcome::Unknown(kind)
        } else {
            Outcome::Retry(kind)
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

/// Whether a send that got no answer may be tried again within the send loop without posting
/// twice: Discord dedupes by nonce and Slack's connector looks the part up first; Telegram's
/// `sendMessage` has neither, and a timed-out send is often delivered anyway
/// (python-telegram-bot#1045, where one retried message arrived three times).
pub(crate) fn repeats_unanswered_safely(surface: Surface) -> bool {
    matches!(surface, Surface::Slack | Surface::Discord)
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
    use crate::channel::http::stream_settings::telegram_budget;
    use crate::channel::stream::BudgetConfig;
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

    /// A conversation budget spaced a second apart, with no window.
    fn spaced() -> RateBudget {
        RateBudget::new(BudgetConfig::new(Duration::from_secs(1)))
    }

    /// Sends `part` through the loop, answering each try from `script` (then `Sent`), and
    /// returns the result with the instant of every try, measured from the start.
    async fn run(
        transport: &Transport,
        part: CommittedPart,
        script: Vec<Outcome>,
    ) -> (Result<PartReceipt, SendError>, Vec<Duration>) {
        run_on(transport, &spaced(), part, script).await
    }

    /// [`run`] spending `budget`.
    async fn run_on(
        transport: &Transport,
        budget: &RateBudget,
        part: CommittedPart,
        script: Vec<Outcome>,
    ) -> (Result<PartReceipt, SendError>, Vec<Duration>) {
        let start = Instant::now();
        let script = Mutex::new(VecDeque::from(script));
        let tries = Mutex::new(Vec::new());
        let result = transport
            .retry(budget, part, || {
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
    async fn a_rate_limit_longer_than_the_wait_budget_hands_the_part_back_at_once() {
        let t = transport(SendPolicy::new().max_wait(Duration::from_secs(30)));
        let part = committed(1).await.pop().unwrap();
        let start = Instant::now();
        let (result, at) = run(&t, part, vec![limited(60), limited(60)]).await;
        let error = result.unwrap_err();
        // No second try inside the surface's pause, and no sleep past the cap.
        assert_eq!(at, [Duration::ZERO]);
        assert_eq!(start.elapsed(), Duration::ZERO);
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
        let t = transport(SendPolicy::new().max_tries(1));
        let budget = spaced();
        let mut parts = committed(2).await.into_iter();
        let start = Instant::now();
        let (first, _) = run_on(&t, &budget, parts.next().unwrap(), vec![limited(3)]).await;
        assert!(first.is_err());
        assert_eq!(start.elapsed(), Duration::ZERO);
        // The next part waits the pause out, within its own budget.
        let (second, at) = run_on(&t, &budget, parts.next().unwrap(), vec![]).await;
        assert!(second.is_ok());
        assert_eq!(at, [Duration::from_secs(3)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_global_limit_holds_back_sibling_routes_and_a_route_limit_does_not() {
        let t = transport(SendPolicy::new().max_tries(1));
        let (here, there) = (spaced(), spaced());
        let other_route = t.clone();
        let mut parts = committed(4).await.into_iter();
        let global = Outcome::RateLimited {
            wait: Some(Duration::from_secs(2)),
            global: true,
        };
        let (limited_globally, _) = run_on(&t, &here, parts.next().unwrap(), vec![global]).await;
        assert!(limited_globally.is_err());
        let (sent, at) = run_on(&other_route, &there, parts.next().unwrap(), vec![]).await;
        assert!(sent.is_ok());
        assert_eq!(
            at,
            [Duration::from_secs(2)],
            "the sibling waited out the global limit"
        );

        let (limited_here, _) = run_on(&t, &here, parts.next().unwrap(), vec![limited(5)]).await;
        assert!(limited_here.is_err());
        let (sent, at) = run_on(&other_route, &there, parts.next().unwrap(), vec![]).await;
        assert!(sent.is_ok());
        assert_eq!(at, [Duration::ZERO], "a route limit stays on its route");
    }

    #[tokio::test(start_paused = true)]
    async fn an_absurd_requested_wait_is_reported_clamped_without_a_second_try() {
        let t = transport(SendPolicy::new().max_wait(Duration::from_secs(1)));
        let part = committed(1).await.pop().unwrap();
        let absurd = || Outcome::RateLimited {
            wait: Some(Duration::MAX),
            global: true,
        };
        let (result, at) = run(&t, part, vec![absurd(), absurd()]).await;
        assert_eq!(result.unwrap_err().retry_after(), Some(MAX_RETRY_AFTER));
        assert_eq!(
            at,
            [Duration::ZERO],
            "the clamped wait is beyond the budget"
        );
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

    /// The Telegram group default (20 calls a minute) with every slot of the window spent at
    /// the start.
    async fn full_telegram_window() -> RateBudget {
        let budget = RateBudget::new(telegram_budget(false));
        for _ in 0..20 {
            let spent = budget
                .acquire_unspaced_within(CallKind::Final, Duration::ZERO)
                .await;
            assert_eq!(spent, Ok(Duration::ZERO));
        }
        budget
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_window_hands_a_plain_send_back_at_once_when_its_slot_is_beyond_max_wait() {
        let t = transport(SendPolicy::new());
        let budget = full_telegram_window().await;
        let start = Instant::now();
        // The slot is 1 ms further than the default 30 s cap.
        tokio::time::sleep(Duration::from_millis(29_999)).await;
        let part = committed(1).await.pop().unwrap();
        let (result, at) = run_on(&t, &budget, part, vec![]).await;
        let error = result.unwrap_err();
        assert!(at.is_empty(), "no try: {at:?}");
        assert_eq!(start.elapsed(), Duration::from_millis(29_999), "no sleep");
        assert_eq!(error.retry_after(), Some(Duration::from_millis(30_001)));
        assert_eq!(error.part().map(CommittedPart::index), Some(0));
        let cause = std::error::Error::source(&error)
            .and_then(|e| e.downcast_ref::<ChannelError>())
            .unwrap();
        assert!(matches!(
            cause.kind(),
            ChannelErrorKind::RateLimited { retry_after: Some(w), global: false }
                if *w == Duration::from_millis(30_001)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_window_is_waited_out_exactly_when_its_slot_is_within_max_wait() {
        let t = transport(SendPolicy::new());
        let budget = full_telegram_window().await;
        let start = Instant::now();
        // The slot is exactly the default 30 s cap away: the longest a plain send waits.
        tokio::time::sleep(Duration::from_secs(30)).await;
        let part = committed(1).await.pop().unwrap();
        let (result, at) = run_on(&t, &budget, part, vec![]).await;
        assert!(result.is_ok());
        assert_eq!(at, [Duration::from_secs(30)]);
        assert_eq!(start.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_on_a_plain_send_pauses_the_budget_for_a_stream() {
        let t = transport(SendPolicy::new().max_tries(1));
        let budget = RateBudget::new(BudgetConfig::new(Duration::from_millis(100)));
        let stream_budget = budget.clone();
        let part = committed(1).await.pop().unwrap();
        let start = Instant::now();
        let (result, _) = run_on(&t, &budget, part, vec![limited(2)]).await;
        assert!(result.is_err());
        // A stream's preview on the same conversation waits the flood wait out.
        stream_budget.acquire(CallKind::Preview).await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn plain_sends_are_not_spaced_but_a_streams_next_preview_is_spaced_after_them() {
        let t = transport(SendPolicy::new());
        let budget = spaced();
        let start = Instant::now();
        for part in committed(3).await {
            let (result, at) = run_on(&t, &budget, part, vec![]).await;
            assert!(result.is_ok());
            assert_eq!(
                at,
                [Duration::ZERO],
                "a burst: no min_interval between parts"
            );
        }
        assert_eq!(
            budget.next_slot(CallKind::Preview),
            start + Duration::from_secs(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_plain_send_takes_the_final_reserve_the_previews_left() {
        let t = transport(SendPolicy::new());
        let config = BudgetConfig::new(Duration::ZERO)
            .window(3, Duration::from_secs(60))
            .final_reserve(1);
        let budget = RateBudget::new(config);
        budget.acquire(CallKind::Preview).await;
        budget.acquire(CallKind::Preview).await;
        let start = Instant::now();
        let part = committed(1).await.pop().unwrap();
        let (result, at) = run_on(&t, &budget, part, vec![]).await;
        assert!(result.is_ok());
        assert_eq!(at, [Duration::ZERO]);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
