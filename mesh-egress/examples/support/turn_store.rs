//! `turn --store URL`: the turn on the front door ([`Bot`]) with the store, under the
//! conversation's lease. Its parts go through the durable outbox (streamed blocks too, onto the
//! surface's own stream under `--deliver`), and a holding line's promise is kept by the store's
//! promise keeper: stored, with the route's typed input ([`Asked`]) and what was shown before
//! it, **before** the line goes, for `worker` to keep by re-running the same route, or kept here
//! with `--follow-up` (this process's worker, built from the same bot). If this process dies
//! meanwhile, the claim runs out and a worker finishes it.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use mesh_egress::bot::Promise;
use mesh_egress::bot::Sendable;
use mesh_egress::ledger::Ledger;
use mesh_egress::store::{DurableLedger, FollowUpPlan, Lease, Renewal, Store, StoreError};
use mesh_egress::{Bot, Cancellation, Ownership, Turn};

use super::cli::{Surface, delivery_failed, holder_name};
use super::turn_bot::{Asked, ROUTE};

/// The longest wait between two follow-ups: the store keeper's plan caps its backoff there.
const MAX_FOLLOW_UP_DELAY: Duration = Duration::from_secs(600);
/// How often `turn` asks again for a conversation another process is speaking in.
const LEASE_RETRY: Duration = Duration::from_millis(100);

/// A persistent turn: the store, its durable ledger, and the conversation's lease renewed in
/// the background.
pub(crate) struct Persistent {
    store: Store,
    ledger: DurableLedger,
    lease: Lease,
    renewal: Renewal,
    holder: String,
    ttl: Duration,
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
        let ledger = match store.durable_ledger() {
            Ok(ledger) => ledger,
            Err(error) => {
                tracing::error!(target: "mesh_egress::store", error = %error, "the store's ledger could not be opened");
                eprintln!("error: the store's ledger could not be opened");
                return Err(ExitCode::FAILURE);
            }
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
            ledger,
            lease,
            renewal,
            holder,
            ttl,
        }))
    }

    /// The store the bot commits through and keeps promises in.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// `turn` of the bot, persistent: it runs under the conversation's lease (losing it stops
    /// recovery as well as delivery) and records on the store's ledger.
    pub(crate) fn turn(&self, turn: Turn) -> Turn {
        turn.with_ownership(self.ownership())
            .with_ledger(Ledger::new(self.ledger.clone()))
    }

    /// The ownership the turn runs under: the conversation's lease.
    fn ownership(&self) -> Ownership {
        self.lease.ownership()
    }

    /// Runs `handler` as the bot's route [`ROUTE`] for `asked` and delivers what it gave
    /// through the outbox. A holding line's promise is stored by the store's keeper before the
    /// line is committed (a crash in between can at worst leave a promise whose holding line
    /// never went, kept all the same, never a holding line without a promise behind it). Exit
    /// 1 with one `error:` line when the delivery or the store failed.
    pub(crate) async fn run<H, Fut, O>(
        self,
        bot: &Bot,
        turn: &Turn,
        handler: H,
        asked: Asked,
        follow_up: bool,
        target: Surface,
    ) -> ExitCode
    where
        H: Fn(Turn, Asked) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
        O: Sendable,
    {
        let route = bot.route(ROUTE, handler);
        let delivered = bot.run(turn, &route, asked).await;
        let Self {
            store,
            ledger,
            lease,
            renewal,
            holder,
            ttl,
        } = self;
        // The follow-up takes the lease again, as any worker does.
        drop(renewal);
        let _ = store.release(lease).await;
        let code = match delivered {
            Err(error) => delivery_failed(target, &error),
            Ok(delivery) => {
                tracing::info!(target: "mesh_egress::degrade", outcome = ?delivery.outcome(), kept = matches!(delivery.promise(), Some(Promise::Bot(_))), delivered_bytes = delivery.delivered().len(), mode = turn.mode().as_str(), "turn ended");
                match delivery.promise() {
                    None => ExitCode::SUCCESS,
                    Some(Promise::Caller(_)) => ExitCode::SUCCESS,
                    Some(Promise::Bot(commitment)) if !follow_up => {
                        tracing::info!(
                            target: "mesh_egress::store",
                            commitment = %commitment.id(),
                            route = ROUTE,
                            "holding line sent; the promise is stored for a worker"
                        );
                        ExitCode::SUCCESS
                    }
                    Some(Promise::Bot(commitment)) => {
                        let plan = FollowUpPlan::for_commitment(commitment, MAX_FOLLOW_UP_DELAY);
                        keep_here(bot, &ledger, holder, ttl, commitment.id(), plan).await
                    }
                    // A promise of a kind this example does not know yet: nothing to keep here.
                    Some(_) => ExitCode::SUCCESS,
                }
            }
        };
        // The ledger's rows are written in the background: wait for them before exiting.
        if let Err(error) = ledger.flush().await {
            tracing::error!(target: "mesh_egress::store", error = %error, "ledger rows not written");
        }
        code
    }
}

/// Keeps the stored promise `id` in this process on its own `plan`, with the bot's worker (the
/// same route re-run, gated and delivered through the outbox, the commitment ended with its
/// follow-up), and ends it on the store; if this process dies, its claim runs out and a worker
/// finishes it.
async fn keep_here(
    bot: &Bot,
    ledger: &DurableLedger,
    holder: String,
    ttl: Duration,
    id: mesh_egress::ledger::CommitmentId,
    plan: FollowUpPlan,
) -> ExitCode {
    // The follow-up's rows go on the ledger this process flushes before it exits.
    let bot = bot.clone().with_ledger(Ledger::new(ledger.clone()));
    let Some(worker) = bot.worker(holder) else {
        // `turn --store` built the bot with its store: there is always a worker.
        eprintln!("error: the store failed during the follow-up");
        return ExitCode::FAILURE;
    };
    let worker = worker.with_lease_ttl(ttl);
    match worker.keep_in_process(id, plan, &Cancellation::new()).await {
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
