//! What a worker does with claims besides taking them: claiming for one surface or one
//! commitment, keeping a claim alive, giving it back untried, and finding the conversations
//! whose outbox still has parts to send.
//!
//! | from | to | what moves it |
//! |---|---|---|
//! | `pending` (due) / `claimed` (expired) | `claimed` | [`Store::claim_due_on`]: like [`Store::claim_due`], for one surface |
//! | `pending` / `claimed` (expired) | `claimed` | [`Store::claim_commitment`]: the process that made the promise keeps it on its own schedule |
//! | `claimed` | `claimed` | [`Store::renew_claim`]: the claim's expiry moves on, fenced |
//! | `claimed` | `pending` | [`Store::release_claim`]: given back untried (shutdown, conversation busy); no try is counted |
//! | `claimed` | ended | a follow-up commit that ends it in the same transaction ([`Durable::sealing`](super::Durable::sealing)) |

use std::time::Duration;

use sqlx::Row;

use super::commitments::sql;
use super::{Claim, CommitmentStatus, PendingWork, Store, StoreError, millis, on_pool};
use crate::address::Surface;
use crate::reply::CommitmentId;

const CLAIM_DUE_ON: &str = "UPDATE mesh_commitments \
     SET state = 'claimed', claim_holder = $1, claim_token = COALESCE(claim_token, 0) + 1, \
         claim_expires_ms = {now} + $2, updated_ms = {now} \
     WHERE id IN (SELECT id FROM mesh_commitments \
         WHERE ((state = 'pending' AND due_ms <= {now}) \
            OR (state = 'claimed' AND claim_expires_ms <= {now})) \
           AND surface = $4 \
         ORDER BY due_ms LIMIT $3{lock}) \
     RETURNING id, conversation, surface, agent, run, handler, input, mode, gate, \
               system_prompt, plan, attempts_made, claim_token, address";

// Not-yet-due counts: the process that made the promise waits its own backoff.
const CLAIM_ONE: &str = "UPDATE mesh_commitments \
     SET state = 'claimed', claim_holder = $1, claim_token = COALESCE(claim_token, 0) + 1, \
         claim_expires_ms = {now} + $2, updated_ms = {now} \
     WHERE id IN (SELECT id FROM mesh_commitments \
         WHERE id = $4 \
           AND (state = 'pending' OR (state = 'claimed' AND claim_expires_ms <= {now})) \
         LIMIT $3{lock}) \
     RETURNING id, conversation, surface, agent, run, handler, input, mode, gate, \
               system_prompt, plan, attempts_made, claim_token, address";

const RENEW_CLAIM: &str = "UPDATE mesh_commitments \
     SET claim_expires_ms = {now} + $4, updated_ms = {now} \
     WHERE id = $1 AND state = 'claimed' AND claim_holder = $2 AND claim_token = $3 \
       AND claim_expires_ms > {now}";

const RELEASE_CLAIM: &str = "UPDATE mesh_commitments \
     SET state = 'pending', due_ms = {now} + $4, claim_holder = NULL, \
         claim_expires_ms = NULL, updated_ms = {now} \
     WHERE id = $1 AND state = 'claimed' AND claim_holder = $2 AND claim_token = $3 \
       AND claim_expires_ms > {now}";

const DUE_COUNT_ON: &str = "SELECT \
     (SELECT COUNT(*) FROM mesh_commitments \
        WHERE ((state = 'pending' AND due_ms <= {now}) \
           OR (state = 'claimed' AND claim_expires_ms <= {now})) AND surface = $1) AS due, \
     (SELECT COUNT(*) FROM mesh_outbox_parts \
        WHERE state IN ('pending', 'sending') AND surface = $1) AS open";

const OPEN_CONVERSATIONS: &str = "SELECT conversation, MIN(seq) AS first \
     FROM mesh_outbox_parts WHERE surface = $1 AND state IN ('pending', 'sending') \
     GROUP BY conversation ORDER BY first LIMIT $2";

const STATUS: &str = "SELECT state FROM mesh_commitments WHERE id = $1";

/// Where a worker's walk over one surface's open destinations stands: the last destination of
/// its last page (the address as stored, `""` for none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DestinationKey {
    pub(crate) conversation: String,
    pub(crate) address: String,
}

/// A destination with open parts, as a page of [`Store::open_destinations`] lists it.
#[derive(Clone, Debug)]
pub(crate) struct OpenDestination {
    /// The conversation.
    pub(crate) conversation: String,
    /// Its stored address text (`None`: a row from before migration 0004).
    pub(crate) address: Option<String>,
    /// How many parts it had open when the page was read.
    pub(crate) open: usize,
    /// The token of the conversation's lease when the page was read (0: never leased), for
    /// [`Store::acquire_seen`].
    pub(crate) token: i64,
}

impl OpenDestination {
    /// Where a walk stands after this destination.
    pub(crate) fn key(&self) -> DestinationKey {
        DestinationKey {
            conversation: self.conversation.clone(),
            address: self.address.clone().unwrap_or_default(),
        }
    }
}

impl Store {
    /// [`claim_due`](Self::claim_due) for the commitments whose follow-up goes to `surface`:
    /// a worker serves one surface and leaves the others' promises to their workers.
    ///
    /// # Errors
    ///
    /// As [`claim_due`](Self::claim_due).
    pub async fn claim_due_on(
        &self,
        surface: Surface,
        holder: &str,
        ttl: Duration,
        limit: u32,
    ) -> Result<Vec<Claim>, StoreError> {
        self.claim_where(CLAIM_DUE_ON, holder, ttl, limit, Some(surface.as_str()))
            .await
    }

    /// Claims commitment `id` whether or not it is due (unless it is ended, or someone holds
    /// a live claim on it): how the process that made a promise keeps it in-process on its
    /// own schedule while the store still records it. `None` when it could not be claimed
    /// ([`commitment_status`](Self::commitment_status) says why).
    ///
    /// # Errors
    ///
    /// As [`claim_due`](Self::claim_due). A commitment that cannot be claimed is `None`, not an
    /// error.
    pub async fn claim_commitment(
        &self,
        id: CommitmentId,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Claim>, StoreError> {
        let id = id.to_string();
        Ok(self
            .claim_where(CLAIM_ONE, holder, ttl, 1, Some(&id))
            .await?
            .pop())
    }

    /// Extends `claim` to `ttl` from now (database clock). `false` when it had expired or
    /// moved on: its holder must stop, the new holder decides.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails. A claim that expired or moved on is
    /// `false`, not an error.
    pub async fn renew_claim(&self, claim: &Claim, ttl: Duration) -> Result<bool, StoreError> {
        self.fenced_claim_update(RENEW_CLAIM, claim, ttl).await
    }

    /// Gives `claim` back untried, due again after `after`: no try is counted. What a worker
    /// does on shutdown, or when another holder has the conversation, so the next worker can
    /// take it at once instead of after the claim's expiry. `false` when it had expired or
    /// moved on already.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails. A claim that expired or moved on is
    /// `false`, not an error.
    pub async fn release_claim(&self, claim: &Claim, after: Duration) -> Result<bool, StoreError> {
        let released = self
            .fenced_claim_update(RELEASE_CLAIM, claim, after)
            .await?;
        if released {
            tracing::debug!(target: "mesh_egress::store", commitment = %claim.id, holder = %claim.holder, "claim released untried");
        }
        Ok(released)
    }

    async fn fenced_claim_update(
        &self,
        template: &str,
        claim: &Claim,
        duration: Duration,
    ) -> Result<bool, StoreError> {
        let statement = sql(&self.inner.pool, template);
        let changed = on_pool!(&self.inner.pool, pool => {
            sqlx::query(&statement)
                .bind(claim.id.to_string())
                .bind(&claim.holder)
                .bind(claim.token)
                .bind(millis(duration))
                .execute(pool)
                .await
                .map_err(StoreError::database)?
                .rows_affected()
        });
        Ok(changed == 1)
    }

    /// [`pending_work`](Self::pending_work) for one surface: what a worker serving `surface`
    /// still has to do.
    ///
    /// # Errors
    ///
    /// As [`pending_work`](Self::pending_work).
    pub async fn pending_work_on(&self, surface: Surface) -> Result<PendingWork, StoreError> {
        self.pending_work_where(DUE_COUNT_ON, Some(surface.as_str()))
            .await
    }

    /// Up to `limit` conversations with parts still `pending` or `sending` on `surface`, the
    /// one waiting longest first: where [`resend`](Self::resend) has work.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails.
    pub async fn open_conversations(
        &self,
        surface: Surface,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let statement = sql(&self.inner.pool, OPEN_CONVERSATIONS);
        on_pool!(&self.inner.pool, pool => {
            let rows = sqlx::query(&statement)
                .bind(surface.as_str())
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await
                .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| row.try_get("conversation").map_err(StoreError::database))
                .collect()
        })
    }

    /// One page of at most `limit` destinations with open parts on `surface`, in
    /// (conversation, address) order after `after` (from the start when `None`): what a worker
    /// serving `surface` sends next (see [`OpenDestination`]). Destinations whose first open part
    /// waits for its backoff are left out, and so are conversations someone other than `holder`
    /// holds a live lease on (that holder sends them).
    pub(crate) async fn open_destinations(
        &self,
        surface: Surface,
        holder: &str,
        after: Option<&DestinationKey>,
        limit: u32,
    ) -> Result<Vec<OpenDestination>, StoreError> {
        let statement = &self.inner.sql.open_destinations;
        let now = self.clock_ms();
        on_pool!(&self.inner.pool, pool => {
            let rows = sqlx::query(statement)
                .bind(surface.as_str())
                .bind(after.map(|key| key.conversation.as_str()))
                .bind(after.map_or("", |key| key.address.as_str()))
                .bind(holder)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await
                .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    let get_i64 = |name: &str| {
                        row.try_get::<Option<i64>, _>(name).map_err(StoreError::database)
                    };
                    Ok(OpenDestination {
                        conversation: row.try_get("conversation").map_err(StoreError::database)?,
                        address: row.try_get("address").map_err(StoreError::database)?,
                        open: usize::try_from(get_i64("open")?.unwrap_or(0).max(0))
                            .unwrap_or(usize::MAX),
                        token: get_i64("token")?.unwrap_or(0),
                    })
                })
                .collect()
        })
    }

    /// How long until the next part on `surface` that waits for its backoff may be tried, if
    /// one does: how long a worker with nothing else to do may sleep.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails.
    pub async fn next_attempt_on(&self, surface: Surface) -> Result<Option<Duration>, StoreError> {
        let statement = &self.inner.sql.next_attempt_on;
        let now = self.clock_ms();
        let next: Option<i64> = on_pool!(&self.inner.pool, pool => {
            sqlx::query(statement)
                .bind(surface.as_str())
                .bind(now)
                .fetch_one(pool)
                .await
                .and_then(|row| row.try_get("next_ms"))
                .map_err(StoreError::database)?
        });
        Ok(
            next.map(|at| {
                Duration::from_millis(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
            }),
        )
    }

    /// Where commitment `id` is, or `None` when the store has no such commitment.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails, and [`StoreError::Corrupt`] when the
    /// stored state is not one the store knows.
    pub async fn commitment_status(
        &self,
        id: CommitmentId,
    ) -> Result<Option<CommitmentStatus>, StoreError> {
        let statement = sql(&self.inner.pool, STATUS);
        let raw: Option<String> = on_pool!(&self.inner.pool, pool => {
            sqlx::query(&statement)
                .bind(id.to_string())
                .fetch_optional(pool)
                .await
                .map_err(StoreError::database)?
                .map(|row| row.try_get("state").map_err(StoreError::database))
                .transpose()?
        });
        raw.map(|raw| CommitmentStatus::parse(&raw)).transpose()
    }
}
