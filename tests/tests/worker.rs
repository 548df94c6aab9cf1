//! The `Worker` on both backends: a due promise kept once with its end committed alongside the
//! follow-up, failed tries rescheduled then handed off, a stale holder fenced out, a shutdown
//! giving the claim back at once, and (PostgreSQL) two workers racing over many promises.

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mesh_egress::boundary::resolve;
use mesh_egress::channel::{Deliver, Recorder, SurfaceClient};
use mesh_egress::degrade::{Commitment, DegradationPolicy, Mode, Reply};
use mesh_egress::store::{CommitmentEnd, CommitmentStatus, FollowUpPlan, FollowUpTask, Store};
use mesh_egress::worker::Worker;
use mesh_egress::{
    Address, AgentMessage, Attribution, Bot, Cancellation, EgressError, Surface, Turn,
    egress_boundary,
};

use store_support::*;

both_backends!(
    a_due_promise_is_kept_once_and_a_second_pass_does_nothing,
    failed_tries_go_back_on_the_plan_and_the_last_one_hands_off,
    a_worker_whose_claim_and_lease_ran_out_cannot_commit_after_a_takeover,
    a_shutdown_mid_wait_gives_the_claim_back_at_once,
    a_follow_up_waits_for_the_conversations_open_parts_and_goes_after_them,
    a_follow_up_never_overtakes_an_earlier_part_the_surface_said_not_now_to,
    a_row_stored_with_a_prompt_key_is_served_by_a_typed_handler,
    a_typed_follow_up_re_runs_its_handler_with_the_stored_input_as_its_type,
    an_input_that_no_longer_fits_its_handler_hands_off_at_once,
);

const HANDLER: &str = "answer";
/// How long any wait in these tests may take.
const BOUND: Duration = Duration::from_secs(20);

fn promise(conversation: &str, run: &str, attempts: u32) -> Commitment {
    let policy = DegradationPolicy::default().with_follow_up(Duration::ZERO, attempts);
    let failed = Err(EgressError::transport(
        "503",
        Attribution::new("bot", conversation, run),
    ));
    match resolve(Mode::Interactive, &policy, failed) {
        Reply::Holding { commitment, .. } => commitment,
        other => panic!("expected a holding line, got {other:?}"),
    }
}

async fn keep(store: &Store, conversation: &str, run: &str, plan: FollowUpPlan) -> Commitment {
    let commitment = promise(conversation, run, plan.attempts());
    let task = FollowUpTask::new(
        HANDLER,
        serde_json::json!({"prompt": format!("status of {run}?")}),
        Mode::Interactive,
    );
    store
        .keep_commitment(&commitment, &Address::Plain, &task, plan)
        .await
        .unwrap();
    commitment
}

fn now_plan(attempts: u32) -> FollowUpPlan {
    FollowUpPlan::new(Duration::ZERO, Duration::ZERO, attempts)
}

/// A handler answering with its run's id, so each promise's answer is told apart.
#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message(format!("answer for {}", turn.attribution().run())))
}

/// Fails with a cause the person must never see, counting its calls.
#[egress_boundary(interactive)]
async fn failing(turn: &Turn, calls: &AtomicU32) -> Result<AgentMessage, EgressError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(EgressError::transport(
        "CAUSE-7f3 upstream 503",
        turn.attribution().clone(),
    ))
}

/// The one door: a bot with the store and `client`, and (with `policy`) its degradation policy.
fn bot(
    store: &Store,
    client: impl SurfaceClient + 'static,
    policy: Option<DegradationPolicy>,
) -> Bot {
    let bot = Bot::new().with_store(store.clone()).with_client(client);
    match policy {
        Some(policy) => bot.with_policy(policy),
        None => bot,
    }
}

/// The policy of the tests that hand off: a named person takes over.
fn handing_off() -> Option<DegradationPolicy> {
    Some(DegradationPolicy::default().with_handoff("Sam", "Sam will take it from here."))
}

fn worker(store: &Store, channel: Recorder, holder: &str) -> Worker {
    let bot = bot(store, channel, None);
    let _route = bot.route(
        HANDLER,
        |turn: Turn, _input: serde_json::Value| async move { answer(&turn).await },
    );
    bot.worker(holder)
        .expect("a store")
        .with_lease_ttl(Duration::from_secs(30))
        .with_poll_interval(Duration::from_millis(20))
}

async fn status(store: &Store, conversation: &str) -> Vec<CommitmentStatus> {
    store
        .commitments(conversation)
        .await
        .unwrap()
        .iter()
        .map(|c| c.status)
        .collect()
}

async fn a_due_promise_is_kept_once_and_a_second_pass_does_nothing(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let _ = keep(&store, "c1", "r1", now_plan(3)).await;
    let channel = Recorder::new();
    let worker = worker(&store, channel.clone(), "w1");
    let shutdown = Cancellation::new();

    let report = worker.run_once(&shutdown).await.unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    assert_eq!(channel.sent(), ["answer for r1"]);
    assert_eq!(status(&store, "c1").await, [CommitmentStatus::Fulfilled]);
    let parts = store.parts("c1").await.unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].state, mesh_egress::store::PartState::Sent);

    let again = worker.run_once(&shutdown).await.unwrap();
    assert_eq!(again.fulfilled, 0, "{again:?}");
    assert_eq!(channel.sent().len(), 1, "one follow-up message per promise");
    assert!(store.pending_work().await.unwrap().is_idle());
}

async fn failed_tries_go_back_on_the_plan_and_the_last_one_hands_off(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    // Two tries, due 100 ms and then 200 ms after the last: the first fails and is
    // rescheduled, the second hands off.
    let _ = keep(
        &store,
        "c2",
        "r1",
        FollowUpPlan::new(Duration::from_millis(100), Duration::from_secs(1), 2),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let channel = Recorder::new();
    let bot = bot(&store, channel.clone(), handing_off());
    let _route = bot.route(HANDLER, move |turn: Turn, _input: serde_json::Value| {
        let seen = Arc::clone(&seen);
        async move { failing(&turn, &seen).await }
    });
    let worker = bot
        .worker("w1")
        .expect("a store")
        .with_poll_interval(Duration::from_millis(10));
    let shutdown = Cancellation::new();

    let first = worker.pass(&shutdown).await.unwrap();
    assert_eq!((first.retried, first.handed_off), (1, 0), "{first:?}");
    assert_eq!(status(&store, "c2").await, [CommitmentStatus::Pending]);
    assert!(channel.sent().is_empty(), "a failed try sends nothing");

    // Due later: `run_once` does not wait for it.
    let early = worker.run_once(&shutdown).await.unwrap();
    assert_eq!((early.retried, early.handed_off), (0, 0), "{early:?}");
    tokio::time::sleep(Duration::from_millis(250)).await;
    let rest = tokio::time::timeout(BOUND, worker.run_once(&shutdown))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(rest.handed_off, 1, "{rest:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(channel.sent(), ["Sam will take it from here."]);
    assert!(!channel.sent().concat().contains("CAUSE"));
    let stored = store.commitments("c2").await.unwrap();
    assert_eq!(stored[0].status, CommitmentStatus::HandedOff);
    assert_eq!(stored[0].attempts_made, 2);
}

async fn a_worker_whose_claim_and_lease_ran_out_cannot_commit_after_a_takeover(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let _ = keep(&store, "c3", "r1", now_plan(3)).await;
    let short = Duration::from_millis(200);

    // The stale worker claims and takes the lease, then stalls past both.
    let stale_claim = store
        .claim_due_on(Surface::Plain, "stale", short, 1)
        .await
        .unwrap()
        .pop()
        .expect("claimed");
    let stale_lease = store.acquire("c3", "stale", short).await.unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;

    // Another worker takes the conversation over and keeps the promise.
    let fresh_channel = Recorder::new();
    let fresh = worker(&store, fresh_channel.clone(), "fresh");
    let report = fresh.run_once(&Cancellation::new()).await.unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");

    // The stale worker wakes and tries to commit its follow-up as if it still held both.
    let stale_channel = Recorder::new();
    let durable = store.channel(stale_channel.clone());
    let message = AgentMessage::new("stale answer", stale_claim.attribution().clone())
        .with_ownership(stale_lease.ownership());
    let refused = durable
        .sealing(&stale_claim, CommitmentEnd::Fulfilled)
        .deliver(message)
        .await;
    assert!(refused.is_err(), "a stale holder committed: {refused:?}");
    assert!(stale_channel.sent().is_empty());

    // Even with a live lease of its own again, its claim is fenced out.
    let relet = store.acquire("c3", "stale", LONG).await.unwrap();
    let message = AgentMessage::new("stale answer", stale_claim.attribution().clone())
        .with_ownership(relet.ownership());
    let refused = durable
        .sealing(&stale_claim, CommitmentEnd::Fulfilled)
        .deliver(message)
        .await;
    assert!(refused.is_err(), "a moved-on claim committed: {refused:?}");
    assert!(stale_channel.sent().is_empty());

    assert_eq!(fresh_channel.sent(), ["answer for r1"]);
    let texts: Vec<String> = store
        .parts("c3")
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.text)
        .collect();
    assert_eq!(
        texts,
        ["answer for r1"],
        "only the new holder's follow-up is in the outbox"
    );
    assert_eq!(status(&store, "c3").await, [CommitmentStatus::Fulfilled]);
}

/// Says it started, then never answers.
#[egress_boundary(interactive)]
async fn stalled(_turn: &Turn, started: &tokio::sync::Notify) -> Result<AgentMessage, EgressError> {
    started.notify_one();
    std::future::pending().await
}

async fn a_shutdown_mid_wait_gives_the_claim_back_at_once(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let _ = keep(&store, "c4", "r1", now_plan(3)).await;
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    // A lease far longer than the test: only a release lets the next worker in.
    let bot = bot(&store, Recorder::new(), None);
    let _route = bot.route(HANDLER, move |turn: Turn, _input: serde_json::Value| {
        let signal = Arc::clone(&signal);
        async move { stalled(&turn, &signal).await }
    });
    let slow = bot
        .worker("slow")
        .expect("a store")
        .with_lease_ttl(Duration::from_secs(600));
    let shutdown = Cancellation::new();
    let stop = shutdown.clone();
    let running = tokio::spawn(async move { slow.run(&stop).await });
    tokio::time::timeout(BOUND, started.notified())
        .await
        .expect("the slow worker started the follow-up");
    assert_eq!(status(&store, "c4").await, [CommitmentStatus::Claimed]);

    shutdown.cancel();
    let report = tokio::time::timeout(BOUND, running)
        .await
        .expect("the worker stops on shutdown")
        .unwrap()
        .unwrap();
    assert_eq!(report.released, 1, "{report:?}");
    assert_eq!(status(&store, "c4").await, [CommitmentStatus::Pending]);

    let channel = Recorder::new();
    let next = worker(&store, channel.clone(), "next");
    let kept = tokio::time::timeout(Duration::from_secs(5), next.run_once(&Cancellation::new()))
        .await
        .expect("taken over at once, not after the 600 s claim")
        .unwrap();
    assert_eq!(kept.fulfilled, 1, "{kept:?}");
    assert_eq!(channel.sent(), ["answer for r1"]);
    let stored = store.commitments("c4").await.unwrap();
    assert_eq!(
        stored[0].attempts_made, 1,
        "the given-back try was not counted"
    );
}

async fn a_follow_up_waits_for_the_conversations_open_parts_and_goes_after_them(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    // A message committed before a crash, never sent: still pending in the outbox.
    let channel = Recorder::new();
    let blocked = Scripted::new(100, &[Step::Die]);
    let crashed = store.channel(blocked);
    let lease = store
        .acquire("c5", "crashed", Duration::from_millis(100))
        .await
        .unwrap();
    let earlier = message("c5", "the earlier message").with_ownership(lease.ownership());
    let died = tokio::spawn(async move { crashed.deliver(earlier).await }).await;
    assert!(died.is_err(), "the sender died mid-send");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let _ = keep(&store, "c5", "r2", now_plan(3)).await;

    let worker = worker(&store, channel.clone(), "w1");
    let report = worker.run_once(&Cancellation::new()).await.unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    // The dead sender's part may have reached stdout: plain cannot dedupe, so it is
    // `uncertain` and not re-sent; the follow-up goes after it, never before.
    assert_eq!(channel.sent(), ["answer for r2"]);
    assert_eq!(
        states(&store, "c5").await,
        [
            mesh_egress::store::PartState::Uncertain,
            mesh_egress::store::PartState::Sent
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_on_postgres_keep_each_of_fifty_promises_exactly_once() {
    let place = Backend::Postgres.place();
    let store = Store::open(&place.url).await.unwrap();
    let mut expected = Vec::new();
    for i in 0..50 {
        // Ten conversations, five promises each: the workers also meet on leases.
        let _ = keep(
            &store,
            &format!("c{}", i % 10),
            &format!("r{i}"),
            now_plan(3),
        )
        .await;
        expected.push(format!("answer for r{i}"));
    }
    let channel = Recorder::new();
    let handles: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|holder| {
            let worker = worker(&store, channel.clone(), holder);
            tokio::spawn(async move { worker.run_once(&Cancellation::new()).await })
        })
        .collect();
    let mut fulfilled = 0;
    for handle in handles {
        let report = tokio::time::timeout(Duration::from_secs(60), handle)
            .await
            .expect("bounded")
            .unwrap()
            .unwrap();
        fulfilled += report.fulfilled;
    }
    assert_eq!(fulfilled, 50);
    let mut sent = channel.sent();
    sent.sort();
    expected.sort();
    assert_eq!(sent, expected, "each follow-up delivered exactly once");
    for c in 0..10 {
        assert_eq!(
            status(&store, &format!("c{c}")).await,
            [CommitmentStatus::Fulfilled; 5]
        );
    }
    assert!(store.pending_work().await.unwrap().is_idle());
}

async fn a_follow_up_never_overtakes_an_earlier_part_the_surface_said_not_now_to(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    // An earlier message the surface answered "not now" to: pending, to be tried later.
    let lease = store
        .acquire("c7", "first", Duration::from_secs(30))
        .await
        .unwrap();
    let earlier = message("c7", "the earlier message").with_ownership(lease.ownership());
    // Retried at once: this is about order, not the backoff (`worker_retry.rs`).
    let refused = store
        .channel(Scripted::new(100, &[Step::RetryAfter]))
        .with_retry(at_once());
    assert!(refused.deliver(earlier).await.is_err());
    store.release(lease).await.unwrap();
    let _ = keep(&store, "c7", "r7", now_plan(3)).await;

    // The worker's surface still says "not now" (to the pass's own resend, then to the one
    // before the follow-up): the resend stops at the earlier part, and the follow-up must
    // wait behind it, untried.
    let channel = Scripted::new(100, &[Step::RetryAfter, Step::RetryAfter]);
    let bot = bot(&store, channel.clone(), None);
    let _route = bot.route(
        HANDLER,
        |turn: Turn, _input: serde_json::Value| async move { answer(&turn).await },
    );
    let worker = bot
        .worker("w1")
        .expect("a store")
        .with_lease_ttl(Duration::from_secs(30))
        .with_poll_interval(Duration::from_millis(20))
        .with_part_retry(at_once());
    let first = worker.pass(&Cancellation::new()).await.unwrap();
    assert_eq!(first.fulfilled, 0, "{first:?}");
    assert!(channel.sent().is_empty(), "{:?}", channel.sent());
    assert_eq!(status(&store, "c7").await, [CommitmentStatus::Pending]);

    // Then the surface takes it: the earlier message first, the follow-up after it.
    let rest = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(rest.fulfilled, 1, "{rest:?}");
    assert_eq!(channel.sent(), ["the earlier message", "answer for r7"]);
}

/// A handler's typed input: the shape the rows stored before typed input had, `{"prompt": ..}`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Asked {
    prompt: String,
    #[serde(default)]
    urgent: bool,
}

#[egress_boundary(interactive)]
async fn asked(turn: &Turn, asked: Asked) -> Result<AgentMessage, EgressError> {
    let urgency = if asked.urgent { " (urgent)" } else { "" };
    Ok(turn.message(format!("You asked: {}{urgency}", asked.prompt)))
}

/// Answers with the prompt, counting its calls.
#[egress_boundary(interactive)]
async fn counted(
    turn: &Turn,
    asked: Asked,
    calls: &AtomicU32,
) -> Result<AgentMessage, EgressError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Ok(turn.message(asked.prompt))
}

fn typed_worker(store: &Store, channel: Recorder) -> Worker {
    let bot = bot(store, channel, None);
    let _route = bot.route(HANDLER, |turn: Turn, input: Asked| async move {
        asked(&turn, input).await
    });
    bot.worker("w-typed")
        .expect("a store")
        .with_lease_ttl(Duration::from_secs(30))
        .with_poll_interval(Duration::from_millis(20))
}

async fn a_row_stored_with_a_prompt_key_is_served_by_a_typed_handler(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    // `keep` stores the input as rows did before typed input: `{"prompt": "status of r1?"}`.
    let _ = keep(&store, "c-old", "r1", now_plan(2)).await;
    let channel = Recorder::new();
    let report = typed_worker(&store, channel.clone())
        .run_once(&Cancellation::new())
        .await
        .unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    assert_eq!(channel.sent(), ["You asked: status of r1?"]);
    assert_eq!(status(&store, "c-old").await, [CommitmentStatus::Fulfilled]);
}

async fn a_typed_follow_up_re_runs_its_handler_with_the_stored_input_as_its_type(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let commitment = promise("c-typed", "r1", 2);
    let input = Asked {
        prompt: "Is the deploy done?".into(),
        urgent: true,
    };
    let task = FollowUpTask::typed(HANDLER, &input, Mode::Interactive).unwrap();
    store
        .keep_commitment(&commitment, &Address::Plain, &task, now_plan(2))
        .await
        .unwrap();
    let channel = Recorder::new();
    let report = typed_worker(&store, channel.clone())
        .run_once(&Cancellation::new())
        .await
        .unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    assert_eq!(channel.sent(), ["You asked: Is the deploy done? (urgent)"]);
}

async fn an_input_that_no_longer_fits_its_handler_hands_off_at_once(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let commitment = promise("c-mismatch", "r1", 3);
    let task = FollowUpTask::typed(
        HANDLER,
        &serde_json::json!({"question": 7}),
        Mode::Interactive,
    )
    .unwrap();
    store
        .keep_commitment(&commitment, &Address::Plain, &task, now_plan(3))
        .await
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let channel = Recorder::new();
    let bot = bot(&store, channel.clone(), handing_off());
    let _route = bot.route(HANDLER, move |turn: Turn, input: Asked| {
        let seen = Arc::clone(&seen);
        async move { counted(&turn, input, &seen).await }
    });
    let worker = bot
        .worker("w-mismatch")
        .expect("a store")
        .with_poll_interval(Duration::from_millis(10));
    let report = worker.run_once(&Cancellation::new()).await.unwrap();
    assert_eq!(report.handed_off, 1, "{report:?}");
    assert_eq!(
        report.retried, 0,
        "asking again would fail the same way: {report:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler never ran");
    assert_eq!(channel.sent(), ["Sam will take it from here."]);
    assert_eq!(
        status(&store, "c-mismatch").await,
        [CommitmentStatus::HandedOff]
    );
}
