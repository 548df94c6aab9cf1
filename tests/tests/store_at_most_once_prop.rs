//! A property of at most once (issue 21), on both backends, against the loopback Slack,
//! Discord and Telegram fakes: two senders over several conversations, random API failures (a
//! lost answer, a 429 asking for longer than the lease, a 5xx, Slack's `internal_error`, an
//! unreadable 2xx) and random lease lapses (sender A's lease, never renewed, runs out while it
//! waits; sender B takes the conversation as soon as it can and sends what A left, pass after
//! pass). Whatever happens, every part is shown at most once (unless the conversation's
//! outbox was told `UnknownOutcome::SendAgain`), only in its own conversation, and in the end
//! either shown or `uncertain` (with its ledger row) or `failed`; a `sent` part is shown.
//!
//! At most 12 cases per backend; each case is bounded (its senders finish within seconds).

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::stream::BudgetConfig;
use mesh_egress::channel::{
    BoxedChannel, Deliver, DiscordChannel, PlainText, SlackChannel, TelegramChannel,
};
use mesh_egress::ledger::{Ledger, LedgerRecord, OutboxRecord};
use mesh_egress::store::{Lease, PartState, Store, StoreError, UnknownOutcome};
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{AgentMessage, Attribution, Surface};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use store_support::{Backend, LONG};

const TOKEN: &str = "123456789:AAF-prop-token";
/// Sender A's lease: shorter than every 429's wait, so waiting one out lapses it.
const A_LEASE: Duration = Duration::from_millis(300);
/// How long a case's senders may take, in all.
const BOUND: Duration = Duration::from_secs(20);
/// How many passes sender B makes at most (each with a fresh connector: no inherited pause).
const PASSES: usize = 8;

/// What the surface does with one send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Accept,
    /// Posted, answer lost.
    LostAnswer,
    /// Not posted; a 429 asking for longer than A's lease.
    LongRateLimit,
    /// A 5xx, posted or not.
    ServerError {
        posted: bool,
    },
    /// Slack's `internal_error` (another surface: a 5xx), posted or not.
    InternalError {
        posted: bool,
    },
    /// Posted, answered with a 2xx that is not JSON.
    Unreadable,
}

impl Fault {
    fn step(self, surface: Surface) -> ChatStep {
        let then = |posted: bool, answer: FakeResponse| {
            if posted {
                ChatStep::AcceptThen(answer)
            } else {
                ChatStep::Answer(answer)
            }
        };
        match self {
            Self::Accept => ChatStep::Accept,
            Self::LostAnswer => ChatStep::lost_response(),
            Self::LongRateLimit => {
                // Whole seconds on Slack and Telegram; fractional on Discord.
                let wait = match surface {
                    Surface::Discord => Duration::from_millis(500),
                    _ => Duration::from_secs(1),
                };
                ChatStep::Answer(FakeResponse::chat_rate_limited(surface, wait))
            }
            Self::ServerError { posted } => {
                then(posted, FakeResponse::chat_server_error(surface, 503))
            }
            Self::InternalError { posted } => {
                let answer = match surface {
                    Surface::Slack => FakeResponse::raw(
                        200,
                        serde_json::json!({ "ok": false, "error": "internal_error" }).to_string(),
                    ),
                    _ => FakeResponse::chat_server_error(surface, 500),
                };
                then(posted, answer)
            }
            Self::Unreadable => ChatStep::AcceptThen(FakeResponse::not_json(200)),
        }
    }
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        3 => Just(Fault::Accept),
        2 => Just(Fault::LostAnswer),
        2 => Just(Fault::LongRateLimit),
        1 => any::<bool>().prop_map(|posted| Fault::ServerError { posted }),
        1 => any::<bool>().prop_map(|posted| Fault::InternalError { posted }),
        1 => Just(Fault::Unreadable),
    ]
}

/// One conversation of a case.
#[derive(Clone, Debug)]
struct Conversation {
    surface: Surface,
    parts: usize,
    faults: Vec<Fault>,
    /// Whether A's lease is renewed while it sends (otherwise it may lapse).
    renewed: bool,
    /// After how long B starts asking for the conversation.
    b_after_ms: u64,
    send_again: bool,
}

fn conversation() -> impl Strategy<Value = Conversation> {
    (
        prop_oneof![
            Just(Surface::Slack),
            Just(Surface::Discord),
            Just(Surface::Telegram)
        ],
        1usize..4,
        prop::collection::vec(fault(), 0..5),
        any::<bool>(),
        0u64..500,
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(surface, parts, faults, renewed, b_after_ms, send_again)| Conversation {
                surface,
                parts,
                faults,
                renewed,
                b_after_ms,
                send_again,
            },
        )
}

fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(3)
        .backoff(Duration::from_millis(2))
        .max_wait(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(2))
}

/// A fresh connector of `surface` to the conversation's own chat on `api`.
fn connector(surface: Surface, api: &FakeApi, chat: usize) -> BoxedChannel {
    let renderer = PlainText::new().with_limit(12);
    let budget = BudgetConfig::new(Duration::ZERO);
    match surface {
        Surface::Slack => BoxedChannel::new(
            SlackChannel::new(TOKEN, format!("C{chat:08}"))
                .with_renderer(renderer)
                .with_stream_budget(budget)
                .base_url(api.base_url())
                .policy(policy()),
        ),
        Surface::Discord => BoxedChannel::new(
            DiscordChannel::new(TOKEN, format!("11000000000000000{chat:02}"))
                .with_renderer(renderer)
                .with_stream_budget(budget)
                .base_url(api.base_url())
                .policy(policy()),
        ),
        _ => BoxedChannel::new(
            TelegramChannel::new(TOKEN, format!("-100{chat:010}"))
                .with_renderer(renderer)
                .with_stream_budget(budget)
                .base_url(api.base_url())
                .policy(policy()),
        ),
    }
}

/// Conversation names are unique over every case on one store.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The texts of a conversation's parts: unique over the whole test, 12 characters each.
fn texts(id: u32, parts: usize) -> Vec<String> {
    (0..parts).map(|p| format!("c{id:06}p{p}xxx")).collect()
}

/// What one conversation's senders share.
#[derive(Clone)]
struct Shared {
    store: Store,
    name: String,
    spec: Conversation,
    api: Arc<FakeApi>,
    chat: usize,
    ledger: Ledger,
}

impl Shared {
    fn durable(&self) -> mesh_egress::store::Durable<BoxedChannel> {
        // Due again at once: this is about how often a part is shown, not when it is tried
        // (the backoff: `worker_retry.rs`).
        self.store
            .channel(connector(self.spec.surface, &self.api, self.chat))
            .with_ledger(self.ledger.clone())
            .with_retry(store_support::at_once())
    }
}

/// Sender A: holds the conversation with a short lease (renewed or not), commits its message
/// and delivers it.
async fn sender_a(shared: Shared, lease: Lease, body: String) {
    let Shared {
        store, name, spec, ..
    } = &shared;
    let renewal = spec.renewed.then(|| store.keep_renewed(&lease, A_LEASE));
    let message = AgentMessage::new(body, Attribution::new("ops", name, "r1"))
        .with_ownership(lease.ownership());
    // Whatever it ends with (delivered, handed back, ownership lost), the outbox has it.
    let _ = shared.durable().deliver(message).await;
    drop(renewal);
    if lease.is_held() {
        let _ = store.release(lease).await;
    }
}

/// Sender B: asks for the conversation until it gets it, then resends pass after pass, each
/// through a fresh connector, until nothing is open.
async fn sender_b(shared: Shared) {
    let Shared {
        store, name, spec, ..
    } = &shared;
    tokio::time::sleep(Duration::from_millis(spec.b_after_ms)).await;
    let lease = loop {
        match store.acquire(name, "sender-b", LONG).await {
            Ok(lease) => break lease,
            Err(StoreError::LeaseHeld { .. }) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("{other}"),
        }
    };
    let knob = if spec.send_again {
        UnknownOutcome::SendAgain
    } else {
        UnknownOutcome::Uncertain
    };
    for _ in 0..PASSES {
        let durable = shared.durable().with_unknown_outcome(knob);
        store.resend(&durable, &lease).await.unwrap();
        let open = store
            .parts(name)
            .await
            .unwrap()
            .iter()
            .any(|p| matches!(p.state, PartState::Pending | PartState::Sending));
        if !open {
            break;
        }
    }
}

async fn check(store: &Store, case: Vec<Conversation>) -> Result<(), TestCaseError> {
    let mut apis = Vec::new();
    for spec in &case {
        let api = FakeApi::start(spec.surface, TOKEN).await.unwrap();
        api.script(spec.faults.iter().map(|f| f.step(spec.surface)));
        apis.push(Arc::new(api));
    }
    let ids: Vec<u32> = case
        .iter()
        .map(|_| NEXT.fetch_add(1, Ordering::Relaxed))
        .collect();
    let names: Vec<String> = ids.iter().map(|id| format!("prop-{id}")).collect();
    let ledger = Ledger::in_memory();
    let mut senders = tokio::task::JoinSet::new();
    for (i, spec) in case.iter().enumerate() {
        let shared = Shared {
            store: store.clone(),
            name: names[i].clone(),
            spec: spec.clone(),
            api: Arc::clone(&apis[i]),
            chat: i,
            ledger: ledger.clone(),
        };
        // A has the conversation first; B waits for it.
        let lease = store.acquire(&names[i], "sender-a", A_LEASE).await.unwrap();
        senders.spawn(sender_a(
            shared.clone(),
            lease,
            texts(ids[i], spec.parts).concat(),
        ));
        senders.spawn(sender_b(shared));
    }
    let finished = tokio::time::timeout(BOUND, async {
        while let Some(joined) = senders.join_next().await {
            joined.expect("a sender panicked");
        }
    })
    .await;
    prop_assert!(
        finished.is_ok(),
        "the senders did not finish within {BOUND:?}"
    );

    let reported: Vec<(String, usize)> = ledger
        .entries()
        .iter()
        .filter_map(|e| match e.record() {
            LedgerRecord::Outbox(OutboxRecord::Uncertain { delivery, part, .. }) => {
                Some((delivery.clone(), *part))
            }
            _ => None,
        })
        .collect();
    for (i, spec) in case.iter().enumerate() {
        let rows = store.parts(&names[i]).await.unwrap();
        let expected = texts(ids[i], spec.parts);
        prop_assert_eq!(rows.len(), expected.len());
        for (row, text) in rows.iter().zip(&expected) {
            prop_assert_eq!(&row.text, text);
            let shown = apis[i].texts().iter().filter(|t| *t == text).count();
            for (j, other) in apis.iter().enumerate() {
                if j != i {
                    prop_assert!(
                        !other.texts().contains(text),
                        "{} reached another conversation",
                        text
                    );
                }
            }
            if !spec.send_again {
                prop_assert!(shown <= 1, "{} shown {} times: {:?}", text, shown, spec);
            }
            match row.state {
                PartState::Sent => prop_assert!(shown >= 1, "{} sent but not shown", text),
                PartState::Uncertain => prop_assert!(
                    reported.contains(&(row.delivery.clone(), row.index)),
                    "{} uncertain without its ledger row",
                    text
                ),
                PartState::Failed => {}
                other => prop_assert!(false, "{} left {:?}: {:?}", text, other, spec),
            }
        }
    }
    Ok(())
}

fn run(backend: Backend) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let place = backend.place();
    let store = runtime.block_on(Store::open(&place.url)).unwrap();
    let mut runner = TestRunner::new(Config {
        cases: 12,
        failure_persistence: None,
        ..Config::default()
    });
    let cases = prop::collection::vec(conversation(), 2..4);
    let result = runner.run(&cases, |case| runtime.block_on(check(&store, case)));
    runtime.block_on(store.close());
    if let Err(error) = result {
        panic!("{error}");
    }
}

#[test]
fn every_part_is_shown_at_most_once_in_its_own_conversation_or_reported_sqlite() {
    run(Backend::Sqlite);
}

#[test]
fn every_part_is_shown_at_most_once_in_its_own_conversation_or_reported_postgres() {
    run(Backend::Postgres);
}
