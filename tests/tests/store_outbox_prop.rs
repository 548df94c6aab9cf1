//! A property of the durable outbox, on both backends: under random API failures and random
//! crashes (the delivering future dropped in the middle of a send, before or after the
//! surface posted), then `Store::resend` as often as it takes, no committed part is lost, none
//! is posted twice on a surface that dedupes (Discord's nonce) or can be looked up (Slack's
//! metadata), and every other part is posted once or marked `uncertain` — never twice.

mod store_support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use mesh_egress::channel::{Channel, Deliver, PartLookup, PartReceipt, PlainText, SendError};
use mesh_egress::store::{Lease, PartState, Store};
use mesh_egress::{Address, AgentMessage, Attribution, CommittedPart, Surface};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tokio::sync::Notify;

use store_support::{Backend, LONG, at_once};

/// What the surface does with the next send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Accept,
    /// Posts, then the answer is lost: a retryable error without `Retry-After`.
    Lost,
    /// Does not post; a retryable error without `Retry-After` (a reset before the request).
    Unknown,
    /// Does not post; "not now".
    RetryAfter,
    /// Does not post; refused for good.
    Refuse,
    /// The process dies during the send, after the surface posted.
    CrashAfterPost,
    /// The process dies during the send, before anything reached the surface.
    CrashBeforePost,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        4 => Just(Fault::Accept),
        2 => Just(Fault::Lost),
        1 => Just(Fault::Unknown),
        1 => Just(Fault::RetryAfter),
        1 => Just(Fault::Refuse),
        2 => Just(Fault::CrashAfterPost),
        1 => Just(Fault::CrashBeforePost),
    ]
}

/// The surface the outbox is configured for, and what the fake can do.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Discord,
    SlackWithHistory,
    SlackWithoutHistory,
    Telegram,
}

impl Kind {
    /// The chat the model surface stands in for: its surface picks the duplicate rules.
    fn address(self) -> Address {
        let surface = match self {
            Self::Discord => Surface::Discord,
            Self::SlackWithHistory | Self::SlackWithoutHistory => Surface::Slack,
            Self::Telegram => Surface::Telegram,
        };
        store_support::stand_in(surface)
    }
}

#[derive(Default)]
struct Posted {
    /// Every post, in order: (idempotency key, id).
    log: Vec<(String, String)>,
}

/// An in-memory surface following a script: Discord-like dedupe by the part's idempotency key
/// (the nonce), a Slack-like lookup by the part's identity, or neither.
#[derive(Clone)]
struct ModelSurface {
    kind: Kind,
    renderer: PlainText,
    script: Arc<Mutex<VecDeque<Fault>>>,
    posted: Arc<Mutex<Posted>>,
    crashed: Arc<Notify>,
}

impl ModelSurface {
    fn new(kind: Kind, script: Vec<Fault>) -> Self {
        Self {
            kind,
            renderer: PlainText::new().with_limit(10),
            script: Arc::new(Mutex::new(script.into())),
            posted: Arc::default(),
            crashed: Arc::new(Notify::new()),
        }
    }

    /// Posts `part` as the surface would; the id it holds the part under.
    fn post(&self, part: &CommittedPart) -> String {
        let mut posted = self.posted.lock().unwrap();
        let key = part.idempotency_key();
        if matches!(self.kind, Kind::Discord)
            && let Some((_, id)) = posted.log.iter().find(|(k, _)| *k == key)
        {
            return id.clone();
        }
        let id = format!("m{}", posted.log.len() + 1);
        posted.log.push((key, id.clone()));
        id
    }

    fn count(&self, key: &str) -> usize {
        self.posted
            .lock()
            .unwrap()
            .log
            .iter()
            .filter(|(k, _)| k == key)
            .count()
    }
}

impl Channel for ModelSurface {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn address(&self) -> Address {
        self.kind.address()
    }

    async fn send(&self, part: CommittedPart) -> Result<PartReceipt, SendError> {
        let step = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Fault::Accept);
        let already = matches!(self.kind, Kind::Discord) && self.count(&part.idempotency_key()) > 0;
        match step {
            Fault::CrashAfterPost | Fault::CrashBeforePost => {
                if step == Fault::CrashAfterPost {
                    self.post(&part);
                }
                self.crashed.notify_one();
                std::future::pending().await
            }
            // Discord answers a known nonce with the message it has, whatever else is wrong.
            _ if already => Ok(PartReceipt::new(self.post(&part))),
            Fault::Accept => Ok(PartReceipt::new(self.post(&part))),
            Fault::Lost => {
                self.post(&part);
                Err(SendError::new(part, "response lost"))
            }
            Fault::Unknown => Err(SendError::new(part, "connection reset")),
            Fault::RetryAfter => {
                Err(SendError::new(part, "rate limited").with_retry_after(Duration::from_secs(1)))
            }
            Fault::Refuse => Err(SendError::new(part, "refused").with_retryable(false)),
        }
    }

    async fn look_up(&self, part: &CommittedPart, _since: SystemTime) -> PartLookup {
        if !matches!(self.kind, Kind::SlackWithHistory) {
            return PartLookup::unknown("no lookup");
        }
        let posted = self.posted.lock().unwrap();
        match posted
            .log
            .iter()
            .find(|(k, _)| *k == part.idempotency_key())
        {
            Some((_, id)) => PartLookup::Found(PartReceipt::new(id.clone())),
            None => PartLookup::NotFound,
        }
    }
}

#[derive(Clone, Debug)]
struct Scenario {
    kind: Kind,
    /// Each message's body: words of ten code points, one part each.
    messages: Vec<usize>,
    script: Vec<Fault>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop_oneof![
            Just(Kind::Discord),
            Just(Kind::SlackWithHistory),
            Just(Kind::SlackWithoutHistory),
            Just(Kind::Telegram)
        ],
        prop::collection::vec(1usize..=3, 1..=2),
        prop::collection::vec(fault(), 0..10),
    )
        .prop_map(|(kind, messages, script)| Scenario {
            kind,
            messages,
            script,
        })
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Runs `work` unless the surface reports a crash first, in which case `work` is dropped
/// where it stood (as a killed process would leave it). True when it crashed.
async fn unless_crashed<F: std::future::Future>(surface: &ModelSurface, work: F) -> bool {
    tokio::select! {
        _ = work => false,
        () = surface.crashed.notified() => true,
    }
}

/// A restarted worker: the same holder, a new lease (and fencing token).
async fn restart(store: &Store, conversation: &str) -> Lease {
    store.acquire(conversation, "w1", LONG).await.unwrap()
}

/// Resends until nothing is open in `conversation`, restarting after each crash. Every round
/// settles a part or consumes a step of the script, so the bound is reached only if parts
/// stay open for good.
async fn settle(
    store: &Store,
    channel: &mesh_egress::store::Durable<ModelSurface>,
    surface: &ModelSurface,
    conversation: &str,
    lease: &mut Lease,
) -> Result<(), TestCaseError> {
    let mut rounds = 0;
    loop {
        let open = store
            .parts(conversation)
            .await
            .unwrap()
            .iter()
            .any(|p| matches!(p.state, PartState::Pending | PartState::Sending));
        if !open {
            return Ok(());
        }
        rounds += 1;
        prop_assert!(rounds <= 40, "parts still open after 40 resends");
        if unless_crashed(surface, store.resend(channel, lease)).await {
            *lease = restart(store, conversation).await;
        }
    }
}

async fn check(store: &Store, scenario: Scenario) -> Result<(), TestCaseError> {
    let conversation = format!("prop-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let surface = ModelSurface::new(scenario.kind, scenario.script.clone());
    // Due again at once: this is about what is lost or doubled, not when a part is tried
    // (the backoff: `worker_retry.rs`).
    let channel = store.channel(surface.clone()).with_retry(at_once());
    let mut lease = restart(store, &conversation).await;
    for (m, &parts) in scenario.messages.iter().enumerate() {
        let body: Vec<String> = (0..parts).map(|p| format!("m{m}p{p}word.")).collect();
        let message =
            AgentMessage::new(body.join(" "), Attribution::new("ops", &conversation, "r1"))
                .with_ownership(lease.ownership());
        if unless_crashed(&surface, channel.deliver(message)).await {
            lease = restart(store, &conversation).await;
        }
        // A worker settles what is open in a conversation before it sends anything new there.
        settle(store, &channel, &surface, &conversation, &mut lease).await?;
    }
    let rows = store.parts(&conversation).await.unwrap();
    let committed: usize = scenario.messages.iter().sum();
    prop_assert_eq!(rows.len(), committed, "every committed part has its row");
    let refusals = scenario.script.contains(&Fault::Refuse);
    let posted = surface.posted.lock().unwrap().log.clone();
    for row in &rows {
        let key = format!("{}-{}", row.delivery, row.index);
        let count = posted.iter().filter(|(k, _)| *k == key).count();
        prop_assert!(
            count <= 1,
            "{key} posted {count} times on {:?}",
            scenario.kind
        );
        match row.state {
            PartState::Sent => {
                prop_assert_eq!(count, 1, "{} is sent but not on the surface", key);
                let id = posted
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, id)| id.clone());
                prop_assert_eq!(row.platform_id.clone(), id, "{} has the surface's id", key);
            }
            PartState::Uncertain => prop_assert!(
                matches!(scenario.kind, Kind::SlackWithoutHistory | Kind::Telegram),
                "{key} is uncertain on {:?}, which can settle it",
                scenario.kind
            ),
            PartState::Failed => {
                prop_assert!(refusals, "{key} failed without a refusal");
                prop_assert_eq!(count, 0, "{} failed but is on the surface", key);
            }
            other => prop_assert!(false, "{key} is still {other:?}"),
        }
    }
    // What reached the surface is in commit order.
    let order: Vec<usize> = posted
        .iter()
        .map(|(k, _)| {
            rows.iter()
                .position(|r| format!("{}-{}", r.delivery, r.index) == *k)
                .expect("only committed parts are posted")
        })
        .collect();
    prop_assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "posted out of order: {order:?}"
    );
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
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&scenario(), |scenario| {
        runtime.block_on(check(&store, scenario))
    });
    runtime.block_on(store.close());
    if let Err(error) = result {
        panic!("{error}");
    }
}

#[test]
fn no_part_is_lost_or_doubled_under_random_crashes_and_failures_sqlite() {
    run(Backend::Sqlite);
}

#[test]
fn no_part_is_lost_or_doubled_under_random_crashes_and_failures_postgres() {
    run(Backend::Postgres);
}
