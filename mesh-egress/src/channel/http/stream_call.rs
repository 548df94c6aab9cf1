//! One call of a streaming session: spend the conversation's [`RateBudget`], send, read the
//! answer with the connector's own classifier, and honour the surface's rate-limit answer.
//!
//! Unlike the per-part send loop beside it (`retry.rs`), a call here carries no part: a stream
//! confirms text, not parts, and the session decides what a refusal means (roll over, fall
//! back, stop).

use std::future::Future;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::answer::{BodyError, Outcome, read_capped, too_large};
use super::retry::{Classify, Transport};
use super::{ChannelError, ChannelErrorKind, Surface};
use crate::channel::stream::{CallKind, DriverError, RateBudget};

/// One request of a stream.
pub(crate) struct StreamCall {
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) authorization: Option<String>,
    pub(crate) body: Value,
    /// Whether sending it again after no answer cannot show anything twice (an edit or draft
    /// carrying the whole text, a create deduped by nonce, a stop). A call that is not (a post,
    /// a stream's start) gets no second try after no answer: its outcome is unknown.
    pub(crate) repeat_safe: bool,
}

/// Reads a surface's rate-limit headers into the budget (Discord's `X-RateLimit-*`).
pub(crate) type Observe = fn(&HeaderMap, &RateBudget);

/// How a call ended when it did not succeed.
#[derive(Debug)]
pub(crate) struct CallFailure {
    pub(crate) kind: ChannelErrorKind,
    pub(crate) tries: u32,
    /// Whether the last try may have been applied: no answer, a 5xx, or an error Slack says
    /// may follow a partial success (`internal_error`). A refusal or a rate limit was not.
    pub(crate) unknown: bool,
}

impl CallFailure {
    fn new(kind: ChannelErrorKind, tries: u32) -> Self {
        Self {
            kind,
            tries,
            unknown: false,
        }
    }

    /// The surface's error code or description, for a refusal.
    pub(crate) fn code(&self) -> Option<&str> {
        match &self.kind {
            ChannelErrorKind::Refused { detail, .. } => Some(detail),
            _ => None,
        }
    }

    /// A failure a later call may not meet: a rate limit, a 5xx, no answer. (No answer is
    /// ambiguous for a surface without idempotency: the text may have been applied. The
    /// session leaves it unconfirmed, so the receipt never claims it.)
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ChannelErrorKind::RateLimited { .. }
                | ChannelErrorKind::Server { .. }
                | ChannelErrorKind::Transport { .. }
        )
    }

    pub(crate) fn into_driver_error(self, surface: Surface) -> DriverError {
        DriverError::new(Box::new(ChannelError::new(surface, self.tries, self.kind)))
    }

    /// The driver's error for a failed call that carried the next `parts` parts: when its
    /// outcome is unknown they may be shown, so they are reported uncertain, never re-sent.
    pub(crate) fn into_driver_error_for(self, surface: Surface, parts: usize) -> DriverError {
        let uncertain = if self.unknown { parts } else { 0 };
        self.into_driver_error(surface).with_uncertain(uncertain)
    }
}

/// Whether a call whose outcome is unknown may be sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repeat {
    Yes,
    No,
}

/// Makes streaming calls for one session: its transport, its conversation's budget, and the
/// count of calls made.
pub(crate) struct Caller {
    pub(crate) transport: Transport,
    pub(crate) budget: RateBudget,
    pub(crate) classify: Classify,
    pub(crate) observe: Option<Observe>,
    pub(crate) calls: usize,
}

impl Caller {
    /// Sends `call` as a call of `kind`; returns the surface's id from the answer.
    ///
    /// A [`CallKind::Final`] call is retried within the connector's [`SendPolicy`]
    /// (tries, and total waiting); a [`CallKind::Preview`] is never retried: on a rate limit it
    /// pauses the budget and gives up at once, so a stream that cannot keep up coalesces into
    /// the next call instead of hammering the surface inside its flood window (the cascade the
    /// Telegram surface issue warns about).
    ///
    /// [`SendPolicy`]: super::SendPolicy
    pub(crate) async fn call(
        &mut self,
        kind: CallKind,
        call: &StreamCall,
    ) -> Result<String, CallFailure> {
        self.call_with(kind, call, self.classify).await
    }

    /// [`call`](Self::call) with another classifier (an answer shape of its own).
    pub(crate) async fn call_with(
        &mut self,
        kind: CallKind,
        call: &StreamCall,
        classify: Classify,
    ) -> Result<String, CallFailure> {
        self.call_retrying(kind, call, classify, Repeat::Yes).await
    }

    /// [`call`](Self::call) for a request that must not be repeated when its outcome is
    /// unknown (Slack's `chat.appendStream`, which appends again): a try that may have been
    /// applied ends the call at once with [`CallFailure::unknown`] set, for the session to find
    /// out what the surface holds. Rate limits are still retried: they were not applied.
    pub(crate) async fn call_once(
        &mut self,
        kind: CallKind,
        call: &StreamCall,
    ) -> Result<String, CallFailure> {
        self.call_retrying(kind, call, self.classify, Repeat::No)
            .await
    }

    /// Waits until a call of `kind` may go (the budget, without spending it), at most the
    /// policy's `max_wait`: past that the call itself fails at once on the same cap. What a
    /// driver's [`ready`](crate::channel::stream::Driver::ready) waits on.
    pub(crate) fn ready(&self, kind: CallKind) -> impl Future<Output = ()> + Send + '_ {
        self.budget
            .ready_within(kind, self.transport.policy.max_wait)
    }

    /// Every wait the budget imposes (the bot-wide pause, the conversation's pause, spacing
    /// and window) comes out of the policy's `max_wait`, with the backoffs: when the next slot
    /// is further than what is left of it, the call fails at once, rate limited with that wait
    /// as its `retry_after`, and nothing sleeps past the cap.
    async fn call_retrying(
        &mut self,
        kind: CallKind,
        call: &StreamCall,
        classify: Classify,
        repeat: Repeat,
    ) -> Result<String, CallFailure> {
        let policy = self.transport.policy;
        let max_tries = if kind == CallKind::Preview {
            1
        } else {
            policy.max_tries
        };
        let mut waited = Duration::ZERO;
        let mut tries = 0u32;
        loop {
            let bot = self.transport.bot_pause_left();
            let slot = if bot > policy.max_wait.saturating_sub(waited) {
                Err((bot, true))
            } else {
                tokio::time::sleep(bot).await;
                waited = waited.saturating_add(bot);
                let left = policy.max_wait.saturating_sub(waited);
                self.budget
                    .acquire_within(kind, left)
                    .await
                    .map_err(|wait| (wait, false))
            };
            match slot {
                Ok(wait) => waited = waited.saturating_add(wait),
                Err((wait, global)) => {
                    let kind = ChannelErrorKind::RateLimited {
                        retry_after: Some(wait),
                        global,
                    };
                    return Err(CallFailure::new(kind, tries));
                }
            }
            tries += 1;
            self.calls += 1;
            let (kind_of_failure, backoff, unknown) = match self.exchange(call, classify).await {
                Outcome::Sent(id) => return Ok(id),
                Outcome::RateLimited { wait, global } => {
                    let pause = wait.unwrap_or_else(|| policy.backoff_for(tries));
                    if global {
                        self.transport.pause_bot_for(pause);
                    } else {
                        self.budget.pause_for(pause);
                    }
                    let failure = ChannelErrorKind::RateLimited {
                        retry_after: wait,
                        global,
                    };
                    // The pause is the wait: it is waited out (or found too long) above.
                    (failure, Duration::ZERO, false)
                }
                Outcome::Unknown(failure) => {
                    return Err(CallFailure {
                        kind: failure,
                        tries,
                        unknown: true,
                    });
                }
                Outcome::Retry(failure) if repeat == Repeat::No => {
                    return Err(CallFailure {
                        kind: failure,
                        tries,
                        unknown: true,
                    });
                }
                Outcome::Retry(failure) => (failure, policy.backoff_for(tries), true),
                Outcome::Fail { kind, .. } => return Err(CallFailure::new(kind, tries)),
            };
            let left = policy.max_wait.saturating_sub(waited);
            if tries >= max_tries || left.is_zero() {
                return Err(CallFailure {
                    kind: kind_of_failure,
                    tries,
                    unknown,
                });
            }
            let backoff = backoff.min(left);
            tokio::time::sleep(backoff).await;
            waited = waited.saturating_add(backoff);
        }
    }

    async fn exchange(&self, call: &StreamCall, classify: Classify) -> Outcome {
        let transport = &self.transport;
        let mut builder = transport
            .client
            .request(call.method.clone(), &call.url)
            .timeout(transport.policy.timeout)
            .json(&call.body);
        if let Some(auth) = &call.authorization {
            let Ok(mut value) = HeaderValue::from_str(auth) else {
                return Outcome::Fail {
                    kind: ChannelErrorKind::InvalidToken,
                    retryable: false,
                };
            };
            value.set_sensitive(true);
            builder = builder.header(reqwest::header::AUTHORIZATION, value);
        }
        let response = match builder.send().await {
            Ok(response) => response,
            Err(error) if error.is_builder() => {
                return Outcome::Fail {
                    kind: transport.transport_failure(error),
                    retryable: false,
                };
            }
            Err(error) => {
                let reached = !error.is_connect();
                return unanswered(call, transport.transport_failure(error), reached);
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        if let Some(observe) = self.observe {
            observe(&headers, &self.budget);
        }
        let limit = transport.policy.max_response_bytes;
        match read_capped(response, limit).await {
            Ok(body) => classify(status, &headers, &body, &transport.token),
            Err(BodyError::TooLarge) => too_large(status, &headers, limit),
            // The surface answered, so it had the request: the outcome is unknown.
            Err(BodyError::Transport(error)) => {
                unanswered(call, transport.transport_failure(error), true)
            }
        }
    }
}

/// A call that got no answer: tried again unless it may have reached the surface and is not
/// [`repeat_safe`](StreamCall::repeat_safe).
fn unanswered(call: &StreamCall, kind: ChannelErrorKind, maybe_reached: bool) -> Outcome {
    if maybe_reached && !call.repeat_safe {
        Outcome::Unknown(kind)
    } else {
        Outcome::Retry(kind)
    }
}

/// A classifier for answers whose success carries no id (Telegram's `sendMessageDraft`
/// answers `{"ok": true, "result": true}`): success is `ok: true` with a 2xx.
pub(crate) fn ok_without_id(status: StatusCode, body: &[u8]) -> Option<Outcome> {
    let answer = serde_json::from_slice::<Value>(body).ok()?;
    (status.is_success() && answer.get("ok").and_then(Value::as_bool) == Some(true))
        .then(|| Outcome::Sent(String::new()))
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::channel::http::stream_settings::telegram_budget;
    use crate::channel::http::{SendPolicy, Token};

    /// A caller on the Telegram group default budget (twenty calls a minute) with the default
    /// policy (30 s of waiting), every slot of the window spent at the start.
    async fn caller_on_a_full_window() -> Caller {
        let budget = RateBudget::new(telegram_budget(false));
        for _ in 0..20 {
            let spent = budget
                .acquire_unspaced_within(CallKind::Final, Duration::ZERO)
                .await;
            assert_eq!(spent, Ok(Duration::ZERO));
        }
        let mut transport = Transport::new(Surface::Telegram, Token::new("t"));
        transport.policy = SendPolicy::new();
        Caller {
            transport,
            budget,
            classify: super::super::telegram::classify,
            observe: None,
            calls: 0,
        }
    }

    /// A request reqwest refuses to build: the try ends at once, without a socket.
    fn unbuildable() -> StreamCall {
        StreamCall {
            method: Method::POST,
            url: "not a url".to_owned(),
            authorization: None,
            body: Value::Null,
            repeat_safe: true,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_call_whose_slot_is_beyond_max_wait_fails_at_once_rate_limited() {
        let mut caller = caller_on_a_full_window().await;
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(29_999)).await;
        for kind in [CallKind::Final, CallKind::Preview] {
            let failure = caller.call(kind, &unbuildable()).await.unwrap_err();
            assert!(
                matches!(
                    failure.kind,
                    ChannelErrorKind::RateLimited { retry_after: Some(w), global: false }
                        if w >= Duration::from_millis(30_001)
                ),
                "{kind:?}: {:?}",
                failure.kind
            );
            assert_eq!(failure.tries, 0);
        }
        assert_eq!(caller.calls, 0, "no request went out");
        assert_eq!(start.elapsed(), Duration::from_millis(29_999), "no sleep");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_call_waits_for_a_slot_exactly_max_wait_away() {
        let mut caller = caller_on_a_full_window().await;
        let start = Instant::now();
        tokio::time::sleep(Duration::from_secs(30)).await;
        let failure = caller
            .call(CallKind::Final, &unbuildable())
            .await
            .unwrap_err();
        // It waited the whole cap for the slot, then made its one try.
        assert_eq!(start.elapsed(), Duration::from_secs(60));
        assert_eq!((failure.tries, caller.calls), (1, 1));
        assert!(!failure.unknown, "a request never sent was not applied");
    }

    #[tokio::test(start_paused = true)]
    async fn the_sessions_wait_for_the_budget_is_capped_by_max_wait_too() {
        let caller = caller_on_a_full_window().await;
        let start = Instant::now();
        caller.ready(CallKind::Final).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "60 s away: back at once");
        tokio::time::sleep(Duration::from_secs(30)).await;
        caller.ready(CallKind::Final).await;
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(60),
            "30 s away: waited"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_bot_wide_pause_beyond_max_wait_fails_a_stream_call_at_once() {
        let mut caller = caller_on_a_full_window().await;
        caller.budget = RateBudget::new(crate::channel::stream::BudgetConfig::new(Duration::ZERO));
        caller.transport.pause_bot_for(Duration::from_secs(45));
        let failure = caller
            .call(CallKind::Final, &unbuildable())
            .await
            .unwrap_err();
        assert!(matches!(
            failure.kind,
            ChannelErrorKind::RateLimited { retry_after: Some(w), global: true }
                if w == Duration::from_secs(45)
        ));
        assert_eq!(caller.calls, 0);
    }
}
