//! One call of a streaming session: spend the conversation's [`RateBudget`], send, read the
//! answer with the connector's own classifier, and honour the surface's rate-limit answer,
//! through the one call of `exchange.rs` that plain sends make too (ownership re-checked
//! before every try, the rule for a try that may have been applied).
//!
//! Unlike the per-part send loop beside it (`retry.rs`), a call here carries no part: a stream
//! confirms text, not parts, and the session decides what a refusal means (roll over, fall
//! back, stop).

use std::future::Future;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::answer::CallEnd;
use super::exchange::{Failure, Observe, Plan, Repeat, Spacing, Stop, Wire};
use super::transport::{Classify, Transport};
use super::{ChannelError, ChannelErrorKind, Surface};
use crate::channel::stream::{CallKind, DriverError, Parts, RateBudget};
use crate::ownership::Ownership;

/// One request of a stream.
pub(crate) struct StreamCall {
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) authorization: Option<String>,
    pub(crate) body: Value,
    /// Whether sending it again after a try that may have been applied cannot show anything
    /// twice (an edit or draft carrying the whole text, a create deduped by nonce, a stop). A
    /// call that is not (a post, a stream's start or append, Telegram's `sendMessage`) gets no
    /// second try after no answer, a 5xx, `internal_error` or an unreadable 2xx: its outcome
    /// is unknown.
    pub(crate) repeat_safe: bool,
}

impl StreamCall {
    fn wire(&self) -> Wire<'_> {
        Wire {
            method: self.method.clone(),
            url: &self.url,
            authorization: self.authorization.as_deref(),
            body: &self.body,
        }
    }
}

/// How a call ended when it did not succeed.
#[derive(Debug)]
pub(crate) struct CallFailure {
    failure: Failure,
    /// Whether a try may have been applied: no answer, a 5xx, an error Slack says may follow a
    /// partial success (`internal_error`), an unreadable 2xx. A refusal or a rate limit was
    /// not. Once set by a try, no later try of the same call clears it.
    pub(crate) unknown: bool,
}

impl CallFailure {
    fn new(failure: Failure) -> Self {
        Self {
            unknown: failure.maybe_applied,
            failure,
        }
    }

    /// What the surface answered last, unless the call stopped for its ownership.
    pub(crate) fn kind(&self) -> Option<&ChannelErrorKind> {
        self.failure.kind()
    }

    /// For logs: the surface's last answer, or the lost ownership.
    pub(crate) fn describe(&self) -> String {
        self.kind().map_or_else(
            || "the conversation's ownership no longer covers a call".to_owned(),
            ToString::to_string,
        )
    }

    /// Whether the surface refused the call (an error code or description).
    pub(crate) fn is_refused(&self) -> bool {
        matches!(self.kind(), Some(ChannelErrorKind::Refused { .. }))
    }

    /// The surface's error code or description, for a refusal.
    pub(crate) fn code(&self) -> Option<&str> {
        match self.kind() {
            Some(ChannelErrorKind::Refused { detail, .. }) => Some(detail),
            _ => None,
        }
    }

    /// A failure a later call may not meet: a rate limit, a 5xx, no answer. (No answer is
    /// ambiguous for a surface without idempotency: the text may have been applied. The
    /// session leaves it unconfirmed, so the receipt never claims it.)
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            Some(
                ChannelErrorKind::RateLimited { .. }
                    | ChannelErrorKind::Server { .. }
                    | ChannelErrorKind::Transport { .. }
            )
        )
    }

    pub(crate) fn into_driver_error(self, surface: Surface) -> DriverError {
        match self.failure.stop {
            Stop::NotOwned => DriverError::new(Box::new(crate::channel::stream::OwnershipLost)),
            Stop::Surface { kind, .. } => DriverError::new(Box::new(ChannelError::new(
                surface,
                self.failure.tries,
                kind,
            ))),
        }
    }
}

/// Makes streaming calls for one session: its transport, its conversation's budget, the
/// ownership of the parts its calls carry, and the count of calls made.
pub(crate) struct Caller {
    pub(crate) transport: Transport,
    pub(crate) budget: RateBudget,
    pub(crate) classify: Classify,
    pub(crate) observe: Option<Observe>,
    pub(crate) calls: usize,
    /// The ownership of the parts not confirmed yet (the driver sets it before each flush):
    /// every try of every call re-checks it.
    pub(crate) owners: Vec<Ownership>,
}

impl Caller {
    /// A caller for a new session, before any part arrived.
    pub(crate) fn new(
        transport: Transport,
        budget: RateBudget,
        classify: Classify,
        observe: Option<Observe>,
    ) -> Self {
        Self {
            transport,
            budget,
            classify,
            observe,
            calls: 0,
            owners: Vec::new(),
        }
    }

    /// Sends `call` as a call of `kind`; returns the surface's id from the answer.
    ///
    /// A [`CallKind::Final`] call is retried within the connector's [`SendPolicy`]
    /// (tries, and total waiting); a [`CallKind::Preview`] is never retried: on a rate limit it
    /// pauses the budget and gives up at once, so a stream that cannot keep up coalesces into
    /// the next call instead of hammering the surface inside its flood window (the cascade the
    /// Telegram surface issue warns about). A try that may have been applied is repeated only
    /// when the call is [`repeat_safe`](StreamCall::repeat_safe); otherwise the call ends at
    /// once with [`CallFailure::unknown`] set, for the session to find out what the surface
    /// holds or to report its parts uncertain.
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
    ///
    /// Every wait the budget imposes (the bot-wide pause, the conversation's pause, spacing
    /// and window) comes out of the policy's `max_wait`, with the backoffs: when the next slot
    /// is further than what is left of it, the call fails at once, rate limited with that wait
    /// as its `retry_after`, and nothing sleeps past the cap.
    pub(crate) async fn call_with(
        &mut self,
        kind: CallKind,
        call: &StreamCall,
        classify: Classify,
    ) -> Result<String, CallFailure> {
        let policy = self.transport.policy;
        let plan = Plan {
            budget: &self.budget,
            kind,
            spacing: Spacing::Spaced,
            max_tries: if kind == CallKind::Preview {
                1
            } else {
                policy.max_tries
            },
            repeat: if call.repeat_safe {
                Repeat::Safe
            } else {
                Repeat::Never
            },
            owners: &self.owners,
        };
        let transport = &self.transport;
        let calls = &mut self.calls;
        let observe = self.observe.map(|observe| (observe, &self.budget));
        transport
            .call(&plan, |timeout| {
                *calls += 1;
                transport.exchange(call.wire(), classify, timeout, observe)
            })
            .await
            .map_err(CallFailure::new)
    }

    /// Takes the ownership of the parts from `from` on as the one every later call re-checks,
    /// and fails with [`OwnershipLost`](crate::channel::stream::OwnershipLost) unless it still
    /// holds: what each driver does before a flush.
    pub(crate) fn own(&mut self, parts: &Parts, from: usize) -> Result<(), DriverError> {
        self.owners = parts.owners_from(from);
        parts.check_owned_from(from)
    }

    /// Waits until a call of `kind` may go (the budget, without spending it), at most the
    /// policy's `max_wait`: past that the call itself fails at once on the same cap. What a
    /// driver's [`ready`](crate::channel::stream::Driver::ready) waits on.
    pub(crate) fn ready(&self, kind: CallKind) -> impl Future<Output = ()> + Send + '_ {
        self.budget
            .ready_within(kind, self.transport.policy.max_wait)
    }
}

/// A classifier for answers whose success carries no id (Telegram's `sendMessageDraft`
/// answers `{"ok": true, "result": true}`): success is `ok: true` with a 2xx.
pub(crate) fn ok_without_id(status: StatusCode, body: &[u8]) -> Option<CallEnd> {
    let answer = serde_json::from_slice::<Value>(body).ok()?;
    (status.is_success() && answer.get("ok").and_then(Value::as_bool) == Some(true))
        .then(|| CallEnd::Sent(String::new()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
        Caller::new(transport, budget, crate::channel::telegram::classify, None)
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
                    failure.kind(),
                    Some(ChannelErrorKind::RateLimited { retry_after: Some(w), global: false })
                        if *w >= Duration::from_millis(30_001)
                ),
                "{kind:?}: {:?}",
                failure.kind()
            );
            assert_eq!(failure.failure.tries, 0);
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
        assert_eq!((failure.failure.tries, caller.calls), (1, 1));
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
            failure.kind(),
            Some(ChannelErrorKind::RateLimited { retry_after: Some(w), global: true })
                if *w == Duration::from_secs(45)
        ));
        assert_eq!(caller.calls, 0);
    }
}
