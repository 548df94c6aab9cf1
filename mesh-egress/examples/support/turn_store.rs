//! `turn --store URL`: the turn under the conversation's lease, its parts through the durable
//! outbox, and a holding line's promise stored for `worker` (or kept here with `--follow-up`).
#![allow(dead_code, unreachable_pub)]

use std::process::ExitCode;
use std::time::Duration;

use mesh_egress::channel::BoxedChannel;
use mesh_egress::degrade::{DegradationPolicy, Mode};
use mesh_egress::gate::QualityGate;
use mesh_egress::store::{FollowUpPlan, FollowUpTask, Lease, Renewal, Store, StoreError};
use mesh_egress::worker::{Handler, Worker};
use mesh_egress::{Cancellation, Ownership, Reply, Turn};

use super::cli::{HANDLER, Surface, delivery_failed, holder_name};

/// The longest wait between two follow-ups, as the in-memory runner's default.
const MAX_FOLLOW_UP_DELAY: Duration = Duration::from_secs(600);
/// How often `turn` asks again for a conversation another process is speaking in.
const LEASE_RETRY: Duration = Duration::from_millis(100);

/// A persistent turn: the store, and the conversation's lease renewed in the background.
pub(crate) struct Persistent {
    store: Store,
    lease: Lease,
    renewal: Renewal,
    holder: String,
    ttl: Duration,
}

/// Everything the persistent delivery needs from `main`.
pub(crate) struct Delivered<'a, H, G> {
    pub(crate) turn: &'a Turn,
    pub(crate) mode: Mode,
    pub(crate) policy: &'a DegradationPolicy,
    pub(crate) channel: BoxedChannel,
    pub(crate) surface: mesh_egress::store::Surface,
    pub(crate) target: Surface,
    pub(crate) reply: Reply,
    pub(crate) task: FollowUpTask,
    pub(crate) follow_up: bool,
    pub(crate) handler: H,
    pub(crate) gate: G,
}

impl Persistent {
    /// Opens the store `url` names (`None`: not persistent) and takes `conversation`'s lease,
    /// waiting up to one lease length for a process that holds it.
    pub(crate) async fn start(
        url: Option<String>,
        conversation: &str,
    ) -> Result<Option<Self>, ExitCode> {
        let Some(store) = super::cli::open_store(url.as_deref()).await? else {
            return Ok(None);
        };
        let (ttl, _warnings) = mesh_egress::store::lease_ttl_from_env();
        let holder = holder_name("turn");
        let deadline = tokio::time::Instant::now() + ttl;
        let lease = loop {
            match store.acquire(conversation, &holder, ttl).await {
                Ok(lease) => break lease,
                Err(StoreError::LeaseHeld { .. }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(LEASE_RETRY).await;
                }
                Err(error) => {
                    tracing::error!(target: "mesh_egress::store", error = %error, "conversation lease not granted");
                    eprintln!("error: the conversation is held by another process");
                    return Err(ExitCode::FAILURE);
                }
            }
        };
        let renewal = store.keep_renewed(&lease, ttl);
        Ok(Some(Self {
            store,
            lease,
            renewal,
            holder,
            ttl,
        }))
    }

    /// The ownership the turn runs under: the conversation's lease.
    pub(crate) fn ownership(&self) -> Ownership {
        self.lease.ownership()
    }

    /// Delivers the reply through the outbox. A holding line's promise is stored **before**
    /// the line is committed: a crash in between can at worst send the answer without the
    /// holding line before it, never leave a holding line without a promise behind it.
    pub(crate) async fn deliver<H, G>(self, run: Delivered<'_, H, G>) -> ExitCode
    where
        H: Handler,
        G: Fn(&FollowUpTask) -> QualityGate + Send + Sync + 'static,
    {
        let Self {
            store,
            lease,
            renewal,
            holder,
            ttl,
        } = self;
        // A part the outbox cannot settle is reported on the turn's ledger, besides the log.
        let durable = store
            .channel(run.channel, run.surface)
            .with_ledger(run.turn.ledger().clone());
        let stored = match &run.reply {
            Reply::Holding { commitment, .. } => {
                let plan = FollowUpPlan::for_commitment(commitment, MAX_FOLLOW_UP_DELAY);
                if let Err(code) = keep(&store, commitment, run.surface, &run.task, plan).await {
                    return code;
                }
                Some(commitment.id())
            }
            _ => None,
        };
        let delivered =
            mesh_egress::boundary::deliver(run.turn, run.mode, run.policy, &durable, run.reply)
                .await;
        drop(renewal);
        let _ = store.release(lease).await;
        let mut receipt = match delivered {
            Ok(receipt) => receipt,
            Err(error) => return delivery_failed(run.target, &error),
        };
        let Some(commitment) = receipt.take_commitment() else {
            return ExitCode::SUCCESS;
        };
        let plan = FollowUpPlan::for_commitment(&commitment, MAX_FOLLOW_UP_DELAY);
        if stored != Some(commitment.id()) {
            // An answer that could not be shown became a holding line at delivery.
            if let Err(code) = keep(&store, &commitment, run.surface, &run.task, plan).await {
                return code;
            }
        }
        if !run.follow_up {
            tracing::info!(
                target: "mesh_egress::store",
                commitment = %commitment.id(),
                handler = HANDLER,
                "holding line sent; the promise is stored for a worker"
            );
            return ExitCode::SUCCESS;
        }
        // Kept here, on the promise's own schedule, and ended on the store when it ends; if
        // this process dies, its claim runs out and a worker finishes it.
        let worker = Worker::new(durable, holder)
            .with_lease_ttl(ttl)
            .with_policy(run.policy.clone())
            .register(HANDLER, run.handler)
            .with_gate(run.gate);
        match worker
            .keep_in_process(commitment.id(), plan, &Cancellation::new())
            .await
        {
            Ok(kept) => {
                tracing::info!(target: "mesh_egress::degrade", kept = ?kept, "follow-up ended");
                ExitCode::SUCCESS
            }
            Err(error) => {
                tracing::error!(target: "mesh_egress::store", error = %error, "follow-up could not be kept");
                eprintln!("error: the store failed during the follow-up");
                ExitCode::FAILURE
            }
        }
    }
}

/// Stores the promise; exit 1 with one `error:` line when the store refuses.
async fn keep(
    store: &Store,
    commitment: &mesh_egress::degrade::Commitment,
    surface: mesh_egress::store::Surface,
    task: &FollowUpTask,
    plan: FollowUpPlan,
) -> Result<(), ExitCode> {
    store
        .keep_commitment(commitment, surface, task, plan)
        .await
        .map_err(|error| {
            tracing::error!(target: "mesh_egress::store", error = %error, "the promise could not be stored");
            eprintln!("error: the promise could not be stored");
            ExitCode::FAILURE
        })
}
