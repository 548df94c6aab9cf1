//! The two databases behind [`Store`](super::Store): one connection pool per backend, the
//! embedded migrations, and the SQL each statement needs. Everything above this module is
//! written once; only the SQL text differs (the clock, write locking), so both backends run
//! the same statements in the same order.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

use super::StoreError;

/// A connection pool on one of the two databases.
#[derive(Clone)]
pub(super) enum Pool {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool),
}

/// Runs `$body` with `$pool` bound to the backend's pool; the body is type-checked once per
/// backend, so it is the same code for both.
macro_rules! on_pool {
    ($pool_enum:expr, $pool:ident => $body:expr) => {
        match $pool_enum {
            #[cfg(feature = "sqlite")]
            $crate::store::backend::Pool::Sqlite($pool) => $body,
            #[cfg(feature = "postgres")]
            $crate::store::backend::Pool::Postgres($pool) => $body,
        }
    };
}
pub(super) use on_pool;

/// Every statement the store runs, with the backend's clock and locking spelled in.
pub(super) struct Sql {
    /// How a write transaction starts. SQLite takes the write lock up front (`BEGIN
    /// IMMEDIATE`), so two writers queue on the busy timeout instead of failing on upgrade.
    pub(super) begin: &'static str,
    /// Serialises commits on one conversation (PostgreSQL: a transaction advisory lock), so
    /// `seq` order is commit order. SQLite's single writer already does.
    pub(super) lock_conversation: Option<String>,
    pub(super) acquire: String,
    pub(super) acquire_seen: String,
    pub(super) lease_holder: String,
    pub(super) renew: String,
    pub(super) release: String,
    pub(super) check_fence: String,
    pub(super) insert_part: String,
    pub(super) claim: String,
    pub(super) claim_next: String,
    pub(super) mark_sent: String,
    pub(super) mark_retry: String,
    pub(super) mark_uncertain: String,
    pub(super) mark_failed: String,
    pub(super) reopen_sending: String,
    pub(super) mark_found: String,
    pub(super) reopen_not_found: String,
    pub(super) next_open: String,
    pub(super) parts: String,
    pub(super) open_destinations: String,
    pub(super) next_attempt_on: String,
    pub(super) clock: String,
    pub(super) fail_unaddressed: String,
    pub(super) readdress_parts: String,
    pub(super) stream_sending: String,
    pub(super) stream_confirmed: String,
    pub(super) stream_hand_back: String,
    pub(super) stream_hand_back_maybe: String,
    pub(super) stream_uncertain: String,
    pub(super) insert_ledger: String,
    pub(super) ledger_rows: String,
    pub(super) prune_parts: String,
    pub(super) prune_commitments: String,
    pub(super) prune_ledger: String,
}

const ACQUIRE: &str = "INSERT INTO mesh_leases (conversation, holder, token, expires_ms, updated_ms) \
     VALUES ($1, $2, 1, {now} + $3, {now}) \
     ON CONFLICT (conversation) DO UPDATE \
     SET holder = excluded.holder, token = mesh_leases.token + 1, \
         expires_ms = excluded.expires_ms, updated_ms = excluded.updated_ms \
     WHERE mesh_leases.expires_ms <= excluded.updated_ms OR mesh_leases.holder = excluded.holder \
     RETURNING token, expires_ms, updated_ms AS now_ms";

// A worker's acquire of a conversation it found open: granted only if the lease is still the
// one it saw (`$4`, the token then, 0 for none), so a conversation another worker took and
// finished meanwhile costs this one statement, not a claim, a lookup and a release.
const ACQUIRE_SEEN: &str = "INSERT INTO mesh_leases (conversation, holder, token, expires_ms, updated_ms) \
     VALUES ($1, $2, 1, {now} + $3, {now}) \
     ON CONFLICT (conversation) DO UPDATE \
     SET holder = excluded.holder, token = mesh_leases.token + 1, \
         expires_ms = excluded.expires_ms, updated_ms = excluded.updated_ms \
     WHERE (mesh_leases.expires_ms <= excluded.updated_ms OR mesh_leases.holder = excluded.holder) \
       AND mesh_leases.token = $4 \
     RETURNING token, expires_ms, updated_ms AS now_ms";

const LEASE_HOLDER: &str =
    "SELECT holder, expires_ms - {now} AS left_ms FROM mesh_leases WHERE conversation = $1";

const RENEW: &str = "UPDATE mesh_leases SET expires_ms = {now} + $4, updated_ms = {now} \
     WHERE conversation = $1 AND holder = $2 AND token = $3 AND expires_ms > {now} \
     RETURNING expires_ms, updated_ms AS now_ms";

const RELEASE: &str = "UPDATE mesh_leases SET expires_ms = {now}, updated_ms = {now} \
     WHERE conversation = $1 AND holder = $2 AND token = $3 AND expires_ms > {now}";

const CHECK_FENCE: &str = "SELECT token FROM mesh_leases \
     WHERE conversation = $1 AND holder = $2 AND token = $3 AND expires_ms > {now}{for_update}";

const INSERT_PART: &str = "INSERT INTO mesh_outbox_parts \
     (delivery, part_index, total, conversation, agent, run, surface, body, idempotency_key, \
      state, lease_holder, lease_token, address, created_ms, updated_ms) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, $12, {now}, {now})";

// The fence is part of the claim: a part is only marked `sending` by the lease's current
// holder, in the same statement, so a stale worker cannot start a send either.
const CLAIM: &str = "UPDATE mesh_outbox_parts \
     SET state = 'sending', attempts = attempts + 1, \
         first_attempt_ms = COALESCE(first_attempt_ms, {now}), updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state = 'pending' \
       AND ($3 IS NULL OR EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = $3 AND l.token = $4 AND l.expires_ms > {now})) \
     RETURNING attempts";

// A destination's next part, claimed in the statement that finds it (the healthy resend's one
// round trip for it): only when it is plainly `pending` (not maybe delivered, not a dead
// sender's `sending`) and due (`$3`, the store clock); anything else is left for the careful
// path ([`NEXT_OPEN`]). Fenced like [`CLAIM`] (`$4` holder, `$5` token).
const CLAIM_NEXT: &str = "UPDATE mesh_outbox_parts \
     SET state = 'sending', attempts = attempts + 1, \
         first_attempt_ms = COALESCE(first_attempt_ms, {now}), updated_ms = {now} \
     WHERE seq = (SELECT seq FROM mesh_outbox_parts \
            WHERE conversation = $1 AND address = $2 AND state IN ('pending', 'sending') \
            ORDER BY seq LIMIT 1) \
       AND state = 'pending' AND maybe_delivered = 0 AND next_attempt_ms <= $3 \
       AND EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = $4 AND l.token = $5 AND l.expires_ms > {now}) \
     RETURNING delivery, part_index, total, agent, run, body, attempts";

// What a send came to is recorded only while the lease it was sent under is still the
// conversation's latest ($4 holder, $5 token; NULL: sent without a lease): a new holder
// (whose token is greater) may have claimed the row meanwhile, and a stale sender's mark must
// not land on its claim. The lease need not be unexpired: a row nobody else took is still the
// stale sender's to settle. (Starting a send, the claim, also needs it unexpired.)
const HELD_BY_SENDER: &str = "($4 IS NULL OR EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = $4 AND l.token = $5))";

const MARK_SENT: &str = "UPDATE mesh_outbox_parts \
     SET state = 'sent', platform_id = $3, last_error = NULL, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state = 'sending' AND {held_by_sender}";

// `$7`: when it may be tried again (the store clock), from the part's backoff.
const MARK_RETRY: &str = "UPDATE mesh_outbox_parts \
     SET state = 'pending', last_error = $3, updated_ms = {now}, next_attempt_ms = $7, \
         maybe_delivered = CASE WHEN $6 > 0 THEN 1 ELSE maybe_delivered END \
     WHERE delivery = $1 AND part_index = $2 AND state = 'sending' AND {held_by_sender}";

// Also what a resend settles a dead sender's part with, under the resend's lease.
const MARK_UNCERTAIN: &str = "UPDATE mesh_outbox_parts \
     SET state = 'uncertain', maybe_delivered = 1, last_error = $3, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state IN ('pending', 'sending') \
       AND {held_by_sender}";

// A part the surface refused for good takes the rest of its message with it: showing part 3
// of a message whose part 2 will never arrive reads as a different message.
const MARK_FAILED: &str = "UPDATE mesh_outbox_parts \
     SET state = 'failed', last_error = $3, updated_ms = {now} \
     WHERE delivery = $1 AND part_index >= $2 AND state IN ('pending', 'sending') \
       AND {held_by_sender}";

const REOPEN_SENDING: &str = "UPDATE mesh_outbox_parts \
     SET state = 'pending', maybe_delivered = 1, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state = 'sending' \
       AND EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = $3 AND l.token = $4 AND l.expires_ms > {now})";

// A lookup found the part on the surface: an earlier attempt posted it.
const MARK_FOUND: &str = "UPDATE mesh_outbox_parts \
     SET state = 'sent', platform_id = $3, last_error = NULL, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state IN ('pending', 'sending') \
       AND EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = $4 AND l.token = $5 AND l.expires_ms > {now})";

// A lookup found the part absent: no earlier attempt posted it, so it is plainly pending (and,
// if a stream had it, it now goes as a message of its own).
const REOPEN_NOT_FOUND: &str = "UPDATE mesh_outbox_parts \
     SET state = 'pending', maybe_delivered = 0, streamed = 0, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state IN ('pending', 'sending') \
       AND EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = $3 AND l.token = $4 AND l.expires_ms > {now})";

// A conversation's next open part for one destination (`$2`, the stored address text).
const NEXT_OPEN: &str = "SELECT delivery, part_index, total, agent, run, body, state, \
            maybe_delivered, streamed, first_attempt_ms, next_attempt_ms, {now} AS now_ms \
     FROM mesh_outbox_parts \
     WHERE conversation = $1 AND address = $2 AND state IN ('pending', 'sending') \
     ORDER BY seq LIMIT 1";

const PARTS: &str = "SELECT delivery, part_index, total, surface, address, body, state, \
            platform_id, attempts, maybe_delivered, streamed, last_error \
     FROM mesh_outbox_parts WHERE conversation = $1 ORDER BY seq";

// One page of the destinations with open parts on surface `$1`, in (conversation, address)
// order after the cursor (`$2`, `$3`; `$2` NULL: from the start): each conversation once per
// address (NULL: a row from before migration 0004), with how many parts it has open and the
// token of its lease (NULL: never leased). Left out: destinations whose first open part is not
// due yet (`$5`, the store clock), and conversations someone other than `$4` holds a live lease
// on (that holder sends them).
const OPEN_DESTINATIONS: &str = "SELECT p.conversation, MAX(p.address) AS address, \
            COUNT(*) AS open, MAX(l.token) AS token \
     FROM mesh_outbox_parts p LEFT JOIN mesh_leases l ON l.conversation = p.conversation \
     WHERE p.surface = $1 AND p.state IN ('pending', 'sending') \
       AND ($2 IS NULL OR p.conversation > $2 \
            OR (p.conversation = $2 AND COALESCE(p.address, '') > $3)) \
       AND (l.expires_ms IS NULL OR l.expires_ms <= {now} OR l.holder = $4) \
     GROUP BY p.conversation, COALESCE(p.address, '') \
     HAVING MIN(p.seq) = MIN(CASE WHEN p.next_attempt_ms <= $5 THEN p.seq END) \
     ORDER BY p.conversation, COALESCE(p.address, '') \
     LIMIT $6";

// When the next part on surface `$1` that waits for its backoff may be tried (the store clock).
const NEXT_ATTEMPT_ON: &str = "SELECT MIN(next_attempt_ms) AS next_ms FROM mesh_outbox_parts \
     WHERE surface = $1 AND state = 'pending' AND next_attempt_ms > $2";

// The database's clock, read once when a store opens (see `Store::clock_ms`).
const CLOCK: &str = "SELECT {now} AS now_ms";

// A conversation's open parts on surface `$2` that have no address (`$3` NULL) or the
// unreadable address `$3`: failed, never sent to a guessed destination, fenced on the lease
// (`$5`, `$6`) like every other transition a worker makes.
const FAIL_UNADDRESSED: &str = "UPDATE mesh_outbox_parts \
     SET state = 'failed', unaddressed = 1, last_error = $4, updated_ms = {now} \
     WHERE conversation = $1 AND surface = $2 AND state IN ('pending', 'sending') \
       AND (($3 IS NULL AND address IS NULL) OR address = $3) \
       AND EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = $5 AND l.token = $6 AND l.expires_ms > {now}) \
     RETURNING delivery, part_index, agent, run";

// The operator's fix: the conversation's rows without a (readable) address get `$2`, and
// those a worker ended for want of one are open again.
const READDRESS_PARTS: &str = "UPDATE mesh_outbox_parts \
     SET address = $2, surface = $3, \
         state = CASE WHEN unaddressed = 1 THEN 'pending' ELSE state END, \
         last_error = CASE WHEN unaddressed = 1 THEN NULL ELSE last_error END, \
         unaddressed = 0, updated_ms = {now} \
     WHERE conversation = $1 \
       AND (unaddressed = 1 OR (address IS NULL AND state IN ('pending', 'sending')))";

// The lease a part was committed under, still live: what a streamed part's marks are fenced on
// (the stream's parts carry the commit's ownership, so it is the lease the claim would check).
const COMMIT_FENCE: &str = "(mesh_outbox_parts.lease_holder IS NULL OR EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = mesh_outbox_parts.lease_holder \
              AND l.token = mesh_outbox_parts.lease_token AND l.expires_ms > {now}))";

// The lease a part was committed under is still the conversation's latest (expired or not):
// what the journal's marks of a call's result are fenced on, as a send's marks are.
const COMMIT_HELD: &str = "(mesh_outbox_parts.lease_holder IS NULL OR EXISTS (SELECT 1 FROM mesh_leases l \
            WHERE l.conversation = mesh_outbox_parts.conversation \
              AND l.holder = mesh_outbox_parts.lease_holder \
              AND l.token = mesh_outbox_parts.lease_token))";

// A surface's stream is about to make a call that may show the part: the stream's claim.
const STREAM_SENDING: &str = "UPDATE mesh_outbox_parts \
     SET state = 'sending', streamed = 1, attempts = attempts + 1, \
         first_attempt_ms = COALESCE(first_attempt_ms, {now}), updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state = 'pending' AND {commit_fence}";

// The stream confirmed the part, inside message `$3` (NULL when the stream could not say
// which). What the surface confirmed is the truth, so a part whose `sending` mark was not
// written is recorded too, while its lease is the conversation's latest.
const STREAM_CONFIRMED: &str = "UPDATE mesh_outbox_parts \
     SET state = 'sent', streamed = 1, platform_id = $3, last_error = NULL, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state IN ('pending', 'sending') \
       AND {commit_held}";

// The stream stopped without confirming the part and handed it back: it goes again at once, as
// a message of its own ([`Channel::send`]), from the confirmed offset.
const STREAM_HAND_BACK: &str = "UPDATE mesh_outbox_parts \
     SET state = 'pending', streamed = 0, last_error = $3, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state = 'sending' AND streamed = 1 \
       AND {commit_held}";

// The same for a part whose call may have shown it, where a message of its own with its
// idempotency key is deduped (a Discord create of that one part): pending, maybe delivered.
const STREAM_HAND_BACK_MAYBE: &str = "UPDATE mesh_outbox_parts \
     SET state = 'pending', streamed = 0, maybe_delivered = 1, last_error = $3, \
         updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state = 'sending' AND streamed = 1 \
       AND {commit_held}";

// The stream stopped on a call that may have been applied, on a surface where repeating it
// could post twice: the part may be shown, so it is never sent again.
const STREAM_UNCERTAIN: &str = "UPDATE mesh_outbox_parts \
     SET state = 'uncertain', maybe_delivered = 1, last_error = $3, updated_ms = {now} \
     WHERE delivery = $1 AND part_index = $2 AND state = 'sending' AND streamed = 1 \
       AND {commit_held}";

const INSERT_LEDGER: &str = "INSERT INTO mesh_ledger \
     (conversation, agent, run, kind, entry, created_ms) VALUES ($1, $2, $3, $4, $5, {now})";

const LEDGER_ROWS: &str = "SELECT entry FROM mesh_ledger \
     WHERE conversation = $1 AND ($2 IS NULL OR run = $2) ORDER BY seq";

// Retention: only final rows, older than `$1` milliseconds.
const PRUNE_PARTS: &str =
    "DELETE FROM mesh_outbox_parts WHERE state = 'sent' AND updated_ms < {now} - $1";

const PRUNE_COMMITMENTS: &str = "DELETE FROM mesh_commitments \
     WHERE state IN ('fulfilled', 'handed_off', 'cancelled') \
       AND ended_ms IS NOT NULL AND ended_ms < {now} - $1";

const PRUNE_LEDGER: &str = "DELETE FROM mesh_ledger WHERE created_ms < {now} - $1";

impl Sql {
    fn new(now: &str, begin: &'static str, for_update: &str, lock: Option<&str>) -> Self {
        let f = |template: &str| {
            template
                .replace("{commit_fence}", COMMIT_FENCE)
                .replace("{commit_held}", COMMIT_HELD)
                .replace("{held_by_sender}", HELD_BY_SENDER)
                .replace("{now}", now)
                .replace("{for_update}", for_update)
        };
        Self {
            begin,
            lock_conversation: lock.map(str::to_owned),
            acquire: f(ACQUIRE),
            acquire_seen: f(ACQUIRE_SEEN),
            lease_holder: f(LEASE_HOLDER),
            renew: f(RENEW),
            release: f(RELEASE),
            check_fence: f(CHECK_FENCE),
            insert_part: f(INSERT_PART),
            claim: f(CLAIM),
            claim_next: f(CLAIM_NEXT),
            mark_sent: f(MARK_SENT),
            mark_retry: f(MARK_RETRY),
            mark_uncertain: f(MARK_UNCERTAIN),
            mark_failed: f(MARK_FAILED),
            reopen_sending: f(REOPEN_SENDING),
            mark_found: f(MARK_FOUND),
            reopen_not_found: f(REOPEN_NOT_FOUND),
            next_open: f(NEXT_OPEN),
            parts: f(PARTS),
            open_destinations: f(OPEN_DESTINATIONS),
            next_attempt_on: f(NEXT_ATTEMPT_ON),
            clock: f(CLOCK),
            fail_unaddressed: f(FAIL_UNADDRESSED),
            readdress_parts: f(READDRESS_PARTS),
            stream_sending: f(STREAM_SENDING),
            stream_confirmed: f(STREAM_CONFIRMED),
            stream_hand_back: f(STREAM_HAND_BACK),
            stream_hand_back_maybe: f(STREAM_HAND_BACK_MAYBE),
            stream_uncertain: f(STREAM_UNCERTAIN),
            insert_ledger: f(INSERT_LEDGER),
            ledger_rows: f(LEDGER_ROWS),
            prune_parts: f(PRUNE_PARTS),
            prune_commitments: f(PRUNE_COMMITMENTS),
            prune_ledger: f(PRUNE_LEDGER),
        }
    }

    #[cfg(feature = "sqlite")]
    fn sqlite() -> Self {
        Self::new(
            "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
            "BEGIN IMMEDIATE",
            "",
            None,
        )
    }

    #[cfg(feature = "postgres")]
    fn postgres() -> Self {
        // `clock_timestamp()`, not `now()`: `now()` is frozen at the transaction's start, and a
        // commit that waited on a lock must compare the lease against the time it runs.
        Self::new(
            "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            "BEGIN",
            " FOR UPDATE",
            Some("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"),
        )
    }
}

/// The migrations shipped in the crate, versioned and checksummed by sqlx's migrator (its
/// `_sqlx_migrations` table), embedded with `include_str!` so opening a store needs no files.
fn migrator(migrations: &'static [(i64, &'static str, &'static str)]) -> Migrator {
    Migrator {
        migrations: Cow::Owned(
            migrations
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect(),
        ),
        ..Migrator::DEFAULT
    }
}

#[cfg(feature = "sqlite")]
const SQLITE_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "outbox leases commitments",
        include_str!("../../migrations/sqlite/0001_outbox_leases_commitments.sql"),
    ),
    (
        2,
        "ledger retention",
        include_str!("../../migrations/sqlite/0002_ledger_retention.sql"),
    ),
    (
        3,
        "streamed parts",
        include_str!("../../migrations/sqlite/0003_streamed_parts.sql"),
    ),
    (
        4,
        "addresses",
        include_str!("../../migrations/sqlite/0004_addresses.sql"),
    ),
    (
        5,
        "part retries",
        include_str!("../../migrations/sqlite/0005_part_retries.sql"),
    ),
    // 0006 is numbered for work in flight: the migrator applies a missing lower version
    // whenever it appears (sqlx applies every unapplied version, in order), so the gap is
    // harmless.
    (
        7,
        "web chats",
        include_str!("../../migrations/sqlite/0007_web_chats.sql"),
    ),
];

#[cfg(feature = "postgres")]
const POSTGRES_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "outbox leases commitments",
        include_str!("../../migrations/postgres/0001_outbox_leases_commitments.sql"),
    ),
    (
        2,
        "ledger retention",
        include_str!("../../migrations/postgres/0002_ledger_retention.sql"),
    ),
    (
        3,
        "streamed parts",
        include_str!("../../migrations/postgres/0003_streamed_parts.sql"),
    ),
    (
        4,
        "addresses",
        include_str!("../../migrations/postgres/0004_addresses.sql"),
    ),
    (
        5,
        "part retries",
        include_str!("../../migrations/postgres/0005_part_retries.sql"),
    ),
    // 0006 is numbered for work in flight: the migrator applies a missing lower version
    // whenever it appears (sqlx applies every unapplied version, in order), so the gap is
    // harmless.
    (
        7,
        "web chats",
        include_str!("../../migrations/postgres/0007_web_chats.sql"),
    ),
];

/// Opens (and creates and migrates) the database `url` names.
pub(super) async fn open(url: &str) -> Result<(Pool, Sql), StoreError> {
    let scheme = url.split(':').next().unwrap_or_default();
    match scheme {
        "sqlite" => open_sqlite(url).await,
        "postgres" | "postgresql" => open_postgres(url).await,
        _ => Err(StoreError::UnsupportedUrl {
            scheme: scheme.to_owned(),
        }),
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &str) -> Result<(Pool, Sql), StoreError> {
    use std::str::FromStr;
    use std::time::Duration;

    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };

    if url.contains(":memory:") || url.contains("mode=memory") {
        // An in-memory database would be a stand-in called durable.
        return Err(StoreError::NotDurable);
    }
    let options = SqliteConnectOptions::from_str(url)
        .map_err(StoreError::database)?
        .create_if_missing(true)
        // WAL lets readers and one writer on other processes share the file; the busy timeout
        // makes a second writer wait its turn instead of failing at once.
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(10))
        // FULL: a committed part survives a power cut, not only a killed process.
        .synchronous(SqliteSynchronous::Full);
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .map_err(StoreError::database)?;
    migrator(SQLITE_MIGRATIONS)
        .run(&pool)
        .await
        .map_err(StoreError::migrate)?;
    Ok((Pool::Sqlite(pool), Sql::sqlite()))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(_url: &str) -> Result<(Pool, Sql), StoreError> {
    Err(StoreError::BackendDisabled { feature: "sqlite" })
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<(Pool, Sql), StoreError> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(url)
        .await
        .map_err(StoreError::database)?;
    // The migrator takes an advisory lock, so workers starting together migrate once.
    migrator(POSTGRES_MIGRATIONS)
        .run(&pool)
        .await
        .map_err(StoreError::migrate)?;
    Ok((Pool::Postgres(pool), Sql::postgres()))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str) -> Result<(Pool, Sql), StoreError> {
    Err(StoreError::BackendDisabled {
        feature: "postgres",
    })
}
