//! The ingress classifier's heuristic decision on a typical event vs parsing the same event
//! JSON alone with serde_json (`serde_json::from_slice::<Value>`), goal: within 1.5×.
//!
//! `decide` is everything the classifier does for one event without a judge: the document
//! checks (size, UTF-8, a nesting scan), reading the surface's event into an `Inbound`
//! (mentions, reply-to, thread, address, delivery ids), the one heuristic pass with its state
//! (the duplicate check, the thread window, the bot cap), the complexity signals, remembering
//! the message, and building the ledger row (recorded on a store that discards it, so a growing
//! `Vec` is not measured). The classifier runs in its steady state: each event is one of 20,000
//! distinct ones, cycled, so its delivery memory is full and evicting, and no event is a
//! duplicate when it comes round again. The baseline parses the same cycle of documents.
//!
//! The share of corpus traffic that reaches the judge is reported by
//! `cargo test -p mesh-egress --all-features --test ingress_corpus -- --nocapture`.
//!
//! `cargo bench -p mesh-egress --features ingress --bench ingress` (add `-- --quick` on a busy
//! machine)

#![allow(missing_docs)]

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{Criterion, criterion_group};
use mesh_egress::Surface;
use mesh_egress::engagement::Engagement;
use mesh_egress::ingress::{Identity, Ingress};
use mesh_egress::ledger::{Ledger, LedgerEntry, LedgerStore};
use serde_json::{Value, json};

/// A ledger store that keeps nothing, so the bench measures the classifier, not a growing Vec.
struct Discard;

impl LedgerStore for Discard {
    fn record(&self, entry: LedgerEntry) {
        black_box(entry);
    }

    fn entries(&self) -> Vec<LedgerEntry> {
        Vec::new()
    }
}

/// Distinct events in the cycle: more than the classifier remembers (16,384 delivery ids, two
/// or three per event), so none is a duplicate when it comes round again.
const CYCLE: usize = 20_000;

fn ingress() -> Ingress {
    Ingress::builder(
        Identity::new("Atlas")
            .alias("atlas-bot")
            .slack_user("U0BOTATLAS")
            .discord_user("1100000000000000001")
            .telegram("atlas_support_bot", 7_000_000_001),
    )
    .ledger(Ledger::new(Discard))
    .build()
    .expect("classifier")
}

/// A Slack Events API envelope as Slack sends it (blocks, authorizations and all), message
/// `n` of the cycle.
fn slack(n: usize, text: &str) -> Vec<u8> {
    let ts = format!("{}.{:06}", 1_741_078_800 + n / 1000, n % 1000);
    serde_json::to_vec(&json!({
        "token": "XXYYZZ", "team_id": "T0NORTHWND", "api_app_id": "A0ATLASAPP",
        "event": {
            "type": "message", "channel": "C0OPS", "user": "U0CAROL", "text": text, "ts": ts,
            "event_ts": ts, "channel_type": "channel", "team": "T0NORTHWND",
            "client_msg_id": format!("6d0c8a4e-1f2b-4c3d-9e8f-{n:012}"),
            "blocks": [{"type": "rich_text", "block_id": "Xy1z", "elements": [
                {"type": "rich_text_section", "elements": [
                    {"type": "user", "user_id": "U0BOTATLAS"},
                    {"type": "text", "text": text}]}]}]
        },
        "type": "event_callback",
        "authorizations": [{"enterprise_id": null, "team_id": "T0NORTHWND",
            "user_id": "U0BOTATLAS", "is_bot": true, "is_enterprise_install": false}],
        "event_id": format!("Ev0{n:09}"), "event_time": 1_741_078_800 + n / 1000,
        "event_context": "4-eyJldCI6Im1lc3NhZ2UiLCJ0aWQiOiJUME5PUlRIV05EIn0"
    }))
    .expect("json")
}

/// A Discord `MESSAGE_CREATE` dispatch as the gateway sends it, message `n` of the cycle.
fn discord(n: usize, content: &str) -> Vec<u8> {
    let id = ((1_741_078_800_000u64 - 1_420_070_400_000 + n as u64) << 22).to_string();
    serde_json::to_vec(&json!({"op": 0, "t": "MESSAGE_CREATE", "s": n, "d": {
        "type": 0, "tts": false, "timestamp": "2025-03-04T09:00:00.000000+00:00",
        "pinned": false, "nonce": id, "mentions": [{"id": "1100000000000000001",
            "username": "atlas", "global_name": "Atlas", "avatar": null, "discriminator": "0",
            "public_flags": 0, "bot": true}],
        "mention_roles": [], "mention_everyone": false, "id": id, "flags": 0, "embeds": [],
        "edited_timestamp": null, "content": content, "components": [],
        "channel_id": "1200000000000000001", "guild_id": "900000000000000001",
        "author": {"id": "1300000000000000002", "username": "bob", "global_name": "Bob",
            "avatar": null, "discriminator": "0", "public_flags": 0},
        "member": {"roles": [], "premium_since": null, "pending": false, "nick": null,
            "mute": false, "joined_at": "2024-01-10T10:00:00.000000+00:00", "flags": 0,
            "deaf": false, "communication_disabled_until": null, "avatar": null},
        "attachments": []}}))
    .expect("json")
}

/// A Telegram `Update` with a mention entity, update `n` of the cycle.
fn telegram(n: usize, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"update_id": 400_000_000 + n, "message": {
        "message_id": 5000 + n, "date": 1_741_078_800 + n,
        "from": {"id": 1001, "is_bot": false, "first_name": "Alice", "username": "alice_nw",
            "language_code": "en"},
        "chat": {"id": -1_001_234_567_890_i64, "title": "Northwind Ops", "type": "supergroup"},
        "text": text, "entities": [{"offset": 0, "length": 18, "type": "mention"}]}}))
    .expect("json")
}

/// Polls `decide` once: without a judge it is ready at once.
fn decide_now(ingress: &Ingress, surface: Surface, event: &[u8]) -> Engagement {
    let inbound = ingress.parse(surface, event).expect("a message");
    let decide = pin!(ingress.decide(&inbound));
    match decide.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(decided) => decided,
        Poll::Pending => panic!("a heuristic decision is ready on its first poll"),
    }
}

type Kinds = [(&'static str, Surface, Box<dyn Fn(usize) -> Vec<u8>>); 4];

fn kinds() -> Kinds {
    [
        (
            "slack_mention",
            Surface::Slack,
            Box::new(|n| slack(n, "<@U0BOTATLAS> what's the status of shipment NW-4471?")),
        ),
        (
            "slack_ambient",
            Surface::Slack,
            Box::new(|n| slack(n, "the coffee machine on 3 is broken again")),
        ),
        (
            "discord_mention",
            Surface::Discord,
            Box::new(|n| {
                discord(
                    n,
                    "<@1100000000000000001> what's the shipping cutoff today?",
                )
            }),
        ),
        (
            "telegram_mention",
            Surface::Telegram,
            Box::new(|n| telegram(n, "@atlas_support_bot where is order 5531?")),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("ingress");
    for (label, surface, make) in &kinds() {
        let events: Vec<Vec<u8>> = (0..CYCLE).map(make).collect();
        eprintln!("{label}: {} bytes per event", events[0].len());
        let classifier = ingress();
        let mut next = 0usize;
        group.bench_function(format!("{label}/decide"), |b| {
            b.iter(|| {
                next = (next + 1) % CYCLE;
                black_box(decide_now(&classifier, *surface, black_box(&events[next])))
            });
        });
        let mut next = 0usize;
        group.bench_function(format!("{label}/serde_json_value"), |b| {
            b.iter(|| {
                next = (next + 1) % CYCLE;
                black_box(serde_json::from_slice::<Value>(black_box(&events[next])).expect("json"))
            });
        });
    }
    group.finish();
}

/// `MESH_BENCH_COUNT=N MESH_BENCH_SUBJECT=<kind>/<decide|serde_json_value>`: runs one subject N
/// times outside criterion and exits, for instruction counts under
/// `valgrind --tool=callgrind` (steadier than wall time on a shared machine; subtract a run
/// with `N=0`, which pays only for building the events).
fn counted() -> bool {
    let (Ok(count), Ok(subject)) = (
        std::env::var("MESH_BENCH_COUNT"),
        std::env::var("MESH_BENCH_SUBJECT"),
    ) else {
        return false;
    };
    let count: usize = count.parse().expect("MESH_BENCH_COUNT is a number");
    let (kind, what) = subject.split_once('/').expect("<kind>/<subject>");
    let (_, surface, make) = kinds()
        .into_iter()
        .find(|(label, ..)| *label == kind)
        .expect("a kind the bench knows");
    let events: Vec<Vec<u8>> = (0..CYCLE).map(make).collect();
    let classifier = ingress();
    for i in 0..count {
        let event = black_box(&events[i % CYCLE]);
        match what {
            "decide" => {
                black_box(decide_now(&classifier, surface, event));
            }
            "serde_json_value" => {
                black_box(serde_json::from_slice::<Value>(event).expect("json"));
            }
            other => panic!("unknown subject {other}"),
        }
    }
    true
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}

fn main() {
    if counted() {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
