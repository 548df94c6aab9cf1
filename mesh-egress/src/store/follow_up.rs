//! A [`Durable`] channel's side of a commitment: the promise stored where its holding line
//! goes ([`Durable::keep_commitment`]), and [`Sealing`], a follow-up's delivery whose commit
//! also ends its commitment, so the parts of the follow-up and the end of the promise are
//! written together or not at all.

use std::fmt;
use std::future::Future;

use super::commitments::Seal;
use super::{Claim, CommitmentEnd, Durable, FollowUpPlan, FollowUpTask, StoreError};
use crate::channel::{Channel, PartReceipt, SendError};
use crate::outbound::{CommitError, CommitRecord, CommittedPart};
use crate::reply::Commitment;

/// A [`Durable`] channel for one claimed commitment's follow-up (built by
/// [`Durable::sealing`]): committing its message writes the parts **and** ends the commitment
/// in one transaction, fenced on the claim (and on the conversation's lease, like every
/// durable commit). A crash therefore never leaves a delivered follow-up whose commitment is
/// still due, nor an ended commitment whose follow-up was never committed; and a claim that
/// expired or moved on commits nothing. A second message through the same `Sealing` is
/// refused: at most one follow-up message per commitment.
pub struct Sealing<'a, C> {
    durable: &'a Durable<C>,
    seal: Seal,
}

impl<C: Channel> Durable<C> {
    /// Stores `commitment` for the holding line this channel delivers: its follow-up goes
    /// where the holding line went, this channel's [`address`](Channel::address). See
    /// [`Store::keep_commitment`](super::Store::keep_commitment).
    ///
    /// # Errors
    ///
    /// As [`Store::keep_commitment`](super::Store::keep_commitment), with this channel's
    /// address as `to`.
    pub async fn keep_commitment(
        &self,
        commitment: &Commitment,
        task: &FollowUpTask,
        plan: FollowUpPlan,
    ) -> Result<(), StoreError> {
        self.store()
            .keep_commitment(commitment, &self.address, task, plan)
            .await
    }

    /// A channel that delivers `claim`'s follow-up through this outbox and, in the commit's
    /// transaction, ends the commitment as `end` (see [`Sealing`]).
    pub fn sealing<'a>(&'a self, claim: &Claim, end: CommitmentEnd) -> Sealing<'a, C> {
        Sealing {
            durable: self,
            seal: Seal::ending(&self.store().inner.pool, claim, end),
        }
    }
}

impl<C: Channel> Channel for Sealing<'_, C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        Channel::renderer(self.durable)
    }

    fn address(&self) -> crate::address::Address {
        Channel::address(self.durable)
    }

    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        self.durable.commit_parts(record, Some(&self.seal))
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let durable = self.durable;
        async move {
            // The crash test's point: the follow-up and the commitment's end are committed,
            // nothing is sent yet. A restart must send it once and never keep the promise again.
            crate::failpoint::hit("follow_up_committed").await;
            Channel::send(durable, part).await
        }
    }
}

impl<C> fmt::Debug for Sealing<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealing")
            .field("commitment", &self.seal.id)
            .field("end", &self.seal.state)
            .finish_non_exhaustive()
    }
}
