//! The ledger on the store and retention, on both backends: the durable sink holds exactly the
//! rows the turn's ledger holds (never a cause), readable per conversation and run after a
//! restart; `prune` deletes only final rows older than its cutoff.

mod store_support;

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use mesh_egress::boundary::resolve;
use mesh_egress::channel::Deliver;
use mesh_egress::degrade::{Commitment, DegradationPolicy, Mode, Reply};
use mesh_egress::ledger::{Ledger, LedgerRecord, LedgerStore, OutboxRecord};
use mesh_egress::store::{
    CommitmentEnd, CommitmentStatus, DurableLedger, FollowUpPlan, FollowUpTask, PartState,
    PruneReport, Store, StoreError,
};
use mesh_egress::{
    Address, AgentMessage, Attribution, EgressError, Outbound, Turn, egress_boundary,
};

use store_support::*;

both_backends!(
    the_durable_ledger_holds_the_turns_rows_per_conversation_and_run_and_never_the_cause,
    prune_deletes_only_final_rows_older_than_the_cutoff,
    the_durable_ledger_keeps_its_newest_window_in_memory_and_every_row_on_the_store,
);

/// A person is waiting, and the model failed with `cause`: the boundary records it on the
/// turn's ledger (never the cause) and holds.
#[egress_boundary(interactive)]
fn asked(turn: &Turn, cause: String) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport(cause, turn.attribution().clone()))
}

/// Nobody asked, and the model failed with `cause`: recorded the same way, then silence.
#[egress_boundary(proactive)]
fn digest(turn: &Turn, cause: String) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport(cause, turn.attribution().clone()))
}

/// `mode`'s handler for `turn`, failing with `cause`: its reply.
fn failed(turn: &Turn, mode: Mode, cause: String) -> Reply {
    match mode {
        Mode::Proactive => digest(turn, cause),
        _ => asked(turn, cause),
    }
}

async fn the_durable_ledger_holds_the_turns_rows_per_conversation_and_run_and_never_the_cause(
    backend: Backend,
) {
    let place = backend.place();
    let cause = support::marker("ledger");
    let store = Store::open(&place.url).await.unwrap();
    let sink = store.durable_ledger().unwrap();
    let mut turns = Vec::new();
    for (conversation, run, mode) in [
        ("c1", "r1", Mode::Interactive),
        ("c1", "r2", Mode::Proactive),
        ("c2", "r1", Mode::Interactive),
    ] {
        let attribution = Attribution::new("ops", conversation, run);
        let turn = Turn::new(attribution).with_ledger(Ledger::new(sink.clone()));
        let _reply = failed(
            &turn,
            mode,
            format!("{cause}: upstream said 503 with body {{\"secret\":1}}"),
        );
        turns.push(turn);
    }
    sink.flush().await.unwrap();
    let recorded = LedgerStore::entries(&sink);
    assert!(
        recorded.len() >= 6,
        "each failed turn records rows: {recorded:?}"
    );
    store.close().await;

    // After a restart: the rows are where they were written.
    let store = Store::open(&place.url).await.unwrap();
    let run_rows = store.ledger_entries("c1", Some("r1")).await.unwrap();
    let of = |conversation: &str, run: Option<&str>| -> Vec<_> {
        recorded
            .iter()
            .filter(|e| {
                e.attribution().conversation() == conversation
                    && run.is_none_or(|r| e.attribution().run() == r)
            })
            .cloned()
            .collect()
    };
    assert_eq!(run_rows, of("c1", Some("r1")));
    assert_eq!(
        turns[0].ledger().entries(),
        recorded,
        "the turns' ledger is the sink"
    );
    assert!(
        run_rows
            .iter()
            .any(|e| matches!(e.record(), LedgerRecord::BoundaryError(_))),
        "{run_rows:?}"
    );
    let conversation_rows = store.ledger_entries("c1", None).await.unwrap();
    assert_eq!(conversation_rows, of("c1", None));
    assert!(conversation_rows.len() > run_rows.len());
    assert_eq!(
        store.ledger_entries("c2", None).await.unwrap(),
        of("c2", None)
    );
    assert!(store.ledger_entries("c3", None).await.unwrap().is_empty());
    let text = serde_json::to_string(&conversation_rows).unwrap();
    assert!(!text.contains(&cause), "a cause reached the ledger: {text}");
    assert!(
        !text.contains("secret"),
        "a body reached the ledger: {text}"
    );
}

fn promise(conversation: &str) -> Commitment {
    let policy = DegradationPolicy::default().with_follow_up(Duration::ZERO, 3);
    let failed = Err(EgressError::transport(
        "503",
        Attribution::new("bot", conversation, "r1"),
    ));
    match resolve(Mode::Interactive, &policy, failed) {
        Reply::Holding { commitment, .. } => commitment,
        other => panic!("expected a holding line, got {other:?}"),
    }
}

async fn prune_deletes_only_final_rows_older_than_the_cutoff(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let lease = store.acquire("c1", "w1", LONG).await.unwrap();
    // Five parts: sent, sent, uncertain, then the rest of the message goes (sent, sent).
    let sent = Scripted::new(10, &[Step::Accept, Step::Accept, Step::Unknown]);
    let channel = store.channel(sent);
    let _ = channel
        .deliver(message("c1", BODY).with_ownership(lease.ownership()))
        .await;
    store.resend(&channel, &lease).await.unwrap();
    // A refused message: failed parts.
    let refused = store.channel(Scripted::new(10, &[Step::Refuse]));
    let _ = refused
        .deliver(message("c1", "one two.").with_ownership(lease.ownership()))
        .await;
    // A committed message nobody sent: pending parts.
    let _pending = Outbound::new(message("c1", "never sent.").with_ownership(lease.ownership()))
        .render(&mesh_egress::channel::PlainText::new())
        .unwrap()
        .commit(&channel)
        .await
        .unwrap();
    let before = states(&store, "c1").await;
    assert_eq!(
        before,
        [
            PartState::Sent,
            PartState::Sent,
            PartState::Uncertain,
            PartState::Sent,
            PartState::Sent,
            PartState::Failed,
            PartState::Pending,
        ]
    );
    // Commitments: one ended, one open.
    let task = FollowUpTask::new("ask", serde_json::json!({}), Mode::Interactive);
    for c in [promise("c1"), promise("c1")] {
        let plan = FollowUpPlan::for_commitment(&c, Duration::from_secs(600));
        store
            .keep_commitment(&c, &Address::Plain, &task, plan)
            .await
            .unwrap();
    }
    let claim = store.claim_due("w1", LONG, 1).await.unwrap().remove(0);
    assert!(
        store
            .end_commitment(&claim, CommitmentEnd::Fulfilled)
            .await
            .unwrap()
    );
    // Ledger rows.
    let sink = store.durable_ledger().unwrap();
    let turn =
        Turn::new(Attribution::new("ops", "c1", "r1")).with_ledger(Ledger::new(sink.clone()));
    let _ = digest(&turn, "503".to_owned());
    sink.flush().await.unwrap();
    let ledger_rows = store.ledger_entries("c1", None).await.unwrap().len();
    assert!(ledger_rows > 0);

    // Nothing is an hour old: nothing goes.
    let kept = store.prune(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(kept, PruneReport::default());
    assert_eq!(states(&store, "c1").await, before);

    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = store.prune(Duration::ZERO).await.unwrap();

    assert_eq!(
        (report.parts, report.commitments, report.ledger_rows),
        (4, 1, u64::try_from(ledger_rows).unwrap())
    );
    assert_eq!(
        states(&store, "c1").await,
        [PartState::Uncertain, PartState::Failed, PartState::Pending],
        "open, uncertain and failed parts are never pruned"
    );
    let commitments = store.commitments("c1").await.unwrap();
    assert_eq!(commitments.len(), 1);
    assert_eq!(
        commitments[0].status,
        CommitmentStatus::Pending,
        "the open one stays"
    );
    assert!(store.ledger_entries("c1", None).await.unwrap().is_empty());
    // The pending part still goes after a prune, and the fence still holds.
    let report = store.resend(&channel, &lease).await.unwrap();
    assert_eq!(report.sent, 1);
}

/// One small row for run `run` of conversation `conversation`.
fn record_row(ledger: &Ledger, conversation: &str, run: usize) {
    ledger.record(
        &Attribution::new("ops", conversation, format!("r{run:05}")),
        LedgerRecord::Outbox(OutboxRecord::Uncertain {
            delivery: format!("{run:016x}"),
            part: 0,
            surface: "plain".to_owned(),
            after_restart: false,
        }),
    );
}

/// A long-running worker's ledger stays flat: past its window the handle answers from the
/// newest rows only, and every row is still on the store.
async fn the_durable_ledger_keeps_its_newest_window_in_memory_and_every_row_on_the_store(
    backend: Backend,
) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let sink = store.durable_ledger().unwrap();
    let ledger = Ledger::new(sink.clone());
    let rows = DurableLedger::WINDOW + 300;
    for run in 0..rows {
        record_row(&ledger, "c-window", run);
        assert!(sink.entries().len() <= DurableLedger::WINDOW, "row {run}");
    }
    sink.flush().await.unwrap();

    let held = sink.entries();
    assert_eq!(held.len(), DurableLedger::WINDOW);
    let first_kept = format!("r{:05}", rows - DurableLedger::WINDOW);
    assert_eq!(
        held[0].attribution().run(),
        first_kept,
        "the oldest are dropped"
    );
    assert_eq!(
        held[DurableLedger::WINDOW - 1].attribution().run(),
        format!("r{:05}", rows - 1)
    );
    assert_eq!(
        ledger.entries(),
        held,
        "the turn's ledger reads the same window"
    );
    let stored = store.ledger_entries("c-window", None).await.unwrap();
    assert_eq!(stored.len(), rows, "every row is on the store");
}

/// While the store cannot keep up, the writer's queue stops at its bound: the rows past it are
/// counted and the next flush reports them, never held without bound. On a current-thread
/// runtime the writer cannot run while rows are recorded, so the queue fills exactly.
#[tokio::test(flavor = "current_thread")]
async fn a_full_ledger_queue_counts_the_rows_past_it_and_the_flush_reports_them() {
    let place = Backend::Sqlite.place();
    let store = Store::open(&place.url).await.unwrap();
    let sink = store.durable_ledger().unwrap();
    let ledger = Ledger::new(sink.clone());
    let over = 5;
    for run in 0..DurableLedger::QUEUE + over {
        record_row(&ledger, "c-queue", run);
    }
    assert_eq!(sink.queued(), DurableLedger::QUEUE);
    assert!(sink.entries().len() <= DurableLedger::WINDOW);

    let flushed = sink.flush().await;
    assert!(
        matches!(flushed, Err(StoreError::LedgerRowsLost { rows }) if rows == over as u64),
        "{flushed:?}"
    );
    assert_eq!(sink.queued(), 0);
    let stored = store.ledger_entries("c-queue", None).await.unwrap();
    assert_eq!(stored.len(), DurableLedger::QUEUE);
    // Counted once: the next flush starts clean.
    record_row(&ledger, "c-queue", DurableLedger::QUEUE + over);
    sink.flush().await.unwrap();
}
