//! `turn --store URL`: the turn under the conversation's lease, its parts through the durable
//! outbox, and a holding line's promise stored for `worker` (or kept here with `--follow-up`).
//! With `--stream` too, the streamed blocks go through the same outbox (onto the surface's own
//! stream under `--deliver`), and a promise made after some blocks were shown is stored with
//! what was shown, so its follow-up delivers only what follows.
#![allow(dead_code, unreachable_pub)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mesh_egress::BoxFuture;
use mesh_egress::boundary::{Promise, PromiseKeeper, StreamPlan, StreamedTurnReceipt};
use mesh_egress::channel::stream::StreamingChannel;
use mesh_egress::channel::{BoxedChannel, Channel, DeliveryError};
use mesh_egress::degrade::{Commitment, DegradationPolicy, Mode};
use mesh_egress::gate::QualityGate;
use mesh_egress::ledger::Ledger;
use mesh_egress::store::{Durable, FollowUpPlan, FollowUpTask, Lease, Renewal, Store, StoreError};
use mesh_egress::worker::{Handler, Worker};
use mesh_egress::{Address, Cancellation, Ownership, Reply, Turn};

use super::cli::{
    DELIVERED_INPUT, HANDLER, OwnConversation, Surface, delivery_failed, holder_name,
};
use super::turn_stream::Streamed;

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
        let (ttl, _warnings) = mesh_egress::store::Lease::ttl_from_env();
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
            .channel(run.channel.clone())
            .with_ledger(run.turn.ledger().clone());
        let stored = match &run.reply {
            Reply::Holding { commitment, .. } => {
                let plan = FollowUpPlan::for_commitment(commitment, MAX_FOLLOW_UP_DELAY);
                if let Err(code) = keep(&durable, commitment, &run.task, plan).await {
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
            if let Err(code) = keep(&durable, &commitment, &run.task, plan).await {
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
        keep_here(
            KeptHere {
                store,
                channel: run.channel,
                ledger: run.turn.ledger().clone(),
                holder,
                ttl,
                policy: run.policy,
            },
            &commitment,
            plan,
            run.handler,
            run.gate,
        )
        .await
    }
}

/// Everything the persistent streamed turn needs from `main`.
pub(crate) struct StreamedDelivery<'a, H, G> {
    pub(crate) streamed: Streamed<'a>,
    pub(crate) policy: &'a DegradationPolicy,
    pub(crate) task: FollowUpTask,
    pub(crate) handler: H,
    pub(crate) gate: G,
}

impl Persistent {
    /// `turn --stream --store` to stdout: `boundary::stream` through the outbox, each block a
    /// message of its own committed and recorded like any other.
    pub(crate) async fn stream<H, G>(
        self,
        run: StreamedDelivery<'_, H, G>,
        channel: BoxedChannel,
    ) -> ExitCode
    where
        H: Handler,
        G: Fn(&FollowUpTask) -> QualityGate + Send + Sync + 'static,
    {
        let durable = self.durable(channel.clone(), &run);
        let Streamed {
            turn,
            plan,
            router,
            request,
            ..
        } = &run.streamed;
        let plan = self.keeping(plan, durable.address(), &run);
        let source = router.stream(turn, request);
        let streamed = mesh_egress::boundary::stream(turn, &plan, &durable, source).await;
        self.after_stream(channel, streamed, run).await
    }

    /// `turn --stream --store --deliver S`: `boundary::stream_live` onto the surface's own
    /// stream through the outbox. Each block is committed (`pending`), marked `sending` before
    /// the stream's call that may show it and `sent` with the message that holds it once the
    /// surface confirms it; what the stream did not confirm is re-sent through the outbox.
    pub(crate) async fn stream_live<C, H, G>(
        self,
        run: StreamedDelivery<'_, H, G>,
        channel: C,
    ) -> ExitCode
    where
        C: StreamingChannel + Clone + 'static,
        H: Handler,
        G: Fn(&FollowUpTask) -> QualityGate + Send + Sync + 'static,
    {
        // The follow-up goes through the same connector, as a message of its own.
        let follow_up = BoxedChannel::new(channel.clone());
        let durable = self.durable(channel, &run);
        let Streamed {
            turn,
            plan,
            router,
            request,
            ..
        } = &run.streamed;
        let plan = self.keeping(plan, durable.address(), &run);
        let source = router.stream(turn, request);
        let streamed = mesh_egress::boundary::stream_live(turn, &plan, &durable, source).await;
        self.after_stream(follow_up, streamed, run).await
    }

    /// The turn's plan with the store as its promise keeper: a holding line's promise is
    /// stored before the line goes, as on the non-streamed path, for the address the line goes
    /// to.
    fn keeping<'p, H, G>(
        &self,
        plan: &StreamPlan<'p>,
        address: Address,
        run: &StreamedDelivery<'_, H, G>,
    ) -> StreamPlan<'p> {
        plan.clone().with_promise_keeper(Arc::new(StoreKeeper {
            store: self.store.clone(),
            address,
            task: run.task.clone(),
        }))
    }

    /// The outbox channel of a streamed turn: `uncertain` parts are reported on its ledger.
    fn durable<C: Channel, H, G>(
        &self,
        channel: C,
        run: &StreamedDelivery<'_, H, G>,
    ) -> Durable<C> {
        self.store
            .channel(channel)
            .with_ledger(run.streamed.turn.ledger().clone())
    }

    /// After the streamed turn: a holding line's promise was stored before the line went
    /// ([`StoreKeeper`]); with `--follow-up` this process keeps it here, through `channel`.
    async fn after_stream<H, G>(
        self,
        channel: BoxedChannel,
        streamed: Result<StreamedTurnReceipt, DeliveryError>,
        run: StreamedDelivery<'_, H, G>,
    ) -> ExitCode
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
        drop(renewal);
        let _ = store.release(lease).await;
        let target = run.streamed.target;
        let mut receipt = match streamed {
            Ok(receipt) => receipt,
            Err(error) => return delivery_failed(target, &error),
        };
        tracing::info!(
            target: "mesh_egress::degrade",
            end = ?receipt.end(),
            blocks = receipt.blocks().len(),
            delivered_bytes = receipt.delivered().len(),
            mode = run.streamed.mode.as_str(),
            "streamed turn ended"
        );
        let Some(commitment) = receipt.take_rest() else {
            return ExitCode::SUCCESS;
        };
        let plan = FollowUpPlan::for_commitment(&commitment, MAX_FOLLOW_UP_DELAY);
        if !run.streamed.follow_up {
            tracing::info!(
                target: "mesh_egress::store",
                commitment = %commitment.id(),
                handler = HANDLER,
                "holding line sent; the promise is stored for a worker"
            );
            return ExitCode::SUCCESS;
        }
        keep_here(
            KeptHere {
                store,
                channel,
                ledger: run.streamed.turn.ledger().clone(),
                holder,
                ttl,
                policy: run.policy,
            },
            &commitment,
            plan,
            run.handler,
            run.gate,
        )
        .await
    }
}

/// Stores a streamed turn's promise before its holding line goes out: the task carries the
/// Markdown already shown, so the follow-up's handler delivers only what follows it.
struct StoreKeeper {
    store: Store,
    /// Where the holding line goes, and so the follow-up.
    address: Address,
    task: FollowUpTask,
}

impl PromiseKeeper for StoreKeeper {
    fn keep<'a>(
        &'a self,
        promise: Promise<'a>,
    ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
        let (commitment, delivered) = (promise.commitment(), promise.delivered());
        Box::pin(async move {
            let mut task = self.task.clone();
            if !delivered.is_empty()
                && let Some(input) = task.input.as_object_mut()
            {
                input.insert(DELIVERED_INPUT.to_owned(), delivered.into());
            }
            let plan = FollowUpPlan::for_commitment(commitment, MAX_FOLLOW_UP_DELAY);
            self.store
                .keep_commitment(commitment, &self.address, &task, plan)
                .await
                .map_err(|error| {
                    tracing::error!(target: "mesh_egress::store", error = %error, "the promise could not be stored; the holding line is not sent");
                    Box::new(error) as Box<dyn std::error::Error + Send + Sync>
                })
        })
    }
}

/// What keeping a promise in this process needs: the store, the channel its holding line
/// went through (the follow-up goes there too), the ledger, and who holds it for how long.
struct KeptHere<'a> {
    store: Store,
    channel: BoxedChannel,
    ledger: Ledger,
    holder: String,
    ttl: Duration,
    policy: &'a DegradationPolicy,
}

/// Keeps a stored promise in this process, on its own schedule, and ends it on the store; if
/// this process dies, its claim runs out and a worker finishes it.
async fn keep_here<H, G>(
    here: KeptHere<'_>,
    commitment: &Commitment,
    plan: FollowUpPlan,
    handler: H,
    gate: G,
) -> ExitCode
where
    H: Handler,
    G: Fn(&FollowUpTask) -> QualityGate + Send + Sync + 'static,
{
    let worker = Worker::new(here.store, here.holder)
        .with_client(OwnConversation(here.channel))
        .with_ledger(here.ledger)
        .with_lease_ttl(here.ttl)
        .with_policy(here.policy.clone())
        .register(HANDLER, handler)
        .with_gate(gate);
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

/// Stores the promise for the holding line `durable` delivers; exit 1 with one `error:` line
/// when the store refuses.
async fn keep<C: Channel>(
    durable: &Durable<C>,
    commitment: &mesh_egress::degrade::Commitment,
    task: &FollowUpTask,
    plan: FollowUpPlan,
) -> Result<(), ExitCode> {
    durable
        .keep_commitment(commitment, task, plan)
        .await
        .map_err(|error| {
            tracing::error!(target: "mesh_egress::store", error = %error, "the promise could not be stored");
            eprintln!("error: the promise could not be stored");
            ExitCode::FAILURE
        })
}
