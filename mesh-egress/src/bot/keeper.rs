//! The two [`PromiseKeeper`]s: the bot's in-memory one (the promised route re-run in this
//! process on the commitment's backoff) and the store's (stored before the holding line goes,
//! kept by a worker), and the follow-up both make: the same route re-run on a follow-up turn.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::{Bot, Outcome, Outgoing, Shape, collect};
use crate::address::Address;
use crate::answer::Streamed;
use crate::boundary::keeping::{
    Ending, InProcess, InProcessEnd, MAX_FOLLOW_UP_DELAY, Tried, Tries, keep_in_process,
};
use crate::boundary::{Promise, PromiseKeeper, Rerun, resolve_in};
use crate::channel::DeliveryError;
use crate::degrade::choose;
use crate::egress::EgressError;
use crate::future::BoxFuture;
use crate::ledger::{CommitmentState, Ledger};
use crate::reply::{Commitment, Mode, Reply};
use crate::turn::{StopReason, Turn};

/// No route is registered under the name a promise stored.
#[derive(Debug, thiserror::Error)]
#[error("no route is registered under {0:?} on this bot")]
struct UnknownRoute(String);

impl Bot {
    /// The follow-up's reply: `rerun`'s route re-run on `turn` (a follow-up turn, so a failure
    /// is left on it, never a second promise), a stream read whole, and only what follows
    /// `delivered` (what the person saw before the promise).
    pub(super) async fn follow_up_reply(
        &self,
        turn: &Turn,
        mode: Mode,
        rerun: &Rerun,
        delivered: &str,
    ) -> Reply {
        let policy = turn.policy_for(mode);
        let outgoing = match self.erased_route(rerun.route()) {
            Some(route) => route.call(turn.clone(), rerun.input().clone()),
            None => Err(EgressError::semantic(
                UnknownRoute(rerun.route().to_owned()),
                turn.attribution().clone(),
            )
            .with_retryable(false)),
        };
        let reply = match outgoing {
            Ok(future) => match future.await {
                Outgoing(Shape::Whole(reply)) => reply,
                Outgoing(Shape::Streamed(streamed)) => match streamed.into_inner() {
                    Streamed::Resolved(reply) => reply,
                    Streamed::Stream { stream, mode } => collect(turn, stream, mode).await,
                },
            },
            Err(error) => return resolve_in(turn, mode, policy, Err(error)),
        };
        match reply {
            Reply::Answer(answer) if !delivered.is_empty() => match rest_after(delivered, answer) {
                Ok(rest) => Reply::Answer(rest),
                Err(error) => resolve_in(turn, mode, policy, Err(error)),
            },
            other => other,
        }
    }

    /// The turn a follow-up of `promise` runs on: its conversation's address, the mode and the
    /// person's message of the turn that made it, recording on that turn's ledger, marked a
    /// follow-up (a failure is left on it for the keeper).
    pub(super) fn follow_up_turn(&self, promise: &OwnedPromise) -> Turn {
        self.plain_turn(promise)
            .with_mode(promise.mode)
            .into_follow_up()
    }

    /// A turn of the promise's conversation that is not a follow-up (the last word's).
    fn plain_turn(&self, promise: &OwnedPromise) -> Turn {
        let mut turn = self
            .turn(
                promise.address.clone(),
                promise.commitment.attribution().clone(),
            )
            .with_ledger(promise.ledger.clone());
        if let Some(input) = &promise.input {
            turn = turn.with_input(input.clone());
        }
        turn
    }

    /// Keeps `promise` in this process, through the one keeping mechanism
    /// ([`keep_in_process`]): re-runs its route after each backoff step and sends the first
    /// answer, or Layer C's line for the mode after the last failed try (or one that cannot
    /// be retried).
    async fn keep_here(self, promise: OwnedPromise) -> Result<Outcome, DeliveryError> {
        let plan = InProcess {
            commitment: &promise.commitment,
            ledger: Some(&promise.ledger),
            cancellation: None,
            max_delay: MAX_FOLLOW_UP_DELAY,
        };
        let mut tries = InMemoryTries {
            bot: &self,
            promise: &promise,
        };
        match keep_in_process(&plan, &mut tries).await {
            Ok(InProcessEnd::Done { done, .. }) => Ok(done.outcome()),
            Ok(InProcessEnd::Cancelled { .. }) => Ok(Outcome::Stopped(StopReason::Cancelled)),
            Err(error) => {
                // The answer (or the last word) was ready and the surface refused it: the
                // commitment stays pending on the ledger, so an operator sees it.
                tracing::warn!(target: "mesh_egress::bot", commitment = %promise.commitment.id(), error = %error, "follow-up not delivered");
                Err(error)
            }
        }
    }
}

/// How a promise kept in memory ended.
enum Ended {
    /// The follow-up's answer was sent, or the agent chose silence.
    Kept(Outcome),
    /// After the last try: the handoff line was sent.
    HandedOff,
    /// After the last try of a proactive promise: nothing was sent.
    GaveUp,
}

impl Ended {
    fn outcome(&self) -> Outcome {
        match self {
            Self::Kept(outcome) => *outcome,
            Self::HandedOff => Outcome::Handoff,
            Self::GaveUp => Outcome::Silent,
        }
    }
}

impl Ending for Ended {
    fn state(&self) -> CommitmentState {
        match self {
            Self::Kept(_) => CommitmentState::Fulfilled,
            Self::HandedOff => CommitmentState::HandedOff,
            Self::GaveUp => CommitmentState::Cancelled,
        }
    }
}

/// The in-memory keeper's tries: the promised route re-run on a follow-up turn and sent on
/// the bot's one path; the mode's last word sent the same way.
struct InMemoryTries<'a> {
    bot: &'a Bot,
    promise: &'a OwnedPromise,
}

impl Tries for InMemoryTries<'_> {
    type Done = Ended;
    type Error = DeliveryError;

    async fn attempt(&mut self, _k: u32) -> Result<Tried<Ended>, DeliveryError> {
        let promise = self.promise;
        let turn = self.bot.follow_up_turn(promise);
        let reply = self
            .bot
            .follow_up_reply(&turn, promise.mode, &promise.rerun, &promise.delivered)
            .await;
        let sent = self.bot.send_rerun(&turn, reply.into(), None).await;
        match (turn.take_follow_up_failure(), sent) {
            (Some(failure), _) => Ok(Tried::Failed(failure)),
            (None, Ok(delivery)) => Ok(Tried::Ended(Ended::Kept(delivery.outcome()))),
            (None, Err(error)) => Err(error),
        }
    }

    async fn give_up(&mut self, failure: EgressError, _k: u32) -> Result<Ended, DeliveryError> {
        let promise = self.promise;
        let turn = self.bot.plain_turn(promise);
        let policy = turn.policy_for(promise.mode);
        let last = choose(promise.mode, policy, &failure, Some(turn.ledger()));
        if matches!(last, Reply::Silence) {
            return Ok(Ended::GaveUp);
        }
        // A hand-built reply's own promise cannot come back from a last word.
        let _handoff = self.bot.send_rerun(&turn, last.into(), None).await?;
        Ok(Ended::HandedOff)
    }
}

#[cfg(all(feature = "gate", feature = "markdown"))]
fn rest_after(
    delivered: &str,
    answer: crate::egress::AgentMessage,
) -> Result<crate::egress::AgentMessage, EgressError> {
    crate::boundary::rest_after(delivered, answer)
}

/// Without the stream's joiner nothing was streamed before a promise, so nothing is cut.
#[cfg(not(all(feature = "gate", feature = "markdown")))]
fn rest_after(
    _delivered: &str,
    answer: crate::egress::AgentMessage,
) -> Result<crate::egress::AgentMessage, EgressError> {
    Ok(answer)
}

/// A [`Promise`] with what it borrows owned, for a keeper that outlives the turn.
pub(super) struct OwnedPromise {
    commitment: Commitment,
    address: Address,
    mode: Mode,
    delivered: String,
    rerun: Rerun,
    input: Option<String>,
    ledger: Ledger,
}

/// Promises without a route to re-run: no keeper can keep them (they come back to the caller).
#[derive(Debug, thiserror::Error)]
#[error("a promise with no route to re-run cannot be kept")]
struct NothingToRerun;

/// The bot's in-memory keeper: keeps each promise in a task of the current runtime (gone
/// with the process; a store keeps promises across restarts).
pub(super) struct InMemory {
    bot: Bot,
}

impl InMemory {
    pub(super) fn new(bot: Bot) -> Self {
        Self { bot }
    }
}

impl PromiseKeeper for InMemory {
    fn keep<'a>(
        &'a self,
        promise: Promise<'a>,
    ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
        Box::pin(async move {
            let rerun = promise.rerun().ok_or(NothingToRerun)?.clone();
            let owned = OwnedPromise {
                commitment: promise.commitment().duplicate(),
                address: promise.address().clone(),
                mode: promise.mode(),
                delivered: promise.delivered().to_owned(),
                rerun,
                input: promise.input().map(str::to_owned),
                ledger: promise.ledger().cloned().unwrap_or_else(Ledger::in_memory),
            };
            let runtime = tokio::runtime::Handle::try_current()?;
            let bot = self.bot.clone();
            let in_flight = bot.shared.in_memory.begin();
            runtime.spawn(async move {
                let ended = bot.clone().keep_here(owned).await;
                in_flight.end(ended);
            });
            Ok(())
        })
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod durable {
    use super::{BoxFuture, MAX_FOLLOW_UP_DELAY, NothingToRerun, Promise, PromiseKeeper};
    use crate::store::{FollowUpPlan, FollowUpTask, Store};

    /// The store keeps a promise durably: stored (route, input, mode, plan and address) before
    /// its holding line goes; a [`Worker`](crate::worker::Worker) built with
    /// [`Bot::worker`](crate::Bot::worker) re-runs the route. A promise without a route cannot
    /// be kept by anyone: it is refused, and its holding line is not sent.
    impl PromiseKeeper for Store {
        fn keep<'a>(
            &'a self,
            promise: Promise<'a>,
        ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
            Box::pin(async move {
                let rerun = promise.rerun().ok_or(NothingToRerun)?;
                // The route's typed input (serialized by `Bot::run`), what the person had seen
                // (a stream's delivered prefix) and what they said (the follow-up turn's input,
                // so its gate reads the same message).
                let task = FollowUpTask::typed(rerun.route(), rerun.input(), promise.mode())?
                    .with_delivered(promise.delivered())
                    .with_said(promise.input().unwrap_or_default());
                let plan = FollowUpPlan::for_commitment(promise.commitment(), MAX_FOLLOW_UP_DELAY);
                self.keep_commitment(promise.commitment(), promise.address(), &task, plan)
                    .await?;
                Ok(())
            })
        }
    }
}

/// The promises the in-memory keeper is keeping, and how the finished ones ended, for
/// [`Bot::promises_kept`].
#[derive(Default)]
pub(super) struct InFlight {
    state: Mutex<InFlightState>,
    changed: Notify,
}

#[derive(Default)]
struct InFlightState {
    running: usize,
    ended: Vec<Result<Outcome, DeliveryError>>,
}

/// One promise being kept: counted until it is dropped (a panicking follow-up too).
pub(super) struct Running {
    in_flight: Arc<InFlight>,
    ended: Option<Result<Outcome, DeliveryError>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, InFlightState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn begin(self: &Arc<Self>) -> Running {
        self.lock().running += 1;
        Running {
            in_flight: Arc::clone(self),
            ended: None,
        }
    }

    /// Waits until no promise is being kept; how those that ended did, in the order they
    /// ended (taken: a second call gives only what ended since).
    pub(super) async fn settled(&self) -> Vec<Result<Outcome, DeliveryError>> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = self.lock();
                if state.running == 0 {
                    return std::mem::take(&mut state.ended);
                }
            }
            changed.await;
        }
    }
}

impl Running {
    pub(super) fn end(mut self, ended: Result<Outcome, DeliveryError>) {
        self.ended = Some(ended);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        {
            let mut state = self.in_flight.lock();
            state.running -= 1;
            if let Some(ended) = self.ended.take() {
                state.ended.push(ended);
            }
        }
        self.in_flight.changed.notify_waiters();
    }
}
