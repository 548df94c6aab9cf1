//! One request exchange and the one rule for an unknown outcome, shared by the per-part send
//! loop (`retry.rs`) and the streaming sessions' calls (`stream_call.rs`).
//!
//! Before every try the call re-checks the ownership of what it carries (in memory: a lease
//! whose renewal failed is revoked already) and cuts the try's timeout to the lease's time
//! left; a try that could outlast the lease does not start. After every try it reads the
//! answer as [`Outcome`]s say: what the surface did not apply (a rate limit, a refusal, a
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
use super::answer::{BodyError, Outcome, read_capped, too_large};
use super::policy::MAX_RETRY_AFTER;
use super::retry::{Classify, Transport};
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
    pub(crate) async fn call<F, Fut>(&self, plan: &Plan<'_>, mut attempt: F) -> Result<String, Failure>
    where
        F: FnMut(Duration) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let policy = self.policy;
        let surface = self.surface.name();
        let mut spent = Duration::ZERO;
        let mut tries = 0u32;
        let mut maybe_applied = false;
        // The wait the surface asked for in the last try, if it was rate limited: what a call
        // ended on that pause reports.
        let mut asked_last: Option<Duration> = None;
        let end = |tries, maybe_applied, stop| Err(Failure { tries, maybe_applied, stop });
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
                    Spacing::Unspaced => {
                        plan.budget.acquire_unspaced_within(plan.kind, left).await
                    }
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
                    let stop = Stop::Surface { kind, retryable: true, retry_after: Some(wait) };
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
                Outcome::Sent(id) => return Ok(id),
                Outcome::RateLimited { wait, global } => {
                    let wait = wait.map(|w| w.min(MAX_RETRY_AFTER));
                    let pause = wait.unwrap_or_else(|| policy.backoff_for(tries));
                    if global {
                        self.pause_bot_for(pause);
                    } else {
                        plan.budget.pause_for(pause);
                    }
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, global, retry_after_ms = wait.map(millis), "rate limited");
                    let kind = ChannelErrorKind::RateLimited { retry_after: wait, global };
                    // The pause is waited out (or found too long) before the next try.
                    (kind, Duration::ZERO, wait)
                }
                Outcome::Retry(kind) => {
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "not applied; trying again");
                    (kind, policy.backoff_for(tries), None)
                }
                Outcome::MaybeApplied(kind) if plan.repeat == Repeat::Safe => {
                    maybe_applied = true;
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "may have been applied; repeating is safe");
                    (kind, policy.backoff_for(tries), None)
                }
                Outcome::MaybeApplied(kind) | Outcome::Unknown(kind) => {
                    tracing::warn!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "may have been applied, and a repeat could show it twice; the outcome is unknown");
                    let stop = Stop::Surface { kind, retryable: true, retry_after: None };
                    return end(tries, true, stop);
                }
                Outcome::Fail { kind, retryable } => {
                    tracing::debug!(target: "mesh_egress::channel", surface, tries, failure = kind_name(&kind), "refused");
                    let stop = Stop::Surface { kind, retryable, retry_after: None };
                    return end(tries, maybe_applied, stop);
                }
            };
            asked_last = asked;
            let left = policy.max_wait.saturating_sub(spent);
            if tries >= plan.max_tries || left.is_zero() {
                let stop = Stop::Surface { kind, retryable: true, retry_after: asked };
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
    ) -> Outcome {
        let mut builder = self
            .client
            .request(wire.method, wire.url)
            .timeout(timeout)
            .json(wire.body);
        if let Some(auth) = wire.authorization {
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
            // One that never connected never reached the surface; any other may have.
            Err(error) if error.is_connect() => {
                return Outcome::Retry(self.transport_failure(error));
            }
            Err(error) => return Outcome::MaybeApplied(self.transport_failure(error)),
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
                Outcome::MaybeApplied(self.transport_failure(error))
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
