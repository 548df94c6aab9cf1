//! Rows without an address (written before migration 0004, or whose address cannot be read):
//! how a worker ends them without guessing where they go, and [`Store::readdress`], how an
//! operator gives them their conversation's address so they go after all.

use sqlx::Row;

use super::commitments::sql;
use super::lease::Lease;
use super::{Claim, Store, StoreError, address_text, on_pool, to_usize};
use crate::address::{Address, Surface};

/// Why such a part is `failed`, for operators reading the row.
const NO_ADDRESS: &str = "stored without a readable address (before migration 0004?): not sent to a guessed destination; Store::readdress sends it";

// The worker's end for a claimed commitment without a (readable) address: `cancelled`,
// marked so readdress can open it again; fenced on the claim and on the row still holding
// the address text claimed (`$4`, NULL for none), so a readdress in between wins.
const END_UNADDRESSED: &str = "UPDATE mesh_commitments \
     SET state = 'cancelled', unaddressed = 1, ended_ms = {now}, claim_expires_ms = NULL, \
         updated_ms = {now} \
     WHERE id = $1 AND state = 'claimed' AND claim_holder = $2 AND claim_token = $3 \
       AND claim_expires_ms > {now} AND (($4 IS NULL AND address IS NULL) OR address = $4)";

const READDRESS_COMMITMENTS: &str = "UPDATE mesh_commitments \
     SET address = $2, surface = $3, \
         state = CASE WHEN unaddressed = 1 THEN 'pending' ELSE state END, \
         due_ms = CASE WHEN unaddressed = 1 THEN {now} ELSE due_ms END, \
         ended_ms = CASE WHEN unaddressed = 1 THEN NULL ELSE ended_ms END, \
         unaddressed = 0, updated_ms = {now} \
     WHERE conversation = $1 \
       AND (unaddressed = 1 OR (address IS NULL AND state IN ('pending', 'claimed')))";

/// What [`Store::readdress`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Readdressed {
    /// Parts given the address: the open ones without one, and those a worker had marked
    /// `failed` for want of one (now `pending` again).
    pub parts: u64,
    /// Commitments given the address: the open ones without one, and those a worker had
    /// ended `cancelled` for want of one (now `pending`, due at once).
    pub commitments: u64,
}

/// One part a worker marked `failed` for want of an address.
pub(crate) struct UnaddressedPart {
    pub(crate) delivery: String,
    pub(crate) index: usize,
    pub(crate) agent: String,
    pub(crate) run: String,
}

impl Store {
    /// Gives `conversation`'s rows that have no address the address `to`, and puts back what
    /// a worker ended for want of one: its parts marked `failed` that way become `pending`
    /// (sent in order by the next worker with a client for `to`'s surface), its commitments
    /// ended `cancelled` that way become `pending`, due at once. Open rows without an address
    /// (not yet seen by a worker) get the address and stay as they are. Rows that have an
    /// address, and rows that failed or ended for any other reason, are not touched.
    ///
    /// What an operator runs after an upgrade for each conversation whose rows predate
    /// migration 0004 (see [rows without an address](super#rows-without-an-address)); it
    /// needs no lease: a worker only ever ends rows that still have no address. An address
    /// that fails [`Address::validate`] is refused ([`StoreError::BadAddress`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::BadAddress`] when `to` fails [`Address::validate`], and
    /// [`StoreError::Database`] when the database fails (one transaction: nothing is changed).
    ///
    /// ```no_run
    /// use mesh_egress::address::SlackAddress;
    /// use mesh_egress::store::Store;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = Store::open("sqlite:/var/lib/mesh/outbox.db").await?;
    /// let fixed = store.readdress("conv-1", &SlackAddress::new("C0123456789").into()).await?;
    /// println!("{} parts and {} promises will go to C0123456789", fixed.parts, fixed.commitments);
    /// # Ok(()) }
    /// ```
    pub async fn readdress(
        &self,
        conversation: &str,
        to: &Address,
    ) -> Result<Readdressed, StoreError> {
        let address = address_text(conversation, to)?;
        let surface = to.surface().as_str();
        let commitments = sql(&self.inner.pool, READDRESS_COMMITMENTS);
        let begin = self.inner.sql.begin;
        let changed = on_pool!(&self.inner.pool, pool => {
            let mut tx = pool.begin_with(begin).await.map_err(StoreError::database)?;
            let mut changed = Readdressed::default();
            for (statement, count) in [
                (self.inner.sql.readdress_parts.as_str(), &mut changed.parts),
                (commitments.as_str(), &mut changed.commitments),
            ] {
                *count = sqlx::query(statement)
                    .bind(conversation)
                    .bind(&address)
                    .bind(surface)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::database)?
                    .rows_affected();
            }
            tx.commit().await.map_err(StoreError::database)?;
            changed
        });
        tracing::info!(target: "mesh_egress::store", conversation, address = %to, parts = changed.parts, commitments = changed.commitments, "rows readdressed");
        Ok(changed)
    }

    /// Marks `lease`'s conversation's open parts on `surface` whose address is `stored` (the
    /// text a worker found; `None`: no address at all) `failed`, fenced on the lease: never
    /// sent to a guessed destination. The parts it marked.
    pub(crate) async fn fail_unaddressed(
        &self,
        lease: &Lease,
        surface: Surface,
        stored: Option<&str>,
    ) -> Result<Vec<UnaddressedPart>, StoreError> {
        let fence = lease.fence();
        let statement = &self.inner.sql.fail_unaddressed;
        on_pool!(&self.inner.pool, pool => {
            let rows = sqlx::query(statement)
                .bind(lease.conversation())
                .bind(surface.as_str())
                .bind(stored)
                .bind(NO_ADDRESS)
                .bind(fence.holder.as_str())
                .bind(fence.token)
                .fetch_all(pool)
                .await
                .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    let text = |name: &str| row.try_get::<String, _>(name).map_err(StoreError::database);
                    Ok(UnaddressedPart {
                        delivery: text("delivery")?,
                        index: to_usize(row.try_get("part_index").map_err(StoreError::database)?)?,
                        agent: text("agent")?,
                        run: text("run")?,
                    })
                })
                .collect()
        })
    }

    /// Ends `claim`, whose commitment has no readable address, `cancelled` (marked so
    /// [`readdress`](Self::readdress) can open it again). `false` when the claim moved on or
    /// the commitment was readdressed meanwhile.
    pub(crate) async fn end_unaddressed(&self, claim: &Claim) -> Result<bool, StoreError> {
        let statement = sql(&self.inner.pool, END_UNADDRESSED);
        let changed = on_pool!(&self.inner.pool, pool => {
            sqlx::query(&statement)
                .bind(claim.id.to_string())
                .bind(&claim.holder)
                .bind(claim.token)
                .bind(claim.stored_address.as_deref())
                .execute(pool)
                .await
                .map_err(StoreError::database)?
                .rows_affected()
        });
        Ok(changed == 1)
    }
}
