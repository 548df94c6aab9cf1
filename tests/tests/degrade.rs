//! Layer C end to end: real model failures (through `Router`) reach the boundary, and what a
//! person receives is an answer, a holding line, a handoff or silence — never the cause.

mod support;

use std::time::Duration;

use mesh_egress::boundary::resolve;
use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::degrade::{DegradationPolicy, Mode};
use mesh_egress::ledger::{DegradationOutcome, Ledger, LedgerRecord};
use mesh_egress::model::{ChatMessage, ChatRequest, Jitter, ModelError, RetryConfig, Router};
use mesh_egress::testing::{ScriptedConnector, Step};
use mesh_egress::{AgentMessage, Attribution, EgressError, Reply, Turn, egress_boundary};
use proptest::prelude::*;
use support::{LogCapture, marker};

fn config() -> RetryConfig {
    RetryConfig::default()
        .with_attempts(2)
        .with_base_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_millis(500))
        .with_attempt_timeout(Some(Duration::from_secs(2)))
        .with_total_deadline(Duration::from_secs(10))
}

fn router(connector: ScriptedConnector) -> Router<ScriptedConnector> {
    Router::new(
        connector,
        "primary",
        config().with_fallback_models(["fallback"]),
    )
    .with_jitter(Jitter::fixed(0.5))
}

async fn run_turn(
    turn: &Turn,
    router: &Router<ScriptedConnector>,
) -> Result<AgentMessage, EgressError> {
    let completion = router
        .complete(turn, ChatRequest::new(vec![ChatMessage::user("status?")]))
        .await?;
    Ok(AgentMessage::new(
        completion.content.unwrap_or_default(),
        turn.attribution().clone(),
    ))
}

/// A provider failure whose text carries `marker`.
fn failing(status: u16, code: &'static str, marker: &str) -> Step {
    let text = format!("{marker}: upstream said no");
    Step::fail(move || {
        ModelError::status(status)
            .with_code(code)
            .with_provider_message(text.clone())
    })
}

#[derive(Clone, Copy, Debug)]
enum Failure {
    AllDown,
    Unauthorized,
    BadRequest,
    ContextOverflow,
}

impl Failure {
    fn step(self, marker: &str) -> Step {
        match self {
            Self::AllDown => failing(503, "server_error", marker),
            Self::Unauthorized => failing(401, "invalid_api_key", marker),
            Self::BadRequest => failing(400, "invalid_request_error", marker),
            Self::ContextOverflow => failing(400, "context_length_exceeded", marker),
        }
    }

    fn retryable(self) -> bool {
        matches!(self, Self::AllDown)
    }
}

#[tokio::test(start_paused = true)]
async fn every_mode_and_policy_keeps_the_cause_away_from_the_person() {
    let failures = [
        Failure::AllDown,
        Failure::Unauthorized,
        Failure::BadRequest,
        Failure::ContextOverflow,
    ];
    type MakePolicy = fn() -> DegradationPolicy;
    let policies: [(&str, MakePolicy); 3] = [
        ("default", DegradationPolicy::default),
        ("always hand off", || {
            DegradationPolicy::default().always_hand_off(true)
        }),
        ("custom copy", || {
            DegradationPolicy::default()
                .with_holding_lines(["On it, one moment.", "Still on it."])
                .with_handoff("the support queue", "Passing this to {to}.")
        }),
    ];
    for failure in failures {
        for (policy_name, make_policy) in policies {
            for mode in [Mode::Interactive, Mode::Proactive] {
                let cause = marker("table");
                let logs = LogCapture::default();
                let _guard = logs.install();
                let ledger = Ledger::in_memory();
                let policy = make_policy().with_ledger(ledger.clone());
                let turn =
                    Turn::new(Attribution::new("bot", "conv", "run")).with_ledger(ledger.clone());
                let router = router(ScriptedConnector::new().otherwise(failure.step(&cause)));
                let channel = Recorder::new();

                let reply = resolve(mode, &policy, run_turn(&turn, &router).await);
                let case = format!("{failure:?} / {policy_name} / {mode:?}");
                let expected = match (mode, failure.retryable(), policy_name) {
                    (Mode::Proactive, _, _) => "silence",
                    (Mode::Interactive, true, "always hand off") => "handoff",
                    (Mode::Interactive, true, _) => "holding",
                    (Mode::Interactive, false, _) => "handoff",
                };
                assert_eq!(reply.kind(), expected, "{case}");
                let carries_promise = matches!(reply, Reply::Holding { .. });
                let mut receipt = channel.deliver(reply).await.expect("delivered");
                assert_eq!(
                    receipt.take_commitment().is_some(),
                    carries_promise,
                    "{case}"
                );

                let received = channel.sent().concat();
                assert!(
                    !received.contains(&cause),
                    "{case}: cause leaked: {received}"
                );
                assert!(!received.contains("upstream said no"), "{case}: {received}");
                assert_eq!(received.is_empty(), mode == Mode::Proactive, "{case}");

                // The cause did reach the operator: once, in the error-tracking event.
                let events = logs.events();
                let carrying: Vec<_> = events
                    .iter()
                    .filter(|e| e.to_string().contains(&cause))
                    .collect();
                assert_eq!(carrying.len(), 1, "{case}: {events:#?}");
                assert_eq!(carrying[0]["target"], "mesh_egress::egress", "{case}");
                assert!(
                    events.iter().any(|e| e["target"] == "mesh_egress::degrade"),
                    "{case}: the outcome is logged"
                );
                let rows = ledger.entries();
                assert!(
                    !format!("{rows:?}").contains(&cause),
                    "{case}: ledger holds the cause"
                );
                let outcome = rows.iter().find_map(|r| match &r.record() {
                    LedgerRecord::Degradation(d) => Some(d.outcome().clone()),
                    _ => None,
                });
                let recorded = match outcome {
                    Some(DegradationOutcome::Holding { .. }) => "holding",
                    Some(DegradationOutcome::Handoff { .. }) => "handoff",
                    Some(DegradationOutcome::Silence {
                        retry_next_cycle: true,
                    }) => "silence",
                    other => panic!("{case}: unexpected ledger outcome {other:?}"),
                };
                assert_eq!(recorded, expected, "{case}");
            }
        }
    }
}

#[egress_boundary(interactive, policy = policy)]
async fn ask(
    turn: &Turn,
    router: &Router<ScriptedConnector>,
    policy: &DegradationPolicy,
) -> Result<AgentMessage, EgressError> {
    run_turn(turn, router).await
}

#[tokio::test(start_paused = true)]
async fn consecutive_holding_lines_in_one_conversation_differ() {
    let cause = marker("rotation");
    let policy = DegradationPolicy::default();
    let router = router(ScriptedConnector::new().otherwise(Failure::AllDown.step(&cause)));
    let channel = Recorder::new();
    let turn = Turn::new(Attribution::new("bot", "dm-rotating", "run"));
    for _ in 0..6 {
        let mut receipt = channel
            .deliver(ask(&turn, &router, &policy).await)
            .await
            .expect("delivered");
        let _promise = receipt.take_commitment().expect("holding line");
    }
    let sent = channel.sent();
    assert_eq!(sent.len(), 6);
    for pair in sent.windows(2) {
        assert_ne!(pair[0], pair[1], "{sent:#?}");
    }
    assert!(!sent.concat().contains(&cause));
}

/// One step of a random fault schedule.
fn arb_step() -> impl Strategy<Value = u8> {
    0u8..9
}

fn step_for(code: u8, marker: &str) -> Step {
    match code {
        0 | 1 => Step::answer("the real answer"),
        2 => failing(503, "server_error", marker),
        3 => failing(429, "rate_limit_exceeded", marker),
        4 => Step::fail(|| ModelError::connection("connection reset by peer")),
        5 => failing(401, "invalid_api_key", marker),
        6 => failing(400, "context_length_exceeded", marker),
        7 => Step::empty(),
        _ => Step::stall(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// For random fault schedules through `Router` and the boundary: nothing delivered contains
    /// a cause, every interactive turn delivers something, and every proactive turn delivers the
    /// answer or nothing.
    #[test]
    fn no_fault_schedule_leaks_a_cause_or_leaves_a_person_without_a_reply(
        primary in proptest::collection::vec(arb_step(), 0..6),
        fallback in proptest::collection::vec(arb_step(), 0..6),
        interactive in any::<bool>(),
    ) {
        let cause = marker("prop");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let (reply_kind, received, answered) = runtime.block_on(async {
            let connector = ScriptedConnector::new()
                .on("primary", primary.iter().map(|c| step_for(*c, &cause)))
                .on("fallback", fallback.iter().map(|c| step_for(*c, &cause)))
                .otherwise(failing(503, "server_error", &cause));
            let router = router(connector);
            let turn = Turn::new(Attribution::new("bot", "conv", "run"));
            let mode = if interactive { Mode::Interactive } else { Mode::Proactive };
            let result = run_turn(&turn, &router).await;
            let answered = result.is_ok();
            let reply = resolve(mode, &DegradationPolicy::default(), result);
            let kind = reply.kind();
            let channel = Recorder::new();
            let _receipt = channel.deliver(reply).await.expect("delivered");
            (kind, channel.sent(), answered)
        });
        let all = received.concat();
        prop_assert!(!all.contains(&cause), "cause leaked: {all}");
        prop_assert!(!all.contains("upstream said no"));
        if interactive {
            prop_assert_eq!(received.len(), 1, "an interactive turn always says something");
        } else if answered {
            prop_assert_eq!(received.len(), 1);
            prop_assert_eq!(reply_kind, "answer");
        } else {
            prop_assert!(received.is_empty(), "a failed proactive turn stays silent");
        }
        if answered {
            prop_assert_eq!(received, vec!["the real answer".to_owned()]);
        }
    }
}
