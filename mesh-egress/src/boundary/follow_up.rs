//! `FollowUpRunner`: a closure's follow-up kept in this process through the one keeping
//! mechanism ([`super::keeping`]). It was public until the `Bot` kept promises itself (issue
//! 24); it is now the unit tests' driver of `keep_in_process` (the backoff instants, the
//! hand-off after the last try, a terminal failure, a cancellation), compiled for tests only.

// Its whole former shape stays (a test reads only some of it).
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use super::deliver::render_for;
use super::keeping::{
    Ending, InProcess, InProcessEnd, MAX_FOLLOW_UP_DELAY, Tried, Tries, keep_in_process,
};
use super::{track, unsilenced};
use crate::channel::{Channel, Deliver, DeliveryError, Receipt, deliver_rendered};
use crate::degrade::DegradationPolicy;
use crate::egress::{AgentMessage, EgressError};
use crate::ledger::{CommitmentState, Ledger};
use crate::ownership::Cancellation;
use crate::reply::Commitment;

/// Re-runs a turn after a holding line until the real answer can be delivered, or hands the
/// conversation off after the last try — so a person who was told "give me a sec" is never left
/// waiting.
///
/// The runner is a future the caller owns and awaits (spawn it on your own runtime if you want
/// it in the background): it starts no task of its own, and dropping it or cancelling its
/// [`Cancellation`] stops it at once.
///
/// Follow-up `k` (from 1) runs `first_delay × 2^(k-1)` after the previous try (capped at
/// [`with_max_delay`](Self::with_max_delay), 10 minutes by default), for at most the
/// commitment's `attempts` tries. Each failure is recorded exactly like a failure at the
/// boundary (one error-tracking event carrying the cause) but mints no new promise; a failure
/// that cannot be retried hands off at once.
#[derive(Clone, Debug)]
pub(crate) struct FollowUpRunner {
    policy: DegradationPolicy,
    ledger: Option<Ledger>,
    cancellation: Cancellation,
    max_delay: Duration,
}

/// How a commitment ended (see [`FollowUpRunner`]).
#[derive(Debug)]
#[must_use]
#[non_exhaustive]
pub(crate) enum FollowUpOutcome {
    /// The real answer was delivered.
    Fulfilled {
        /// The delivery of the answer.
        receipt: Receipt,
        /// Follow-up tries it took.
        follow_ups: u32,
    },
    /// Every try failed (or one could not be retried); a handoff was delivered instead.
    HandedOff {
        /// The delivery of the handoff line.
        receipt: Receipt,
        /// Follow-up tries made.
        follow_ups: u32,
    },
    /// The agent chose to say nothing: its answer was only one of the policy's silence tokens
    /// ([`DegradationPolicy::with_silence_tokens`]). Nothing was sent; the promise counts as
    /// kept.
    Silent {
        /// Follow-up tries it took.
        follow_ups: u32,
    },
    /// The caller cancelled the follow-up; nothing more was sent.
    Cancelled {
        /// Follow-up tries made before the cancellation.
        follow_ups: u32,
    },
}

impl FollowUpRunner {
    /// A runner that hands off with `policy`'s handoff line and records on the policy's ledger,
    /// if it has one (see [`with_ledger`](Self::with_ledger)).
    pub(crate) fn new(policy: DegradationPolicy) -> Self {
        Self {
            ledger: policy.ledger().cloned(),
            policy,
            cancellation: Cancellation::new(),
            max_delay: MAX_FOLLOW_UP_DELAY,
        }
    }

    /// Records on `ledger` (e.g. the ledger of the turn that made the promise).
    pub(crate) fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Stops the runner when `cancellation` fires.
    pub(crate) fn with_cancellation(mut self, cancellation: Cancellation) -> Self {
        self.cancellation = cancellation;
        self
    }

    /// Caps the wait between two follow-ups.
    pub(crate) fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// The runner's cancellation token.
    pub(crate) fn cancellation(&self) -> &Cancellation {
        &self.cancellation
    }

    fn plan<'a>(&'a self, commitment: &'a Commitment) -> InProcess<'a> {
        InProcess {
            commitment,
            ledger: self.ledger.as_ref(),
            cancellation: Some(&self.cancellation),
            max_delay: self.max_delay,
        }
    }

    /// The wait before follow-up `k` (from 1).
    pub(crate) fn delay_before(&self, commitment: &Commitment, k: u32) -> Duration {
        self.plan(commitment).delay_before(k)
    }

    /// Keeps `commitment`: re-runs `turn` after each backoff and delivers the first answer to
    /// `channel`, or a handoff after the last failed try. A delivery failure is returned as is
    /// (the commitment stays pending on the ledger, so an operator sees it).
    pub(crate) async fn run<C, F, Fut>(
        &self,
        commitment: Commitment,
        channel: &C,
        turn: F,
    ) -> Result<FollowUpOutcome, DeliveryError>
    where
        C: Channel + ?Sized,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<AgentMessage, EgressError>>,
    {
        let mut tries = Closure {
            runner: self,
            commitment: &commitment,
            channel,
            turn,
        };
        Ok(
            match keep_in_process(&self.plan(&commitment), &mut tries).await? {
                InProcessEnd::Done { done, follow_ups } => match done {
                    Ended::Fulfilled(receipt) => FollowUpOutcome::Fulfilled {
                        receipt,
                        follow_ups,
                    },
                    Ended::HandedOff(receipt) => FollowUpOutcome::HandedOff {
                        receipt,
                        follow_ups,
                    },
                    Ended::Silent => FollowUpOutcome::Silent { follow_ups },
                },
                InProcessEnd::Cancelled { follow_ups } => FollowUpOutcome::Cancelled { follow_ups },
            },
        )
    }
}

/// How a closure's promise ended.
enum Ended {
    Fulfilled(Receipt),
    HandedOff(Receipt),
    Silent,
}

impl Ending for Ended {
    fn state(&self) -> CommitmentState {
        match self {
            Self::Fulfilled(_) | Self::Silent => CommitmentState::Fulfilled,
            Self::HandedOff(_) => CommitmentState::HandedOff,
        }
    }
}

/// The runner's tries: the closure re-run, its answer rendered for the channel before it
/// counts, and the policy's handoff line after the last.
struct Closure<'a, C: ?Sized, F> {
    runner: &'a FollowUpRunner,
    commitment: &'a Commitment,
    channel: &'a C,
    turn: F,
}

impl<C, F, Fut> Tries for Closure<'_, C, F>
where
    C: Channel + ?Sized,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<AgentMessage, EgressError>>,
{
    type Done = Ended;
    type Error = DeliveryError;

    async fn attempt(&mut self, _k: u32) -> Result<Tried<Ended>, DeliveryError> {
        let ledger = self.runner.ledger.as_ref();
        let answer = match (self.turn)().await {
            Ok(answer) => match unsilenced(&self.runner.policy, answer, ledger) {
                Some(answer) => answer,
                None => return Ok(Tried::Ended(Ended::Silent)),
            },
            Err(error) => {
                track(&error, ledger);
                return Ok(Tried::Failed(error));
            }
        };
        // Rendered before it counts: an answer that cannot be shown on this channel is a
        // failed try like any other, not a delivery error.
        match render_for(self.channel, answer) {
            Ok(rendered) => Ok(Tried::Ended(Ended::Fulfilled(
                deliver_rendered(self.channel, rendered, None).await?,
            ))),
            Err(error) => {
                track(&error, ledger);
                Ok(Tried::Failed(error))
            }
        }
    }

    async fn give_up(&mut self, _failure: EgressError, _k: u32) -> Result<Ended, DeliveryError> {
        let line = AgentMessage::new(
            self.runner.policy.handoff_line(),
            self.commitment.attribution().clone(),
        );
        Ok(Ended::HandedOff(self.channel.deliver(line).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::resolve;
    use crate::channel::Recorder;
    use crate::degrade::{Mode, Reply};
    use crate::egress::Attribution;
    use crate::ledger::Ledger;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tokio::time::Instant;

    const CAUSE: &str = "FOLLOWUP-CAUSE-5d1e";

    fn attr() -> Attribution {
        Attribution::new("bot", "dm-7", "run-3")
    }

    fn setup(attempts: u32) -> (DegradationPolicy, Ledger, Recorder, Commitment) {
        let ledger = Ledger::in_memory();
        let policy = DegradationPolicy::default()
            .with_follow_up(Duration::from_secs(10), attempts)
            .with_handoff("Sam", "Sam will take it from here.")
            .with_ledger(ledger.clone());
        let channel = Recorder::new();
        let Reply::Holding { commitment, .. } = resolve(
            Mode::Interactive,
            &policy,
            Err(EgressError::transport(CAUSE, attr())),
        ) else {
            panic!("expected a holding line");
        };
        (policy, ledger, channel, commitment)
    }

    fn final_state(ledger: &Ledger) -> (CommitmentState, u32) {
        let promises = ledger.commitments();
        assert_eq!(promises.len(), 1);
        (promises[0].1.state(), promises[0].1.follow_ups())
    }

    #[tokio::test(start_paused = true)]
    async fn a_follow_up_that_succeeds_delivers_the_answer_after_the_backoff() {
        let (policy, ledger, channel, commitment) = setup(3);
        let calls = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let seen = calls.clone();
        let outcome = FollowUpRunner::new(policy)
            .run(commitment, &channel, move || {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == 0 {
                        Err(EgressError::transport(CAUSE, attr()))
                    } else {
                        Ok(AgentMessage::new("the answer", attr()))
                    }
                }
            })
            .await
            .expect("delivered");
        assert!(matches!(
            outcome,
            FollowUpOutcome::Fulfilled { follow_ups: 2, .. }
        ));
        // 10 s before the first try, 20 s before the second.
        assert_eq!(start.elapsed(), Duration::from_secs(30));
        assert_eq!(channel.sent(), ["the answer"]);
        assert_eq!(final_state(&ledger), (CommitmentState::Fulfilled, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_follow_up_answer_that_renders_to_nothing_is_a_failed_try_not_a_delivery_error() {
        let (policy, ledger, channel, commitment) = setup(3);
        let calls = Arc::new(AtomicU32::new(0));
        let seen = calls.clone();
        let outcome = FollowUpRunner::new(policy)
            .run(commitment, &channel, move || {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                // A lone quote marker renders to nothing visible.
                let body = if n == 0 { ">" } else { "the answer" };
                async move { Ok(AgentMessage::new(body, attr())) }
            })
            .await
            .expect("delivered");
        assert!(matches!(
            outcome,
            FollowUpOutcome::Fulfilled { follow_ups: 2, .. }
        ));
        assert_eq!(channel.sent(), ["the answer"]);
        assert_eq!(final_state(&ledger), (CommitmentState::Fulfilled, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn exhausted_follow_ups_hand_off_instead_of_leaving_the_person_waiting() {
        let (policy, ledger, channel, commitment) = setup(3);
        let start = Instant::now();
        let outcome = FollowUpRunner::new(policy)
            .run(commitment, &channel, || async {
                Err(EgressError::transport(CAUSE, attr()))
            })
            .await
            .expect("delivered");
        assert!(matches!(
            outcome,
            FollowUpOutcome::HandedOff { follow_ups: 3, .. }
        ));
        assert_eq!(start.elapsed(), Duration::from_secs(10 + 20 + 40));
        assert_eq!(channel.sent(), ["Sam will take it from here."]);
        assert!(!channel.sent().concat().contains(CAUSE));
        assert_eq!(final_state(&ledger), (CommitmentState::HandedOff, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_terminal_failure_during_follow_up_hands_off_at_once() {
        let (policy, ledger, channel, commitment) = setup(5);
        let start = Instant::now();
        let outcome = FollowUpRunner::new(policy)
            .run(commitment, &channel, || async {
                Err(EgressError::transport(CAUSE, attr()).with_retryable(false))
            })
            .await
            .expect("delivered");
        assert!(matches!(
            outcome,
            FollowUpOutcome::HandedOff { follow_ups: 1, .. }
        ));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(final_state(&ledger), (CommitmentState::HandedOff, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_mid_wait_ends_at_once_and_sends_nothing() {
        let (policy, ledger, channel, commitment) = setup(3);
        let runner = FollowUpRunner::new(policy);
        let token = runner.cancellation().clone();
        let start = Instant::now();
        let cancel = async {
            tokio::time::sleep(Duration::from_secs(4)).await;
            token.cancel();
        };
        let (outcome, ()) = tokio::join!(
            runner.run(commitment, &channel, || async {
                Ok(AgentMessage::new("too late", attr()))
            }),
            cancel
        );
        assert!(matches!(
            outcome.expect("no delivery attempted"),
            FollowUpOutcome::Cancelled { follow_ups: 0 }
        ));
        assert_eq!(start.elapsed(), Duration::from_secs(4));
        assert!(channel.sent().is_empty());
        assert_eq!(final_state(&ledger), (CommitmentState::Cancelled, 0));
        assert_eq!(
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            0,
            "the runner leaves no task behind"
        );
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let (policy, _ledger, _channel, commitment) = setup(3);
        let runner = FollowUpRunner::new(policy).with_max_delay(Duration::from_secs(35));
        let delays: Vec<u64> = (1..=4)
            .map(|k| runner.delay_before(&commitment, k).as_secs())
            .collect();
        assert_eq!(delays, [10, 20, 35, 35]);
    }
}
