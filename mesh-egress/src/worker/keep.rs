//! Keeping one claimed commitment: lease, resend, re-run, gate, boundary, sealed delivery.

use std::time::Duration;

use super::{Worker, sleep_unless};
use crate::address::Address;
use crate::boundary::keeping::{Step, Tried, Tries, one_try};
use crate::boundary::{record_delivered, render_for, resolve_in, track};
use crate::channel::{BoxedChannel, Channel, DeliveryError, deliver_rendered};
use crate::egress::{AgentMessage, EgressError};
use crate::ledger::{CommitmentRecord, CommitmentState, LedgerRecord};
use crate::outbound::{CommitError, Outbound};
use crate::ownership::Cancellation;
use crate::reply::Reply;
use crate::store::{Claim, CommitmentEnd, Durable, Lease, StoreError};
use crate::turn::Turn;

/// How one claimed commitment came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kept {
    /// The answer was committed together with the commitment's end.
    Fulfilled,
    /// A handoff line was committed together with the commitment's end.
    HandedOff,
    /// Ended with nothing sent (a proactive promise whose last try failed).
    Cancelled,
    /// The try failed and the commitment waits for its next step on the plan.
    RetryLater,
    /// Given back untried: a shutdown, another holder had the conversation, or no client of
    /// this worker can send to the commitment's address.
    Released,
    /// The claim or the conversation's lease moved on; nothing was committed.
    Lost,
    /// Stored without a readable address (before migration 0004): ended `cancelled` with
    /// nothing sent, never kept to a guessed destination (see
    /// [`Store::readdress`](crate::store::Store::readdress)).
    Unaddressed,
}

/// A problem named for the error-tracking event when no handler is registered.
#[derive(Debug, thiserror::Error)]
#[error("no handler is registered under {0:?} on this worker")]
struct UnknownHandler(String);

/// A stored promise's try: the handler re-run under the claim and the lease, gated, put through
/// the boundary with the stored mode, delivered sealed with the commitment's end; the last
/// word the same way.
struct StoredTries<'a> {
    worker: &'a Worker,
    claim: &'a Claim,
    lease: &'a Lease,
    turn: &'a Turn,
    channel: &'a Durable<BoxedChannel>,
    shutdown: &'a Cancellation,
    cancellation: &'a Cancellation,
}

impl Tries for StoredTries<'_> {
    type Done = Kept;
    type Error = StoreError;

    async fn attempt(&mut self, _k: u32) -> Result<Tried<Kept>, StoreError> {
        let (worker, claim, turn, channel) = (self.worker, self.claim, self.turn, self.channel);
        let Some(result) = worker
            .run_guarded(claim, self.lease, turn, self.shutdown, self.cancellation)
            .await?
        else {
            return Ok(Tried::Ended(if self.shutdown.is_cancelled() {
                Kept::Released
            } else {
                Kept::Lost
            }));
        };
        let answer = match result {
            Ok(answer) => answer,
            Err(error) => return Ok(Tried::Failed(error)),
        };
        let answer = match resolve_in(turn, claim.task().mode, &worker.policy, Ok(answer)) {
            Reply::Answer(answer) => answer,
            // The agent answered with one of its silence tokens: it chose to say nothing, and
            // the promise is kept with nothing sent.
            Reply::Silence => {
                let ended = worker
                    .store()
                    .end_commitment(claim, CommitmentEnd::Fulfilled)
                    .await?;
                return Ok(Tried::Ended(if ended {
                    Kept::Fulfilled
                } else {
                    Kept::Lost
                }));
            }
            // `resolve_in` passes an answer through; nothing else can come back.
            _ => return Ok(Tried::Ended(Kept::Lost)),
        };
        match render_for(channel, answer) {
            Ok(answer) => {
                let sealing = channel.sealing(claim, CommitmentEnd::Fulfilled);
                let delivered = deliver_rendered(&sealing, answer, None).await;
                record_delivered(turn.ledger(), turn.attribution(), channel, &delivered);
                Ok(Tried::Ended(match settle(delivered) {
                    Delivered::Committed => Kept::Fulfilled,
                    Delivered::Refused => Kept::Lost,
                }))
            }
            Err(error) => Ok(Tried::Failed(error)),
        }
    }

    async fn give_up(&mut self, failure: EgressError, _k: u32) -> Result<Kept, StoreError> {
        self.worker
            .give_up(self.claim, self.channel, self.turn, failure)
            .await
    }
}

/// Why a follow-up's delivery ended, as far as the commitment is concerned.
enum Delivered {
    /// The parts and the end were committed (sends that failed after it are the outbox's).
    Committed,
    /// Nothing was committed: the claim or the lease moved on.
    Refused,
}

impl Worker {
    /// Keeps `claim`: takes the conversation's lease, sends what it still has open for the
    /// commitment's address, re-runs the handler and delivers to that address or reschedules
    /// (see the [module docs](super)). The `follow_up_claimed` failpoint stops a crash test's
    /// child here, after the claim and before any delivery.
    pub(crate) async fn keep(
        &self,
        claim: &Claim,
        shutdown: &Cancellation,
    ) -> Result<Kept, StoreError> {
        crate::failpoint::hit("follow_up_claimed").await;
        let store = self.store();
        let Some(address) = claim.address() else {
            return self.end_unaddressed_commitment(claim).await;
        };
        let channel = match self.channel_for(address) {
            Ok(channel) => self.durable(channel),
            Err(refused) => {
                // Left for a worker that can send there.
                self.report_refused(&refused);
                store.release_claim(claim, Duration::ZERO).await?;
                return Ok(Kept::Released);
            }
        };
        let conversation = claim.attribution().conversation();
        let lease = match store.acquire(conversation, &self.holder, self.ttl).await {
            Ok(lease) => lease,
            Err(StoreError::LeaseHeld { .. }) => {
                // Someone is speaking in this conversation: due again at once, uncounted (the
                // pass stops and waits, so this does not spin; `--once` still sees it due).
                store.release_claim(claim, Duration::ZERO).await?;
                return Ok(Kept::Released);
            }
            Err(error) => {
                let _ = store.release_claim(claim, Duration::ZERO).await;
                return Err(error);
            }
        };
        let renewal = store.keep_renewed(&lease, self.ttl);
        let kept = self
            .keep_leased(claim, address, &channel, &lease, shutdown)
            .await;
        drop(renewal);
        if let Err(error) = store.release(lease).await {
            tracing::warn!(target: "mesh_egress::store", conversation, error = %error, "lease release failed; it runs out at its expiry");
        }
        let kept = kept?;
        tracing::info!(target: "mesh_egress::store", conversation, commitment = %claim.id(), holder = %self.holder, kept = ?kept, "follow-up kept");
        self.record_end(claim, kept);
        Ok(kept)
    }

    async fn keep_leased(
        &self,
        claim: &Claim,
        address: &Address,
        channel: &Durable<BoxedChannel>,
        lease: &Lease,
        shutdown: &Cancellation,
    ) -> Result<Kept, StoreError> {
        let store = self.store();
        // The conversation's earlier parts go first, so the follow-up never overtakes them.
        match store.resend(channel, lease).await {
            // An earlier part must be tried later: the follow-up waits behind it, untried
            // (uncounted, due again when that part's backoff ends, or at once; the pass stops
            // and waits, as for a held lease).
            Ok(report) if report.stopped => {
                store
                    .release_claim(claim, report.retry_in.unwrap_or(Duration::ZERO))
                    .await?;
                return Ok(Kept::Released);
            }
            Ok(_) => {}
            Err(StoreError::LeaseLost { .. }) => return Ok(Kept::Lost),
            Err(error) => return Err(error),
        }
        let cancellation = Cancellation::new();
        let turn = Turn::new(claim.attribution().clone())
            .with_address(address.clone())
            .with_ownership(lease.ownership())
            .with_cancellation(cancellation.clone());
        // The follow-up's rows (model attempts, gate, Layer C) go on the worker's ledger.
        let turn = match &self.outbox.ledger {
            Some(ledger) => turn.with_ledger(ledger.clone()),
            None => turn,
        };
        // One try of the stored plan, through the keeping mechanism every keeper shares: the
        // answer delivered, or the failure retried on the plan, or the mode's last word.
        let mut tries = StoredTries {
            worker: self,
            claim,
            lease,
            turn: &turn,
            channel,
            shutdown,
            cancellation: &cancellation,
        };
        let k = claim.attempts_made().saturating_add(1);
        match one_try(&mut tries, k, claim.is_last_try()).await? {
            Step::Done(kept) => Ok(kept),
            Step::Again(failure) => {
                track(&failure, Some(turn.ledger()));
                Ok(if store.retry_later(claim).await? {
                    Kept::RetryLater
                } else {
                    Kept::Lost
                })
            }
        }
    }

    /// Runs the handler (and the gate) while renewing the claim; `None` when the shutdown
    /// fired (the claim is given back) or the claim was lost (the lease is revoked with it).
    async fn run_guarded(
        &self,
        claim: &Claim,
        lease: &Lease,
        turn: &Turn,
        shutdown: &Cancellation,
        cancellation: &Cancellation,
    ) -> Result<Option<Result<AgentMessage, EgressError>>, StoreError> {
        let store = self.store();
        let work = self.run_handler(claim, turn);
        tokio::pin!(work);
        let every = (self.ttl / 3).max(Duration::from_millis(1));
        let ownership = lease.ownership();
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    cancellation.cancel();
                    store.release_claim(claim, Duration::ZERO).await?;
                    tracing::info!(target: "mesh_egress::store", commitment = %claim.id(), holder = %self.holder, "shutdown: claim given back untried");
                    return Ok(None);
                }
                () = ownership.revoked() => {
                    cancellation.cancel();
                    tracing::warn!(target: "mesh_egress::store", commitment = %claim.id(), holder = %self.holder, "lease lost: follow-up stopped");
                    return Ok(None);
                }
                result = &mut work => return Ok(Some(result)),
                renewed = renew_after(store, claim, every, self.ttl, shutdown) => {
                    if !renewed? {
                        ownership.revoke();
                        cancellation.cancel();
                        tracing::warn!(target: "mesh_egress::store", commitment = %claim.id(), holder = %self.holder, "claim lost: follow-up stopped");
                        return Ok(None);
                    }
                }
            }
        }
    }

    async fn run_handler(&self, claim: &Claim, turn: &Turn) -> Result<AgentMessage, EgressError> {
        let task = claim.task();
        let Some(handler) = self.handlers.get(&task.handler) else {
            return Err(EgressError::semantic(
                UnknownHandler(task.handler.clone()),
                claim.attribution().clone(),
            ));
        };
        let result = handler.call(task, turn).await;
        self.gate(claim, turn, result).await
    }

    #[cfg(feature = "gate")]
    async fn gate(
        &self,
        claim: &Claim,
        turn: &Turn,
        result: Result<AgentMessage, EgressError>,
    ) -> Result<AgentMessage, EgressError> {
        let task = claim.task();
        match (&self.gate, &task.gate) {
            (Some(make), Some(_)) => {
                let user = task.said().unwrap_or_default();
                make(task).check(turn, user, result).await
            }
            _ => result,
        }
    }

    #[cfg(not(feature = "gate"))]
    async fn gate(
        &self,
        _claim: &Claim,
        _turn: &Turn,
        result: Result<AgentMessage, EgressError>,
    ) -> Result<AgentMessage, EgressError> {
        result
    }

    /// The last try failed (or cannot be retried; `error` is marked so by [`one_try`]): the
    /// boundary decides with the stored mode, as for a non-retryable error: interactive hands
    /// off, proactive stays silent.
    async fn give_up(
        &self,
        claim: &Claim,
        channel: &Durable<BoxedChannel>,
        turn: &Turn,
        error: EgressError,
    ) -> Result<Kept, StoreError> {
        let reply = resolve_in(turn, claim.task().mode, &self.policy, Err(error));
        let message = match reply {
            Reply::Handoff { message } | Reply::Answer(message) => message,
            Reply::Holding { message, .. } => message,
            Reply::Silence => {
                return Ok(
                    if self
                        .store()
                        .end_commitment(claim, CommitmentEnd::Cancelled)
                        .await?
                    {
                        Kept::Cancelled
                    } else {
                        Kept::Lost
                    },
                );
            }
        };
        let rendered = match Outbound::new(message).render(Channel::renderer(channel)) {
            Ok(rendered) => rendered,
            Err(error) => {
                // Layer C's own sentence cannot be shown here: the channel is misconfigured.
                // End the promise rather than retry a line that will never render.
                tracing::error!(target: "mesh_egress::store", commitment = %claim.id(), error = %error, "handoff line cannot be rendered; commitment cancelled");
                let ended = self
                    .store()
                    .end_commitment(claim, CommitmentEnd::Cancelled)
                    .await?;
                return Ok(if ended { Kept::Cancelled } else { Kept::Lost });
            }
        };
        let sealing = channel.sealing(claim, CommitmentEnd::HandedOff);
        let delivered = deliver_rendered(&sealing, rendered, None).await;
        record_delivered(turn.ledger(), turn.attribution(), channel, &delivered);
        Ok(match settle(delivered) {
            Delivered::Committed => Kept::HandedOff,
            Delivered::Refused => Kept::Lost,
        })
    }
}

impl Worker {
    /// Puts how a promise ended on the worker's ledger, as the in-process follow-up runner
    /// does: its state and how many tries it took.
    fn record_end(&self, claim: &Claim, kept: Kept) {
        let state = match kept {
            Kept::Fulfilled => CommitmentState::Fulfilled,
            Kept::HandedOff => CommitmentState::HandedOff,
            Kept::Cancelled => CommitmentState::Cancelled,
            _ => return,
        };
        if let Some(ledger) = &self.outbox.ledger {
            ledger.record(
                claim.attribution(),
                LedgerRecord::Commitment(CommitmentRecord::new(
                    claim.id(),
                    state,
                    claim.attempts_made().saturating_add(1),
                    claim.plan().attempts(),
                )),
            );
        }
    }
}

/// Whether a sealed delivery committed: only a commit failure leaves the commitment open.
fn settle(result: Result<crate::channel::Receipt, DeliveryError>) -> Delivered {
    match result {
        Ok(_) => Delivered::Committed,
        Err(DeliveryError::Commit(error)) => {
            if let CommitError::Store(cause) = &error {
                tracing::warn!(target: "mesh_egress::store", error = %cause, "follow-up commit failed; the claim runs out and the commitment is retried");
            }
            Delivered::Refused
        }
        Err(error) => {
            // Committed, then a send failed: the commitment has ended with its parts, which
            // the outbox resends (or marks `uncertain`) by its own rules.
            tracing::warn!(target: "mesh_egress::store", error = %error, "follow-up committed but not fully sent; the outbox keeps the rest");
            Delivered::Committed
        }
    }
}

/// Renews `claim` after `every`; waits forever once `shutdown` fired (the caller's shutdown
/// arm takes over).
async fn renew_after(
    store: &crate::store::Store,
    claim: &Claim,
    every: Duration,
    ttl: Duration,
    shutdown: &Cancellation,
) -> Result<bool, StoreError> {
    if !sleep_unless(every, shutdown).await {
        std::future::pending::<()>().await;
    }
    store.renew_claim(claim, ttl).await
}
