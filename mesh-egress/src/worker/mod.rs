//! [`Worker`]: keeps durable promises and finishes what crashed or replaced processes left in
//! the outbox (features `sqlite`, `postgres`).
//!
//! A worker is built from a [`Bot`] ([`Bot::worker`]) and holds its [`SurfaceClient`]s, one per
//! surface (a `SlackClient` per bot token, say, and a `DiscordClient`), not channels: every part and commitment in the store
//! carries the [`Address`] of its conversation, and the worker makes the
//! channel for that address from the client of its surface. One worker so serves every
//! conversation of every surface it has a client for, each in its own chat. Each pass it
//!
//! 1. sends the parts still open in the outbox, surface by surface and destination by
//!    destination, under the conversation's lease ([`Store::resend`] through a durable channel
//!    to the stored address): one page of up to 64 destinations a surface, going on from
//!    where the last pass stopped, so every conversation is reached within a bounded number of
//!    passes (see [`Worker::pass`]); a part its surface did not take waits for its backoff and
//!    is given up after its last attempt ([`PartRetry`], [`with_part_retry`](Worker::with_part_retry)), and
//! 2. claims due commitments one at a time, surface by surface ([`Store::claim_due_on`]:
//!    PostgreSQL skips rows another worker is claiming, SQLite has one writer) and keeps each:
//!    it takes the conversation's lease (fencing) and renews lease and claim in the background,
//!    sends what the conversation still has open for the commitment's address, then re-runs the
//!    bot's route registered under the stored name with the stored input (read back as the
//!    route's input type) on a follow-up turn in the stored mode, and puts its reply through
//!    the bot's one path (the bot's gate once, render first, Layer C once) to the stored address
//!    through the outbox, with the commitment ended **in the same transaction** as the
//!    follow-up's parts ([`Durable::sealing`](crate::store::Durable::sealing)).
//!
//! A failed try goes back on the stored plan ([`Store::retry_later`]); the last failed try (or
//! one that cannot be retried) goes through the boundary as a non-retryable error, so the
//! stored mode decides: interactive hands off, proactive stays silent (`cancelled`). Losing
//! the claim or the lease stops the try: nothing is committed, the new holder decides. A
//! shutdown ([`Cancellation`]) while a handler runs gives the claim back untried
//! ([`Store::release_claim`]) and releases the lease, so another worker takes it at once;
//! once a follow-up is committed it is finished first.
//!
//! At most one follow-up message per commitment reaches the person: the commitment ends with
//! the commit of its follow-up, fenced on the claim, and the outbox's duplicate rules (see
//! [`store`](crate::store#duplicates-per-surface)) cover the sends. Store events log at target
//! `mesh_egress::store`.
//!
//! # What a worker does not send
//!
//! | stored row | what the worker does |
//! |---|---|
//! | waiting for its backoff ([`PartRetry`]) | nothing until its next-attempt time: its conversation is left out of the pass (the worker sleeps no longer than until then); after its last attempt, `failed` with an [`OutboxRecord::AttemptsExhausted`](crate::ledger::OutboxRecord) row and one `error` event at `mesh_egress::egress` |
//! | on a surface it has no client for | nothing: left `pending` for a worker that has one; one `warn` per surface for the worker's lifetime |
//! | an address its client refuses ([`UnservedAddress`]) | nothing: left `pending`; one `warn` per address |
//! | no address (before migration 0004), or one it cannot read | a part: `failed`; a commitment: ended `cancelled`; an [`OutboxRecord::Unaddressed`](crate::ledger::OutboxRecord)/`UnaddressedCommitment` row on the store's ledger; one `warn` per conversation per pass. [`Store::readdress`] sends them after all |
//!
//! ```no_run
//! use mesh_egress::channel::{DiscordClient, SlackClient};
//! use mesh_egress::store::Store;
//! use mesh_egress::{egress_boundary, AgentMessage, Bot, Cancellation, EgressError, Turn};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Question { text: String }
//!
//! #[egress_boundary(interactive)]
//! async fn answer(turn: &Turn, question: Question) -> Result<AgentMessage, EgressError> {
//!     // `turn.address()` is the conversation's chat; the answer goes there.
//!     Ok(turn.message(format!("Here it is: {}", question.text)))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bot = Bot::new()
//!     .with_client(SlackClient::new(std::env::var("SLACK_BOT_TOKEN")?))
//!     .with_client(DiscordClient::new(std::env::var("DISCORD_BOT_TOKEN")?))
//!     .with_store(Store::open("sqlite:/var/lib/mesh/outbox.db").await?);
//! // The same route the turns ran: a stored promise names it, with its input.
//! let _answer = bot.route("answer", |turn: Turn, question: Question| async move {
//!     answer(&turn, question).await
//! });
//! let worker = bot.worker("worker-a").expect("the bot has a store");
//! let report = worker.run_once(&Cancellation::new()).await?;
//! # let _ = report; Ok(()) }
//! ```

mod keep;

mod unaddressed;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub use keep::Kept;

use crate::address::{Address, Surface};
use crate::bot::Bot;
use crate::channel::{BoxedChannel, SurfaceClient, UnservedAddress};
use crate::ledger::Ledger;
use crate::ownership::Cancellation;
use crate::store::{
    DestinationKey, Durable, FollowUpPlan, OpenDestination, PartRetry, PendingWork, ResendReport,
    Store, StoreError, UnknownOutcome,
};

/// How long a worker sleeps between passes when there was nothing to do.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// How many destinations with open parts one pass looks at, per surface: one page of the walk
/// (see [`Worker::pass`]).
const RESEND_BATCH: u32 = 64;
/// How many times one pass reads a surface's page again after finding a destination another
/// worker took (see `Worker::resend_page`).
const PAGE_READS: usize = 4;
/// How often a worker looks for work on the surfaces it has no client for (to warn once).
const UNSERVED_CHECK: Duration = Duration::from_secs(60);
/// How many refused addresses a worker remembers having warned about.
const MAX_REFUSED_REPORTS: usize = 1024;

/// Keeps durable commitments and sends what the outbox still holds, on every surface it has a
/// client for (see the [module docs](self)).
pub struct Worker {
    /// The bot the worker keeps promises for: its routes, gate, policies and clients.
    bot: Bot,
    store: Store,
    holder: String,
    outbox: Outbox,
    ttl: Duration,
    poll: Duration,
    reports: Mutex<Reports>,
    /// Where each surface's walk over its open destinations stands.
    cursors: Mutex<HashMap<Surface, DestinationKey>>,
    /// Where in a page this worker starts (from its holder name), so workers reading the same
    /// page start apart.
    offset: usize,
}

/// How the worker's durable channels treat what they cannot settle (see [`Durable`]).
#[derive(Clone, Default)]
struct Outbox {
    ledger: Option<Ledger>,
    unknown_outcome: UnknownOutcome,
    dedupe_window: Option<Duration>,
    retry: PartRetry,
}

/// What visiting one destination of a page came to.
enum Visit {
    /// Its lease was ours and its open parts went through the outbox's rules.
    Resent,
    /// Another holder took its lease since the page was read.
    Taken,
    /// Nothing to send here: no client can serve it, or it had no readable address.
    Left,
}

/// What the worker has warned about, so each warning goes out once.
#[derive(Default)]
struct Reports {
    /// Conversations whose rows without an address were ended in this pass.
    unaddressed: HashSet<String>,
    /// Surfaces with work and no client.
    unserved: HashSet<Surface>,
    /// Addresses a client refused (bounded).
    refused: HashSet<Address>,
    /// When the surfaces without a client were last looked at.
    checked: Option<tokio::time::Instant>,
}

/// What a worker did, summed over its passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Commitments ended `fulfilled` (the answer was committed with the end).
    pub fulfilled: u32,
    /// Commitments ended `handed_off`.
    pub handed_off: u32,
    /// Commitments ended `cancelled`.
    pub cancelled: u32,
    /// Failed tries put back on the plan.
    pub retried: u32,
    /// Claims given back untried (shutdown, or another holder had the conversation).
    pub released: u32,
    /// Tries stopped because the claim or the lease moved on.
    pub lost: u32,
    /// Outbox parts sent.
    pub parts_sent: usize,
    /// Outbox parts marked `uncertain`.
    pub parts_uncertain: usize,
    /// Outbox parts the surface refused.
    pub parts_failed: usize,
    /// Outbox parts marked `failed` because they were stored without a (readable) address.
    pub parts_unaddressed: usize,
    /// Commitments ended `cancelled` because they were stored without a (readable) address.
    pub unaddressed: u32,
}

impl WorkerReport {
    fn count(&mut self, kept: Kept) {
        match kept {
            Kept::Fulfilled => self.fulfilled += 1,
            Kept::HandedOff => self.handed_off += 1,
            Kept::Cancelled => self.cancelled += 1,
            Kept::RetryLater => self.retried += 1,
            Kept::Released => self.released += 1,
            Kept::Lost => self.lost += 1,
            Kept::Unaddressed => self.unaddressed += 1,
        }
    }

    fn add_resend(&mut self, resend: &ResendReport) {
        self.parts_sent += resend.sent;
        self.parts_uncertain += resend.uncertain;
        self.parts_failed += resend.failed;
    }

    fn absorb(&mut self, other: WorkerReport) {
        self.fulfilled += other.fulfilled;
        self.handed_off += other.handed_off;
        self.cancelled += other.cancelled;
        self.retried += other.retried;
        self.released += other.released;
        self.lost += other.lost;
        self.parts_sent += other.parts_sent;
        self.parts_uncertain += other.parts_uncertain;
        self.parts_failed += other.parts_failed;
        self.parts_unaddressed += other.parts_unaddressed;
        self.unaddressed += other.unaddressed;
    }

    /// Whether the pass moved anything forward (a promise ended or rescheduled, a part
    /// settled); a pass that only gave claims back or lost them waits before the next.
    fn made_progress(&self) -> bool {
        self.fulfilled + self.handed_off + self.cancelled + self.retried + self.unaddressed > 0
            || self.parts_sent + self.parts_uncertain + self.parts_failed + self.parts_unaddressed
                > 0
    }
}

impl Bot {
    /// The worker that keeps this bot's durable promises and finishes what its outbox holds,
    /// built from the same value: the store, the clients (one per surface), the policies, the
    /// gate and the routes (a promise's follow-up is its route re-run with the stored input,
    /// through the bot's one path). `None` without a store. `holder` names the worker process
    /// (unique per process: claims and leases are held in its name).
    ///
    /// The lease length is `MESH_WORKER_LEASE_MS` (see
    /// [`Lease::ttl_from_env`](crate::store::Lease::ttl_from_env)) and the per-part retries
    /// `MESH_WORKER_RETRY_BASE_MS`, `MESH_WORKER_RETRY_MAX_MS` and `MESH_WORKER_MAX_ATTEMPTS`
    /// (see [`PartRetry::from_env`](crate::store::PartRetry::from_env)), until set with the
    /// worker's `with_*`.
    pub fn worker(&self, holder: impl Into<String>) -> Option<Worker> {
        let store = self.store()?.clone();
        Some(Worker::new(self.clone(), store, holder.into()))
    }
}

impl Worker {
    /// A worker for `bot` on its `store`.
    pub(crate) fn new(bot: Bot, store: Store, holder: String) -> Self {
        let ledger = bot.store_ledger();
        Self {
            bot,
            store,
            holder,
            outbox: Outbox {
                retry: crate::store::PartRetry::from_env().0,
                ledger,
                ..Outbox::default()
            },
            ttl: crate::store::Lease::ttl_from_env().0,
            poll: DEFAULT_POLL,
            reports: Mutex::new(Reports::default()),
            cursors: Mutex::new(HashMap::new()),
            offset: 0,
        }
        .with_offset()
    }

    /// Spreads workers over the page of destinations: each starts at its own offset.
    fn with_offset(mut self) -> Self {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.holder.hash(&mut hasher);
        self.offset = usize::try_from(hasher.finish() % u64::from(RESEND_BATCH)).unwrap_or(0);
        self
    }

    /// The clients the worker delivers with: the bot's, one per surface.
    fn clients(&self) -> &BTreeMap<Surface, Arc<dyn SurfaceClient>> {
        self.bot.clients()
    }

    /// What the worker's durable channels do with a part whose outcome cannot be settled
    /// (see [`Durable::with_unknown_outcome`]).
    pub fn with_unknown_outcome(mut self, policy: UnknownOutcome) -> Self {
        self.outbox.unknown_outcome = policy;
        self
    }

    /// How long after its first attempt a part may still be re-sent on a surface that
    /// dedupes (see [`Durable::with_dedupe_window`]).
    pub fn with_dedupe_window(mut self, window: Duration) -> Self {
        self.outbox.dedupe_window = Some(window);
        self
    }

    /// When a part the worker could not send is tried again, and after how many attempts it is
    /// given up (see [`PartRetry`]; by default from the environment, as
    /// [`Bot::worker`] says).
    pub fn with_part_retry(mut self, retry: PartRetry) -> Self {
        self.outbox.retry = retry;
        self
    }

    /// How long a claim or a conversation lease lasts without renewal (renewed every third
    /// of it while held): a killed worker's work is taken over after at most this long.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// How long [`run`](Self::run) and [`run_once`](Self::run_once) wait between passes that
    /// found nothing to do.
    pub fn with_poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// The store the worker serves.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The surfaces the worker has a client for, in a fixed order.
    pub fn surfaces(&self) -> impl Iterator<Item = Surface> + '_ {
        self.clients().keys().copied()
    }

    /// The name the worker holds claims and leases under.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// One pass: sends the parts open on the surfaces the worker has a client for, each to
    /// its stored address, then claims and keeps due commitments one at a time, surface by
    /// surface, until none is due or `shutdown` fires.
    ///
    /// The open parts of a surface are walked destination by destination in (conversation,
    /// address) order, one page of up to 64 destinations a pass, each pass going on from where
    /// the last one stopped and starting over once a page comes back short (a cursor). Left out
    /// of a page: destinations whose first open part waits for its backoff
    /// ([`PartRetry`]), and conversations another holder has a live lease on. So however many
    /// conversations are busy or failing, a destination with a part due is reached within
    /// `⌈due destinations / 64⌉ + 1` passes: none waits behind the others forever.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when the store fails during the pass; what was done before it stays
    /// done. A conversation another holder leases, or a part the surface refuses, is not an
    /// error.
    pub async fn pass(&self, shutdown: &Cancellation) -> Result<WorkerReport, StoreError> {
        let mut report = WorkerReport::default();
        self.lock_reports().unaddressed.clear();
        self.report_unserved().await?;
        let store = self.store();
        for (&surface, client) in self.clients() {
            if !self
                .resend_page(surface, client.as_ref(), shutdown, &mut report)
                .await?
            {
                return Ok(report);
            }
        }
        for &surface in self.clients().keys() {
            while !shutdown.is_cancelled() {
                let Some(claim) = store
                    .claim_due_on(surface, &self.holder, self.ttl, 1)
                    .await?
                    .pop()
                else {
                    break;
                };
                let kept = self.keep(&claim, shutdown).await?;
                report.count(kept);
                if kept == Kept::Released {
                    // Its conversation is busy (or we are stopping): the next pass tries again.
                    break;
                }
            }
        }
        Ok(report)
    }

    /// Sends one page of `surface`'s open destinations, from where the last page ended; `false`
    /// when `shutdown` fired meanwhile.
    ///
    /// Workers walking the same surface read the same pages, so each starts its page at its
    /// own offset (from a hash of its holder name) and, once it finds a destination another
    /// worker took since the page was read, reads the page again (what is done or taken is no
    /// longer in it) rather than try the rest one by one: a few page reads instead of a failed
    /// lease per destination and worker. At most [`PAGE_READS`] reads a pass.
    async fn resend_page(
        &self,
        surface: Surface,
        client: &dyn SurfaceClient,
        shutdown: &Cancellation,
        report: &mut WorkerReport,
    ) -> Result<bool, StoreError> {
        let after = self.lock_cursors().get(&surface).cloned();
        let mut page = Vec::new();
        for _ in 0..PAGE_READS {
            page = self
                .store
                .open_destinations(surface, &self.holder, after.as_ref(), RESEND_BATCH)
                .await?;
            if page.is_empty() {
                break;
            }
            let offset = self.offset % page.len();
            let mut sent_any = false;
            let mut taken = false;
            for destination in page[offset..].iter().chain(&page[..offset]) {
                if shutdown.is_cancelled() {
                    return Ok(false);
                }
                match self
                    .resend_destination(surface, client, destination, report)
                    .await?
                {
                    Visit::Taken if sent_any => {
                        taken = true;
                        break;
                    }
                    Visit::Taken | Visit::Left => {}
                    Visit::Resent => sent_any = true,
                }
            }
            if !taken {
                break;
            }
        }
        let mut cursors = self.lock_cursors();
        match page.last() {
            Some(last) if page.len() >= RESEND_BATCH as usize => {
                cursors.insert(surface, last.key())
            }
            _ => cursors.remove(&surface),
        };
        Ok(true)
    }

    /// Passes until nothing is pending or due on the surfaces the worker has a client for
    /// (due-later commitments do not count; one whose claim expired does), or until
    /// `shutdown` fires. Work on other surfaces is left to their workers; parts a client of
    /// this worker refuses to serve ([`UnservedAddress`], which the HTTP clients never do for
    /// their own surface) keep it waiting, as work another holder has does.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when the store fails during a pass or while counting what is left; what
    /// was done before it stays done.
    pub async fn run_once(&self, shutdown: &Cancellation) -> Result<WorkerReport, StoreError> {
        let mut total = WorkerReport::default();
        loop {
            let report = self.pass(shutdown).await?;
            let idle = !report.made_progress();
            total.absorb(report);
            if shutdown.is_cancelled() || self.served_work().await?.is_idle() {
                return Ok(total);
            }
            // Work is left that someone else holds (a live lease, a claim about to expire) or
            // that waits for its backoff: wait for it instead of spinning.
            if idle && !self.pause(shutdown).await {
                return Ok(total);
            }
        }
    }

    /// What is pending or due on the surfaces the worker serves.
    async fn served_work(&self) -> Result<PendingWork, StoreError> {
        let mut work = PendingWork::default();
        for &surface in self.clients().keys() {
            let on = self.store().pending_work_on(surface).await?;
            work.due_commitments += on.due_commitments;
            work.open_parts += on.open_parts;
        }
        Ok(work)
    }

    /// Passes until `shutdown` fires, waiting between passes that found nothing to do.
    ///
    /// # Errors
    ///
    /// None: a pass that fails (the store not answering) is logged at `warn`, and the next pass
    /// tries again.
    pub async fn run(&self, shutdown: &Cancellation) -> Result<WorkerReport, StoreError> {
        let mut total = WorkerReport::default();
        loop {
            let report = match self.pass(shutdown).await {
                Ok(report) => report,
                Err(error) => {
                    // A database hiccup is not a reason to stop keeping promises.
                    tracing::warn!(target: "mesh_egress::store", holder = %self.holder, error = %error, "worker pass failed; retrying");
                    WorkerReport::default()
                }
            };
            let idle = !report.made_progress();
            total.absorb(report);
            if shutdown.is_cancelled() || (idle && !self.pause(shutdown).await) {
                return Ok(total);
            }
        }
    }

    /// Keeps commitment `id` in this process on its own `plan` (the promise's maker, e.g.
    /// `turn --follow-up`): waits each backoff step, claims it ([`Store::claim_commitment`])
    /// and tries, until it ends. If another worker holds it meanwhile, waits for that one;
    /// if it ended elsewhere, says how. A shutdown while waiting returns
    /// [`Kept::Released`] (nothing is held).
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when the store fails while claiming, reading or ending the commitment.
    pub async fn keep_in_process(
        &self,
        id: crate::reply::CommitmentId,
        plan: FollowUpPlan,
        shutdown: &Cancellation,
    ) -> Result<Kept, StoreError> {
        use crate::store::CommitmentStatus;
        let store = self.store();
        let mut next = 1;
        loop {
            if !sleep_unless(plan.delay_before(next), shutdown).await {
                return Ok(Kept::Released);
            }
            let claim = loop {
                if let Some(claim) = store.claim_commitment(id, &self.holder, self.ttl).await? {
                    break claim;
                }
                match store.commitment_status(id).await? {
                    Some(CommitmentStatus::Fulfilled) => return Ok(Kept::Fulfilled),
                    Some(CommitmentStatus::HandedOff) => return Ok(Kept::HandedOff),
                    Some(CommitmentStatus::Cancelled) | None => return Ok(Kept::Cancelled),
                    // Another worker holds a live claim: it ends it or gives it back.
                    Some(_) => {
                        if !self.pause(shutdown).await {
                            return Ok(Kept::Released);
                        }
                    }
                }
            };
            let tried = claim.attempts_made();
            match self.keep(&claim, shutdown).await? {
                Kept::RetryLater => next = tried.saturating_add(2),
                Kept::Released if !shutdown.is_cancelled() => next = tried.saturating_add(1),
                other => return Ok(other),
            }
        }
    }

    /// Sends what `destination` (a conversation and its stored address) had open when its
    /// page was read, on `surface`, through `client`; ends it when it has no readable address.
    async fn resend_destination(
        &self,
        surface: Surface,
        client: &dyn SurfaceClient,
        destination: &OpenDestination,
        report: &mut WorkerReport,
    ) -> Result<Visit, StoreError> {
        let conversation = destination.conversation.as_str();
        let stored = destination.address.as_deref();
        let address = match crate::store::read_address(conversation, stored) {
            Ok(Some(address)) => address,
            Ok(None) => {
                self.end_unaddressed_parts(surface, conversation, None, report)
                    .await?;
                return Ok(Visit::Left);
            }
            Err(error) => {
                tracing::error!(target: "mesh_egress::store", conversation, error = %error, "stored parts have an address that cannot be read");
                self.end_unaddressed_parts(surface, conversation, stored, report)
                    .await?;
                return Ok(Visit::Left);
            }
        };
        let channel = match client.channel_for(&address) {
            Ok(channel) => channel,
            Err(refused) => {
                self.report_refused(&refused);
                return Ok(Visit::Left);
            }
        };
        let durable = self.durable(channel);
        Ok(
            match self.resend_conversation(destination, &durable).await? {
                Some(resend) => {
                    report.add_resend(&resend);
                    Visit::Resent
                }
                None => Visit::Taken,
            },
        )
    }

    /// Sends the parts `destination` had open through `channel`, under its lease: four
    /// statements for a healthy one-part message (the lease, the part found and claimed, its
    /// mark, the release). `None` when the lease is not the one the page saw (another holder
    /// took the conversation meanwhile: it sends them, or the next pass finds what is left).
    async fn resend_conversation(
        &self,
        destination: &OpenDestination,
        channel: &Durable<BoxedChannel>,
    ) -> Result<Option<ResendReport>, StoreError> {
        let store = self.store();
        let conversation = destination.conversation.as_str();
        let Some(lease) = store
            .acquire_seen(conversation, &self.holder, self.ttl, destination.token)
            .await?
        else {
            return Ok(None);
        };
        let renewal = store.keep_renewed(&lease, self.ttl);
        let resent = store
            .resend_up_to(channel, &lease, destination.open.max(1))
            .await;
        drop(renewal);
        store.release(lease).await?;
        match resent {
            Ok(report) => Ok(Some(report)),
            Err(StoreError::LeaseLost { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The channel to `address`, from the client of its surface.
    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match self.clients().get(&address.surface()) {
            Some(client) => client.channel_for(address),
            None => Err(UnservedAddress::new(address.surface(), address.clone())),
        }
    }

    /// `channel` through the store's outbox, with the worker's outbox settings.
    fn durable(&self, channel: BoxedChannel) -> Durable<BoxedChannel> {
        let mut durable = self
            .store
            .channel(channel)
            .with_unknown_outcome(self.outbox.unknown_outcome)
            .with_retry(self.outbox.retry);
        if let Some(window) = self.outbox.dedupe_window {
            durable = durable.with_dedupe_window(window);
        }
        match &self.outbox.ledger {
            Some(ledger) => durable.with_ledger(ledger.clone()),
            None => durable,
        }
    }

    fn lock_reports(&self) -> std::sync::MutexGuard<'_, Reports> {
        self.reports.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_cursors(&self) -> std::sync::MutexGuard<'_, HashMap<Surface, DestinationKey>> {
        self.cursors.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Warns once per surface that has work and no client here (looked at every minute at
    /// most, until every such surface was reported).
    async fn report_unserved(&self) -> Result<(), StoreError> {
        let now = tokio::time::Instant::now();
        let unserved: Vec<Surface> = {
            let mut reports = self.lock_reports();
            if reports
                .checked
                .is_some_and(|at| now.saturating_duration_since(at) < UNSERVED_CHECK)
            {
                return Ok(());
            }
            reports.checked = Some(now);
            Surface::ALL
                .into_iter()
                .filter(|s| !self.clients().contains_key(s) && !reports.unserved.contains(s))
                .collect()
        };
        for surface in unserved {
            let work = self.store().pending_work_on(surface).await?;
            if work.is_idle() {
                continue;
            }
            if self.lock_reports().unserved.insert(surface) {
                tracing::warn!(target: "mesh_egress::store", holder = %self.holder, surface = surface.as_str(), open_parts = work.open_parts, due_commitments = work.due_commitments, "work on a surface this worker has no client for: left pending for a worker that has one");
            }
        }
        Ok(())
    }

    /// Warns once per address a client refused to serve (the rows are left pending).
    fn report_refused(&self, refused: &UnservedAddress) {
        let mut reports = self.lock_reports();
        if reports.refused.len() < MAX_REFUSED_REPORTS
            && reports.refused.insert(refused.address().clone())
        {
            drop(reports);
            tracing::warn!(target: "mesh_egress::store", holder = %self.holder, address = %refused.address(), "the surface's client cannot send to this address: left pending");
        }
    }

    /// Waits one poll interval, or less when a part's backoff ends sooner; `false` when
    /// `shutdown` fired instead. (A database error here waits the whole interval.)
    async fn pause(&self, shutdown: &Cancellation) -> bool {
        let mut wait = self.poll;
        for &surface in self.clients().keys() {
            if let Ok(Some(next)) = self.store().next_attempt_on(surface).await {
                wait = wait.min(next);
            }
        }
        sleep_unless(wait, shutdown).await
    }
}

/// Sleeps `duration`; `false` when `shutdown` fired first.
async fn sleep_unless(duration: Duration, shutdown: &Cancellation) -> bool {
    tokio::select! {
        biased;
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(duration) => true,
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let handlers = self.bot.route_names();
        let surfaces: Vec<Surface> = self.surfaces().collect();
        f.debug_struct("Worker")
            .field("holder", &self.holder)
            .field("surfaces", &surfaces)
            .field("ttl", &self.ttl)
            .field("routes", &handlers)
            .finish_non_exhaustive()
    }
}
