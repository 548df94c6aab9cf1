//! One request exchange and the one rule for an unknown outcome, shared by the per-part send
//! loop (`retry.rs`) and the streaming sessions' calls (`stream_call.rs`).
//!
//! Before every try the call re-checks the ownership of what it carries (in memory: a lease
//! whose renewal failed is revoked already) and cuts the try's timeout to the lease's time
//! left; a try that could outlast the lease does not start. After every try it reads the
//! answer as [`CallEnd`]s say: what the surface did not apply (a rate limit, a refusal, a
//! request that never left) may be tried again; what it may have applied (no answer, a 5xx,
//! Slack's `internal_error`, a 2xx that could not be read) is tried again only when the call
//! is idempotent or reconciled before the repeat ([`Repeat::Safe`]), and otherwise ends the
//! call at once. Once a try may have been applied the call carries that to its end
//! ([`Failure::maybe_applied`]), whatever the later tries answer.

use std::future::Future;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderValue;
use serde_json::Value;

use super::ChannelErrorKind;
use super::answer::{BodyError, CallEnd, read_capped, too_large};
use super::policy::MAX_RETRY_AFTER;
use super::transport::{Classify, Transport};
use crate::channel::stream::{CallKind, RateBudget};
use crate::ownership::{Ownership, TryWindow};

/// Reads a surface's rate-limit headers into the budget (Discord's `X-RateLimit-*`).
pub(crate) type Observe = fn(&reqwest::header::HeaderMap, &RateBudget);

/// One request on the wire: method, URL, authorization, JSON body.
pub(crate) struct Wire<'a> {
    pub(crate) method: Method,
    pub(crate) url: &'a str,
    pub(crate) authorization: Option<&'a str>,
    pub(crate) body: &'a Value,
}

/// Whether a try that may have been applied may be made again within the same call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// It may: the call is idempotent (an edit or draft carrying the whole text, a create
    /// deduped by nonce, a stop), or the caller reconciles before the repeat (Slack's lookup).
    Safe,
    /// It may not: the call ends at once, its outcome unknown.
    Never,
}

/// How a call waits for its conversation's budget before each try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spacing {
    /// The pause, the window and the spacing (a stream's calls).
    Spaced,
    /// The pause and the window, never the spacing (a plain part: bursts are allowed).
    Unspaced,
}

/// What one call is allowed: its budget and kind, how many tries, whether a try that may
/// have been applied is repeated, and the ownership(s) it is made under.
pub(crate) struct Plan<'a> {
    pub(crate) budget: &'a RateBudget,
    pub(crate) kind: CallKind,
    pub(crate) spacing: Spacing,
    pub(crate) max_tries: u32,
    pub(crate) repeat: Repeat,
    pub(crate) owners: &'a [Ownership],
}

/// Why a call ended without success.
#[derive(Debug)]
pub(crate) struct Failure {
    /// How many tries were made.
    pub(crate) tries: u32,
    /// Whether any try may have been applied: no later answer of the same call clears it.
    pub(crate) maybe_applied: bool,
    pub(crate) stop: Stop,
}

/// What ended a call.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The surface's last answer, or a budget wait past the cap.
    Surface {
        kind: ChannelErrorKind,
        /// Whether delivering again later could work.
        retryable: bool,
        /// The wait the surface (or the budget) asked for, when a rate limit ended it.
        retry_after: Option<Duration>,
    },
    /// The ownership was lost, or its lease had too little time left for the next try.
    NotOwned,
}

impl Failure {
    /// The surface's answer that ended the call, if it was one.
    pub(crate) fn kind(&self) -> Option<&ChannelErrorKind> {
        match &self.stop {
            Stop::Surface { kind, .. } => Some(kind),
            Stop::NotOwned => None,
        }
    }
}

impl Transport {
    /// Makes one call under `plan`: each try goes through `attempt`, given the try's timeout
    /// (the policy's, cut to the lease's time left). See the module docs for the rule.
    ///
    /// Every wait (the bot-wide pause, the conversation's budget, the backoffs) comes out of
    /// the policy's `max_wait`: when the next slot is further than what is left of it, the
    /// call ends at once, rate limited with that wait as its `retry_after`, and nothing sleeps
    /// past the cap.
    pub(crate) async fn call<F, Fut>(
        &self,
        plan: &Plan<'_>,
        mut attempt: F,
    ) -> Result<String, Failure>
    where
        F: FnMut(Duration) -> Fut,
        Fut: Future<Output = CallEnd>,
    {
        let policy = self.policy;
        let surface = self.surface.name();
        let mut spent = Duration::ZERO;
        let mut tries = 0u32;
        let mut maybe_applied = false;
        // The wait the surface asked for in the last try, if it was rate limited: what a call
        // ended on that pause reports.
        let mut asked_last: Option<Duration> = None;
        let end = |tries, maybe_applied, stop| {
            Err(Failure {
                tries,
                maybe_applied,
                stop,
            })
        };
        loop {
            let bot = self.bot_pause_left();
            let waited = if bot > policy.max_wait.saturating_sub(spent) {
                Err((bot, true))
            } else {
                tokio::time::sleep(bot).await;
                spent = spent.saturating_add(bot);
                let left = policy.max_wait.saturating_sub(spent);
                let slot = match plan.spacing {
                    Spacing::Spaced => plan.budget.acquire_within(plan.kind, left).await,
                    Spacing::Unspaced => plan.budget.acquire_unspaced_within(plan.kind, left).await,
                };
                slot.map_err(|wait| (wait, false))
            };
            match waited {
                Ok(waited) => spent = spent.saturating_add(waited),
                Err((wait, global)) => {
                    let wait = asked_last.map_or(wait, |asked| asked.max(wait));
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, global, retry_after_ms = millis(wait), "the next slot is past the wait cap");
                    let kind = ChannelErrorKind::RateLimited {
                        retry_after: Some(wait),
                        global,
                    };
                    let stop = Stop::Surface {
                        kind,
                        retryable: true,
                        retry_after: Some(wait),
                    };
                    return end(tries, maybe_applied, stop);
                }
            }
            // After every wait, before the try: is the conversation still ours, for long
            // enough?
            let timeout = match TryWindow::of_all(plan.owners, policy.timeout) {
                TryWindow::Open(timeout) => timeout,
                window => {
                    tracing::warn!(target: "mesh_egress::channel", surface, tries, lost = window == TryWindow::Lost, "the conversation's lease no longer covers a try; handed back untried");
                    return end(tries, maybe_applied, Stop::NotOwned);
                }
            };
            tries += 1;
            let (kind, backoff, asked) = match attempt(timeout).await {
                CallEnd::Sent(id) => return Ok(id),
                CallEnd::RateLimited { wait, global } => {
                    let wait = wait.map(|w| w.min(MAX_RETRY_AFTER));
                    let pause = wait.unwrap_or_else(|| policy.backoff_for(tries));
                    if global {
                        self.pause_bot_for(pause);
                    } else {
                        plan.budget.pause_for(pause);
                    }
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, global, retry_after_ms = wait.map(millis), "rate limited");
                    let kind = ChannelErrorKind::RateLimited {
                        retry_after: wait,
                        global,
                    };
                    // The pause is waited out (or found too long) before the next try.
                    (kind, Duration::ZERO, wait)
                }
                CallEnd::Retry(kind) => {
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "not applied; trying again");
                    (kind, policy.backoff_for(tries), None)
                }
                CallEnd::MaybeApplied(kind) if plan.repeat == Repeat::Safe => {
                    maybe_applied = true;
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "may have been applied; repeating is safe");
                    (kind, policy.backoff_for(tries), None)
                }
                CallEnd::MaybeApplied(kind) | CallEnd::Unknown(kind) => {
                    tracing::warn!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "may have been applied, and a repeat could show it twice; the outcome is unknown");
                    let stop = Stop::Surface {
                        kind,
                        retryable: true,
                        retry_after: None,
                    };
                    return end(tries, true, stop);
                }
                CallEnd::Fail { kind, retryable } => {
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "refused");
                    let stop = Stop::Surface {
                        kind,
                        retryable,
                        retry_after: None,
                    };
                    return end(tries, maybe_applied, stop);
                }
            };
            asked_last = asked;
            let left = policy.max_wait.saturating_sub(spent);
            if tries >= plan.max_tries || left.is_zero() {
                let stop = Stop::Surface {
                    kind,
                    retryable: true,
                    retry_after: asked,
                };
                return end(tries, maybe_applied, stop);
            }
            let backoff = backoff.min(left);
            tokio::time::sleep(backoff).await;
            spent = spent.saturating_add(backoff);
        }
    }

    /// One try of `wire` with `timeout`, read by `classify` (and its headers by `observe`,
    /// into `budget`).
    pub(crate) async fn exchange(
        &self,
        wire: Wire<'_>,
        classify: Classify,
        timeout: Duration,
        observe: Option<(Observe, &RateBudget)>,
    ) -> CallEnd {
        let mut builder = self
            .client
            .request(wire.method, wire.url)
            .timeout(timeout)
            .json(wire.body);
        if let Some(auth) = wire.authorization {
            let Ok(mut value) = HeaderValue::from_str(auth) else {
                return CallEnd::Fail {
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
                return CallEnd::Fail {
                    kind: self.transport_failure(error),
                    retryable: false,
                };
            }
            // One that never connected never reached the surface; any other may have.
            Err(error) if error.is_connect() => {
                return CallEnd::Retry(self.transport_failure(error));
            }
            Err(error) => return CallEnd::MaybeApplied(self.transport_failure(error)),
        };
        let status = response.status();
        let headers = response.headers().clone();
        if let Some((observe, budget)) = observe {
            observe(&headers, budget);
        }
        let limit = self.policy.max_response_bytes;
        match read_capped(response, limit).await {
            Ok(body) => classify(status, &headers, &body, &self.token),
            Err(BodyError::TooLarge) => too_large(status, &headers, limit),
            // The surface answered, so it had the request: it may have applied it.
            Err(BodyError::Transport(error)) => {
                CallEnd::MaybeApplied(self.transport_failure(error))
            }
        }
    }
}

fn millis(wait: Duration) -> u64 {
    u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
}

/// A failure's name for logs (never its text, which may quote a surface's answer).
pub(crate) fn kind_name(kind: &ChannelErrorKind) -> &'static str {
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

#[cfg(all(test, any(feature = "sqlite", feature = "postgres")))]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;
    use crate::address::Surface;
    use crate::channel::http::{SendPolicy, Token};
    use crate::channel::stream::BudgetConfig;
    use crate::ownership::Fence;

    fn transport() -> Transport {
        let mut transport = Transport::new(Surface::Slack, Token::new("t"));
        transport.policy = SendPolicy::new()
            .max_tries(5)
            .backoff(Duration::from_millis(100))
            .max_wait(Duration::from_secs(30))
            .request_timeout(Duration::from_secs(10));
        transport
    }

    /// An ownership backed by a lease of `length` that ends `left` from now.
    fn leased(left: Duration, length: Duration) -> Ownership {
        let fence = Fence::new("c".into(), "w".into(), 1, Instant::now() + left, length);
        Ownership::leased(Arc::new(fence))
    }

    /// Makes one call with `repeat` under `owners`, answering each try from `script` (then
    /// `Sent`); returns the result and each try's instant (from the start) and timeout.
    async fn call(
        owners: &[Ownership],
        repeat: Repeat,
        script: Vec<CallEnd>,
    ) -> (Result<String, Failure>, Vec<(Duration, Duration)>) {
        let transport = transport();
        let budget = RateBudget::new(BudgetConfig::new(Duration::ZERO));
        let plan = Plan {
            budget: &budget,
            kind: CallKind::Final,
            spacing: Spacing::Unspaced,
            max_tries: transport.policy.max_tries,
            repeat,
            owners,
        };
        let start = Instant::now();
        let script = Mutex::new(VecDeque::from(script));
        let tries = Mutex::new(Vec::new());
        let result = transport
            .call(&plan, |timeout| {
                tries.lock().unwrap().push((start.elapsed(), timeout));
                let next = script.lock().unwrap().pop_front();
                std::future::ready(next.unwrap_or_else(|| CallEnd::Sent("ok".into())))
            })
            .await;
        (result, tries.into_inner().unwrap())
    }

    fn maybe() -> CallEnd {
        CallEnd::MaybeApplied(ChannelErrorKind::Server { status: 503 })
    }

    fn limited(secs: u64) -> CallEnd {
        CallEnd::RateLimited {
            wait: Some(Duration::from_secs(secs)),
            global: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_try_that_may_have_been_applied_is_never_repeated_unless_safe() {
        let (result, tries) = call(&[], Repeat::Never, vec![maybe()]).await;
        let failure = result.unwrap_err();
        assert_eq!(tries.len(), 1, "not repeated");
        assert!(failure.maybe_applied);
        assert!(matches!(
            failure.stop,
            Stop::Surface {
                retryable: true,
                retry_after: None,
                ..
            }
        ));

        let (result, tries) = call(&[], Repeat::Safe, vec![maybe()]).await;
        assert_eq!(result.unwrap(), "ok");
        assert_eq!(tries.len(), 2, "an idempotent call is repeated");
    }

    #[tokio::test(start_paused = true)]
    async fn maybe_applied_survives_a_later_rate_limit_past_the_wait_cap() {
        let (result, tries) = call(&[], Repeat::Safe, vec![maybe(), limited(60)]).await;
        let failure = result.unwrap_err();
        assert_eq!(tries.len(), 2);
        assert!(
            failure.maybe_applied,
            "a later \"not now\" does not make the first try unapplied"
        );
        assert!(matches!(
            failure.stop,
            Stop::Surface { retry_after: Some(w), .. } if w == Duration::from_secs(60)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_not_applied_answer_is_tried_again_and_leaves_no_maybe() {
        let not_applied = CallEnd::Retry(ChannelErrorKind::Transport {
            detail: "could not connect".into(),
        });
        let (result, tries) = call(&[], Repeat::Never, vec![not_applied, limited(60)]).await;
        let failure = result.unwrap_err();
        assert_eq!(tries.len(), 2, "a connection never opened is tried again");
        assert!(!failure.maybe_applied);
    }

    #[tokio::test(start_paused = true)]
    async fn ownership_is_checked_before_every_try_and_a_lapsed_lease_stops_the_call_untried() {
        // A 30 s lease ending in 15 s; the surface asks for 20 s: the lease is gone by then.
        let owner = leased(Duration::from_secs(15), Duration::from_secs(30));
        let (result, tries) = call(&[owner], Repeat::Safe, vec![limited(20)]).await;
        let failure = result.unwrap_err();
        assert_eq!(tries.len(), 1, "no try after the lease ran out: {tries:?}");
        assert!(matches!(failure.stop, Stop::NotOwned));

        let revoked = Ownership::held();
        revoked.revoke();
        let (result, tries) = call(&[revoked], Repeat::Safe, vec![]).await;
        assert!(matches!(result.unwrap_err().stop, Stop::NotOwned));
        assert!(tries.is_empty(), "a revoked ownership starts nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn no_try_outlasts_the_lease_and_none_starts_on_a_lease_too_short_for_one() {
        // 2 s left of a 2 s lease, a 10 s request timeout: the try's timeout is cut to 2 s.
        let short = leased(Duration::from_secs(2), Duration::from_secs(2));
        let (result, tries) = call(std::slice::from_ref(&short), Repeat::Safe, vec![]).await;
        assert!(result.is_ok());
        assert_eq!(tries, [(Duration::ZERO, Duration::from_secs(2))]);
        // 8 s left of a 30 s lease: less than a whole timeout and than half the lease (a
        // renewal has failed); the try does not start.
        let lapsing = leased(Duration::from_secs(8), Duration::from_secs(30));
        let (result, tries) = call(&[lapsing], Repeat::Safe, vec![]).await;
        assert!(matches!(result.unwrap_err().stop, Stop::NotOwned));
        assert!(tries.is_empty());
        // 12 s left: the whole timeout ends before the lease does.
        let healthy = leased(Duration::from_secs(12), Duration::from_secs(30));
        let (_, tries) = call(&[healthy], Repeat::Safe, vec![]).await;
        assert_eq!(tries, [(Duration::ZERO, Duration::from_secs(10))]);
    }
}
