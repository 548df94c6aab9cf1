//! The two [`PromiseKeeper`]s: the bot's in-memory one (the promised route re-run in this
//! process on the commitment's backoff) and the store's (stored before the holding line goes,
//! kept by a worker), and the follow-up both make: the same route re-run on a follow-up turn.

use std::time::Duration;

use super::{Bot, Outgoing, Shape, collect};
use crate::address::Address;
use crate::answer::Streamed;
use crate::boundary::{Promise, PromiseKeeper, Rerun, record_commitment, resolve_in};
use crate::degrade::choose;
use crate::egress::EgressError;
use crate::future::BoxFuture;
use crate::ledger::{CommitmentState, Ledger};
use crate::reply::{Commitment, Mode, Reply};
use crate::retry::Backoff;
use crate::turn::Turn;

/// The longest wait between two follow-ups (the store's plan and the in-memory keeper's).
const MAX_FOLLOW_UP_DELAY: Duration = Duration::from_secs(600);

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

    /// Keeps `promise` in this process: re-runs its route after each backoff step and sends
    /// the first answer, or Layer C's line for the mode after the last failed try (or one that
    /// cannot be retried).
    async fn keep_here(self, promise: OwnedPromise) {
        let OwnedPromise {
            commitment,
            address,
            mode,
            delivered,
            rerun,
        } = promise;
        let ledger = Ledger::in_memory();
        let attempts = commitment.attempts().max(1);
        let backoff = Backoff::new(commitment.first_delay(), MAX_FOLLOW_UP_DELAY);
        for k in 1..=attempts {
            tokio::time::sleep(backoff.step(k)).await;
            let turn = self
                .turn(address.clone(), commitment.attribution().clone())
                .with_mode(mode)
                .with_ledger(ledger.clone())
                .into_follow_up();
            let reply = self.follow_up_reply(&turn, mode, &rerun, &delivered).await;
            let sent = self.send_rerun(&turn, reply.into(), None).await;
            let failure = match (turn.take_follow_up_failure(), sent) {
                (None, Ok(_)) => {
                    record_commitment(Some(&ledger), &commitment, CommitmentState::Fulfilled, k);
                    return;
                }
                (None, Err(error)) => {
                    // The answer was ready and the surface refused it: the commitment stays
                    // pending on the ledger, so an operator sees it.
                    tracing::warn!(target: "mesh_egress::bot", commitment = %commitment.id(), error = %error, "follow-up not delivered");
                    return;
                }
                (Some(failure), _) => failure,
            };
            if failure.retryable() && k < attempts {
                record_commitment(Some(&ledger), &commitment, CommitmentState::Pending, k);
                continue;
            }
            let policy = turn.policy_for(mode);
            let last = choose(mode, policy, &failure.with_retryable(false), Some(&ledger));
            let state = match last {
                Reply::Silence => CommitmentState::Cancelled,
                _ => CommitmentState::HandedOff,
            };
            let plain = self.turn(address.clone(), commitment.attribution().clone());
            if let Err(error) = self.send_rerun(&plain, last.into(), None).await {
                tracing::warn!(target: "mesh_egress::bot", commitment = %commitment.id(), error = %error, "handoff not delivered");
                return;
            }
            record_commitment(Some(&ledger), &commitment, state, k);
            return;
        }
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
struct OwnedPromise {
    commitment: Commitment,
    address: Address,
    mode: Mode,
    delivered: String,
    rerun: Rerun,
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
            };
            let runtime = tokio::runtime::Handle::try_current()?;
            runtime.spawn(self.bot.clone().keep_here(owned));
            Ok(())
        })
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) use durable::StoredRun;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod durable {
    use serde::{Deserialize, Serialize};

    use super::{BoxFuture, MAX_FOLLOW_UP_DELAY, NothingToRerun, Promise, PromiseKeeper};
    use crate::store::{FollowUpPlan, FollowUpTask, Store};

    /// A route's follow-up as the store keeps it: the route's input and what the person had
    /// seen (a stream's delivered prefix; absent for a whole answer).
    #[derive(Serialize, Deserialize)]
    pub(in crate::bot) struct StoredRun {
        pub(in crate::bot) input: serde_json::Value,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        pub(in crate::bot) delivered: String,
    }

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
                let run = StoredRun {
                    input: rerun.input().clone(),
                    delivered: promise.delivered().to_owned(),
                };
                let task =
                    FollowUpTask::new(rerun.route(), serde_json::to_value(run)?, promise.mode());
                let plan = FollowUpPlan::for_commitment(promise.commitment(), MAX_FOLLOW_UP_DELAY);
                self.keep_commitment(promise.commitment(), promise.address(), &task, plan)
                    .await?;
                Ok(())
            })
        }
    }
}
