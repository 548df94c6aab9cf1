//! The durable commit boundary: an outbox of rendered parts and conversation leases with
//! fencing, on an embedded SQLite file (feature `sqlite`) or PostgreSQL (feature `postgres`).
//!
//! [`Store::open`] takes a URL: `sqlite:PATH` creates and migrates the file (WAL mode, a busy
//! timeout, write transactions taken with `BEGIN IMMEDIATE`, so several processes on one host
//! share it); `postgres://…` connects and migrates a database for many workers on many hosts.
//! The migrations ship inside the crate. [`Store::channel`] wraps any [`Channel`](crate::channel::Channel) in a
//! [`Durable`] one: committing a message writes all its parts in one transaction together with
//! the lease check and the channel's [`Address`] (see [addresses](#addresses)), and each send
//! is recorded. [`Store::resend`] sends what a crashed or replaced worker left, in order. [`Store::durable_ledger`] writes the run ledger to the same
//! database ([`Store::ledger_entries`] reads it per conversation and run), and
//! [`Store::prune`] deletes what ended long enough ago.
//!
//! Rows become [`CommittedPart`](crate::CommittedPart)s only inside this crate: the store is a
//! concrete type over a private backend, with no trait a user could implement to forge a
//! sendable part.
//!
//! ```no_run
//! use std::time::Duration;
//! use mesh_egress::{AgentMessage, Attribution};
//! use mesh_egress::channel::{Deliver, Recorder};
//! use mesh_egress::store::Store;
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::open("sqlite:/var/lib/mesh/outbox.db").await?;
//! let lease = store.acquire("c1", "worker-a", Duration::from_secs(30)).await?;
//! let channel = store.channel(Recorder::new());
//! let message = AgentMessage::new("Deployed.", Attribution::new("ops", "c1", "r1"))
//!     .with_ownership(lease.ownership());
//! channel.deliver(message).await?;
//! // After a restart, or on the worker that took the conversation over:
//! let report = store.resend(&channel, &lease).await?;
//! # let _ = report; Ok(()) }
//! ```
//!
//! # Part states
//!
//! Every part is one row, in exactly one state:
//!
//! | from | to | what moves it |
//! |---|---|---|
//! | — | `pending` | the commit transaction (all parts of a message at once, after the lease check) |
//! | `pending` | `sending` | a send claims it, in one statement that also checks the lease (so one worker sends it) |
//! | `sending` | `sent` | the surface accepted it; its message id is recorded |
//! | `sending` | `pending` | the surface answered that it did not post (a `Retry-After`), or a lookup found the part absent: safe to send again anywhere; or the outcome is unknown on a surface that dedupes (Discord), marked *maybe delivered*; or a try may have posted it and a later try of the same send was told "not now", marked *maybe delivered* (the next attempt dedupes or looks it up); or the connector stopped before a try for the conversation's ownership (its lease lapsed, or had too little time left for a try: [fencing](#fencing)), its *maybe delivered* flag kept. Not before its next-attempt time ([part retries](#part-retries)) |
//! | `sending` | `failed` (attempts exhausted) | any of the above on the part's last allowed attempt; the later parts of the same message become `failed` with it |
//! | `sending` | `sent` | the outcome is unknown, and a lookup ([`Channel::look_up`](crate::channel::Channel::look_up), Slack) found the part on the surface: its id is recorded, nothing is re-sent |
//! | `sending` | `uncertain` | the outcome is unknown (no answer, a 5xx, Slack's `internal_error`, an unreadable or over-cap 2xx) on a surface that cannot dedupe, and no lookup could tell |
//! | `sending` | `failed` | the surface refused for good (a non-retryable error); the later parts of the same message become `failed` with it |
//! | `sending` | `pending` / `sent` / `uncertain` | found still `sending` by [`Store::resend`] (its sender died mid-send): the unknown-outcome rules below |
//! | `pending` (maybe delivered) | `sent` / `pending` / `uncertain` | [`Store::resend`], when the surface cannot dedupe the re-send any more: a lookup decides (found / absent / cannot tell) |
//! | `pending` | `sending` (streamed) | a surface's stream is about to make the call that may show it in a message ([streamed parts](#streamed-parts)), fenced on the lease it was committed under; a part shown only as a draft (Telegram's `sendMessageDraft`) is no message and stays `pending` |
//! | `sending` (streamed) | `sent` | the stream confirmed it; the id of the message that holds it is recorded (one growing message holds several parts) |
//! | `pending` / `sending` (streamed) | `sent` | the stream confirmed it (even if its `sending` mark was not written: what the surface confirmed is the truth) |
//! | `sending` (streamed) | `pending` | the stream stopped without confirming it and handed it back (also when the stream stopped for a [store failure](#store-failures), best effort): re-sent as a message of its own, from the confirmed offset; a part in a one-part Discord create that may have been applied comes back *maybe delivered* (its re-send carries the same nonce) |
//! | `sending` (streamed) | `uncertain` | the stream stopped on a call that may have been applied (no answer, a 5xx, `internal_error`, an unreadable 2xx) and that nothing can dedupe or read back: Telegram's `sendMessage`, a Slack post or start, a Slack append whose stopped stream cannot be read, a Discord edit, a packed Discord create: maybe shown, never sent again |
//! | `sending` (streamed) | `uncertain` / `pending` | found so by [`Store::resend`] (its sender died mid-stream): the unknown-outcome knob alone, never a lookup or a nonce |
//! | `pending` / `sending` (no address) | `failed` | a [`Worker`](crate::worker::Worker) found it stored without a readable address ([rows without an address](#rows-without-an-address)): never sent to a guessed destination |
//! | `failed` (for want of an address) | `pending` | [`Store::readdress`]: the operator gave its conversation the address |
//!
//! Every transition a sender makes after a send (to `sent`, `pending`, `uncertain` or
//! `failed`), the journal's included, is [fenced](#fencing) on the lease the part was sent
//! (or committed) under: a sender whose lease moved on never overwrites what the new holder
//! does with the row.
//!
//! `sent`, `uncertain` and `failed` are final: nothing sends them again. An `uncertain` part is
//! never re-sent blindly and never dropped silently: it stays in the outbox (see
//! [`Store::parts`]) and is logged at `warn` on target `mesh_egress::store` for operators
//! (and, with [`Durable::with_ledger`], recorded as a
//! [`OutboxRecord::Uncertain`](crate::ledger::OutboxRecord) row: delivery id, part, surface,
//! never its text); the later parts of its conversation go on.
//!
//! # Addresses
//!
//! Every part is stored with the [`Address`] of the channel it was committed through
//! ([`Channel::address`](crate::channel::Channel::address): where the part really goes), as
//! JSON in the `address` column; an address that fails [`Address::validate`] is refused at
//! commit ([`StoreError::BadAddress`]) rather than written where no reader could trust it.
//! [`Store::resend`] sends the parts stored for its channel's address only, so a resend
//! through a channel to one chat can never post another chat's parts. A promise
//! ([`Store::keep_commitment`]) is stored with the address of the channel its holding line goes
//! through ([`Durable::keep_commitment`] does that), so its follow-up reaches the chat that
//! read the promise and no other. What reads a row back checks its address again
//! ([`StoredPart::address`], [`Claim::address`]); text that is not a valid address is a
//! [`StoreError::BadAddress`], never a panic. The surface, and so the duplicate rules below,
//! come from the address: no caller states them.
//!
//! A [`Worker`](crate::worker::Worker) holds a [`SurfaceClient`](crate::channel::SurfaceClient)
//! per surface and makes the channel for each stored address from it, so one worker serves
//! every conversation of every surface it has a client for.
//!
//! # Rows without an address
//!
//! Rows written before migration 0004 have no address (the column is NULL), and a row whose
//! address cannot be read has none a sender could trust. They are never sent to a guessed
//! destination. The first worker that serves their surface marks such parts `failed` (under
//! the conversation's lease) and ends such commitments `cancelled` with nothing sent, each
//! marked as ended for want of an address; each gets a ledger row
//! ([`OutboxRecord::Unaddressed`](crate::ledger::OutboxRecord) or `UnaddressedCommitment`:
//! delivery id, part or commitment id, surface; never the text) on the store's durable ledger,
//! and one `warn` on target
//! `mesh_egress::store` names the conversation (once per conversation per pass).
//!
//! To send them after all, an operator gives the conversation its address:
//!
//! ```no_run
//! # use mesh_egress::store::Store;
//! use mesh_egress::address::SlackAddress;
//! # async fn f(store: Store) -> Result<(), mesh_egress::store::StoreError> {
//! let fixed = store.readdress("conv-1", &SlackAddress::new("C0123456789").into()).await?;
//! # let _ = fixed; Ok(()) }
//! ```
//!
//! [`Store::readdress`] sets the address on the conversation's rows that have none, puts the
//! parts a worker failed for want of one back to `pending` and the commitments it ended back
//! to `pending` (due at once); the next pass of a worker with a client for that surface sends
//! them, in order, by the usual rules. Rows that have an address, and rows that failed or
//! ended for another reason, are never touched. To find the conversations concerned, read
//! the ledger's `unaddressed` rows ([`Store::ledger_entries`]) or the `warn` events. Running
//! `readdress` before any worker of the new release has started sends nothing twice: it only
//! gives the still-open rows their address.
//!
//! # Duplicates, per surface
//!
//! A send whose outcome is unknown may have reached the surface. Whether it is sent again
//! depends on what the surface of the part's address can deduplicate ([`Surface`]):
//!
//! - **Discord** sends the part's idempotency key as `nonce` with `enforce_nonce`, and Discord
//!   drops a repeated nonce within a few minutes
//!   (<https://discord.com/developers/docs/resources/message#create-message>). A part whose
//!   first attempt began less than the dedupe window ago (default 2 minutes,
//!   [`Durable::with_dedupe_window`]) is re-sent; an older one becomes `uncertain`.
//! - **Slack** has no server-side dedupe, so the part is looked up instead of re-sent blindly:
//!   every message carries the delivery id and part index as metadata, and
//!   [`SlackChannel`](crate::channel::SlackChannel)'s [`look_up`](crate::channel::Channel::look_up)
//!   reads one page (at most 50 messages, from a minute before the first attempt) of
//!   `conversations.replies` (a thread) or `conversations.history` with
//!   `include_all_metadata=true`. Found: the part is `sent` with that message's `ts`, and is
//!   not posted again. Not found: it is sent. Without the history scope (`missing_scope`), a
//!   failed lookup, or a page full of newer messages, the part becomes `uncertain`. The
//!   connector does the same before its own retries within one send. A sender whose lease
//!   expired cannot post after the new holder's lookup: it re-checks its ownership before
//!   every try, and no try's timeout outlasts its lease ([fencing](#fencing)).
//! - **Telegram** and plain channels (stdout, a recorder) cannot dedupe and have no lookup
//!   (the [`Channel::look_up`](crate::channel::Channel::look_up) default): such a part becomes
//!   `uncertain`. Any channel can implement the lookup to join Slack's rule. The Telegram
//!   connector itself never repeats a `sendMessage` that may have posted: after no answer, a
//!   5xx or an unreadable 2xx the part comes back *maybe delivered*.
//!
//! The knob: [`Durable::with_unknown_outcome`]. The default, [`UnknownOutcome::Uncertain`], is
//! at most once (a part that cannot be settled is kept as `uncertain`, logged at `warn` on
//! `mesh_egress::store`, and never re-sent); [`UnknownOutcome::SendAgain`] is at least once (it
//! is sent again, and the person may see it twice). Neither ever drops a part silently.
//!
//! The connectors follow one rule for a try that may have been applied (no answer to a request
//! that left, a 5xx, Slack's `internal_error` or `fatal_error`, a 2xx whose body cannot be
//! read or is over the cap): it is repeated within the send only where a repeat cannot show
//! it twice (a Discord create under its nonce, a Slack post after a lookup found it absent, an
//! edit or a draft carrying the whole text), and the send that hands the part back says so
//! ([`SendError::maybe_delivered`](crate::channel::SendError::maybe_delivered)), whatever its
//! later tries answered. The outbox treats such a part as an unknown outcome even when the
//! last answer was a `Retry-After` (it is then `pending`, *maybe delivered*). A
//! [`SendError`](crate::channel::SendError) from any other channel does not say whether the
//! request left the process, so every retryable error without a `Retry-After` counts as an
//! unknown outcome too; a non-retryable one counts as a refusal (the surface answered and did
//! not post).
//!
//! # Streamed parts
//!
//! A [`Durable`] channel over a [`StreamingChannel`](crate::channel::stream::StreamingChannel)
//! is one too: its [`open_stream`](crate::channel::stream::StreamingChannel::open_stream)
//! opens the inner channel's stream and attaches the outbox's journal, a
//! `StreamObserver`. Each block is committed through
//! the durable channel as usual (its parts `pending`, `streamed` unset); then:
//!
//! - **before each call** that may show parts in a message, the journal marks the ones not
//!   marked yet `sending` and `streamed`, in one transaction, each fenced on the lease it was
//!   committed under. A call that shows parts only as a preview (a Telegram draft, which
//!   confirms nothing and is no message) marks nothing: a reply that exists only as drafts is
//!   `pending`, and after a crash it is sent as messages. If any part is refused (its lease
//!   moved on, it is not pending in this outbox), none is marked and the journal refuses the
//!   call (`CallRefused`): that call and the rest of the
//!   reply never go, and the boundary ends the turn as ownership lost, its parts still
//!   `pending` for whoever holds the conversation next. The conversation's lease itself is
//!   left alone. If the database failed, see [store failures](#store-failures).
//! - **after each call**, the parts the surface confirmed are marked `sent`, with the id of the
//!   message that holds them (several parts share one id: one growing message). What the
//!   surface confirmed is the truth: a confirmed part is recorded even if its `sending` mark
//!   was not written.
//! - **when the stream stops** short (a refusal for good, a refused call), the parts it marked
//!   and did not confirm go back to `pending` (`streamed` unset), so the boundary's re-send
//!   through [`Channel::send`](crate::channel::Channel::send) claims, sends and records each
//!   exactly once, as a message of its own, from the confirmed offset. The exception: parts
//!   whose call may have been applied where nothing can dedupe a repeat or read back what the
//!   surface holds (the table above) may be shown, so they become `uncertain` (reported on the
//!   ledger) and are never sent again, in process or after a restart
//!   ([`SurfaceStreamError::uncertain`](crate::channel::stream::SurfaceStreamError::uncertain)). Every mark
//!   after a call is fenced on the lease the part was committed under.
//!
//! After a crash a streamed part can be found `sending`: its call may have shown it inside a
//! growing message, and appends and edits carry neither Slack's metadata nor Discord's nonce,
//! so no lookup and no dedupe can tell. [`Store::resend`] therefore settles it by the knob
//! alone ([`UnknownOutcome::Uncertain`]: `uncertain`, reported like any other;
//! [`UnknownOutcome::SendAgain`]: sent again as a message of its own). A streamed reply's part
//! still `pending` (committed, never given to a call) is an ordinary part and is sent as one.
//!
//! Cost: per call that shows new parts, one write transaction before it and one after it
//! (besides each block's commit), instead of a claim and a mark per part.
//!
//! # Part retries
//!
//! A part that goes back to `pending` gets a next-attempt time from its [`PartRetry`] (on the
//! durable channel, [`Durable::with_retry`]; a worker's from `MESH_WORKER_RETRY_BASE_MS`,
//! `MESH_WORKER_RETRY_MAX_MS`, `MESH_WORKER_MAX_ATTEMPTS`): exponential backoff from 1 s to
//! 5 minutes with jitter, honouring a surface's `Retry-After` up to the cap. Nothing sends it
//! before then: [`Store::resend`] stops at it (the rest of the conversation waits behind it, in
//! order; [`ResendReport::retry_in`] says for how long), and a worker's pass leaves its
//! conversation out. After its last attempt (12 by default) it is `failed`, with an
//! [`OutboxRecord::AttemptsExhausted`](crate::ledger::OutboxRecord) row on the channel's ledger
//! and one `error` event at target `mesh_egress::egress` naming the conversation, never the
//! text. The time is on the store's clock as this process counts it (migration 0005): the
//! database's clock read once at [`Store::open`] and counted on with Tokio's, so processes on
//! hosts whose clocks disagree agree on it and a paused test clock moves it;
//! [`Store::next_attempt_on`] says how long a worker may sleep.
//!
//! Retries count the surface's answers, never the [fencing](#fencing)'s: a part handed back
//! because its ownership was lost (no try, or no further try, under a lapsed lease) is due
//! again at once and never given up for it; and the `failed` mark of a last attempt is fenced
//! like every mark after a send, so a stale sender whose lease moved on gives nothing up (no
//! ledger row, no event): the new holder finds the row `sending` and settles it.
//!
//! # Store failures
//!
//! When the journal cannot write before a call (SQLite busy past its timeout, a PostgreSQL
//! failover), that is not a lost ownership: the conversation is still this process's, only
//! the record is missing. The journal refuses the call as a store failure
//! (`CallRefused::store_failed`): the
//! stream stops, and the parts it had marked for earlier calls and the surface never showed
//! (a block whose edit was rate limited, say) go back to `pending`, best effort. The boundary
//! sends nothing more and ends the turn with
//! `DeliveryError::Commit(CommitError::Store(..))` ([`is_store_failure`](crate::channel::DeliveryError::is_store_failure)) (`turn` exits 1 with one
//! `error:` line, never a cause); the blocks committed after the failure, and those handed
//! back, are `pending` for a [`Worker`](crate::worker::Worker), which sends them once the
//! store answers again. When even the hand-back cannot be written, those rows stay `sending`
//! and a resend settles them by the unknown-outcome rules of [streamed parts](#streamed-parts)
//! (`uncertain` by default, on the ledger): never sent twice, though a block the person never
//! saw may then be kept from them. Tests make the journal fail with the test-only hook
//! `Store::fail_journal_writes` (feature `failpoints`) or the failpoint `journal_unwritable`.
//!
//! # Fencing
//!
//! Every try a connector makes, and every call of a surface's stream, first re-checks the
//! ownership of what it carries, in memory (a lease whose renewal failed is revoked already;
//! one whose expiry passed on this process's clock no longer holds): no database round trip on
//! the healthy path. No try starts whose request timeout could outlast the lease: the timeout
//! is cut to the lease's time left, and when less is left than a whole timeout and than half
//! the lease's length (a healthy renewal, every third of it, never lets it fall so low) the
//! part goes back to `pending` untried, for the renewed lease or the next holder.
//!
//! Starting a send (the claim), a commit and the journal's mark before a call need the lease
//! unexpired in the database. Every mark after a send or a call needs the lease it was made
//! under to be the conversation's latest (its holder and token; expired or not), so a stale
//! sender's mark never lands on a row a new holder has claimed: the new holder's token is
//! greater.
//!
//! # Crash points
//!
//! With the test-only feature `failpoints`, a process whose `MESH_FAILPOINT` names one of
//! these stops there (see the crash tests): `after_commit` (the message's parts are committed,
//! none is sent yet), `between_parts` (a part is sent and marked, the next is not claimed),
//! `after_send_before_mark` (the surface accepted a part, the outbox has not marked it),
//! `between_stream_calls` (a surface's stream confirmed earlier parts and they are `sent`; the
//! next call's parts are marked `sending` and that call has not gone), `drafts_only` (a
//! Telegram reply is on screen as a draft only; nothing of it is `sending`), and in the worker
//! `follow_up_claimed` (a due promise is claimed, nothing delivered) and `follow_up_committed`
//! (the follow-up and the commitment's end are committed, nothing sent). One point fails
//! instead of stopping: `journal_unwritable` (see [store failures](#store-failures)).
//!
//! # Leases and time
//!
//! [`Store::acquire`] gives a [`Lease`] on a conversation: a holder name, an expiry recorded in
//! the database's clock, and a fencing token strictly greater than every earlier token for that
//! conversation. [`Lease::ownership`] is an [`Ownership`](crate::Ownership) that holds while the
//! expiry is ahead (translated to this process's clock, erring early) and that a failed
//! renewal or a release revokes. A durable commit and every send's claim re-check holder and
//! token in the database, so a worker whose lease moved on cannot commit or send even if it
//! still believes it holds the lease, and every mark after a send is fenced too
//! ([fencing](#fencing)). A message without a lease-backed ownership is committed and
//! claimed unfenced: keeping one sender per conversation is then the caller's business (commits
//! on one conversation are still serialised, so a resend goes in commit order).
//! [`Store::keep_renewed`] renews a lease in the background; [`Lease::ttl_from_env`] reads
//! `MESH_WORKER_LEASE_MS`.

mod backend;
mod claims;
mod commitments;
mod durable_ledger;
mod follow_up;
mod lease;
mod outbox;
mod part_retry;
mod readdress;
mod resend;
mod retention;
mod stream;
mod typed_input;
#[cfg(feature = "web")]
mod web_chats;

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;

#[cfg(doc)]
use crate::address::Surface;
use crate::address::{Address, AddressError};

pub(crate) use claims::{DestinationKey, OpenDestination};
pub use commitments::{
    Claim, CommitmentEnd, CommitmentStatus, FollowUpPlan, FollowUpTask, PendingWork,
    StoredCommitment,
};
pub use durable_ledger::DurableLedger;
pub use follow_up::Sealing;
pub use lease::{Lease, Renewal};
pub use outbox::{Durable, UnknownOutcome};
pub use part_retry::PartRetry;
pub use readdress::Readdressed;
pub use resend::ResendReport;
pub use retention::PruneReport;
#[cfg(feature = "web")]
pub(crate) use web_chats::{ChatAccess, Transcript};
#[cfg(all(feature = "web", test))]
pub(crate) use web_chats::{DeliveredRow, TurnRow};

use backend::{Pool, Sql, on_pool};

/// A durable store: the outbox and the conversation leases, on SQLite or PostgreSQL. Clones
/// share one connection pool.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    sql: Sql,
    clock: Clock,
    /// Test-only (feature `failpoints`): how many more journal writes fail.
    #[cfg(feature = "failpoints")]
    journal_failures: std::sync::atomic::AtomicU32,
}

/// The store's clock as this process counts it: the database's clock read once when the store
/// opened, counted on with Tokio's monotonic clock. Part retries are scheduled on it (see
/// migration 0005): every process reads the same database, so hosts whose wall clocks disagree
/// agree on it, and a paused test clock moves it (time-dependent logic runs on `tokio::time`).
/// Leases stay on the database's own clock.
#[derive(Clone, Copy, Debug)]
struct Clock {
    /// The database's clock, in milliseconds since the Unix epoch, when it was read.
    read_ms: i64,
    /// When that answer arrived.
    at: tokio::time::Instant,
}

impl Clock {
    fn now_ms(&self) -> i64 {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.at);
        self.read_ms.saturating_add(millis(elapsed))
    }
}

impl Store {
    /// Opens the store `url` names, creating and migrating it: `sqlite:PATH` (feature
    /// `sqlite`) or `postgres://…` (feature `postgres`).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnsupportedUrl`] for a scheme other than `sqlite:` or `postgres://`,
    /// [`StoreError::BackendDisabled`] when the backend's feature is off,
    /// [`StoreError::NotDurable`] for an in-memory SQLite database, [`StoreError::Database`]
    /// when the database cannot be opened or read, and [`StoreError::Migrate`] when the
    /// migrations cannot be applied.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let (pool, sql) = backend::open(url).await?;
        let read_ms: i64 = on_pool!(&pool, pool => {
            sqlx::query(&sql.clock)
                .fetch_one(pool)
                .await
                .and_then(|row| row.try_get("now_ms"))
                .map_err(StoreError::database)?
        });
        let clock = Clock {
            read_ms,
            at: tokio::time::Instant::now(),
        };
        tracing::debug!(target: "mesh_egress::store", backend = pool.name(), "store opened");
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                sql,
                clock,
                #[cfg(feature = "failpoints")]
                journal_failures: std::sync::atomic::AtomicU32::new(0),
            }),
        })
    }

    /// Test-only (feature `failpoints`, never on in production): the next `writes` writes of
    /// a stream's journal fail as a database that stopped answering would (see
    /// [store failures](self#store-failures)). Clones of this store share it; other stores,
    /// even on the same database, do not.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub fn fail_journal_writes(&self, writes: u32) {
        self.inner
            .journal_failures
            .store(writes, std::sync::atomic::Ordering::SeqCst);
    }

    /// The failpoint `name` makes the next journal write fail, once per process (feature
    /// `failpoints`; inert without it).
    pub(crate) fn inject_failure_at(&self, name: &'static str) {
        #[cfg(feature = "failpoints")]
        if crate::failpoint::fails_once(name) {
            self.fail_journal_writes(1);
        }
        #[cfg(not(feature = "failpoints"))]
        let _ = name;
    }

    /// Whether the next journal write fails (only ever with the feature `failpoints`).
    #[inline]
    pub(crate) fn take_injected_failure(&self) -> bool {
        #[cfg(feature = "failpoints")]
        {
            use std::sync::atomic::Ordering;
            self.inner
                .journal_failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        }
        #[cfg(not(feature = "failpoints"))]
        false
    }

    /// The store's clock as this process counts it, in milliseconds since the Unix epoch: the
    /// clock part retries are scheduled on (see [part retries](self#part-retries)).
    pub(crate) fn clock_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// Wraps `channel` so its commits and sends go through this store's outbox. Every part
    /// is stored with the channel's [`address`](crate::channel::Channel::address), which also
    /// decides the [duplicate rules](self#duplicates-per-surface) its sends follow.
    pub fn channel<C: crate::channel::Channel>(&self, channel: C) -> Durable<C> {
        Durable::new(self.clone(), channel)
    }

    /// Every part recorded for `conversation`, in commit order: what operators and tests read.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails, [`StoreError::Corrupt`] for a row it
    /// cannot read (a negative index, an unknown state), and [`StoreError::BadAddress`] for a
    /// stored address that is not a valid one.
    pub async fn parts(&self, conversation: &str) -> Result<Vec<StoredPart>, StoreError> {
        let sql = &self.inner.sql.parts;
        on_pool!(&self.inner.pool, pool => {
            let rows = sqlx::query(sql)
                .bind(conversation)
                .fetch_all(pool)
                .await
                .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    Ok(StoredPart {
                        delivery: row.try_get("delivery").map_err(StoreError::database)?,
                        index: to_usize(row.try_get("part_index").map_err(StoreError::database)?)?,
                        total: to_usize(row.try_get("total").map_err(StoreError::database)?)?,
                        surface: row.try_get("surface").map_err(StoreError::database)?,
                        address: read_address(conversation, row.try_get::<Option<String>, _>("address").map_err(StoreError::database)?.as_deref())?,
                        text: row.try_get("body").map_err(StoreError::database)?,
                        state: PartState::parse(&row.try_get::<String, _>("state").map_err(StoreError::database)?)?,
                        platform_id: row.try_get("platform_id").map_err(StoreError::database)?,
                        attempts: u32::try_from(row.try_get::<i64, _>("attempts").map_err(StoreError::database)?).unwrap_or(u32::MAX),
                        maybe_delivered: row.try_get::<i64, _>("maybe_delivered").map_err(StoreError::database)? != 0,
                        streamed: row.try_get::<i64, _>("streamed").map_err(StoreError::database)? != 0,
                        last_error: row.try_get("last_error").map_err(StoreError::database)?,
                    })
                })
                .collect()
        })
    }

    /// Closes the pool, waiting for connections in use to come back.
    pub async fn close(&self) {
        on_pool!(&self.inner.pool, pool => pool.close().await)
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.inner.pool.name())
            .finish_non_exhaustive()
    }
}

impl Pool {
    fn name(&self) -> &'static str {
        match self {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(_) => "sqlite",
            #[cfg(feature = "postgres")]
            Pool::Postgres(_) => "postgres",
        }
    }
}

/// An address as the store writes it: validated, then its JSON text.
pub(crate) fn address_text(conversation: &str, address: &Address) -> Result<String, StoreError> {
    let bad = |error| StoreError::BadAddress {
        conversation: conversation.to_owned(),
        error,
    };
    address.validate().map_err(bad)?;
    serde_json::to_string(address).map_err(|e| bad(AddressError::Malformed(e.to_string())))
}

/// An address as the store reads it back: `None` for a row from before migration 0004, a
/// typed error for text that is not a valid address.
pub(crate) fn read_address(
    conversation: &str,
    text: Option<&str>,
) -> Result<Option<Address>, StoreError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let bad = |error| StoreError::BadAddress {
        conversation: conversation.to_owned(),
        error,
    };
    // Bounded: a reader's message can quote what it read.
    let address: Address = serde_json::from_str(text)
        .map_err(|e| bad(AddressError::Malformed(outbox::bounded(e.to_string()))))?;
    address.validate().map_err(bad)?;
    Ok(Some(address))
}

fn to_usize(value: i64) -> Result<usize, StoreError> {
    usize::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative part index {value}")))
}

/// Where a part is in its life (see the [state table](self#part-states)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartState {
    /// Committed, not yet sent (or sent and refused with a "try later").
    Pending,
    /// A send is under way (or its sender died during it).
    Sending,
    /// The surface accepted it.
    Sent,
    /// It may or may not have reached the person; it is not sent again.
    Uncertain,
    /// The surface refused it for good (or refused an earlier part of its message).
    Failed,
}

impl PartState {
    /// The name stored in the outbox.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Sent => "sent",
            Self::Uncertain => "uncertain",
            Self::Failed => "failed",
        }
    }

    fn parse(raw: &str) -> Result<Self, StoreError> {
        Ok(match raw {
            "pending" => Self::Pending,
            "sending" => Self::Sending,
            "sent" => Self::Sent,
            "uncertain" => Self::Uncertain,
            "failed" => Self::Failed,
            other => return Err(StoreError::Corrupt(format!("unknown part state {other:?}"))),
        })
    }
}

/// One outbox row, read back: a record, not something that can be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredPart {
    /// The delivery id, as [`DeliveryId`](crate::DeliveryId) displays it.
    pub delivery: String,
    /// Position in the message, from 0.
    pub index: usize,
    /// How many parts the message has.
    pub total: usize,
    /// The surface it was committed for.
    pub surface: String,
    /// Where it goes: the address of the channel it was committed through. `None` for a row
    /// from before migration 0004, which is never sent to a guessed destination (see
    /// [rows without an address](self#rows-without-an-address)).
    pub address: Option<Address>,
    /// The exact payload.
    pub text: String,
    /// Where it is.
    pub state: PartState,
    /// The surface's id for it, once sent.
    pub platform_id: Option<String>,
    /// How many sends were started.
    pub attempts: u32,
    /// Whether an attempt may have reached the surface without being confirmed.
    pub maybe_delivered: bool,
    /// Whether its last attempt went through a surface's own stream (a growing message; see
    /// [streamed parts](self#streamed-parts)) rather than a message of its own.
    pub streamed: bool,
    /// Why the last attempt did not succeed, if it did not (never a request body).
    pub last_error: Option<String>,
}

/// Why the store could not do something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL's scheme names no backend (`sqlite:` or `postgres://`).
    #[error("unsupported store URL scheme {scheme:?}: use sqlite:PATH or postgres://")]
    UnsupportedUrl {
        /// The scheme found.
        scheme: String,
    },
    /// The URL names a backend whose feature is off.
    #[error("this build of mesh-egress has no {feature} store (enable the `{feature}` feature)")]
    BackendDisabled {
        /// The feature to enable.
        feature: &'static str,
    },
    /// An in-memory SQLite database was asked for; it would not survive a restart.
    #[error("an in-memory database is not a durable store: give sqlite a file path")]
    NotDurable,
    /// The database refused or failed.
    #[error("the store's database failed")]
    Database(#[source] Box<dyn StdError + Send + Sync>),
    /// The shipped migrations could not be applied.
    #[error("the store's migrations could not be applied")]
    Migrate(#[source] Box<dyn StdError + Send + Sync>),
    /// Another holder has a live lease on the conversation.
    #[error("conversation {conversation:?} is leased to {holder:?} for another {remaining:?}")]
    LeaseHeld {
        /// The conversation.
        conversation: String,
        /// Who holds it.
        holder: String,
        /// How long its lease still runs (database clock).
        remaining: Duration,
    },
    /// The lease expired or moved on to another holder.
    #[error("the lease on conversation {conversation:?} was lost")]
    LeaseLost {
        /// The conversation.
        conversation: String,
    },
    /// The part is not `pending` in this outbox: already sent, `uncertain` or `failed`, being
    /// sent by someone else, committed elsewhere, or its lease moved on. It was not sent.
    #[error(
        "part {index} of delivery {delivery} is not pending in the outbox (or its lease moved on); not sent"
    )]
    NotClaimable {
        /// The delivery id.
        delivery: String,
        /// The part's index.
        index: usize,
    },
    /// A row the store wrote cannot be read back.
    #[error("the store holds a row it cannot read: {0}")]
    Corrupt(String),
    /// An address the store was given, or holds, is not a valid one (checked by
    /// [`Address::validate`]): a part or commitment is never written or read with it.
    #[error("conversation {conversation:?} has an address the store cannot use")]
    BadAddress {
        /// The conversation.
        conversation: String,
        /// What is wrong with it.
        #[source]
        error: AddressError,
    },
    /// Something that runs in the background (the durable ledger's writer) was asked for
    /// outside a Tokio runtime.
    #[error("the store needs a Tokio runtime for this (call it from async code)")]
    NoRuntime,
    /// Ledger rows could not be written (they were logged at `error` on target
    /// `mesh_egress::store`).
    #[error("{rows} ledger row(s) could not be written to the store")]
    LedgerRowsLost {
        /// How many, since the last flush.
        rows: u64,
    },
}

impl StoreError {
    fn database(error: sqlx::Error) -> Self {
        Self::Database(Box::new(error))
    }

    fn migrate(error: sqlx::migrate::MigrateError) -> Self {
        Self::Migrate(Box::new(error))
    }
}

/// Milliseconds of a duration as the store's integer, saturating.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
