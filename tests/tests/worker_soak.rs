//! A worker's durable ledger stays flat however long the worker runs: more promises are kept
//! through one worker than the ledger's in-memory window holds, every row reaches the store,
//! and what the handle keeps in memory never passes the window (nor its queue the queue's
//! bound). The full 10,000-promise run, with the process's resident memory, is the
//! `worker_soak` bench (BENCHMARKS.md).

mod store_support;

use std::time::Duration;

use mesh_egress::boundary::resolve;
use mesh_egress::channel::Recorder;
use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
use mesh_egress::ledger::{CommitmentState, Ledger, LedgerRecord, LedgerStore};
use mesh_egress::store::{DurableLedger, FollowUpPlan, FollowUpTask, Store};
use mesh_egress::{
    Address, AgentMessage, Attribution, Bot, Cancellation, EgressError, Turn, egress_boundary,
};

use store_support::Backend;

/// More than the window (1024), so the bound shows.
const PROMISES: usize = DurableLedger::WINDOW + 176;
const CONVERSATIONS: usize = 40;

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message("Here is the answer."))
}

async fn store_promises(store: &Store) {
    let policy = DegradationPolicy::default().with_follow_up(Duration::ZERO, 3);
    let plan = FollowUpPlan::new(Duration::ZERO, Duration::ZERO, 3);
    let task = FollowUpTask::new("answer", serde_json::json!("?"), Mode::Interactive);
    for i in 0..PROMISES {
        let attribution =
            Attribution::new("soak", format!("c{}", i % CONVERSATIONS), format!("r{i}"));
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
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_keeping_more_promises_than_the_window_holds_stays_within_it() {
    let place = Backend::Postgres.place();
    let store = Store::open(&place.url).await.unwrap();
    store_promises(&store).await;
    let sink = store.durable_ledger().unwrap();
    let bot = Bot::new()
        .with_store(store.clone())
        .with_client(Recorder::new())
        .with_ledger(Ledger::new(sink.clone()));
    let _route = bot.route(
        "answer",
        |turn: Turn, _input: serde_json::Value| async move { answer(&turn).await },
    );
    let worker = bot
        .worker("soak")
        .expect("a store")
        .with_lease_ttl(Duration::from_secs(30))
        .with_poll_interval(Duration::from_millis(5));

    // In rounds, watching what the handle holds while the worker keeps promises.
    let shutdown = Cancellation::new();
    let mut kept = 0;
    let mut most_held = 0;
    let mut most_queued = 0;
    while kept < PROMISES as u32 {
        let report = worker.pass(&shutdown).await.unwrap();
        assert!(report.fulfilled > 0, "a pass kept nothing: {report:?}");
        kept += report.fulfilled;
        most_held = most_held.max(sink.entries().len());
        most_queued = most_queued.max(sink.queued());
    }
    sink.flush().await.unwrap();

    assert_eq!(kept as usize, PROMISES);
    assert!(most_held <= DurableLedger::WINDOW, "{most_held} rows held");
    assert_eq!(sink.entries().len(), DurableLedger::WINDOW);
    assert!(
        most_queued <= DurableLedger::QUEUE,
        "{most_queued} rows queued"
    );
    assert_eq!(sink.queued(), 0, "flushed");
    // Every row is on the store: one fulfilled commitment per promise.
    let mut fulfilled = 0;
    for c in 0..CONVERSATIONS {
        fulfilled += store
            .ledger_entries(&format!("c{c}"), None)
            .await
            .unwrap()
            .iter()
            .filter(|row| {
                matches!(row.record(), LedgerRecord::Commitment(r) if r.state() == CommitmentState::Fulfilled)
            })
            .count();
    }
    assert_eq!(fulfilled, PROMISES);
}
