//! Conversation leases with fencing: [`Store::acquire`], [`Store::renew`], [`Store::release`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use tokio::time::Instant;

use super::{Store, StoreError, millis, on_pool};
use crate::ownership::{Fence, Ownership};
use crate::setting::{ConfigWarning, read_setting};

/// The variable [`Lease::ttl_from_env`] reads.
const LEASE_ENV: &str = "MESH_WORKER_LEASE_MS";
/// How long a lease or a claim lasts without renewal, unless `MESH_WORKER_LEASE_MS` says.
const DEFAULT_LEASE: Duration = Duration::from_millis(30_000);

impl Lease {
    /// How long a conversation lease (or a worker's claim) lasts without renewal: from
    /// `MESH_WORKER_LEASE_MS`, default 30 000 ms. An unset or empty value keeps the default
    /// silently; an unparseable or negative value, or `0`, keeps it and is reported (and logged
    /// at `mesh_egress::store`), exactly as the other settings.
    pub fn ttl_from_env() -> (Duration, Vec<ConfigWarning>) {
        Self::ttl_from_lookup(|key| std::env::var(key).ok())
    }

    /// [`Self::ttl_from_env`] through any key lookup.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mesh_egress::store::Lease;
    /// let (ttl, warnings) = Lease::ttl_from_lookup(|_| Some("1500".into()));
    /// assert_eq!((ttl, warnings.len()), (Duration::from_millis(1500), 0));
    /// let (ttl, warnings) = Lease::ttl_from_lookup(|_| Some("0".into()));
    /// assert_eq!((ttl, warnings.len()), (Duration::from_secs(30), 1));
    /// ```
    pub fn ttl_from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> (Duration, Vec<ConfigWarning>) {
        let mut warnings = Vec::new();
        let ttl = read_setting(&lookup, LEASE_ENV, true, &mut warnings)
            .map_or(DEFAULT_LEASE, Duration::from_millis);
        for warning in &warnings {
            tracing::warn!(target: "mesh_egress::store", key = warning.key, "{warning}");
        }
        (ttl, warnings)
    }
}

/// A worker's lease on one conversation: who holds it, its fencing token, and the
/// [`Ownership`] it backs. Not `Clone`: a lease is renewed and released by whoever holds it;
/// share [`ownership`](Self::ownership) instead.
pub struct Lease {
    fence: Arc<Fence>,
    ownership: Ownership,
}

impl Lease {
    /// The conversation leased.
    pub fn conversation(&self) -> &str {
        &self.fence.conversation
    }

    /// Who holds it.
    pub fn holder(&self) -> &str {
        &self.fence.holder
    }

    /// The fencing token: strictly greater than every earlier lease's on this conversation.
    pub fn token(&self) -> u64 {
        u64::try_from(self.fence.token).unwrap_or(0)
    }

    /// An [`Ownership`] held while this lease is: until its expiry passes (on this process's
    /// clock, erring early), a renewal fails, or it is released. Attach it to a message
    /// ([`AgentMessage::with_ownership`](crate::AgentMessage::with_ownership)) or a
    /// [`Turn`](crate::Turn) so a durable commit is fenced on this lease.
    pub fn ownership(&self) -> Ownership {
        self.ownership.clone()
    }

    /// Whether the lease still holds, as far as this process knows (the store has the last
    /// word at every commit and send).
    pub fn is_held(&self) -> bool {
        self.ownership.is_held()
    }

    pub(super) fn fence(&self) -> &Fence {
        &self.fence
    }

    /// When the lease runs out on this process's clock, unless renewed.
    pub fn deadline(&self) -> Instant {
        self.fence.deadline()
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("conversation", &self.fence.conversation)
            .field("holder", &self.fence.holder)
            .field("token", &self.fence.token)
            .field("held", &self.is_held())
            .finish()
    }
}

/// A background renewal of a lease ([`Store::keep_renewed`]); dropping it stops renewing
/// (the lease then runs out at its expiry unless released).
#[must_use = "dropping a Renewal stops renewing the lease at once"]
pub struct Renewal {
    task: tokio::task::JoinHandle<()>,
}

impl Renewal {
    /// Whether it still renews (false once the lease was lost or released).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl fmt::Debug for Renewal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Renewal")
            .field("running", &self.is_running())
            .finish()
    }
}

/// The local instant a lease ends: the remaining time the database reported, counted from
/// before the request was sent, so the local view expires no later than the stored one.
fn local_deadline(started: Instant, expires_ms: i64, now_ms: i64) -> Instant {
    let left = u64::try_from(expires_ms.saturating_sub(now_ms)).unwrap_or(0);
    // A length past what the clock can hold saturates to a century (no panic on the
    // database's numbers).
    started
        .checked_add(Duration::from_millis(left))
        .or_else(|| started.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(started)
}

/// A lease the database granted for `ttl`, held until `deadline` on this process's clock.
fn lease(conversation: &str, holder: &str, token: i64, deadline: Instant, ttl: Duration) -> Lease {
    let fence = Arc::new(Fence::new(
        conversation.to_owned(),
        holder.to_owned(),
        token,
        deadline,
        ttl,
    ));
    Lease {
        ownership: Ownership::leased(Arc::clone(&fence)),
        fence,
    }
}

impl Store {
    /// Takes the lease on `conversation` for `holder`, for `ttl`: granted when nobody holds a
    /// live lease on it (or `holder` itself does, which starts a new lease and ends the old
    /// one). The token is strictly greater than any before for this conversation.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseHeld`] when another holder has a live lease on `conversation`, and
    /// [`StoreError::Database`] when the database fails.
    pub async fn acquire(
        &self,
        conversation: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease, StoreError> {
        let started = Instant::now();
        let sql = &self.inner.sql;
        let granted: Option<(i64, i64, i64)> = on_pool!(&self.inner.pool, pool => {
            let row = sqlx::query(&sql.acquire)
                .bind(conversation)
                .bind(holder)
                .bind(millis(ttl))
                .fetch_optional(pool)
                .await
                .map_err(StoreError::database)?;
            match row {
                Some(row) => Some((
                    row.try_get("token").map_err(StoreError::database)?,
                    row.try_get("expires_ms").map_err(StoreError::database)?,
                    row.try_get("now_ms").map_err(StoreError::database)?,
                )),
                None => None,
            }
        });
        let Some((token, expires_ms, now_ms)) = granted else {
            return Err(self.held_error(conversation).await);
        };
        tracing::debug!(target: "mesh_egress::store", conversation, holder, token, "lease acquired");
        Ok(lease(
            conversation,
            holder,
            token,
            local_deadline(started, expires_ms, now_ms),
            ttl,
        ))
    }

    /// Takes the lease on `conversation` for `holder` only if it is still the one a page of
    /// [`open_destinations`](Self::open_destinations) saw (`seen_token`; 0 for none) and
    /// nobody else holds it live: `None` otherwise, in one statement (no lookup of who holds
    /// it). A conversation another worker took meanwhile is left to it; the next pass sees it
    /// again if it still has open parts.
    pub(crate) async fn acquire_seen(
        &self,
        conversation: &str,
        holder: &str,
        ttl: Duration,
        seen_token: i64,
    ) -> Result<Option<Lease>, StoreError> {
        let started = Instant::now();
        let sql = &self.inner.sql;
        let granted: Option<(i64, i64, i64)> = on_pool!(&self.inner.pool, pool => {
            let row = sqlx::query(&sql.acquire_seen)
                .bind(conversation)
                .bind(holder)
                .bind(millis(ttl))
                .bind(seen_token)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::database)?;
            match row {
                Some(row) => Some((
                    row.try_get("token").map_err(StoreError::database)?,
                    row.try_get("expires_ms").map_err(StoreError::database)?,
                    row.try_get("now_ms").map_err(StoreError::database)?,
                )),
                None => None,
            }
        });
        Ok(granted.map(|(token, expires_ms, now_ms)| {
            lease(
                conversation,
                holder,
                token,
                local_deadline(started, expires_ms, now_ms),
                ttl,
            )
        }))
    }

    async fn held_error(&self, conversation: &str) -> StoreError {
        let sql = &self.inner.sql.lease_holder;
        let found: Result<Option<(String, i64)>, StoreError> = on_pool!(&self.inner.pool, pool => {
            match sqlx::query(sql).bind(conversation).fetch_optional(pool).await {
                Ok(Some(row)) => match (row.try_get("holder"), row.try_get("left_ms")) {
                    (Ok(holder), Ok(left)) => Ok(Some((holder, left))),
                    (Err(e), _) | (_, Err(e)) => Err(StoreError::database(e)),
                },
                Ok(None) => Ok(None),
                Err(e) => Err(StoreError::database(e)),
            }
        });
        match found {
            Ok(Some((holder, left_ms))) => StoreError::LeaseHeld {
                conversation: conversation.to_owned(),
                holder,
                remaining: Duration::from_millis(u64::try_from(left_ms).unwrap_or(0)),
            },
            // The other lease ended between the two statements: report it as held anyway (the
            // caller retries); never as granted.
            Ok(None) => StoreError::LeaseHeld {
                conversation: conversation.to_owned(),
                holder: String::new(),
                remaining: Duration::ZERO,
            },
            Err(error) => error,
        }
    }

    /// Extends `lease` to `ttl` from now (database clock). A lost lease is never regained by
    /// renewal.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`], and the lease's ownership revoked, when it had already
    /// expired or moved on; [`StoreError::Database`] when the database fails.
    pub async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<(), StoreError> {
        self.renew_fence(&lease.fence, &lease.ownership, ttl).await
    }

    /// Renews `lease` in the background every third of `ttl`, for as long as the returned
    /// [`Renewal`] lives and the lease holds: the way a turn keeps its conversation. A refused
    /// renewal revokes the lease's ownership and ends the task; a database error is logged and
    /// retried at the next tick (the local deadline still runs out on time if it persists).
    pub fn keep_renewed(&self, lease: &Lease, ttl: Duration) -> Renewal {
        let store = self.clone();
        let fence = Arc::clone(&lease.fence);
        let ownership = lease.ownership.clone();
        let every = (ttl / 3).max(Duration::from_millis(1));
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = ownership.revoked() => return,
                    () = tokio::time::sleep(every) => {}
                }
                match store.renew_fence(&fence, &ownership, ttl).await {
                    Ok(()) => {}
                    Err(StoreError::LeaseLost { .. }) => return,
                    Err(error) => tracing::warn!(
                        target: "mesh_egress::store",
                        conversation = %fence.conversation,
                        error = %error,
                        "lease renewal failed; retrying"
                    ),
                }
            }
        });
        Renewal { task }
    }

    async fn renew_fence(
        &self,
        fence: &Fence,
        ownership: &Ownership,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let started = Instant::now();
        let sql = &self.inner.sql.renew;
        let renewed: Option<(i64, i64)> = on_pool!(&self.inner.pool, pool => {
            let row = sqlx::query(sql)
                .bind(&fence.conversation)
                .bind(&fence.holder)
                .bind(fence.token)
                .bind(millis(ttl))
                .fetch_optional(pool)
                .await
                .map_err(StoreError::database)?;
            match row {
                Some(row) => Some((
                    row.try_get("expires_ms").map_err(StoreError::database)?,
                    row.try_get("now_ms").map_err(StoreError::database)?,
                )),
                None => None,
            }
        });
        match renewed {
            Some((expires_ms, now_ms)) => {
                fence.extend_to(local_deadline(started, expires_ms, now_ms), ttl);
                Ok(())
            }
            None => {
                ownership.revoke();
                tracing::warn!(
                    target: "mesh_egress::store",
                    conversation = %fence.conversation,
                    holder = %fence.holder,
                    token = fence.token,
                    "lease lost: renewal refused"
                );
                Err(StoreError::LeaseLost {
                    conversation: fence.conversation.clone(),
                })
            }
        }
    }

    /// Ends `lease` now, so another worker may take the conversation at once. Its ownership is
    /// revoked first, whatever the database answers.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails; the ownership is revoked all the same.
    pub async fn release(&self, lease: Lease) -> Result<(), StoreError> {
        lease.ownership.revoke();
        let sql = &self.inner.sql.release;
        let fence = &lease.fence;
        on_pool!(&self.inner.pool, pool => {
            sqlx::query(sql)
                .bind(&fence.conversation)
                .bind(&fence.holder)
                .bind(fence.token)
                .execute(pool)
                .await
                .map_err(StoreError::database)?;
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn leased_ownership_holds_until_the_local_deadline_exactly() {
        let started = Instant::now();
        // The database said 30 s were left; the request took 5 ms of our clock meanwhile.
        let deadline = local_deadline(started, 1_030_000, 1_000_000);
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(deadline, started + Duration::from_secs(30));
        let fence = Arc::new(Fence::new(
            "c".into(),
            "w".into(),
            1,
            deadline,
            Duration::from_secs(30),
        ));
        let ownership = Ownership::leased(Arc::clone(&fence));
        tokio::time::advance(Duration::from_millis(29_994)).await;
        assert!(ownership.is_held());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!ownership.is_held(), "held at the deadline itself");
        // A renewal moves the deadline and the same ownership holds again...
        fence.extend_to(
            Instant::now() + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        assert!(ownership.is_held());
        // ...until it is revoked, whatever the deadline.
        ownership.revoke();
        assert!(!ownership.is_held());
    }

    #[test]
    fn a_deadline_never_lies_past_what_the_database_granted() {
        let started = Instant::now();
        // Clocks that disagree (expiry already behind "now") give no time at all.
        assert_eq!(local_deadline(started, 10, 20), started);
        assert!(
            local_deadline(started, i64::MAX, i64::MIN) > started + Duration::from_secs(86_400)
        );
    }

    #[test]
    fn lease_length_reads_like_the_other_settings() {
        let (ttl, warnings) = Lease::ttl_from_lookup(|_| None);
        assert_eq!((ttl, warnings.len()), (DEFAULT_LEASE, 0));
        for bad in ["abc", "-5", "0"] {
            let (ttl, warnings) = Lease::ttl_from_lookup(|_| Some(bad.to_owned()));
            assert_eq!(ttl, DEFAULT_LEASE, "{bad}");
            assert_eq!(warnings.len(), 1, "{bad}");
            assert_eq!(warnings[0].key, LEASE_ENV);
        }
        let (ttl, _) = Lease::ttl_from_lookup(|key| (key == LEASE_ENV).then(|| " 250 ".to_owned()));
        assert_eq!(ttl, Duration::from_millis(250));
    }
}
