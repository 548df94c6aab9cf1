//! A worker's memory over a long run: 10,000 promises kept through one worker on PostgreSQL,
//! its follow-ups' rows on a durable ledger, with the process's resident memory and what the
//! ledger holds in memory printed every 1,000 promises kept (sampled while the worker runs: one
//! pass may keep them all). Flat is the figure wanted: the ledger
//! keeps its last `DurableLedger::WINDOW` rows and at most `DurableLedger::QUEUE` unwritten ones.
//!
//! `cargo bench -p mesh-egress --all-features --bench worker_soak`
//! (`MESH_BENCH_PROMISES` changes the 10,000; PostgreSQL from `MESH_BENCH_PG_URL`, else a
//! throwaway cluster started like the tests' harness)

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::future::Future;

use mesh_egress::boundary::resolve;
use mesh_egress::channel::{
    BoxedChannel, Channel, PartReceipt, PlainText, SendError, SurfaceClient, UnservedAddress,
};
use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
use mesh_egress::ledger::{CommitmentState, Ledger, LedgerEntry, LedgerRecord, LedgerStore};
use mesh_egress::store::{DurableLedger, FollowUpPlan, FollowUpTask, Store};
use mesh_egress::{
    Address, AgentMessage, Attribution, Bot, Cancellation, CommittedPart, EgressError, Surface,
    Turn,
};

#[mesh_egress::egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message("Here is the answer."))
}

/// A plain channel that takes every part and keeps nothing (a `Recorder` keeps every text it
/// was sent, which would be the bench's own growth, not the worker's).
#[derive(Clone)]
struct Taker {
    renderer: PlainText,
}

impl Channel for Taker {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn address(&self) -> Address {
        Address::Plain
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}

impl SurfaceClient for Taker {
    fn surface(&self) -> Surface {
        Surface::Plain
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match address {
            Address::Plain => Ok(BoxedChannel::new(self.clone())),
            other => Err(UnservedAddress::new(Surface::Plain, other.clone())),
        }
    }
}

/// The worker's ledger: the durable one, counting the promises kept as their rows go by.
struct Counting {
    sink: DurableLedger,
    kept: Arc<AtomicU64>,
}

impl LedgerStore for Counting {
    fn record(&self, entry: LedgerEntry) {
        if matches!(entry.record(), LedgerRecord::Commitment(r) if r.state() == CommitmentState::Fulfilled)
        {
            self.kept.fetch_add(1, Ordering::Relaxed);
        }
        self.sink.record(entry);
    }

    fn entries(&self) -> Vec<LedgerEntry> {
        self.sink.entries()
    }
}

/// One line of the series.
fn sample(kept: u64, sink: &DurableLedger, started: Instant) {
    println!(
        "{kept:>8}   {:>7}   {:>21}   {:>6}   {:>7.1}",
        rss_kib().map_or_else(|| "?".to_owned(), |k| k.to_string()),
        sink.entries().len(),
        sink.queued(),
        started.elapsed().as_secs_f64()
    );
}

/// Resident memory of this process in KiB (Linux `/proc/self/statm`), if readable.
fn rss_kib() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}

fn main() {
    let promises: u32 = support::count("MESH_BENCH_PROMISES", 10_000);
    let rt = support::runtime(2);
    let url = support::pg_url();
    rt.block_on(async {
        let store = Store::open(&url).await.expect("store opens");
        let policy = DegradationPolicy::default().with_follow_up(Duration::ZERO, 3);
        let plan = FollowUpPlan::new(Duration::ZERO, Duration::ZERO, 3);
        let task = FollowUpTask::new("answer", serde_json::json!("?"), Mode::Interactive);
        for i in 0..promises {
            let attribution = Attribution::new("soak", format!("c{}", i % 500), format!("r{i}"));
            let Reply::Holding { commitment, .. } = resolve(
                Mode::Interactive,
                &policy,
                Err(EgressError::transport("503", attribution)),
            ) else {
                panic!("expected a holding line");
            };
            store
                .keep_commitment(&commitment, &Address::Plain, &task, plan)
                .await
                .expect("stored");
        }
        let sink = store.durable_ledger().expect("ledger");
        let counted = Arc::new(AtomicU64::new(0));
        let bot = Bot::new()
            .with_store(store.clone())
            .with_client(Taker {
                renderer: PlainText::new(),
            })
            .with_ledger(Ledger::new(Counting {
                sink: sink.clone(),
                kept: Arc::clone(&counted),
            }));
        let _route = bot.route(
            "answer",
            |turn: Turn, _input: serde_json::Value| async move { answer(&turn).await },
        );
        let worker = bot
            .worker("soak")
            .expect("a store")
            .with_lease_ttl(Duration::from_secs(30));
        let shutdown = Cancellation::new();
        let started = Instant::now();
        println!("worker soak (postgres): {promises} promises kept through one worker");
        println!("    kept   rss KiB   ledger rows in memory   queued   seconds");
        sample(0, &sink, started);
        // Samples every 1,000 promises kept, while the passes run.
        let sampler = tokio::spawn({
            let (sink, counted) = (sink.clone(), Arc::clone(&counted));
            async move {
                let mut next = 1_000;
                loop {
                    let kept = counted.load(Ordering::Relaxed);
                    if kept >= next {
                        sample(kept, &sink, started);
                        next += 1_000;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        let mut kept = 0;
        while kept < promises {
            let report = worker.pass(&shutdown).await.expect("pass");
            assert!(report.fulfilled > 0, "a pass kept nothing");
            kept += report.fulfilled;
        }
        sampler.abort();
        sink.flush().await.expect("flushed");
        println!("after the flush:");
        sample(u64::from(kept), &sink, started);
        store.close().await;
    });
}
