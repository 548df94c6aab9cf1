//! The front door's follow-ups, both keepers, one mechanism: the follow-up re-runs the same
//! route on a follow-up turn that carries the person's message (what the gate reads), the
//! in-memory keeper's ends are reported by `Bot::promises_kept` and recorded on the ledger of
//! the turn that made the promise, and a bot with a store records every turn on the store's
//! durable ledger.

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mesh_egress::bot::Promise;
use mesh_egress::bot::{Endpoint, Outcome};
use mesh_egress::channel::Recorder;
use mesh_egress::degrade::DegradationPolicy;
use mesh_egress::ledger::{CommitmentState, LedgerRecord};
use mesh_egress::store::{CommitmentStatus, Store};
use mesh_egress::{
    Address, AgentMessage, Attribution, Bot, Cancellation, EgressError, Turn, egress_boundary,
};

use store_support::Backend;

/// The internal cause every failure carries; no message may contain it.
const CAUSE: &str = "CAUSE-follow-up-503-c41d";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);
const SAID: &str = "Is the deploy green?";

/// Follow-ups 20 ms after the holding line, `attempts` tries.
fn quick(attempts: u32) -> DegradationPolicy {
    DegradationPolicy::default()
        .with_follow_up(Duration::from_millis(20), attempts)
        .with_handoff("Sam", "Sam will take it from here.")
}

/// Fails with the cause while `failures` is above zero (counting it down), then answers with
/// what the turn says the person said.
#[egress_boundary(interactive)]
async fn echo(turn: &Turn, failures: &AtomicU32) -> Result<AgentMessage, EgressError> {
    if failures
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(EgressError::transport(CAUSE, turn.attribution().clone()));
    }
    Ok(turn.message(format!("You said: {}", turn.input().unwrap_or("nothing"))))
}

fn echo_route(bot: &Bot, failures: u32) -> Endpoint<()> {
    let failures = Arc::new(AtomicU32::new(failures));
    bot.route("echo", move |turn: Turn, (): ()| {
        let failures = Arc::clone(&failures);
        async move { echo(&turn, &failures).await }
    })
}

fn turn(bot: &Bot, conversation: &str) -> Turn {
    bot.turn(
        Address::Plain,
        Attribution::new("ci-bot", conversation, "run-1"),
    )
    .with_input(SAID)
}

fn never_the_cause(texts: &[String]) {
    for text in texts {
        assert!(
            !text.contains(CAUSE),
            "a cause reached the person: {text:?}"
        );
    }
}

#[tokio::test]
async fn an_in_memory_follow_up_carries_the_persons_message_and_its_end_is_reported() {
    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_policy(quick(3));
    let route = echo_route(&bot, 1);
    let turn = turn(&bot, "conv-mem");
    let delivery = bot.run(&turn, &route, ()).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    assert!(matches!(delivery.promise(), Some(Promise::Bot(_))));

    let ended = tokio::time::timeout(BOUND, bot.promises_kept())
        .await
        .expect("kept in time");
    assert!(
        matches!(ended.as_slice(), [Ok(Outcome::Answered)]),
        "{ended:?}"
    );
    let sent = recorder.sent();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        sent[1],
        format!("You said: {SAID}"),
        "the follow-up turn was told"
    );
    never_the_cause(&sent);
    // Recorded on the ledger of the turn that made the promise.
    let promises = turn.ledger().commitments();
    assert_eq!(promises.len(), 1);
    assert_eq!(promises[0].1.state(), CommitmentState::Fulfilled);
    assert_eq!(promises[0].1.follow_ups(), 1);
    // Each end is reported once.
    assert!(bot.promises_kept().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_in_memory_keeper_tries_on_the_commitments_backoff_at_exact_instants() {
    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_policy(quick(3));
    // Two failed tries, then the answer: 20 ms, then 40 more, then 80 more after the line.
    let route = echo_route(&bot, 3);
    let turn = turn(&bot, "conv-paused");
    let start = tokio::time::Instant::now();
    let delivery = bot.run(&turn, &route, ()).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    let ended = bot.promises_kept().await;
    assert!(
        matches!(ended.as_slice(), [Ok(Outcome::Answered)]),
        "{ended:?}"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(20 + 40 + 80));
    let promises = turn.ledger().commitments();
    assert_eq!(promises[0].1.state(), CommitmentState::Fulfilled);
    assert_eq!(promises[0].1.follow_ups(), 3);
    assert_eq!(
        recorder.sent().last().unwrap(),
        &format!("You said: {SAID}")
    );
}

#[tokio::test]
async fn an_in_memory_promise_whose_tries_all_fail_hands_off_once_and_says_so() {
    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_policy(quick(2));
    let route = echo_route(&bot, u32::MAX);
    let turn = turn(&bot, "conv-handoff");
    let delivery = bot.run(&turn, &route, ()).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    let ended = tokio::time::timeout(BOUND, bot.promises_kept())
        .await
        .expect("ended in time");
    assert!(
        matches!(ended.as_slice(), [Ok(Outcome::Handoff)]),
        "{ended:?}"
    );
    let sent = recorder.sent();
    assert_eq!(sent.len(), 2, "a holding line, then one handoff: {sent:?}");
    assert_eq!(sent[1], "Sam will take it from here.");
    never_the_cause(&sent);
    let promises = turn.ledger().commitments();
    assert_eq!(promises[0].1.state(), CommitmentState::HandedOff);
    assert_eq!(
        promises[0].1.follow_ups(),
        2,
        "both tries, then the last word"
    );
    let pending = turn
        .ledger()
        .entries()
        .into_iter()
        .filter(|entry| {
            matches!(entry.record(), LedgerRecord::Commitment(row) if row.state() == CommitmentState::Pending)
        })
        .count();
    assert_eq!(pending, 2, "the promise made, then the first failed try");
}

#[tokio::test]
async fn a_stored_follow_up_carries_the_persons_message_to_the_worker() {
    let place = Backend::Sqlite.place();
    let store = Store::open(&place.url).await.unwrap();
    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_policy(quick(3))
        .with_store(store.clone());
    let route = echo_route(&bot, 1);
    let turn = turn(&bot, "conv-stored");
    let delivery = bot.run(&turn, &route, ()).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    assert!(
        matches!(delivery.promise(), Some(Promise::Bot(_))),
        "stored with the store's keeper"
    );

    let worker = bot
        .worker("worker-input")
        .expect("the bot has a store")
        .with_poll_interval(Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(40)).await;
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    let sent = recorder.sent();
    assert_eq!(
        sent.last().unwrap(),
        &format!("You said: {SAID}"),
        "{sent:?}"
    );
    never_the_cause(&sent);
    let stored = store.commitments("conv-stored").await.unwrap();
    assert_eq!(stored[0].status, CommitmentStatus::Fulfilled);
}

#[tokio::test]
async fn a_bots_turn_records_on_the_stores_durable_ledger() {
    let place = Backend::Sqlite.place();
    let store = Store::open(&place.url).await.unwrap();
    let bot = Bot::new()
        .with_client(Recorder::new())
        .with_policy(quick(2))
        .with_store(store.clone());
    let turn = turn(&bot, "conv-ledger");
    let failures = AtomicU32::new(1);
    let delivery = bot.send(&turn, echo(&turn, &failures).await).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    // Written in the background: wait (bounded) for the rows.
    let rows = tokio::time::timeout(BOUND, async {
        loop {
            let rows = store.ledger_entries("conv-ledger", None).await.unwrap();
            if rows
                .iter()
                .any(|row| matches!(row.record(), LedgerRecord::Commitment(_)))
            {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the turn's rows reach the store");
    assert!(
        rows.iter()
            .any(|row| matches!(row.record(), LedgerRecord::BoundaryError(_))),
        "{rows:?}"
    );
}

/// The route's typed input, stored with its promise.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Question {
    text: String,
    asked: u32,
}

#[egress_boundary(interactive)]
async fn asked(
    turn: &Turn,
    question: &Question,
    healthy: bool,
) -> Result<AgentMessage, EgressError> {
    if !healthy {
        return Err(EgressError::transport(CAUSE, turn.attribution().clone()));
    }
    Ok(turn.message(format!("{} (question {})", question.text, question.asked)))
}

/// The route `ask`, failing or healthy: the same handler in both processes.
fn ask_route(bot: &Bot, healthy: bool) -> Endpoint<Question> {
    bot.route("ask", move |turn: Turn, question: Question| async move {
        asked(&turn, &question, healthy).await
    })
}

#[tokio::test]
async fn after_a_restart_the_follow_up_is_the_same_routes_answer_to_its_typed_input() {
    let place = Backend::Sqlite.place();
    // The first process: the route fails, the promise is stored with its typed input.
    {
        let store = Store::open(&place.url).await.unwrap();
        let bot = Bot::new()
            .with_client(Recorder::new())
            .with_policy(quick(3))
            .with_store(store.clone());
        let route = ask_route(&bot, false);
        let question = Question {
            text: "Is the deploy green?".into(),
            asked: 7,
        };
        let delivery = bot
            .run(&turn(&bot, "conv-restart"), &route, question)
            .await
            .unwrap();
        assert_eq!(delivery.outcome(), Outcome::Holding);
        assert!(matches!(delivery.promise(), Some(Promise::Bot(_))));
        assert!(
            matches!(delivery.promise(), Some(Promise::Bot(_))),
            "the caller can wait for it"
        );
        store.close().await;
    }
    // The restarted process: a new bot on the same file, the same route registered again.
    let store = Store::open(&place.url).await.unwrap();
    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_policy(quick(3))
        .with_store(store.clone());
    let _route = ask_route(&bot, true);
    let worker = bot
        .worker("worker-restarted")
        .expect("the bot has a store")
        .with_poll_interval(Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(40)).await;
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    assert_eq!(recorder.sent(), ["Is the deploy green? (question 7)"]);
    let stored = store.commitments("conv-restart").await.unwrap();
    assert_eq!(stored[0].status, CommitmentStatus::Fulfilled);
}

#[tokio::test]
async fn a_row_stored_before_typed_input_is_served_by_the_route_of_its_name() {
    use mesh_egress::boundary::resolve;
    use mesh_egress::degrade::{Mode, Reply};
    use mesh_egress::store::{FollowUpPlan, FollowUpTask};
    let place = Backend::Sqlite.place();
    let store = Store::open(&place.url).await.unwrap();
    // A promise as an older release stored it: the route's input as the whole value.
    let failed = Err(EgressError::transport(
        CAUSE,
        Attribution::new("ci-bot", "conv-old-row", "run-1"),
    ));
    let Reply::Holding { commitment, .. } = resolve(Mode::Interactive, &quick(2), failed) else {
        panic!("a holding line");
    };
    let old = FollowUpTask::new(
        "ask",
        serde_json::json!({"text": "Is the old row served?", "asked": 3}),
        Mode::Interactive,
    );
    let plan = FollowUpPlan::new(Duration::ZERO, Duration::ZERO, 2);
    store
        .keep_commitment(&commitment, &Address::Plain, &old, plan)
        .await
        .unwrap();
    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_policy(quick(2))
        .with_store(store.clone());
    let _route = ask_route(&bot, true);
    let worker = bot.worker("worker-old-row").expect("the bot has a store");
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    assert_eq!(recorder.sent(), ["Is the old row served? (question 3)"]);
}

/// Each paragraph is longer than the cutter's minimum block, so each is a block of its own.
const P1: &str =
    "The build finished a few minutes ago and every one of the integration tests passed.\n\n";
const P2: &str =
    "Deploying to staging now; the rollout usually takes about a minute to settle down.";

#[egress_boundary(interactive)]
async fn two_paragraphs(turn: &Turn) -> Result<mesh_egress::AnswerStream, EgressError> {
    Ok(mesh_egress::AnswerStream::from_chunks(
        turn,
        [Ok(P1.to_owned()), Ok(P2.to_owned())],
    ))
}

/// A channel that is its own surface (the `Recorder`, stdout) has no stream to show a reply
/// in: with a store its blocks go through the outbox as messages of their own, each claimed
/// and recorded like any message, never as parts of a surface's stream (whose outcome after a
/// crash is only ever `uncertain`).
#[tokio::test]
async fn a_stream_to_a_channel_without_one_of_its_own_is_stored_as_messages() {
    let place = Backend::Sqlite.place();
    let store = Store::open(&place.url).await.unwrap();
    let recorder = Recorder::new();
    let bot = Bot::new()
        .with_client(recorder.clone())
        .with_store(store.clone());
    let turn = turn(&bot, "conv-blocks");
    let reply = two_paragraphs(&turn).await;
    let delivery = tokio::time::timeout(BOUND, bot.send(&turn, reply))
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(recorder.sent(), [P1.trim(), P2.trim()]);
    let parts = store.parts("conv-blocks").await.unwrap();
    let texts: Vec<&str> = parts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(texts, [P1.trim(), P2.trim()]);
    for part in &parts {
        assert_eq!(part.state, mesh_egress::store::PartState::Sent, "{part:?}");
        assert!(!part.streamed, "recorded as a streamed part: {part:?}");
    }
}
