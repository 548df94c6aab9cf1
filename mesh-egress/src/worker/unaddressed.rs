//! Rows without a (readable) address: ended, never sent to a guessed destination, reported
//! once per conversation per pass and on the ledger (the table in the [module docs](super)).

use super::{Kept, Worker, WorkerReport};
use crate::address::Surface;
use crate::egress::Attribution;
use crate::ledger::{LedgerRecord, OutboxRecord};
use crate::store::{Claim, StoreError};

impl Worker {
    /// Marks `conversation`'s open parts on `surface` stored with `stored` (`None`: no
    /// address) `failed`, under the conversation's lease; a held lease leaves them for its
    /// holder.
    pub(super) async fn end_unaddressed_parts(
        &self,
        surface: Surface,
        conversation: &str,
        stored: Option<&str>,
        report: &mut WorkerReport,
    ) -> Result<(), StoreError> {
        let store = self.store();
        let lease = match store.acquire(conversation, &self.holder, self.ttl).await {
            Ok(lease) => lease,
            Err(StoreError::LeaseHeld { .. }) => return Ok(()),
            Err(error) => return Err(error),
        };
        let failed = store.fail_unaddressed(&lease, surface, stored).await;
        store.release(lease).await?;
        let failed = failed?;
        if failed.is_empty() {
            return Ok(());
        }
        if let Some(ledger) = &self.outbox.ledger {
            for part in &failed {
                ledger.record(
                    &Attribution::new(part.agent.as_str(), conversation, part.run.as_str()),
                    LedgerRecord::Outbox(OutboxRecord::Unaddressed {
                        delivery: part.delivery.clone(),
                        part: part.index,
                        surface: surface.as_str().to_owned(),
                    }),
                );
            }
        }
        self.warn_unaddressed(conversation, surface.as_str(), failed.len(), false);
        report.parts_unaddressed += failed.len();
        Ok(())
    }

    /// Ends `claim`, whose commitment has no readable address, with nothing sent.
    pub(super) async fn end_unaddressed_commitment(
        &self,
        claim: &Claim,
    ) -> Result<Kept, StoreError> {
        if !self.store().end_unaddressed(claim).await? {
            return Ok(Kept::Lost);
        }
        if let Some(ledger) = &self.outbox.ledger {
            ledger.record(
                claim.attribution(),
                LedgerRecord::Outbox(OutboxRecord::UnaddressedCommitment {
                    commitment: claim.id(),
                    surface: claim.surface().to_owned(),
                }),
            );
        }
        self.warn_unaddressed(claim.attribution().conversation(), claim.surface(), 0, true);
        Ok(Kept::Unaddressed)
    }

    /// The operator's event: once per conversation per pass.
    fn warn_unaddressed(&self, conversation: &str, surface: &str, parts: usize, commitment: bool) {
        if self
            .lock_reports()
            .unaddressed
            .insert(conversation.to_owned())
        {
            tracing::warn!(
                target: "mesh_egress::store",
                conversation,
                surface,
                parts,
                commitment,
                "rows stored without an address were ended, not sent to a guessed destination; Store::readdress sends them"
            );
        }
    }
}
