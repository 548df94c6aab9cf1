//! What a durable promise costs: commit + send of one message through the SQLite outbox (and
//! PostgreSQL when `MESH_BENCH_PG_URL` names a database) against the in-memory commit of a
//! `Recorder`; and what Slack reconciliation costs: one metadata lookup
//! (`conversations.history`, a page of 50 messages) against one `chat.postMessage`, both on
//! the loopback fake.
//!
//! `cargo bench -p mesh-egress --features sqlite,postgres --bench store`
//! (`MESH_BENCH_PG_URL=postgres://user@127.0.0.1:PORT/db` adds the PostgreSQL rows)

use std::hint::black_box;
use std::time::Duration;

use std::time::SystemTime;

use criterion::{Criterion, criterion_group, criterion_main};
use mesh_egress::Surface as Api;
use mesh_egress::channel::{Channel, Deliver, PartLookup, PlainText, Recorder, SlackChannel};
use mesh_egress::store::Store;
use mesh_egress::testing::FakeApi;
use mesh_egress::{AgentMessage, Attribution, Outbound, Ownership};

const BODY: &str = "Deployed **v2** to every region; p99 is back under 50 ms.";

fn message(ownership: Option<mesh_egress::Ownership>) -> AgentMessage {
    let msg = AgentMessage::new(BODY, Attribution::new("ops", "c1", "r1"));
    match ownership {
        Some(o) => msg.with_ownership(o),
        None => msg,
    }
}

fn durable(c: &mut Criterion, rt: &tokio::runtime::Runtime, label: &str, url: &str) {
    let store = rt.block_on(Store::open(url)).expect("store opens");
    let lease = rt
        .block_on(store.acquire("c1", "bench", Duration::from_secs(3600)))
        .expect("lease");
    let channel = store.channel(Recorder::new());
    c.bench_function(&format!("commit+send/{label} outbox, leased"), |b| {
        b.iter(|| {
            rt.block_on(channel.deliver(message(Some(lease.ownership()))))
                .expect("delivers")
        })
    });
    c.bench_function(&format!("commit+send/{label} outbox, no lease"), |b| {
        b.iter(|| {
            rt.block_on(channel.deliver(message(None)))
                .expect("delivers")
        })
    });
    rt.block_on(store.close());
}

fn store(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let memory = Recorder::new();
    c.bench_function("commit+send/in-memory (Recorder)", |b| {
        b.iter(|| {
            rt.block_on(memory.deliver(black_box(message(None))))
                .expect("delivers")
        })
    });
    let dir = std::env::temp_dir().join(format!("mesh-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    durable(
        c,
        &rt,
        "sqlite",
        &format!("sqlite:{}", dir.join("outbox.db").display()),
    );
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(url) = std::env::var("MESH_BENCH_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        durable(c, &rt, "postgres", &url);
    }
}

/// A lookup that reads a whole page of 50 messages without finding its part (the most it
/// reads), against the send it saves.
fn slack_reconciliation(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let api = rt
        .block_on(FakeApi::start(Api::Slack, "xoxb-bench"))
        .expect("fake");
    let slack = SlackChannel::new("xoxb-bench", "C1")
        .with_renderer(PlainText::new())
        .base_url(api.base_url());
    let since = SystemTime::now();
    let probe = rt.block_on(async {
        for _ in 0..50 {
            slack.deliver(message(None)).await.expect("delivers");
        }
        Outbound::new(message(None))
            .render(slack.renderer())
            .expect("renders")
            .commit(&Ownership::held())
            .await
            .expect("commits")
            .into_parts()
            .next()
            .expect("one part")
    });
    c.bench_function("slack/look_up, a page of 50 without the part", |b| {
        b.iter(|| {
            let lookup = rt.block_on(slack.look_up(&probe, since));
            assert_eq!(lookup, PartLookup::NotFound);
        })
    });
    c.bench_function("slack/chat.postMessage", |b| {
        b.iter(|| rt.block_on(slack.deliver(message(None))).expect("delivers"))
    });
}

criterion_group!(benches, store, slack_reconciliation);
criterion_main!(benches);
