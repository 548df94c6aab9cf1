//! Draining the outbox on PostgreSQL: 10,000 conversations with one open part each, sent by 1, 2
//! and 4 workers; the time to drain, the longest any conversation waited (in time and in
//! passes), and the statements per part (pg_stat_statements when the server has it: every
//! statement the workers ran, divided by the parts), with the heaviest statements named. In the
//! same run, on the same server: what committing those parts through the outbox costs, and a
//! raw-SQL lower bound (insert the part, mark it sent: two statements) with as many
//! connections as workers.
//!
//! A timed harness, not criterion: one drain is seconds of wall time and the figures wanted are
//! counts and maxima, not a distribution.
//!
//! `cargo bench -p mesh-egress --all-features --bench worker_drain`
//! (`MESH_BENCH_PARTS` changes the 10,000; PostgreSQL from
//! `MESH_BENCH_PG_URL=postgres://user@127.0.0.1:PORT/db`, else a throwaway cluster started like
//! the tests' harness)

mod support;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mesh_egress::channel::{
    BoxedChannel, Channel, PartReceipt, PlainText, SendError, SurfaceClient, UnservedAddress,
};
use mesh_egress::store::Store;
use mesh_egress::{
    Address, AgentMessage, Attribution, Cancellation, CommittedPart, Outbound, Surface,
};
use sqlx::Row;

/// When each conversation's part went, and in which pass of its worker.
#[derive(Clone, Default)]
struct Sends(Arc<Mutex<HashMap<String, (Instant, u64)>>>);

/// A plain channel that takes every part at once and records when (the store round trips are
/// what is measured); `pass` is its worker's current pass.
#[derive(Clone)]
struct Clocked {
    renderer: PlainText,
    sends: Sends,
    pass: Arc<AtomicU64>,
}

impl Channel for Clocked {
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
        let conversation = part.attribution().conversation().to_owned();
        let pass = self.pass.load(Ordering::Relaxed);
        self.sends
            .0
            .lock()
            .expect("sends")
            .insert(conversation, (Instant::now(), pass));
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}

impl SurfaceClient for Clocked {
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

/// Statements run on the server since the last reset, and the heaviest five; `None` when the
/// server has no pg_stat_statements.
async fn statements(admin: &sqlx::PgPool) -> Option<(u64, Vec<(u64, String)>)> {
    let rows = sqlx::query(
        "SELECT calls, query FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC",
    )
    .fetch_all(admin)
    .await
    .ok()?;
    let mut total = 0;
    let mut top = Vec::new();
    for row in &rows {
        let calls = u64::try_from(row.get::<i64, _>("calls")).unwrap_or(0);
        total += calls;
        if top.len() < 6 {
            let query: String = row.get("query");
            top.push((calls, query.chars().take(90).collect()));
        }
    }
    Some((total, top))
}

async fn reset(admin: &sqlx::PgPool) {
    let _ = sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(admin)
        .await;
}

fn per_part(total: Option<(u64, Vec<(u64, String)>)>, parts: usize) -> String {
    match total {
        Some((total, top)) => {
            let mut text = format!("{:.2} statements/part", total as f64 / parts as f64);
            for (calls, query) in top {
                text.push_str(&format!(
                    "\n      {:>6.3}/part  {query}",
                    calls as f64 / parts as f64
                ));
            }
            text
        }
        None => "statements: pg_stat_statements unavailable".to_owned(),
    }
}

/// Commits one part for each of `parts` conversations of `round`, eight at a time.
async fn seed(store: &Store, round: &str, parts: usize) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|lane| {
            let store = store.clone();
            let round = round.to_owned();
            tokio::spawn(async move {
                let channel = store.channel(mesh_egress::channel::Recorder::new());
                for i in (lane..parts).step_by(8) {
                    let message = AgentMessage::new(
                        "Deployed.",
                        Attribution::new("bench", format!("{round}-c{i:05}"), "r1"),
                    );
                    let rendered = Outbound::new(message)
                        .render(&PlainText::new())
                        .expect("renders");
                    drop(
                        rendered
                            .commit(&channel)
                            .await
                            .expect("committed")
                            .into_parts(),
                    );
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("seeded");
    }
    started.elapsed()
}

/// `workers` workers drain what is open, each as `run_once` does (a pass, then a look at
/// what is left); the time it took, the longest wait, and the longest in passes.
async fn drain(store: &Store, workers: usize, parts: usize) -> (Duration, Duration, u64, u64) {
    let sends = Sends::default();
    let started = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|n| {
            let pass = Arc::new(AtomicU64::new(0));
            let client = Clocked {
                renderer: PlainText::new(),
                sends: sends.clone(),
                pass: Arc::clone(&pass),
            };
            let worker = mesh_egress::Bot::new()
                .with_store(store.clone())
                .with_client(client)
                .worker(format!("drain-w{n}"))
                .expect("a store")
                .with_lease_ttl(Duration::from_secs(30));
            let store = store.clone();
            tokio::spawn(async move {
                let shutdown = Cancellation::new();
                loop {
                    pass.fetch_add(1, Ordering::Relaxed);
                    let report = worker.pass(&shutdown).await.expect("pass");
                    let left = store.pending_work_on(Surface::Plain).await.expect("work");
                    if left.open_parts == 0 {
                        return pass.load(Ordering::Relaxed);
                    }
                    if report.parts_sent == 0 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            })
        })
        .collect();
    let mut passes = 0;
    for handle in handles {
        passes = passes.max(handle.await.expect("worker"));
    }
    let took = started.elapsed();
    let sends = sends.0.lock().expect("sends");
    assert_eq!(sends.len(), parts, "every conversation's part went once");
    let longest = sends
        .values()
        .map(|(at, _)| at.duration_since(started))
        .max()
        .unwrap_or_default();
    let most_passes = sends.values().map(|(_, pass)| *pass).max().unwrap_or(0);
    let _ = passes;
    (
        took,
        longest,
        most_passes,
        u64::try_from(sends.len()).unwrap_or(0),
    )
}

/// The lower bound: each part inserted and marked sent by raw SQL, `lanes` connections at once.
async fn raw_lower_bound(url: &str, round: &str, parts: usize, lanes: usize) -> Duration {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(u32::try_from(lanes).unwrap_or(1))
        .connect(url)
        .await
        .expect("raw pool");
    let started = Instant::now();
    let tasks: Vec<_> = (0..lanes)
        .map(|lane| {
            let pool = pool.clone();
            let round = round.to_owned();
            tokio::spawn(async move {
                for i in (lane..parts).step_by(lanes) {
                    let key = format!("{round}-{i}");
                    let seq: i64 = sqlx::query(
                        "INSERT INTO mesh_outbox_parts (delivery, part_index, total, conversation, \
                         agent, run, surface, body, idempotency_key, state, address, created_ms, \
                         updated_ms) VALUES ($1, 0, 1, $1, 'bench', 'r1', 'plain', 'Deployed.', $1, \
                         'pending', '{\"surface\":\"plain\"}', 0, 0) RETURNING seq",
                    )
                    .bind(&key)
                    .fetch_one(&pool)
                    .await
                    .expect("insert")
                    .get("seq");
                    sqlx::query(
                        "UPDATE mesh_outbox_parts SET state = 'sent', platform_id = $2, \
                         updated_ms = 1 WHERE seq = $1 AND state = 'pending'",
                    )
                    .bind(seq)
                    .bind(&key)
                    .execute(&pool)
                    .await
                    .expect("mark");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("raw lane");
    }
    let took = started.elapsed();
    pool.close().await;
    took
}

fn main() {
    let parts: usize = support::count("MESH_BENCH_PARTS", 10_000);
    let rt = support::runtime(4);
    let url = support::pg_url();
    rt.block_on(async {
        let store = Store::open(&url).await.expect("store opens");
        let admin = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .expect("admin pool");
        let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(&admin)
            .await;
        println!("worker drain (postgres), {parts} conversations with one open part each");
        for workers in [1, 2, 4] {
            let round = format!("w{workers}");
            reset(&admin).await;
            let seeded = seed(&store, &round, parts).await;
            let commit_cost = statements(&admin).await;
            reset(&admin).await;
            let (took, longest, most_passes, sent) = drain(&store, workers, parts).await;
            let drain_cost = statements(&admin).await;
            reset(&admin).await;
            let raw = raw_lower_bound(&url, &format!("raw-{round}"), parts, workers).await;
            let raw_cost = statements(&admin).await;
            println!("{workers} worker(s):");
            println!(
                "  commit through the outbox: {:>7.0} ms, {}",
                seeded.as_secs_f64() * 1e3,
                per_part(commit_cost, parts)
            );
            println!(
                "  drain: {:>7.0} ms ({:.0} parts/s), longest wait {:.0} ms, in pass {most_passes} of its worker (pages split evenly: ceil({parts}/64/{workers}) = {}), {}",
                took.as_secs_f64() * 1e3,
                sent as f64 / took.as_secs_f64(),
                longest.as_secs_f64() * 1e3,
                parts.div_ceil(64 * workers),
                per_part(drain_cost, parts)
            );
            println!(
                "  raw SQL lower bound (insert + mark sent, {workers} connection(s)): {:>7.0} ms, {}",
                raw.as_secs_f64() * 1e3,
                per_part(raw_cost, parts).lines().next().unwrap_or_default()
            );
        }
        admin.close().await;
        store.close().await;
    });
}
