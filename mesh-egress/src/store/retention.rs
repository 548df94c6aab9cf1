//! Retention: [`Store::prune`] deletes what is final and old; nothing open is ever deleted.

use std::time::Duration;

use super::{Store, StoreError, millis, on_pool};

/// What [`Store::prune`] deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneReport {
    /// Outbox parts in state `sent`.
    pub parts: u64,
    /// Commitments that ended (`fulfilled`, `handed_off`, `cancelled`).
    pub commitments: u64,
    /// Ledger rows.
    pub ledger_rows: u64,
}

impl Store {
    /// Deletes what ended longer than `older_than` ago (by the database's clock), in one
    /// transaction: `sent` outbox parts (by their last change), ended commitments (by their
    /// end) and ledger rows (by when they were recorded).
    ///
    /// Never deleted, however old: `pending`, `sending`, `uncertain` and `failed` parts (the
    /// last two are what operators act on), and commitments not yet ended. Conversation leases
    /// are never deleted either, so fencing tokens keep growing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails (one transaction: nothing is deleted).
    pub async fn prune(&self, older_than: Duration) -> Result<PruneReport, StoreError> {
        let sql = &self.inner.sql;
        let age = millis(older_than);
        let report = on_pool!(&self.inner.pool, pool => {
            let mut tx = pool.begin_with(sql.begin).await.map_err(StoreError::database)?;
            let mut deleted = [0u64; 3];
            for (slot, statement) in deleted.iter_mut().zip([
                &sql.prune_parts,
                &sql.prune_commitments,
                &sql.prune_ledger,
            ]) {
                *slot = sqlx::query(statement)
                    .bind(age)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::database)?
                    .rows_affected();
            }
            tx.commit().await.map_err(StoreError::database)?;
            PruneReport {
                parts: deleted[0],
                commitments: deleted[1],
                ledger_rows: deleted[2],
            }
        });
        tracing::debug!(target: "mesh_egress::store", parts = report.parts, commitments = report.commitments, ledger_rows = report.ledger_rows, "pruned");
        Ok(report)
    }
}
