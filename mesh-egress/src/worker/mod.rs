//! [`Worker`]: keeps durable promises and finishes what crashed or replaced processes left in
//! the outbox (features `sqlite`, `postgres`).
//!
//! A worker serves one surface through one [`Durable`] channel. Each pass it
//!
//! 1. sends the parts still open in the outbox for its surface, conversation by conversation,
//!    under the conversation's lease ([`Store::resend`]), and
//! 2. claims due commitments one at a time ([`Store::claim_due_on`]: PostgreSQL skips rows
//!    another worker is claiming, SQLite has one writer) and keeps each: it takes the
//!    conversation's lease (fencing) and renews lease and claim in the background, sends what
//!    the conversation still has open, re-runs the [`Handler`] registered under the stored
//!    name, re-runs the gate from the stored settings (feature `gate`, see
//!    [`Worker::with_gate`]), puts the result through [`resolve_in`](crate::boundary::resolve_in)
//!    with the stored mode, and delivers through the outbox with the commitment ended **in the
//!    same transaction** as the follow-up's parts ([`Durable::sealing`]).
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
//! ```no_run
//! use mesh_egress::channel::Recorder;
//! use mesh_egress::store::{FollowUpTask, Store, Surface};
//! use mesh_egress::worker::Worker;
//! use mesh_egress::{Cancellation, EgressError, Turn};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::open("sqlite:/var/lib/mesh/outbox.db").await?;
//! let worker = Worker::new(store.channel(Recorder::new(), Surface::Plain), "worker-a")
//!     .register("answer", |task: FollowUpTask, turn: Turn| async move {
//!         Ok::<_, EgressError>(turn.message(format!("Here it is: {}", task.input)))
//!     });
//! let shutdown = Cancellation::new();
//! let report = worker.run_once(&shutdown).await?;
//! # let _ = report; Ok(()) }
//! ```

mod handler;
mod keep;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use handler::{Handler, HandlerFuture};
pub use keep::Kept;

use crate::channel::Channel;
use crate::degrade::DegradationPolicy;
use crate::ownership::Cancellation;
use crate::store::{Durable, FollowUpPlan, ResendReport, Store, StoreError};

/// How long a worker sleeps between passes when there was nothing to do.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// How many conversations with open parts one pass looks at.
const RESEND_BATCH: u32 = 64;

#[cfg(feature = "gate")]
type GateFactory =
    Arc<dyn Fn(&crate::store::FollowUpTask) -> crate::gate::QualityGate + Send + Sync>;

/// Keeps durable commitments and sends what the outbox still holds, for one surface (see the
/// [module docs](self)).
pub struct Worker<C> {
    channel: Durable<C>,
    holder: String,
    ttl: Duration,
    poll: Duration,
    policy: DegradationPolicy,
    handlers: HashMap<String, Arc<dyn Handler>>,
    #[cfg(feature = "gate")]
    gate: Option<GateFactory>,
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
    }

    /// Whether the pass moved anything forward (a promise ended or rescheduled, a part
    /// settled); a pass that only gave claims back or lost them waits before the next.
    fn made_progress(&self) -> bool {
        self.fulfilled + self.handed_off + self.cancelled + self.retried > 0
            || self.parts_sent + self.parts_uncertain + self.parts_failed > 0
    }
}

impl<C: Channel> Worker<C> {
    /// A worker delivering through `channel` (its surface decides which commitments and parts
    /// it serves), holding claims and leases as `holder` (unique per worker process), with the
    /// lease length of `MESH_WORKER_LEASE_MS` (see
    /// [`lease_ttl_from_env`](crate::store::lease_ttl_from_env)) and the default policy's
    /// handoff line.
    pub fn new(channel: Durable<C>, holder: impl Into<String>) -> Self {
        Self {
            channel,
            holder: holder.into(),
            ttl: crate::store::lease_ttl_from_env().0,
            poll: DEFAULT_POLL,
            policy: DegradationPolicy::default(),
            handlers: HashMap::new(),
            #[cfg(feature = "gate")]
            gate: None,
        }
    }

    /// Registers `handler` under `name`, the name a stored commitment's task carries.
    pub fn register(mut self, name: impl Into<String>, handler: impl Handler) -> Self {
        self.handlers.insert(name.into(), Arc::new(handler));
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

    /// The policy whose handoff line the last failed try delivers.
    pub fn with_policy(mut self, policy: DegradationPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Re-runs a gate on every follow-up whose task stored gate settings: `make` builds it
    /// from the task (its [`gate`](crate::store::FollowUpTask::gate) settings and
    /// [`system_prompt`](crate::store::FollowUpTask::system_prompt)), as the original turn
    /// built its own. The gate reads the task's input as the user message when it is a string
    /// (or an object's `"prompt"` string).
    #[cfg(feature = "gate")]
    pub fn with_gate(
        mut self,
        make: impl Fn(&crate::store::FollowUpTask) -> crate::gate::QualityGate + Send + Sync + 'static,
    ) -> Self {
        self.gate = Some(Arc::new(make));
        self
    }

    /// The store behind the worker's channel.
    pub fn store(&self) -> &Store {
        self.channel.store()
    }

    /// The worker's durable channel.
    pub fn channel(&self) -> &Durable<C> {
        &self.channel
    }

    /// The name the worker holds claims and leases under.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// One pass: sends the parts open on this surface, then claims and keeps due commitments
    /// one at a time until none is due or `shutdown` fires.
    pub async fn pass(&self, shutdown: &Cancellation) -> Result<WorkerReport, StoreError> {
        let mut report = WorkerReport::default();
        let store = self.store();
        let surface = self.channel.surface();
        for conversation in store.open_conversations(surface, RESEND_BATCH).await? {
            if shutdown.is_cancelled() {
                return Ok(report);
            }
            if let Some(resend) = self.resend_conversation(&conversation).await? {
                report.add_resend(&resend);
            }
        }
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
        Ok(report)
    }

    /// Passes until nothing is pending or due on this surface (due-later commitments do not
    /// count; one whose claim expired does), or until `shutdown` fires.
    pub async fn run_once(&self, shutdown: &Cancellation) -> Result<WorkerReport, StoreError> {
        let mut total = WorkerReport::default();
        loop {
            let report = self.pass(shutdown).await?;
            let idle = !report.made_progress();
            total.absorb(report);
            if shutdown.is_cancelled()
                || self
                    .store()
                    .pending_work_on(self.channel.surface())
                    .await?
                    .is_idle()
            {
                return Ok(total);
            }
            // Work is left that someone else holds (a live lease, a claim about to expire):
            // wait for it instead of spinning.
            if idle && !self.pause(shutdown).await {
                return Ok(total);
            }
        }
    }

    /// Passes until `shutdown` fires, waiting between passes that found nothing to do.
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

    /// Sends what `conversation` still has open, under its lease; `None` when another holder
    /// has it (that holder sends them).
    async fn resend_conversation(
        &self,
        conversation: &str,
    ) -> Result<Option<ResendReport>, StoreError> {
        let store = self.store();
        let lease = match store.acquire(conversation, &self.holder, self.ttl).await {
            Ok(lease) => lease,
            Err(StoreError::LeaseHeld { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        let renewal = store.keep_renewed(&lease, self.ttl);
        let resent = store.resend(&self.channel, &lease).await;
        drop(renewal);
        store.release(lease).await?;
        match resent {
            Ok(report) => Ok(Some(report)),
            Err(StoreError::LeaseLost { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Waits one poll interval; `false` when `shutdown` fired instead.
    async fn pause(&self, shutdown: &Cancellation) -> bool {
        sleep_unless(self.poll, shutdown).await
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

impl<C: Channel> fmt::Debug for Worker<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut handlers: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
        handlers.sort_unstable();
        f.debug_struct("Worker")
            .field("holder", &self.holder)
            .field("surface", &self.channel.surface())
            .field("ttl", &self.ttl)
            .field("handlers", &handlers)
            .finish_non_exhaustive()
    }
}
