//! Keeping one claimed commitment: the lease, what the conversation still has open, then one
//! try through the bot's one path (the route re-run, gated, rendered, committed together with
//! the commitment's end), or the mode's last word.

use std::time::Duration;

use super::{Worker, sleep_unless};
use crate::address::Address;
use crate::bot::Outcome;
use crate::bot::follow_up::plan::{Step, Tried, Tries, one_try};
use crate::boundary::{Rerun, track};
use crate::channel::{BoxedChannel, DeliveryError};
use crate::degrade::choose;
use crate::egress::EgressError;
use crate::ledger::{CommitmentRecord, CommitmentState, LedgerRecord};
use crate::outbound::CommitError;
use crate::ownership::Cancellation;
use crate::reply::{Mode, Reply};
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

/// One claimed commitment's try: the route re-run on a follow-up turn (the lease and the
/// claim renewed meanwhile, a shutdown or a lost lease stopping it) and its reply through the
/// bot's one path, sealed with the commitment's end; the mode's last word after the last try.
struct StoredTries<'a> {
    worker: &'a Worker,
    claim: &'a Claim,
    lease: &'a Lease,
    turn: &'a Turn,
    mode: Mode,
    rerun: &'a Rerun,
    channel: &'a Durable<BoxedChannel>,
    shutdown: &'a Cancellation,
    cancellation: &'a Cancellation,
}

impl Tries for StoredTries<'_> {
    type Done = Kept;
    type Error = StoreError;

    async fn attempt(&mut self) -> Result<Tried<Kept>, StoreError> {
        let (worker, claim, turn) = (self.worker, self.claim, self.turn);
        let Some(reply) = worker
            .run_guarded(self, self.shutdown, self.cancellation)
            .await?
        else {
            return Ok(Tried::Ended(if self.shutdown.is_cancelled() {
                Kept::Released
            } else {
                Kept::Lost
            }));
        };
        if let Some(failure) = turn.take_follow_up_failure() {
            return Ok(Tried::Failed(failure));
        }
        let sealing = self.channel.sealing(claim, CommitmentEnd::Fulfilled);
        let delivered = worker.bot.whole(turn, &sealing, reply, None).await;
        // The gate blocked it, or it cannot be rendered: a failed try, nothing committed.
        if let Some(failure) = turn.take_follow_up_failure() {
            return Ok(Tried::Failed(failure));
        }
        match delivered {
            // The agent's silence: the promise is kept with nothing sent.
            Ok(delivery) if delivery.outcome() == Outcome::Silent => {
                let ended = worker
                    .store()
                    .end_commitment(claim, CommitmentEnd::Fulfilled)
                    .await?;
                Ok(Tried::Ended(if ended {
                    Kept::Fulfilled
                } else {
                    Kept::Lost
                }))
            }
            delivered => Ok(Tried::Ended(match settle(delivered) {
                Delivered::Committed => Kept::Fulfilled,
                Delivered::Refused => Kept::Lost,
            })),
        }
    }

    async fn give_up(&mut self, failure: EgressError) -> Result<Kept, StoreError> {
        let (worker, claim, turn) = (self.worker, self.claim, self.turn);
        let policy = turn.policy_for(self.mode);
        let last = choose(self.mode, policy, &failure, Some(turn.ledger()));
        if matches!(last, Reply::Silence) {
            let ended = worker
                .store()
                .end_commitment(claim, CommitmentEnd::Cancelled)
                .await?;
            return Ok(if ended { Kept::Cancelled } else { Kept::Lost });
        }
        let sealing = self.channel.sealing(claim, CommitmentEnd::HandedOff);
        let delivered = worker.bot.whole(turn, &sealing, last, None).await;
        if turn.take_follow_up_failure().is_some() {
            // The handoff line itself cannot be rendered here: nothing is sent, and the
            // promise ends.
            let ended = worker
                .store()
                .end_commitment(claim, CommitmentEnd::Cancelled)
                .await?;
            return Ok(if ended { Kept::Cancelled } else { Kept::Lost });
        }
        Ok(match settle(delivered) {
            Delivered::Committed => Kept::HandedOff,
            Delivered::Refused => Kept::Lost,
        })
    }
}

/// What a sealed delivery came to.
enum Delivered {
    /// The follow-up (or handoff) and the commitment's end were committed together.
    Committed,
    /// The commit was refused (the claim or the lease moved on): nothing was written.
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
        let task = claim.task();
        // The route's input as it was stored (its own type is the route's business).
        let rerun = Rerun {
            route: task.handler.clone(),
            input: task.route_input(),
        };
        let cancellation = Cancellation::new();
        let mut turn = self
            .bot
            .turn(address.clone(), claim.attribution().clone())
            .with_ownership(lease.ownership())
            .with_cancellation(cancellation.clone())
            .with_mode(task.mode);
        if let Some(said) = task.said() {
            turn = turn.with_input(said);
        }
        let turn = turn.into_follow_up();
        // One try of the stored plan, through the keeping mechanism every keeper shares: the
        // answer delivered, or the failure retried on the plan, or the mode's last word.
        let mut tries = StoredTries {
            worker: self,
            claim,
            lease,
            turn: &turn,
            mode: task.mode,
            rerun: &rerun,
            channel,
            shutdown,
            cancellation: &cancellation,
        };
        match one_try(&mut tries, claim.is_last_try()).await? {
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

    /// Runs the route's follow-up while renewing the claim; `None` when the shutdown fired (the
    /// claim is given back) or the claim or the lease was lost (the lease is revoked with it).
    async fn run_guarded(
        &self,
        tries: &StoredTries<'_>,
        shutdown: &Cancellation,
        cancellation: &Cancellation,
    ) -> Result<Option<Reply>, StoreError> {
        let (claim, lease, turn) = (tries.claim, tries.lease, tries.turn);
        let store = self.store();
        let work =
            self.bot
                .follow_up_reply(turn, tries.mode, tries.rerun, claim.task().delivered());
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
                reply = &mut work => return Ok(Some(reply)),
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
}

impl Worker {
    /// Puts how a promise ended on the worker's ledger, as the in-memory keeper does: its
    /// state and how many tries it took.
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
fn settle(result: Result<crate::bot::Delivery, DeliveryError>) -> Delivered {
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
