//! [`Sealing`]: a follow-up's delivery whose commit also ends its commitment, so the parts of
//! the follow-up and the end of the promise are written together or not at all.

use std::fmt;
use std::future::Future;

use super::commitments::{END_AND_DELIVER, sql};
use super::{Claim, CommitmentEnd, Durable};
use crate::channel::{Channel, PartReceipt, SendError};
use crate::outbound::{CommitError, CommitRecord, CommittedPart};

/// The statement that ends a claimed commitment inside a commit transaction: `$1` id, `$2`
/// holder, `$3` token, `$4` the end state, `$5` the follow-up's delivery id.
pub(super) struct Seal {
    pub(super) statement: String,
    pub(super) id: String,
    pub(super) holder: String,
    pub(super) token: i64,
    pub(super) state: &'static str,
}

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
    /// A channel that delivers `claim`'s follow-up through this outbox and, in the commit's
    /// transaction, ends the commitment as `end` (see [`Sealing`]).
    pub fn sealing<'a>(&'a self, claim: &Claim, end: CommitmentEnd) -> Sealing<'a, C> {
        Sealing {
            durable: self,
            seal: Seal {
                statement: sql(&self.store().inner.pool, END_AND_DELIVER),
                id: claim.id.to_string(),
                holder: claim.holder.clone(),
                token: claim.token,
                state: end.status().as_str(),
            },
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
