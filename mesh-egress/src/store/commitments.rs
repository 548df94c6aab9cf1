//! Durable commitments: a holding line's promise stored with what a worker needs to keep it
//! ([`Store::keep_commitment`]), claimed when due with an expiring, fenced claim
//! ([`Store::claim_due`]), re-scheduled on the plan fixed when it was stored
//! ([`Store::retry_later`]) and ended once ([`Store::end_commitment`]).
//!
//! # Commitment states
//!
//! | from | to | what moves it |
//! |---|---|---|
//! | — | `pending` | [`Store::keep_commitment`], due after the plan's first delay |
//! | `pending` (due) | `claimed` | [`Store::claim_due`]: holder, a token that only grows, an expiry |
//! | `claimed` (expired) | `claimed` | [`Store::claim_due`] by another worker: the old claim is fenced out |
//! | `claimed` | `pending` | [`Store::retry_later`]: a retryable failure, due after the next backoff step |
//! | `claimed` | `fulfilled` / `handed_off` / `cancelled` | [`Store::end_commitment`], fenced on the claim |

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::backend::Pool;
use super::{Store, StoreError, address_text, millis, on_pool, read_address};
use crate::address::Address;
use crate::egress::Attribution;
use crate::reply::{Commitment, CommitmentId, Mode};

/// What a worker needs to re-run a promised turn: the handler registered under `handler`, the
/// serialisable input it takes, the mode and gate settings of the original turn and its system
/// prompt. Stored in the commitments table, never in ledger rows.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct FollowUpTask {
    /// The name the handler is registered under with the worker.
    pub handler: String,
    /// The handler's input.
    pub input: serde_json::Value,
    /// The mode of the original turn.
    pub mode: Mode,
    /// The gate settings of the original turn, if it ran a gate.
    pub gate: Option<serde_json::Value>,
    /// The original turn's system prompt, if it had one.
    pub system_prompt: Option<String>,
}

impl FollowUpTask {
    /// A task for the handler registered as `handler`.
    pub fn new(handler: impl Into<String>, input: serde_json::Value, mode: Mode) -> Self {
        Self {
            handler: handler.into(),
            input,
            mode,
            gate: None,
            system_prompt: None,
        }
    }

    /// Records the gate settings the follow-up re-runs.
    pub fn with_gate(mut self, gate: serde_json::Value) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Records the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }
}

/// The backoff plan fixed when a commitment was stored: follow-up `k` (from 1) is due
/// `first_delay × 2^(k-1)` after the previous try, capped at `max_delay`, for `attempts` tries.
/// A worker started later with other settings keeps the promise as it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowUpPlan {
    first_delay_ms: u64,
    max_delay_ms: u64,
    attempts: u32,
}

impl FollowUpPlan {
    /// A plan (at least one try).
    pub fn new(first_delay: Duration, max_delay: Duration, attempts: u32) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Self {
            first_delay_ms: ms(first_delay),
            max_delay_ms: ms(max_delay),
            attempts: attempts.max(1),
        }
    }

    /// The plan a commitment was promised with, capped at `max_delay`.
    pub fn for_commitment(commitment: &Commitment, max_delay: Duration) -> Self {
        Self::new(commitment.first_delay(), max_delay, commitment.attempts())
    }

    /// How many tries were promised.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait before follow-up `k` (from 1), saturating.
    pub fn delay_before(&self, k: u32) -> Duration {
        let factor = 1u64.checked_shl(k.saturating_sub(1)).unwrap_or(u64::MAX);
        let ms = self
            .first_delay_ms
            .saturating_mul(factor)
            .min(self.max_delay_ms);
        Duration::from_millis(ms)
    }
}

/// Where a commitment is: `pending` (due at its time) → `claimed` (a worker holds it until its
/// claim expires) → `pending` again after a retryable failure, or ended (`fulfilled`,
/// `handed_off`, `cancelled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommitmentStatus {
    /// Waiting until it is due.
    Pending,
    /// A worker holds a claim on it (or held one that expired).
    Claimed,
    /// The real answer was delivered.
    Fulfilled,
    /// A handoff line was delivered instead.
    HandedOff,
    /// Nothing more will be sent.
    Cancelled,
}

impl CommitmentStatus {
    /// The name stored in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Claimed => "claimed",
            Self::Fulfilled => "fulfilled",
            Self::HandedOff => "handed_off",
            Self::Cancelled => "cancelled",
        }
    }

    pub(super) fn parse(raw: &str) -> Result<Self, StoreError> {
        Ok(match raw {
            "pending" => Self::Pending,
            "claimed" => Self::Claimed,
            "fulfilled" => Self::Fulfilled,
            "handed_off" => Self::HandedOff,
            "cancelled" => Self::Cancelled,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown commitment state {other:?}"
                )));
            }
        })
    }
}

/// How a claimed commitment ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitmentEnd {
    /// The real answer was delivered.
    Fulfilled,
    /// A handoff line was delivered.
    HandedOff,
    /// Nothing more is sent.
    Cancelled,
}

impl CommitmentEnd {
    pub(super) fn status(self) -> CommitmentStatus {
        match self {
            Self::Fulfilled => CommitmentStatus::Fulfilled,
            Self::HandedOff => CommitmentStatus::HandedOff,
            Self::Cancelled => CommitmentStatus::Cancelled,
        }
    }
}

/// One commitment row read back, for operators and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredCommitment {
    /// The commitment id, as [`CommitmentId`] displays it.
    pub id: String,
    /// The surface the follow-up goes to.
    pub surface: String,
    /// Where the follow-up goes. `None` for a row from before migration 0004, which is never
    /// kept to a guessed destination (see
    /// [rows without an address](super#rows-without-an-address)).
    pub address: Option<Address>,
    /// The registered handler's name.
    pub handler: String,
    /// Where it is.
    pub status: CommitmentStatus,
    /// Follow-up tries made.
    pub attempts_made: u32,
}

/// A worker's claim on a due commitment: what to re-run, for whom, and the fence the claim
/// holds. Not `Clone`: one claim, one attempt.
#[derive(Debug)]
pub struct Claim {
    pub(super) id: CommitmentId,
    attribution: Attribution,
    surface: String,
    task: FollowUpTask,
    plan: FollowUpPlan,
    attempts_made: u32,
    pub(super) holder: String,
    pub(super) token: i64,
    address: Option<Address>,
    /// The address as stored (`None`: NULL), so ending it for want of a readable one matches
    /// exactly the row claimed.
    pub(super) stored_address: Option<String>,
}

impl Claim {
    /// The commitment claimed.
    pub fn id(&self) -> CommitmentId {
        self.id
    }

    /// Who is owed the answer.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// The surface the follow-up goes to.
    pub fn surface(&self) -> &str {
        &self.surface
    }

    /// Where the follow-up goes: the address stored with the commitment. `None` when it was
    /// stored before migration 0004 (or its address cannot be read): it is never kept to a
    /// guessed destination.
    pub fn address(&self) -> Option<&Address> {
        self.address.as_ref()
    }

    /// What to re-run.
    pub fn task(&self) -> &FollowUpTask {
        &self.task
    }

    /// The plan fixed when it was stored.
    pub fn plan(&self) -> FollowUpPlan {
        self.plan
    }

    /// Tries made before this one.
    pub fn attempts_made(&self) -> u32 {
        self.attempts_made
    }

    /// Whether this try is the last one the plan allows.
    pub fn is_last_try(&self) -> bool {
        self.attempts_made.saturating_add(1) >= self.plan.attempts
    }
}

/// The backend's clock expression and the lock clause the claim's row selection takes.
fn dialect(pool: &Pool) -> (&'static str, &'static str) {
    match pool {
        // One writer at a time (`BEGIN IMMEDIATE`): the selection needs no row locks.
        #[cfg(feature = "sqlite")]
        Pool::Sqlite(_) => ("CAST(unixepoch('subsec') * 1000 AS INTEGER)", ""),
        // Two workers claiming together take disjoint rows instead of queueing on each other.
        #[cfg(feature = "postgres")]
        Pool::Postgres(_) => (
            "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            " FOR UPDATE SKIP LOCKED",
        ),
    }
}

pub(super) fn sql(pool: &Pool, template: &str) -> String {
    let (now, lock) = dialect(pool);
    template.replace("{now}", now).replace("{lock}", lock)
}

const INSERT: &str = "INSERT INTO mesh_commitments \
     (id, conversation, surface, agent, run, handler, input, mode, gate, system_prompt, plan, \
      due_ms, attempts_made, state, address, created_ms, updated_ms) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, {now} + $12, 0, 'pending', $13, \
             {now}, {now})";

const CLAIM_DUE: &str = "UPDATE mesh_commitments \
     SET state = 'claimed', claim_holder = $1, claim_token = COALESCE(claim_token, 0) + 1, \
         claim_expires_ms = {now} + $2, updated_ms = {now} \
     WHERE id IN (SELECT id FROM mesh_commitments \
         WHERE (state = 'pending' AND due_ms <= {now}) \
            OR (state = 'claimed' AND claim_expires_ms <= {now}) \
         ORDER BY due_ms LIMIT $3{lock}) \
     RETURNING id, conversation, surface, agent, run, handler, input, mode, gate, \
               system_prompt, plan, attempts_made, claim_token, address";

const RETRY_LATER: &str = "UPDATE mesh_commitments \
     SET state = 'pending', attempts_made = attempts_made + 1, due_ms = {now} + $4, \
         claim_holder = NULL, claim_expires_ms = NULL, updated_ms = {now} \
     WHERE id = $1 AND state = 'claimed' AND claim_holder = $2 AND claim_token = $3 \
       AND claim_expires_ms > {now}";

// The end a follow-up's commit writes in its own transaction: the same fence, and the
// delivery recorded (unique: at most one follow-up message per commitment).
const END_AND_DELIVER: &str = "UPDATE mesh_commitments \
     SET state = $4, attempts_made = attempts_made + 1, ended_ms = {now}, delivery = $5, \
         claim_expires_ms = NULL, updated_ms = {now} \
     WHERE id = $1 AND state = 'claimed' AND claim_holder = $2 AND claim_token = $3 \
       AND claim_expires_ms > {now}";

/// The statement that ends a claimed commitment inside a commit transaction: `$1` id, `$2`
/// holder, `$3` token, `$4` the end state, `$5` the follow-up's delivery id.
pub(super) struct Seal {
    pub(super) statement: String,
    pub(super) id: String,
    pub(super) holder: String,
    pub(super) token: i64,
    pub(super) state: &'static str,
}

impl Seal {
    /// The seal that ends `claim`'s commitment as `end` in the commit of its follow-up.
    pub(super) fn ending(pool: &Pool, claim: &Claim, end: CommitmentEnd) -> Self {
        Self {
            statement: sql(pool, END_AND_DELIVER),
            id: claim.id.to_string(),
            holder: claim.holder.clone(),
            token: claim.token,
            state: end.status().as_str(),
        }
    }
}

const END: &str = "UPDATE mesh_commitments \
     SET state = $4, attempts_made = attempts_made + 1, ended_ms = {now}, \
         claim_expires_ms = NULL, updated_ms = {now} \
     WHERE id = $1 AND state = 'claimed' AND claim_holder = $2 AND claim_token = $3 \
       AND claim_expires_ms > {now}";

const DUE_COUNT: &str = "SELECT \
     (SELECT COUNT(*) FROM mesh_commitments \
        WHERE (state = 'pending' AND due_ms <= {now}) \
           OR (state = 'claimed' AND claim_expires_ms <= {now})) AS due, \
     (SELECT COUNT(*) FROM mesh_outbox_parts WHERE state IN ('pending', 'sending')) AS open";

const LIST: &str = "SELECT id, surface, address, handler, state, attempts_made \
     FROM mesh_commitments WHERE conversation = $1 ORDER BY created_ms, id";

/// What [`Store::pending_work`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingWork {
    /// Commitments due now (or whose claim expired).
    pub due_commitments: u64,
    /// Outbox parts still `pending` or `sending`, on any surface.
    pub open_parts: u64,
}

impl PendingWork {
    /// Whether nothing is pending or due.
    pub fn is_idle(&self) -> bool {
        self.due_commitments == 0 && self.open_parts == 0
    }
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn count_u32(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

fn encode<T: Serialize>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

impl Store {
    /// Stores `commitment` with what a worker needs to keep it: `task`, the `plan` (fixed
    /// now) and the address its follow-up goes to, `to`. Due after the plan's first delay.
    ///
    /// The rule: `to` is the address of the channel the commitment's holding line goes
    /// through, so the follow-up reaches the chat that read the promise, and nowhere else.
    /// [`Durable::keep_commitment`](super::Durable::keep_commitment) passes its own; code that
    /// stores the promise apart from its channel (a
    /// keeper that runs before the line goes) passes
    /// that channel's [`Channel::address`](crate::channel::Channel::address). An address that
    /// fails [`Address::validate`] is refused ([`StoreError::BadAddress`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::BadAddress`] when `to` fails [`Address::validate`],
    /// [`StoreError::Corrupt`] when the task's input, gate settings or plan cannot be serialized,
    /// and [`StoreError::Database`] when the database fails (nothing is stored).
    pub async fn keep_commitment(
        &self,
        commitment: &Commitment,
        to: &Address,
        task: &FollowUpTask,
        plan: FollowUpPlan,
    ) -> Result<(), StoreError> {
        let attr = commitment.attribution();
        let address = address_text(attr.conversation(), to)?;
        let input = encode("follow-up input", &task.input)?;
        let gate = task
            .gate
            .as_ref()
            .map(|gate| encode("gate settings", gate))
            .transpose()?;
        let plan_text = encode("follow-up plan", &plan)?;
        let statement = sql(&self.inner.pool, INSERT);
        on_pool!(&self.inner.pool, pool => {
            sqlx::query(&statement)
                .bind(commitment.id().to_string())
                .bind(attr.conversation())
                .bind(to.surface().as_str())
                .bind(attr.agent())
                .bind(attr.run())
                .bind(&task.handler)
                .bind(&input)
                .bind(task.mode.as_str())
                .bind(gate.as_deref())
                .bind(task.system_prompt.as_deref())
                .bind(&plan_text)
                .bind(millis(plan.delay_before(1)))
                .bind(&address)
                .execute(pool)
                .await
                .map_err(StoreError::database)?;
        });
        tracing::debug!(target: "mesh_egress::store", conversation = attr.conversation(), commitment = %commitment.id(), "commitment stored");
        Ok(())
    }

    /// Claims up to `limit` commitments that are due (or whose claim expired) for `holder`,
    /// for `ttl`. PostgreSQL skips rows another worker is claiming (`FOR UPDATE SKIP
    /// LOCKED`); SQLite takes the claim in one `BEGIN IMMEDIATE` transaction.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails, and [`StoreError::Corrupt`] when a
    /// claimed row cannot be read back (its id, mode, input, gate settings or plan). A stored
    /// address that cannot be read is not an error: the claim carries none.
    pub async fn claim_due(
        &self,
        holder: &str,
        ttl: Duration,
        limit: u32,
    ) -> Result<Vec<Claim>, StoreError> {
        self.claim_where(CLAIM_DUE, holder, ttl, limit, None).await
    }

    /// Runs one claim statement (`$1` holder, `$2` ttl, `$3` limit, `$4` the optional
    /// filter) in a write transaction and parses what it claimed.
    pub(super) async fn claim_where(
        &self,
        template: &str,
        holder: &str,
        ttl: Duration,
        limit: u32,
        filter: Option<&str>,
    ) -> Result<Vec<Claim>, StoreError> {
        let statement = sql(&self.inner.pool, template);
        let begin = self.inner.sql.begin;
        let rows: Vec<RawClaim> = on_pool!(&self.inner.pool, pool => {
            let mut tx = pool.begin_with(begin).await.map_err(StoreError::database)?;
            let query = sqlx::query(&statement)
                .bind(holder)
                .bind(millis(ttl))
                .bind(i64::from(limit));
            let query = match filter {
                Some(value) => query.bind(value),
                None => query,
            };
            let rows = query
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::database)?;
            tx.commit().await.map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    let text = |name: &str| row.try_get::<String, _>(name).map_err(StoreError::database);
                    let opt = |name: &str| row.try_get::<Option<String>, _>(name).map_err(StoreError::database);
                    let int = |name: &str| row.try_get::<i64, _>(name).map_err(StoreError::database);
                    Ok(RawClaim {
                        id: text("id")?,
                        conversation: text("conversation")?,
                        surface: text("surface")?,
                        agent: text("agent")?,
                        run: text("run")?,
                        handler: text("handler")?,
                        input: text("input")?,
                        mode: text("mode")?,
                        gate: opt("gate")?,
                        system_prompt: opt("system_prompt")?,
                        plan: text("plan")?,
                        attempts_made: int("attempts_made")?,
                        token: int("claim_token")?,
                        address: opt("address")?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?
        });
        rows.into_iter().map(|raw| raw.into_claim(holder)).collect()
    }

    /// Puts a claimed commitment back after a retryable failure, due after the plan's next
    /// step. `false` when the claim had expired or moved on (the new holder decides).
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails. A claim that expired or moved on is
    /// `false`, not an error.
    pub async fn retry_later(&self, claim: &Claim) -> Result<bool, StoreError> {
        let next = claim.attempts_made.saturating_add(2);
        let statement = sql(&self.inner.pool, RETRY_LATER);
        let changed = on_pool!(&self.inner.pool, pool => {
            sqlx::query(&statement)
                .bind(claim.id.to_string())
                .bind(&claim.holder)
                .bind(claim.token)
                .bind(millis(claim.plan.delay_before(next)))
                .execute(pool)
                .await
                .map_err(StoreError::database)?
                .rows_affected()
        });
        Ok(changed == 1)
    }

    /// Ends a claimed commitment. `false` when the claim had expired or moved on.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails. A claim that expired or moved on is
    /// `false`, not an error.
    pub async fn end_commitment(
        &self,
        claim: &Claim,
        end: CommitmentEnd,
    ) -> Result<bool, StoreError> {
        let statement = sql(&self.inner.pool, END);
        let changed = on_pool!(&self.inner.pool, pool => {
            sqlx::query(&statement)
                .bind(claim.id.to_string())
                .bind(&claim.holder)
                .bind(claim.token)
                .bind(end.status().as_str())
                .execute(pool)
                .await
                .map_err(StoreError::database)?
                .rows_affected()
        });
        Ok(changed == 1)
    }

    /// How much is pending or due: what `worker --once` waits on. Due-later commitments do not
    /// count; a commitment whose claim expired does.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails.
    pub async fn pending_work(&self) -> Result<PendingWork, StoreError> {
        self.pending_work_where(DUE_COUNT, None).await
    }

    /// Runs a count statement (`$1` the optional surface) into a [`PendingWork`].
    pub(super) async fn pending_work_where(
        &self,
        template: &str,
        surface: Option<&str>,
    ) -> Result<PendingWork, StoreError> {
        let statement = sql(&self.inner.pool, template);
        on_pool!(&self.inner.pool, pool => {
            let query = sqlx::query(&statement);
            let query = match surface {
                Some(surface) => query.bind(surface),
                None => query,
            };
            let row = query.fetch_one(pool).await.map_err(StoreError::database)?;
            Ok(PendingWork {
                due_commitments: count(row.try_get("due").map_err(StoreError::database)?),
                open_parts: count(row.try_get("open").map_err(StoreError::database)?),
            })
        })
    }

    /// Every commitment stored for `conversation`, oldest first.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails, [`StoreError::BadAddress`] for a stored
    /// address that is not a valid one, and [`StoreError::Corrupt`] for a state the store does
    /// not know.
    pub async fn commitments(
        &self,
        conversation: &str,
    ) -> Result<Vec<StoredCommitment>, StoreError> {
        let statement = sql(&self.inner.pool, LIST);
        on_pool!(&self.inner.pool, pool => {
            let rows = sqlx::query(&statement)
                .bind(conversation)
                .fetch_all(pool)
                .await
                .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    Ok(StoredCommitment {
                        id: row.try_get("id").map_err(StoreError::database)?,
                        surface: row.try_get("surface").map_err(StoreError::database)?,
                        address: read_address(conversation, row.try_get::<Option<String>, _>("address").map_err(StoreError::database)?.as_deref())?,
                        handler: row.try_get("handler").map_err(StoreError::database)?,
                        status: CommitmentStatus::parse(&row.try_get::<String, _>("state").map_err(StoreError::database)?)?,
                        attempts_made: count_u32(row.try_get("attempts_made").map_err(StoreError::database)?),
                    })
                })
                .collect()
        })
    }
}

/// A claimed row before its text is parsed.
struct RawClaim {
    id: String,
    conversation: String,
    surface: String,
    agent: String,
    run: String,
    handler: String,
    input: String,
    mode: String,
    gate: Option<String>,
    system_prompt: Option<String>,
    plan: String,
    attempts_made: i64,
    token: i64,
    address: Option<String>,
}

impl RawClaim {
    fn into_claim(self, holder: &str) -> Result<Claim, StoreError> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            StoreError::Corrupt(format!("commitment {}: {what}: {e}", self.id))
        };
        let id: CommitmentId = self.id.parse().map_err(|e| corrupt("id", &e))?;
        let mode = match self.mode.as_str() {
            "interactive" => Mode::Interactive,
            "proactive" => Mode::Proactive,
            other => return Err(corrupt("mode", &other)),
        };
        let input = serde_json::from_str(&self.input).map_err(|e| corrupt("input", &e))?;
        let gate = match &self.gate {
            Some(raw) => Some(serde_json::from_str(raw).map_err(|e| corrupt("gate", &e))?),
            None => None,
        };
        let plan = serde_json::from_str(&self.plan).map_err(|e| corrupt("plan", &e))?;
        // An unreadable address is not a reason to fail the batch: the claim carries none, and
        // the worker ends it as it ends one stored before addresses were (never guessing).
        let address = match read_address(&self.conversation, self.address.as_deref()) {
            Ok(address) => address,
            Err(error) => {
                tracing::error!(target: "mesh_egress::store", conversation = %self.conversation, commitment = %self.id, error = %error, "a stored commitment's address cannot be read");
                None
            }
        };
        Ok(Claim {
            id,
            attribution: Attribution::new(self.agent, self.conversation, self.run),
            surface: self.surface,
            task: FollowUpTask {
                handler: self.handler,
                input,
                mode,
                gate,
                system_prompt: self.system_prompt,
            },
            plan,
            attempts_made: count_u32(self.attempts_made),
            holder: holder.to_owned(),
            token: self.token,
            address,
            stored_address: self.address,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_doubles_saturates_and_is_capped() {
        let plan = FollowUpPlan::new(Duration::from_secs(10), Duration::from_secs(35), 3);
        let delays: Vec<u64> = (1..=4).map(|k| plan.delay_before(k).as_secs()).collect();
        assert_eq!(delays, [10, 20, 35, 35]);
        let huge = FollowUpPlan::new(Duration::MAX, Duration::MAX, 0);
        assert_eq!(huge.attempts(), 1);
        assert_eq!(huge.delay_before(200), Duration::from_millis(u64::MAX));
    }

    #[test]
    fn a_plan_round_trips_through_its_stored_text() {
        let plan = FollowUpPlan::new(Duration::from_millis(250), Duration::from_secs(600), 4);
        let text = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<FollowUpPlan>(&text).unwrap(), plan);
    }
}
