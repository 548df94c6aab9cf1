//! The per-part send loop every HTTP connector shares: bounded tries, a bounded wait, the
//! conversation's [`RateBudget`] spent and the surface's rate-limit answer put on it, the
//! part's ownership re-checked before each try, and the part handed back when it still fails
//! (the loop itself, and the rule for a try that may have been applied, are `exchange.rs`'s,
//! shared with the streams' calls).

use std::future::Future;
use std::time::Duration;

use super::answer::CallEnd;
use super::exchange::{Failure, Plan, Repeat, Spacing, Stop, Wire, kind_name};
use super::transport::{Classify, Transport};
use super::{ChannelError, Surface};
use crate::channel::stream::{CallKind, RateBudget};
use crate::channel::{PartReceipt, SendError};
use crate::outbound::CommittedPart;

/// One request, ready to send as many times as it takes.
pub(crate) struct Request {
    pub(crate) url: String,
    pub(crate) authorization: Option<String>,
    pub(crate) body: serde_json::Value,
}

impl Transport {
    /// Sends `part` as `request`, spending `budget` (the conversation's) and retrying within
    /// the policy; hands the part back on failure. A try that may have been applied is
    /// repeated only where a repeat cannot post twice: Discord dedupes by nonce (every part
    /// carries one); Telegram's `sendMessage` has nothing to dedupe by, and a timed-out send is
    /// often delivered anyway (python-telegram-bot#1045, where one retried message arrived
    /// three times). (Slack's connector reconciles first and calls [`retry`](Self::retry)
    /// itself.)
    pub(crate) async fn send(
        &self,
        budget: &RateBudget,
        part: CommittedPart,
        request: Request,
        classify: Classify,
    ) -> Result<PartReceipt, SendError> {
        let repeat = match self.surface {
            Surface::Discord => Repeat::Safe,
            _ => Repeat::Never,
        };
        let request = &request;
        self.retry(budget, part, repeat, |timeout| {
            self.exchange(request.wire(), classify, timeout, None)
        })
        .await
    }

    /// The retry loop of one part (the shared call of `exchange.rs`), apart from HTTP so its
    /// timing can be tested on paused time (and so a connector can put a lookup before a try:
    /// Slack's reconciliation). `attempt` gets each try's timeout.
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
    ///
    /// Before each try, too, the part's ownership is re-checked and the try's timeout cut to
    /// its lease's time left: a part whose lease is gone (or too short for a try) comes back
    /// [`ownership_lost`](SendError::ownership_lost), untried. A part that comes back after a
    /// try that may have been applied says so ([`SendError::maybe_delivered`]), whatever
    /// the later tries answered.
    pub(crate) async fn retry<F, Fut>(
        &self,
        budget: &RateBudget,
        part: CommittedPart,
        repeat: Repeat,
        attempt: F,
    ) -> Result<PartReceipt, SendError>
    where
        F: FnMut(Duration) -> Fut,
        Fut: Future<Output = CallEnd>,
    {
        let surface = self.surface.name();
        let plan = Plan {
            budget,
            kind: CallKind::Final,
            spacing: Spacing::Unspaced,
            max_tries: self.policy.max_tries,
            repeat,
            owners: part.ownership().map_or(&[], std::slice::from_ref),
        };
        let result = self.call(&plan, attempt).await;
        let Failure {
            tries,
            maybe_applied,
            stop,
        } = match result {
            Ok(id) => return Ok(PartReceipt::new(id)),
            Err(failure) => failure,
        };
        let delivery = part.delivery_id().to_string();
        let index = part.index();
        let error = match stop {
            Stop::NotOwned => SendError::ownership_lost(part),
            Stop::Surface {
                kind,
                retryable,
                retry_after,
            } => {
                let failure = kind_name(&kind);
                if retryable {
                    tracing::warn!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure, maybe_delivered = maybe_applied, retry_after_ms = retry_after.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)), "gave up on part; handed back");
                } else {
                    tracing::warn!(target: "mesh_egress::channel", surface, delivery, part = index, tries, failure, "part refused");
                }
                let error = SendError::new(part, ChannelError::new(self.surface, tries, kind))
                    .with_retryable(retryable);
                match retry_after {
                    Some(wait) => error.with_retry_after(wait),
                    None => error,
                }
            }
        };
        Err(error.with_maybe_delivered(maybe_applied))
    }
}

impl Request {
    /// The request on the wire: every plain send is a `POST`.
    pub(crate) fn wire(&self) -> Wire<'_> {
        Wire {
            method: reqwest::Method::POST,
            url: &self.url,
            authorization: self.authorization.as_deref(),
            body: &self.body,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use tokio::time::Instant;

    use super::super::policy::{MAX_RETRY_AFTER, SendPolicy};
    use super::super::{ChannelErrorKind, Token};
    use super::*;
    use crate::channel::PlainText;
    use crate::channel::http::stream_settings::telegram_budget;
    use crate::channel::stream::BudgetConfig;
    use crate::egress::{AgentMessage, Attribution};
    use crate::outbound::Outbound;
    use crate::ownership::Ownership;

    /// `n` one-character parts of one message, committed as a turn commits them.
    pub(in crate::channel::http) async fn committed(n: usize) -> Vec<CommittedPart> {
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
        script: Vec<CallEnd>,
    ) -> (Result<PartReceipt, SendError>, Vec<Duration>) {
        run_on(transport, &spaced(), part, script).await
    }

    /// [`run`] spending `budget`.
    async fn run_on(
        transport: &Transport,
        budget: &RateBudget,
        part: CommittedPart,
        script: Vec<CallEnd>,
    ) -> (Result<PartReceipt, SendError>, Vec<Duration>) {
        let start = Instant::now();
        let script = Mutex::new(VecDeque::from(script));
        let tries = Mutex::new(Vec::new());
        let result = transport
            .retry(budget, part, Repeat::Safe, |_timeout| {
                tries.lock().unwrap().push(start.elapsed());
                let next = script.lock().unwrap().pop_front();
                std::future::ready(next.unwrap_or_else(|| CallEnd::Sent("ok".into())))
            })
            .await;
        (result, tries.into_inner().unwrap())
    }

    fn limited(secs: u64) -> CallEnd {
        CallEnd::RateLimited {
            wait: Some(Duration::from_secs(secs)),
            global: false,
        }
    }

    fn server() -> CallEnd {
        CallEnd::Retry(ChannelErrorKind::Server { status: 503 })
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
        let refused = CallEnd::Fail {
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
        let global = CallEnd::RateLimited {
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
        let absurd = || CallEnd::RateLimited {
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
        let absurd = CallEnd::RateLimited {
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
