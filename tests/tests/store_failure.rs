//! A store failure is not a lost ownership (issue 21, scenario 3), on a SQLite file and on a
//! throwaway PostgreSQL cluster, against the loopback Discord fake. The store's journal is made
//! to fail mid-stream (a streamed answer sent by the front door, `Bot::send_to`, through the
//! outbox) with the test-only hook `Store::fail_journal_writes` (feature
//! `failpoints`), as SQLite busy past its timeout or a PostgreSQL failover would: the stream
//! stops, the block that was rate limited and never shown goes back to `pending`, the turn ends
//! with a typed store error, and a resend with the store answering again sends the rest, each
//! block once.

mod store_support;

use std::time::Duration;

use mesh_egress::CommitError;
use mesh_egress::Surface as Api;
use mesh_egress::bot::Delivery;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::stream::BudgetConfig;
use mesh_egress::channel::{DeliveryError, DiscordChannel};
use mesh_egress::ledger::{Ledger, LedgerRecord, OutboxRecord};
use mesh_egress::store::{PartState, Store, StoredPart};
use mesh_egress::stream::CutterConfig;
use mesh_egress::testing::{FakeApi, FakeResponse};
use mesh_egress::{Address, AnswerStream, Attribution, Bot, EgressError, Turn, egress_boundary};

use store_support::{Backend, LONG, paced};

const TOKEN: &str = "discord-store-failure-token";
const BOUND: Duration = Duration::from_secs(20);
const BLOCKS: [&str; 4] = [
    "The build finished and every test passed.",
    "Deploying to staging now, it takes a minute.",
    "Then production follows after the checks.",
    "The release notes go up once it is live.",
];

both_backends!(
    a_store_failure_mid_stream_hands_back_the_block_never_shown_and_a_resend_sends_the_rest,
    when_even_the_hand_back_fails_the_rows_stay_and_the_resend_rules_apply,
);

fn discord(api: &FakeApi) -> DiscordChannel {
    DiscordChannel::new(TOKEN, "1100000000000000001")
        .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)))
        .base_url(api.base_url())
        .policy(
            SendPolicy::new()
                .max_tries(2)
                .backoff(Duration::from_millis(2))
                .max_wait(Duration::from_secs(3))
                .request_timeout(Duration::from_secs(5)),
        )
}

struct Run {
    _place: store_support::Place,
    store: Store,
    api: FakeApi,
    ledger: Ledger,
    result: Result<Delivery, DeliveryError>,
    rows_after_turn: Vec<StoredPart>,
}

/// [`BLOCKS`] as a model sends them, 60 ms apart.
#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AnswerStream, EgressError> {
    Ok(paced(turn, &BLOCKS, Duration::from_millis(60)))
}

/// Streams [`BLOCKS`] onto Discord's post-then-edit stream through the outbox. The edit that
/// would show the second block is rate limited (half a second, so it is not shown), and while
/// the stream waits the store's journal starts failing `failing_writes` writes.
async fn stream_into_a_failing_store(backend: Backend, failing_writes: u32) -> Run {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let api = FakeApi::start(Api::Discord, TOKEN).await.unwrap();
    api.script_method(
        "editMessage",
        [FakeResponse::chat_rate_limited(
            Api::Discord,
            Duration::from_millis(500),
        )],
    );
    let lease = store.acquire("failing", "worker-a", LONG).await.unwrap();
    let ledger = Ledger::in_memory();
    let durable = store.channel(discord(&api)).with_ledger(ledger.clone());
    let bot = Bot::new()
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None);
    let turn = bot
        .turn(
            Address::Plain,
            Attribution::new("ops-bot", "failing", "run-1"),
        )
        .with_ownership(lease.ownership())
        .with_ledger(ledger.clone());
    let reply = answer(&turn).await;
    let streamed = bot.send_to(&turn, &durable, reply);
    let fail = async {
        // The second block's edit was rate limited: marked `sending`, not shown.
        let reached = tokio::time::timeout(BOUND, async {
            loop {
                let rows = store.parts("failing").await.unwrap();
                if api.calls_to("editMessage") >= 1
                    && rows.get(1).is_some_and(|r| r.state == PartState::Sending)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await;
        assert!(reached.is_ok(), "the second block's edit never went");
        store.fail_journal_writes(failing_writes);
    };
    let (result, ()) = tokio::time::timeout(BOUND, async { tokio::join!(streamed, fail) })
        .await
        .expect("the streamed turn ends in time");
    let rows_after_turn = store.parts("failing").await.unwrap();
    // The store answers again: a worker's pass sends what the outbox holds.
    let worker = store.channel(discord(&api)).with_ledger(ledger.clone());
    store.resend(&worker, &lease).await.unwrap();
    Run {
        _place: place,
        store,
        api,
        ledger,
        result,
        rows_after_turn,
    }
}

fn times_shown(api: &FakeApi, block: &str) -> usize {
    api.texts().iter().map(|t| t.matches(block).count()).sum()
}

fn states(rows: &[StoredPart]) -> Vec<PartState> {
    rows.iter().map(|r| r.state).collect()
}

async fn a_store_failure_mid_stream_hands_back_the_block_never_shown_and_a_resend_sends_the_rest(
    backend: Backend,
) {
    let run = stream_into_a_failing_store(backend, 1).await;

    for block in BLOCKS {
        assert_eq!(
            times_shown(&run.api, block),
            1,
            "{block:?}: {:?}",
            run.api.texts()
        );
    }
    assert_eq!(
        states(&run.rows_after_turn),
        [
            PartState::Sent,
            PartState::Pending,
            PartState::Pending,
            PartState::Pending
        ],
        "the block never shown went back to pending: {:?}",
        run.rows_after_turn
    );
    let error = run
        .result
        .expect_err("the turn ends with the store's error");
    assert!(error.is_store_failure(), "{error:?}");
    assert!(
        matches!(error, DeliveryError::Commit(CommitError::Store(_))),
        "{error:?}"
    );
    let rows = run.store.parts("failing").await.unwrap();
    assert_eq!(states(&rows), [PartState::Sent; 4]);
    assert!(run.ledger.entries().iter().all(|e| !matches!(
        e.record(),
        LedgerRecord::Outbox(OutboxRecord::Uncertain { .. })
    )));
}

/// The documented limit of "best effort": when the store cannot even hand the unshown block
/// back, its row stays `sending`, and the resend settles it by the unknown-outcome rules
/// (`uncertain` by default, reported on the ledger): never sent twice, though the person may
/// not see it. The blocks never given to a call are sent once.
async fn when_even_the_hand_back_fails_the_rows_stay_and_the_resend_rules_apply(backend: Backend) {
    let run = stream_into_a_failing_store(backend, 2).await;

    assert_eq!(
        states(&run.rows_after_turn),
        [
            PartState::Sent,
            PartState::Sending,
            PartState::Pending,
            PartState::Pending
        ],
        "{:?}",
        run.rows_after_turn
    );
    assert!(run.result.expect_err("a store error").is_store_failure());
    let rows = run.store.parts("failing").await.unwrap();
    assert_eq!(
        states(&rows),
        [
            PartState::Sent,
            PartState::Uncertain,
            PartState::Sent,
            PartState::Sent
        ]
    );
    let reported = run
        .ledger
        .entries()
        .iter()
        .filter(|e| {
            matches!(
                e.record(),
                LedgerRecord::Outbox(OutboxRecord::Uncertain {
                    part: 0,
                    after_restart: true,
                    ..
                })
            )
        })
        .count();
    assert_eq!(reported, 1, "the uncertain block is on the ledger");
    for (block, times) in BLOCKS.iter().zip([1, 0, 1, 1]) {
        assert_eq!(times_shown(&run.api, block), times, "{block:?}");
    }
}
