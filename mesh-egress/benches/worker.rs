//! Follow-up claim throughput on PostgreSQL: how many due promises 1, 2 and 4 workers keep per
//! second between them (claim with `FOR UPDATE SKIP LOCKED`, conversation lease, outbox
//! commit sealed with the commitment's end, send, release), each follow-up answered at once by
//! an in-memory handler into a `Recorder`, so the store round trips are what is measured.
//!
//! `cargo bench -p mesh-egress --all-features --bench worker`
//! (PostgreSQL from `MESH_BENCH_PG_URL=postgres://user@127.0.0.1:PORT/db`, else a throwaway
//! cluster started like the tests' harness)

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mesh_egress::Address;
use mesh_egress::boundary::resolve;
use mesh_egress::channel::Recorder;
use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
use mesh_egress::store::{FollowUpPlan, FollowUpTask, Store};
use mesh_egress::{AgentMessage, Attribution, Bot, Cancellation, EgressError, Turn};

/// Due promises per measured round.
const PROMISES: u64 = 100;
/// Distinct conversations they fall in (workers also meet on leases).
const CONVERSATIONS: u64 = 25;

static ROUND: AtomicU64 = AtomicU64::new(0);

#[mesh_egress::egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message("Here is the answer."))
}

/// Stores `PROMISES` due commitments of a fresh round (not measured).
async fn seed(store: &Store) {
    let round = ROUND.fetch_add(1, Ordering::Relaxed);
    let policy = DegradationPolicy::default().with_follow_up(Duration::ZERO, 3);
    let plan = FollowUpPlan::new(Duration::ZERO, Duration::ZERO, 3);
    let task = FollowUpTask::new(
        "answer",
        serde_json::json!({"prompt": "?"}),
        Mode::Interactive,
    );
    for i in 0..PROMISES {
        let attr = Attribution::new(
            "bench",
            format!("round{round}-c{}", i % CONVERSATIONS),
            format!("r{i}"),
        );
        let Reply::Holding { commitment, .. } = resolve(
            Mode::Interactive,
            &policy,
            Err(EgressError::transport("503", attr)),
        ) else {
            panic!("expected a holding line");
        };
        store
            .keep_commitment(&commitment, &Address::Plain, &task, plan)
            .await
            .expect("stored");
    }
}

/// Runs `workers` workers until nothing is due; the time they took.
async fn keep_all(store: &Store, workers: usize) -> Duration {
    let started = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|n| {
            let bot = Bot::new()
                .with_store(store.clone())
                .with_client(Recorder::new());
            let _route = bot.route(
                "answer",
                |turn: Turn, _input: serde_json::Value| async move { answer(&turn).await },
            );
            let worker = bot
                .worker(format!("w{n}"))
                .expect("a store")
                .with_lease_ttl(Duration::from_secs(30))
                .with_poll_interval(Duration::from_millis(1));
            tokio::spawn(async move { worker.run_once(&Cancellation::new()).await })
        })
        .collect();
    let mut kept = 0;
    for handle in handles {
        kept += handle.await.expect("join").expect("worker").fulfilled;
    }
    assert_eq!(u64::from(kept), PROMISES, "every promise kept once");
    started.elapsed()
}

fn claim_throughput(c: &mut Criterion) {
    let rt = support::runtime(4);
    let url = support::pg_url();
    let store = rt.block_on(Store::open(&url)).expect("store opens");
    let mut group = c.benchmark_group("follow-up claim throughput (postgres)");
    group.sample_size(10);
    group.throughput(Throughput::Elements(PROMISES));
    for workers in [1, 2, 4] {
        group.bench_with_input(BenchmarkId::new("workers", workers), &workers, |b, &n| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    rt.block_on(seed(&store));
                    total += rt.block_on(keep_all(&store, n));
                }
                total
            });
        });
    }
    group.finish();
    rt.block_on(store.close());
}

criterion_group!(benches, claim_throughput);
criterion_main!(benches);
