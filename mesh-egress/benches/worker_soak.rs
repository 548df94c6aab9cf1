//! A worker's memory over a long run: 10,000 promises kept through one worker on PostgreSQL,
//! its follow-ups' rows on a durable ledger, with the process's resident memory and what the
//! ledger holds in memory printed every 2,000 promises. Flat is the figure wanted: the ledger
//! keeps its last `DurableLedger::WINDOW` rows and at most `DurableLedger::QUEUE` unwritten ones.
//!
//! `cargo bench -p mesh-egress --all-features --bench worker_soak`
//! (`MESH_BENCH_PROMISES` changes the 10,000; PostgreSQL from `MESH_BENCH_PG_URL`, else a
//! throwaway cluster started like the tests' harness)

#[path = "../../tests/tests/support/postgres.rs"]
#[allow(dead_code, unreachable_pub)]
mod postgres;

use std::time::{Duration, Instant};

use mesh_egress::channel::Recorder;
use mesh_egress::degrade::{DegradationPolicy, Mode, Reply, resolve};
use mesh_egress::ledger::{Ledger, LedgerStore};
use mesh_egress::store::{FollowUpPlan, FollowUpTask, Store};
use mesh_egress::worker::Worker;
use mesh_egress::{Address, AgentMessage, Attribution, Cancellation, EgressError, Turn};

async fn answer(_task: FollowUpTask, turn: Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message("Here is the answer."))
}

/// Resident memory of this process in KiB (Linux `/proc/self/statm`), if readable.
fn rss_kib() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}

fn main() {
    let promises: u32 = std::env::var("MESH_BENCH_PROMISES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let url = std::env::var("MESH_BENCH_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(postgres::fresh_database_url);
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
        let worker = Worker::new(store.clone(), "soak")
            .with_client(Recorder::new())
            .with_lease_ttl(Duration::from_secs(30))
            .with_ledger(Ledger::new(sink.clone()))
            .register("answer", answer);
        let shutdown = Cancellation::new();
        let started = Instant::now();
        let mut kept = 0;
        let mut next_report = 0;
        println!("worker soak (postgres): {promises} promises kept through one worker");
        println!("    kept   rss KiB   ledger rows in memory   queued   seconds");
        while kept < promises {
            if kept >= next_report {
                println!(
                    "{kept:>8}   {:>7}   {:>21}   {:>6}   {:>7.1}",
                    rss_kib().map_or_else(|| "?".to_owned(), |k| k.to_string()),
                    sink.entries().len(),
                    sink.queued(),
                    started.elapsed().as_secs_f64()
                );
                next_report += 2_000;
            }
            let report = worker.pass(&shutdown).await.expect("pass");
            assert!(report.fulfilled > 0, "a pass kept nothing");
            kept += report.fulfilled;
        }
        sink.flush().await.expect("flushed");
        println!(
            "{kept:>8}   {:>7}   {:>21}   {:>6}   {:>7.1}",
            rss_kib().map_or_else(|| "?".to_owned(), |k| k.to_string()),
            sink.entries().len(),
            sink.queued(),
            started.elapsed().as_secs_f64()
        );
        store.close().await;
    });
}
