//! A holding line's promise, kept once: where it goes ([`Destination`], the destination that
//! carried the line), the follow-up every keeper makes (the same route re-run on a follow-up
//! turn, its answer through the bot's one path), the plan ([`plan`]: one try, the backoff), the
//! in-memory keeper (this process) and the durable one (the store; a
//! [`Worker`](crate::worker::Worker) keeps it one try per claim, after a restart too).

pub(crate) mod plan;

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::path::collect;
use super::{Bot, Outcome, Outgoing, Shape};
use crate::address::Address;
use crate::answer::Streamed;
use crate::boundary::{PromiseKeeper, Rerun, ToKeep, resolve_in};
use crate::channel::{BoxedChannel, DeliveryError};
use crate::degrade::choose;
use crate::egress::EgressError;
use crate::future::BoxFuture;
use crate::ledger::{CommitmentState, Ledger};
use crate::reply::{Commitment, Mode, Reply};
use crate::turn::Turn;
use plan::{Ending, Tried, Tries, keep_in_process};

/// Where a route's follow-up goes: the destination that carried its holding line, never a
/// client looked up for an address the bot cannot serve.
#[derive(Clone, Debug)]
pub(crate) enum Destination {
    /// The bot's own client for the turn's address (with a store: through the outbox, by a
    /// worker, which holds the same clients).
    Client,
    /// The caller's channel (`Bot::run_to` without a store or a client for its surface): the
    /// promise is kept in this process, through that channel.
    Channel(BoxedChannel),
}

/// The route that started a turn, and where its promise goes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Started<'a> {
    pub(crate) rerun: &'a Rerun,
    pub(crate) destination: &'a Destination,
}

#[derive(Debug, thiserror::Error)]
#[error("no route is registered under {0:?} on this bot")]
struct UnknownRoute(String);

impl Bot {
    /// The keeper of a promise made through `destination`: the store's when the bot has one and
    /// the promise goes through its clients, the in-memory one otherwise.
    pub(crate) fn keeper(&self, destination: &Destination) -> Arc<dyn PromiseKeeper> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let (Some(store), Destination::Client) = (&self.shared.store, destination) {
            return Arc::new(store.clone());
        }
        Arc::new(InMemory {
            bot: self.clone(),
            destination: destination.clone(),
        })
    }

    /// A promise's follow-up, for every keeper: the route re-run on `turn` (a follow-up turn:
    /// a failure is left on it for the keeper, no second promise is made), a stream read to
    /// its end, and after a stream only what follows `delivered`, what the person had seen.
    pub(crate) async fn follow_up_reply(
        &self,
        turn: &Turn,
        mode: Mode,
        rerun: &Rerun,
        delivered: &str,
    ) -> Reply {
        let policy = turn.policy_for(mode);
        let outgoing = match self.erased_route(&rerun.route) {
            Some(route) => route.call(turn.clone(), rerun.input.clone()),
            None => Err(EgressError::semantic(
                UnknownRoute(rerun.route.clone()),
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

    /// The turn a follow-up of `promise` runs on: the promise's conversation, mode and input.
    fn follow_up_turn(&self, promise: &OwnedPromise) -> Turn {
        self.plain_turn(promise)
            .with_mode(promise.mode)
            .into_follow_up()
    }

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

    /// Delivers a follow-up's reply (or the last word) to where the promise goes.
    async fn deliver_follow_up(
        &self,
        promise: &OwnedPromise,
        turn: &Turn,
        reply: Reply,
    ) -> Result<super::Delivery, DeliveryError> {
        match &promise.destination {
            Destination::Client => self.send_started(turn, reply.into(), None).await,
            Destination::Channel(channel) => self.deliver(turn, channel, reply.into(), None).await,
        }
    }

    /// Keeps `promise` in this process on the commitment's plan.
    async fn keep_here(self, promise: OwnedPromise) -> Result<Outcome, DeliveryError> {
        let mut tries = InMemoryTries {
            bot: &self,
            promise: &promise,
        };
        match keep_in_process(&promise.commitment, &promise.ledger, &mut tries).await {
            Ok(ended) => Ok(ended.outcome()),
            Err(error) => {
                tracing::warn!(target: "mesh_egress::bot", commitment = %promise.commitment.id(), error = %error, "follow-up not delivered");
                Err(error)
            }
        }
    }
}

/// How a promise kept in memory ended.
enum Ended {
    Kept(Outcome),
    HandedOff,
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

/// The in-memory keeper's tries: the route re-run, its answer through the one path (gated,
/// rendered, sent once) to the promise's destination; a failure (left on the follow-up turn
/// by the boundary) retried on the plan; the mode's last word after the last try.
struct InMemoryTries<'a> {
    bot: &'a Bot,
    promise: &'a OwnedPromise,
}

impl Tries for InMemoryTries<'_> {
    type Done = Ended;
    type Error = DeliveryError;

    async fn attempt(&mut self) -> Result<Tried<Ended>, DeliveryError> {
        let promise = self.promise;
        let turn = self.bot.follow_up_turn(promise);
        let reply = self
            .bot
            .follow_up_reply(&turn, promise.mode, &promise.rerun, &promise.delivered)
            .await;
        let sent = self.bot.deliver_follow_up(promise, &turn, reply).await;
        match (turn.take_follow_up_failure(), sent) {
            (Some(failure), _) => Ok(Tried::Failed(failure)),
            (None, Ok(delivery)) => Ok(Tried::Ended(Ended::Kept(delivery.outcome()))),
            (None, Err(error)) => Err(error),
        }
    }

    async fn give_up(&mut self, failure: EgressError) -> Result<Ended, DeliveryError> {
        let promise = self.promise;
        let turn = self.bot.plain_turn(promise);
        let policy = turn.policy_for(promise.mode);
        let last = choose(promise.mode, policy, &failure, Some(turn.ledger()));
        if matches!(last, Reply::Silence) {
            return Ok(Ended::GaveUp);
        }
        let _handoff = self.bot.deliver_follow_up(promise, &turn, last).await?;
        Ok(Ended::HandedOff)
    }
}

/// What follows `delivered` in a follow-up's `answer` (a streamed turn's promise).
#[cfg(feature = "markdown")]
fn rest_after(
    delivered: &str,
    answer: crate::egress::AgentMessage,
) -> Result<crate::egress::AgentMessage, EgressError> {
    crate::boundary::rest_after(delivered, answer)
}

/// Without the streamed boundary nothing is shown before a stream ends: the whole answer.
#[cfg(not(feature = "markdown"))]
fn rest_after(
    _delivered: &str,
    answer: crate::egress::AgentMessage,
) -> Result<crate::egress::AgentMessage, EgressError> {
    Ok(answer)
}

/// A promise the in-memory keeper holds: [`ToKeep`], owned.
struct OwnedPromise {
    commitment: Commitment,
    address: Address,
    mode: Mode,
    delivered: String,
    rerun: Rerun,
    input: Option<String>,
    ledger: Ledger,
    destination: Destination,
}

/// The in-memory keeper: a task per promise, re-running its route on the commitment's plan.
struct InMemory {
    bot: Bot,
    destination: Destination,
}

impl PromiseKeeper for InMemory {
    fn keep<'a>(
        &'a self,
        promise: ToKeep<'a>,
    ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
        Box::pin(async move {
            let owned = OwnedPromise {
                commitment: promise.commitment.duplicate(),
                address: promise.address.clone(),
                mode: promise.mode,
                delivered: promise.delivered.to_owned(),
                rerun: promise.rerun.clone(),
                input: promise.input.map(str::to_owned),
                ledger: promise.ledger.clone(),
                destination: self.destination.clone(),
            };
            // A spawned task, so the follow-up outlives the call that made the promise; the
            // bot's `promises_kept` waits for it.
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
    use super::plan::MAX_FOLLOW_UP_DELAY;
    use super::{BoxFuture, PromiseKeeper, ToKeep};
    use crate::store::{FollowUpPlan, FollowUpTask, Store};

    /// The store's keeper: the promise stored with the line's address (before the line goes),
    /// for a worker to keep.
    impl PromiseKeeper for Store {
        fn keep<'a>(
            &'a self,
            promise: ToKeep<'a>,
        ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
            Box::pin(async move {
                let rerun = promise.rerun;
                let task = FollowUpTask::typed(&rerun.route, &rerun.input, promise.mode)?
                    .with_delivered(promise.delivered)
                    .with_said(promise.input.unwrap_or_default());
                let plan = FollowUpPlan::for_commitment(promise.commitment, MAX_FOLLOW_UP_DELAY);
                self.keep_commitment(promise.commitment, promise.address, &task, plan)
                    .await?;
                Ok(())
            })
        }
    }
}

/// The in-memory keeper's promises in flight, and how each ended (`Bot::promises_kept`).
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

/// One promise in flight; its end is recorded when it drops (a panicking task counts too).
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

    /// Waits until nothing is in flight, then takes how each ended since the last call.
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
