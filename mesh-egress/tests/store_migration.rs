//! Rows stored before migration 0004 (no address), on a SQLite file and on PostgreSQL: the
//! database is built exactly as the previous release left it (its migrations 0001-0003
//! applied, a part and a promise inserted with its statements), then opened by this release,
//! which migrates it. A worker never sends such a row to a guessed destination: the parts
//! become `failed`, the promise ends `cancelled`, each gets a ledger row, one `warn` names the
//! conversation, and nothing reaches any chat. `Store::readdress` then sends them where the
//! operator says.

#[path = "../../tests/tests/support/postgres.rs"]
#[allow(dead_code, unreachable_pub)]
mod postgres;
#[path = "../../tests/tests/support/mod.rs"]
mod support;

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

use mesh_egress::address::SlackAddress;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::{PlainText, SlackClient};
use mesh_egress::ledger::{Ledger, LedgerRecord, OutboxRecord};
use mesh_egress::store::{CommitmentStatus, PartState, Readdressed, Store};
use mesh_egress::testing::FakeApi;
use mesh_egress::worker::Worker;
use mesh_egress::{
    Address, AgentMessage, Bot, Cancellation, EgressError, Surface, Turn, egress_boundary,
};
use sqlx::migrate::{Migration, MigrationType, Migrator};

const TOKEN: &str = "xoxb-migration-SECRET";
const CONVERSATION: &str = "legacy";
/// How long a worker run may take.
const BOUND: Duration = Duration::from_secs(20);

/// The previous release's migrations, as it shipped them.
fn previous_release(backend: &str) -> Migrator {
    let files: [(i64, &str, &str); 3] = match backend {
        "sqlite" => [
            (
                1,
                "outbox leases commitments",
                include_str!("../migrations/sqlite/0001_outbox_leases_commitments.sql"),
            ),
            (
                2,
                "ledger retention",
                include_str!("../migrations/sqlite/0002_ledger_retention.sql"),
            ),
            (
                3,
                "streamed parts",
                include_str!("../migrations/sqlite/0003_streamed_parts.sql"),
            ),
        ],
        _ => [
            (
                1,
                "outbox leases commitments",
                include_str!("../migrations/postgres/0001_outbox_leases_commitments.sql"),
            ),
            (
                2,
                "ledger retention",
                include_str!("../migrations/postgres/0002_ledger_retention.sql"),
            ),
            (
                3,
                "streamed parts",
                include_str!("../migrations/postgres/0003_streamed_parts.sql"),
            ),
        ],
    };
    Migrator {
        migrations: Cow::Owned(
            files
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect(),
        ),
        ..Migrator::DEFAULT
    }
}

// The previous release's statements, with its clock: a two-part Slack message committed and
// never sent, and a promise due now.
const OLD_INSERT_PART: &str = "INSERT INTO mesh_outbox_parts \
     (delivery, part_index, total, conversation, agent, run, surface, body, idempotency_key, \
      state, lease_holder, lease_token, created_ms, updated_ms) \
     VALUES ($1, $2, 2, 'legacy', 'bot', 'r0', 'slack', $3, $4, 'pending', NULL, NULL, $5, $5)";
const OLD_INSERT_COMMITMENT: &str = "INSERT INTO mesh_commitments \
     (id, conversation, surface, agent, run, handler, input, mode, gate, system_prompt, plan, \
      due_ms, attempts_made, state, created_ms, updated_ms) \
     VALUES ($1, 'legacy', 'slack', 'bot', 'r1', 'answer', '\"status?\"', 'interactive', NULL, \
             NULL, '{\"first_delay_ms\":0,\"max_delay_ms\":0,\"attempts\":2}', $2, 0, 'pending', \
             $2, $2)";
const PARTS: [&str; 2] = ["The deploy started.", "It is half done."];
const COMMITMENT_ID: &str = "c0000000000000000000000000000000a";

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// A database as the previous release left it: migrated to 0003, a part pair and a promise in.
async fn previous_release_database(backend: &str, url: &str) {
    macro_rules! fill {
        ($pool:expr) => {{
            let pool = $pool;
            previous_release(backend).run(&pool).await.unwrap();
            for (index, text) in PARTS.iter().enumerate() {
                let index = i64::try_from(index).unwrap();
                sqlx::query(OLD_INSERT_PART)
                    .bind("00000000000000aa")
                    .bind(index)
                    .bind(*text)
                    .bind(format!("00000000000000aa-{index}"))
                    .bind(now_ms())
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            sqlx::query(OLD_INSERT_COMMITMENT)
                .bind(COMMITMENT_ID)
                .bind(now_ms())
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        }};
    }
    if backend == "sqlite" {
        let options = url
            .parse::<sqlx::sqlite::SqliteConnectOptions>()
            .unwrap()
            .create_if_missing(true);
        fill!(sqlx::SqlitePool::connect_with(options).await.unwrap());
    } else {
        fill!(sqlx::PgPool::connect(url).await.unwrap());
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn place(backend: &str, name: &str) -> (String, Option<TempDir>) {
    if backend == "sqlite" {
        let dir =
            std::env::temp_dir().join(format!("mesh-migration-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite:{}", dir.join("store.db").display());
        (url, Some(TempDir(dir)))
    } else {
        (postgres::fresh_database_url(), None)
    }
}

#[egress_boundary(interactive)]
async fn answer(turn: &Turn, _input: serde_json::Value) -> Result<AgentMessage, EgressError> {
    Ok(turn.message(format!("answer at {}", turn.address())))
}

/// A worker built from the one door: a bot with `store`, `client` and the route `answer`.
fn worker(store: &Store, client: SlackClient<PlainText>, ledger: Option<Ledger>) -> Worker {
    let mut bot = Bot::new().with_store(store.clone()).with_client(client);
    if let Some(ledger) = ledger {
        bot = bot.with_ledger(ledger);
    }
    let _route = bot.route(
        "answer",
        |turn: Turn, input: serde_json::Value| async move { answer(&turn, input).await },
    );
    bot.worker("worker").expect("a store")
}

async fn rows_without_an_address_are_never_sent_to_a_guessed_destination(backend: &str) {
    let (url, _dir) = place(backend, "none");
    previous_release_database(backend, &url).await;
    // This release opens it: migration 0004 adds the address columns, NULL for these rows.
    let store = Store::open(&url).await.unwrap();
    let parts = store.parts(CONVERSATION).await.unwrap();
    assert_eq!(parts.len(), 2);
    assert!(
        parts
            .iter()
            .all(|p| p.address.is_none() && p.state == PartState::Pending)
    );
    assert_eq!(
        store.commitments(CONVERSATION).await.unwrap()[0].address,
        None
    );

    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let client = SlackClient::new(TOKEN)
        .with_renderer(PlainText::new())
        .base_url(api.base_url())
        .policy(SendPolicy::new().max_tries(1));
    let ledger = Ledger::in_memory();
    let worker = worker(&store, client.clone(), Some(ledger.clone()))
        .with_poll_interval(Duration::from_millis(20));
    let (events, _guard) = support::capture();
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(
        (
            report.parts_unaddressed,
            report.unaddressed,
            report.fulfilled
        ),
        (2, 1, 0),
        "{report:?}"
    );
    assert!(
        api.calls().is_empty(),
        "nothing was sent: {:?}",
        api.calls()
    );
    assert_eq!(api.lookups(), 0);
    let parts = store.parts(CONVERSATION).await.unwrap();
    assert!(
        parts.iter().all(|p| p.state == PartState::Failed),
        "{parts:?}"
    );
    let stored = store.commitments(CONVERSATION).await.unwrap();
    assert_eq!(stored[0].status, CommitmentStatus::Cancelled);
    let records: Vec<OutboxRecord> = ledger
        .entries()
        .into_iter()
        .filter_map(|entry| match entry.record() {
            LedgerRecord::Outbox(record) => Some(record.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(records.len(), 3, "{records:?}");
    for (index, record) in records[..2].iter().enumerate() {
        assert!(
            matches!(record, OutboxRecord::Unaddressed { part, surface, .. } if *part == index && surface == "slack"),
            "{record:?}"
        );
    }
    assert!(
        matches!(&records[2], OutboxRecord::UnaddressedCommitment { commitment, surface } if commitment.to_string() == COMMITMENT_ID && surface == "slack"),
        "{:?}",
        records[2]
    );
    let ledger_text = format!("{records:?}");
    assert!(
        PARTS.iter().all(|text| !ledger_text.contains(text)),
        "never the text"
    );
    let warned: Vec<_> = events
        .events()
        .into_iter()
        .filter(|e| {
            e.target == "mesh_egress::store"
                && e.message.starts_with("rows stored without an address")
        })
        .collect();
    assert_eq!(
        warned.len(),
        1,
        "one event for the conversation: {warned:?}"
    );
    assert_eq!(warned[0].field("conversation"), Some(CONVERSATION));
    // The next runs find nothing to do and say nothing more.
    let again = worker.run_once(&Cancellation::new()).await.unwrap();
    assert_eq!((again.parts_unaddressed, again.unaddressed), (0, 0));

    // The operator's fix: the conversation's chat, then the next worker pass sends it all.
    let to = Address::from(SlackAddress::new("C0LEGACY1"));
    let fixed = store.readdress(CONVERSATION, &to).await.unwrap();
    assert_eq!((fixed.parts, fixed.commitments), (2, 1), "{fixed:?}");
    assert_eq!(
        store.readdress(CONVERSATION, &to).await.unwrap(),
        Readdressed::default(),
        "only rows without an address are readdressed"
    );
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!((report.parts_sent, report.fulfilled), (2, 1), "{report:?}");
    let received: Vec<(Address, String)> = api
        .received()
        .into_iter()
        .map(|m| (m.address, m.text))
        .collect();
    assert_eq!(
        received,
        [
            (to.clone(), PARTS[0].to_owned()),
            (to.clone(), PARTS[1].to_owned()),
            (to.clone(), "answer at slack:C0LEGACY1".to_owned()),
        ]
    );
    assert!(api.destinations().iter().all(|d| *d == to));
    let parts = store.parts(CONVERSATION).await.unwrap();
    assert!(
        parts
            .iter()
            .all(|p| p.state == PartState::Sent && p.address.as_ref() == Some(&to))
    );
    let stored = store.commitments(CONVERSATION).await.unwrap();
    assert_eq!(stored[0].status, CommitmentStatus::Fulfilled);
    store.close().await;
}

// The event capture is per thread: these run on one.
#[tokio::test(flavor = "current_thread")]
async fn sqlite_rows_migrated_from_0003_without_an_address_are_failed_reported_and_never_sent() {
    rows_without_an_address_are_never_sent_to_a_guessed_destination("sqlite").await;
}

#[tokio::test(flavor = "current_thread")]
async fn pg_rows_migrated_from_0003_without_an_address_are_failed_reported_and_never_sent() {
    rows_without_an_address_are_never_sent_to_a_guessed_destination("postgres").await;
}

/// A row whose stored address is not a valid one (written by hand, or by a buggy tool): reading
/// it is a typed error, and a worker treats it as one without an address, never guessing.
async fn an_unreadable_address_is_a_typed_error_and_never_sent(backend: &str) {
    let (url, _dir) = place(backend, "unreadable");
    previous_release_database(backend, &url).await;
    let store = Store::open(&url).await.unwrap();
    // This release's schema, a destination no Slack id can be.
    let forged = r#"{"surface":"slack","channel":"C0 1; DROP"}"#;
    macro_rules! forge {
        ($pool:expr) => {{
            let pool = $pool;
            sqlx::query("UPDATE mesh_outbox_parts SET address = $1 WHERE conversation = 'legacy'")
                .bind(forged)
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        }};
    }
    if backend == "sqlite" {
        forge!(sqlx::SqlitePool::connect(&url).await.unwrap());
    } else {
        forge!(sqlx::PgPool::connect(&url).await.unwrap());
    }
    let read = store.parts(CONVERSATION).await;
    assert!(
        matches!(&read, Err(mesh_egress::store::StoreError::BadAddress { conversation, .. }) if conversation == CONVERSATION),
        "{read:?}"
    );

    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let client = SlackClient::new(TOKEN)
        .with_renderer(PlainText::new())
        .base_url(api.base_url())
        .policy(SendPolicy::new().max_tries(1));
    let worker = worker(&store, client, None).with_poll_interval(Duration::from_millis(20));
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(report.parts_unaddressed, 2, "{report:?}");
    assert!(
        api.calls().is_empty(),
        "nothing was sent: {:?}",
        api.calls()
    );

    // The operator's fix applies to them too.
    let to = Address::from(SlackAddress::new("C0LEGACY1"));
    let fixed = store.readdress(CONVERSATION, &to).await.unwrap();
    assert_eq!(fixed.parts, 2);
    let parts = store.parts(CONVERSATION).await.unwrap();
    assert!(
        parts
            .iter()
            .all(|p| p.state == PartState::Pending && p.address.as_ref() == Some(&to))
    );
    store.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn sqlite_an_unreadable_stored_address_is_a_typed_error_and_never_sent() {
    an_unreadable_address_is_a_typed_error_and_never_sent("sqlite").await;
}

#[tokio::test(flavor = "current_thread")]
async fn pg_an_unreadable_stored_address_is_a_typed_error_and_never_sent() {
    an_unreadable_address_is_a_typed_error_and_never_sent("postgres").await;
}
