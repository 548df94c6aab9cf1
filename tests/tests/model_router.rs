//! Layer A's deadline policy, rule by rule, in paused time against scripted connectors: every
//! assertion is an exact instant.

mod model_support;
mod support;

use std::time::Duration;

use mesh_egress::ledger::AttemptOutcome;
use mesh_egress::model::{
    ChatMessage, ChatRequest, FailureReason, Jitter, RetryConfig, Route, Router,
};
use mesh_egress::testing::{ScriptedConnector, Step};
use mesh_egress::{Attribution, FailureClass, Ownership, StopReason, Turn};
use model_support::recovery;
use tokio::time::Instant;

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "conv", "run"))
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("status?")])
}

/// A router over `connector` with no jitter, so every wait is exact.
fn router(
    connector: &ScriptedConnector,
    config: RetryConfig,
    routes: &[&str],
) -> Router<ScriptedConnector> {
    let fallbacks = routes[1..].iter().map(|m| Route::new(*m));
    Router::with_routes(connector.clone(), Route::new(routes[0]), fallbacks, config)
        .with_jitter(Jitter::fixed(0.0))
}

fn lookup(pairs: &'static [(&'static str, &'static str)]) -> RetryConfig {
    RetryConfig::from_lookup(|key| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| (*v).to_owned())
    })
}

/// The instants (since `start`) at which `model` was called.
fn call_times(connector: &ScriptedConnector, model: &str, start: Instant) -> Vec<Duration> {
    connector
        .calls_to(model)
        .iter()
        .map(|c| c.at - start)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_healthy_call_answers_on_the_first_attempt_at_once() {
    let connector = ScriptedConnector::new().on("primary", [Step::answer("hi")]);
    let turn = turn();
    let start = Instant::now();
    let done = router(&connector, RetryConfig::default(), &["primary", "fb"])
        .complete(&turn, request())
        .await
        .expect("answered");
    assert_eq!(done.content.as_deref(), Some("hi"));
    assert_eq!(Instant::now() - start, Duration::ZERO);
    let report = recovery(&turn);
    assert_eq!(report.answered_by, Some(0));
    assert_eq!(report.attempts().len(), 1);
    assert_eq!(report.attempts()[0].outcome, AttemptOutcome::Answered);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_primary_falls_back_at_exactly_the_attempt_timeout_and_is_asked_once() {
    let (logs, _guard) = support::capture();
    let connector = ScriptedConnector::new()
        .on("primary", [Step::stall()])
        .on("fallback", [Step::answer("from fallback")]);
    let turn = turn();
    let start = Instant::now();
    let done = router(&connector, RetryConfig::default(), &["primary", "fallback"])
        .complete(&turn, request())
        .await
        .expect("the fallback answers");
    assert_eq!(done.content.as_deref(), Some("from fallback"));
    assert_eq!(call_times(&connector, "primary", start), [Duration::ZERO]);
    assert_eq!(call_times(&connector, "fallback", start), [S(60)]);

    let events = logs.with_message("model fallback started");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].target, "mesh_egress::model");
    assert_eq!(events[0].field("route_index"), Some("1"));
    assert_eq!(events[0].field("previous_route_index"), Some("0"));
    assert_eq!(events[0].field("reason"), Some("attempt_timeout"));

    let report = recovery(&turn);
    assert_eq!(report.answered_by, Some(1));
    assert_eq!(report.answered_model.as_deref(), Some("fallback"));
    assert_eq!(
        report.attempts()[0].outcome,
        AttemptOutcome::Failed(FailureReason::AttemptTimeout)
    );
    assert_eq!(report.attempts()[0].duration, S(60));
}

#[tokio::test(start_paused = true)]
async fn a_stalled_only_route_is_retried_and_recovery_ends_at_the_total_deadline() {
    let connector = ScriptedConnector::new().otherwise(Step::stall());
    let turn = turn();
    let start = Instant::now();
    let err = router(&connector, RetryConfig::default(), &["primary"])
        .complete(&turn, request())
        .await
        .expect_err("nothing answers");
    assert_eq!(Instant::now() - start, S(180));
    // 0 → 60 s timeout, 0.5 s backoff, 60.5 → 120.5, 1 s backoff, 121.5 → capped at 180.
    assert_eq!(
        call_times(&connector, "primary", start),
        [Duration::ZERO, MS(60_500), MS(121_500)]
    );
    assert_eq!(err.attempt(), 3);
    assert!(err.retryable());
    assert_eq!(err.class(), FailureClass::Transport);
    assert_eq!(err.attribution(), turn.attribution());
    assert_eq!(
        recovery(&turn).gave_up.as_deref(),
        Some("retries_exhausted")
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_of_an_hour_is_clamped_to_the_max_delay() {
    let connector =
        ScriptedConnector::new().on("primary", [Step::rate_limited(S(3600)), Step::answer("ok")]);
    let start = Instant::now();
    router(&connector, RetryConfig::default(), &["primary"])
        .complete(&turn(), request())
        .await
        .expect("answered");
    assert_eq!(
        call_times(&connector, "primary", start),
        [Duration::ZERO, S(20)]
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_below_the_cap_is_honoured_and_jitter_never_shortens_it() {
    let connector =
        ScriptedConnector::new().on("primary", [Step::rate_limited(S(3)), Step::answer("ok")]);
    let start = Instant::now();
    router(&connector, RetryConfig::default(), &["primary"])
        .with_jitter(Jitter::fixed(0.99))
        .complete(&turn(), request())
        .await
        .expect("answered");
    assert_eq!(
        call_times(&connector, "primary", start),
        [Duration::ZERO, S(3)]
    );
}

#[tokio::test(start_paused = true)]
async fn only_a_literal_zero_attempt_timeout_lets_a_stall_run_to_the_total() {
    for (value, expected) in [
        ("0", vec![Duration::ZERO]),
        ("-1", vec![Duration::ZERO, MS(60_500), MS(121_500)]),
        ("abc", vec![Duration::ZERO, MS(60_500), MS(121_500)]),
        ("", vec![Duration::ZERO, MS(60_500), MS(121_500)]),
    ] {
        let config = RetryConfig::from_lookup(|key| {
            (key == "MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS").then(|| value.to_owned())
        });
        let warnings = usize::from(value == "-1" || value == "abc");
        assert_eq!(config.warnings().len(), warnings, "{value:?}");
        let connector = ScriptedConnector::new().otherwise(Step::stall());
        let start = Instant::now();
        let _ = router(&connector, config, &["primary"])
            .complete(&turn(), request())
            .await
            .expect_err("stalls");
        assert_eq!(Instant::now() - start, S(180), "{value:?}");
        assert_eq!(
            call_times(&connector, "primary", start),
            expected,
            "{value:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_attempt_timeout_at_or_above_the_total_warns_once_and_is_clamped() {
    let config = lookup(&[
        ("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "10000"),
        ("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "5000"),
    ]);
    assert_eq!(config.warnings().len(), 1);
    assert_eq!(config.attempt_timeout(), Some(S(5)));
    let connector = ScriptedConnector::new().otherwise(Step::stall());
    let start = Instant::now();
    let err = router(&connector, config, &["primary"])
        .complete(&turn(), request())
        .await
        .expect_err("stalls");
    assert_eq!(Instant::now() - start, S(5));
    assert_eq!(err.attempt(), 1);
}

#[tokio::test(start_paused = true)]
async fn at_defaults_each_of_two_fallbacks_gets_a_full_attempt_timeout() {
    let (logs, _guard) = support::capture();
    let connector = ScriptedConnector::new().otherwise(Step::stall());
    let start = Instant::now();
    let err = router(&connector, RetryConfig::default(), &["a", "b", "c"])
        .complete(&turn(), request())
        .await
        .expect_err("all stall");
    assert_eq!(call_times(&connector, "a", start), [Duration::ZERO]);
    assert_eq!(call_times(&connector, "b", start), [S(60)]);
    // The last route is retried until the total deadline: its one share is 60 s.
    assert_eq!(call_times(&connector, "c", start), [S(120)]);
    assert_eq!(Instant::now() - start, S(180));
    assert_eq!(err.attempt(), 3);
    let reasons: Vec<_> = logs
        .with_message("model fallback started")
        .iter()
        .map(|e| {
            (
                e.field("previous_route_index").map(str::to_owned),
                e.field("route_index").map(str::to_owned),
                e.field("reason").map(str::to_owned),
            )
        })
        .collect();
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        reasons,
        [
            (s("0"), s("1"), s("attempt_timeout")),
            (s("1"), s("2"), s("attempt_timeout"))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn remaining_time_is_split_among_remaining_routes_and_unused_time_carries_over() {
    let (logs, _guard) = support::capture();
    // No attempt timeout: only route shares bound the attempts.
    let config = RetryConfig::default()
        .with_attempt_timeout(None)
        .with_total_deadline(S(90));
    let connector = ScriptedConnector::new()
        .on(
            "a",
            [Step::status(503), Step::status(503), Step::status(503)],
        )
        .otherwise(Step::stall());
    let start = Instant::now();
    let _ = router(&connector, config, &["a", "b", "c"])
        .complete(&turn(), request())
        .await
        .expect_err("all fail");
    // a: 0, 0.5, 1.5 (503s, retries exhausted at 1.5 s); b's share = 88.5 / 2 = 44.25 s;
    // c gets what is left: 90 − 45.75 = 44.25 s.
    assert_eq!(
        call_times(&connector, "a", start),
        [Duration::ZERO, MS(500), MS(1500)]
    );
    assert_eq!(call_times(&connector, "b", start), [MS(1500)]);
    assert_eq!(call_times(&connector, "c", start), [MS(45_750)]);
    assert_eq!(Instant::now() - start, S(90));
    let reasons: Vec<_> = logs
        .with_message("model fallback started")
        .iter()
        .filter_map(|e| e.field("reason").map(str::to_owned))
        .collect();
    assert_eq!(reasons, ["retries_exhausted", "route_budget_spent"]);
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_would_outlast_the_route_share_moves_on_at_once() {
    let (logs, _guard) = support::capture();
    let config = RetryConfig::default().with_total_deadline(S(30));
    let connector = ScriptedConnector::new()
        .on("a", [Step::rate_limited(S(20))])
        .on("b", [Step::answer("ok")]);
    let start = Instant::now();
    router(&connector, config.clone(), &["a", "b"])
        .complete(&turn(), request())
        .await
        .expect("b answers");
    // a's share is 15 s; a 20 s wait would outlast it, so b starts at once.
    assert_eq!(call_times(&connector, "b", start), [Duration::ZERO]);
    let events = logs.with_message("model fallback started");
    assert_eq!(events[0].field("reason"), Some("route_budget_spent"));

    // On the last route, recovery ends instead of sleeping into the deadline.
    let connector = ScriptedConnector::new().on("a", [Step::rate_limited(S(20))]);
    let turn = turn();
    let start = Instant::now();
    let err = router(&connector, config.with_total_deadline(S(10)), &["a"])
        .complete(&turn, request())
        .await
        .expect_err("gives up");
    assert_eq!(Instant::now() - start, Duration::ZERO);
    assert!(err.retryable());
    assert_eq!(
        recovery(&turn).gave_up.as_deref(),
        Some("route_budget_spent")
    );
}

#[tokio::test(start_paused = true)]
async fn terminal_errors_are_not_retried_and_do_not_fall_back() {
    for step in [
        Step::status(401),
        Step::status(403),
        Step::status_with_code(400, "invalid_request_error"),
        Step::status_with_code(400, "context_length_exceeded"),
        Step::status(404),
    ] {
        let connector = ScriptedConnector::new()
            .on("a", [step])
            .otherwise(Step::answer("must not be reached"));
        let turn = turn();
        let err = router(&connector, RetryConfig::default(), &["a", "b"])
            .complete(&turn, request())
            .await
            .expect_err("terminal");
        assert_eq!(connector.calls().len(), 1);
        assert!(!err.retryable());
        assert_eq!(err.attempt(), 1);
        assert_eq!(recovery(&turn).gave_up.as_deref(), Some("terminal"));
    }
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_quota_is_not_retried_but_falls_back_by_default() {
    let connector = ScriptedConnector::new()
        .on("a", [Step::status_with_code(429, "insufficient_quota")])
        .on("b", [Step::answer("other provider")]);
    let turn = turn();
    let completion = router(&connector, RetryConfig::default(), &["a", "b"])
        .complete(&turn, request())
        .await
        .expect("fell back");
    assert_eq!(completion.content.as_deref(), Some("other provider"));
    assert_eq!(connector.calls_to("a").len(), 1);
    let report = recovery(&turn);
    assert_eq!(
        report.attempts().iter().next().map(|a| a.outcome),
        Some(AttemptOutcome::Failed(FailureReason::QuotaExhausted))
    );
}

#[tokio::test(start_paused = true)]
async fn a_context_overflow_falls_back_to_a_route_with_a_larger_window() {
    let connector = ScriptedConnector::new()
        .on(
            "small",
            [Step::status_with_code(400, "context_length_exceeded")],
        )
        .on("big", [Step::answer("fits")]);
    let router = Router::with_routes(
        connector.clone(),
        Route::new("small").with_context_window(8_000),
        [
            Route::new("same").with_context_window(8_000),
            Route::new("big").with_context_window(128_000),
        ],
        RetryConfig::default(),
    );
    let done = router
        .complete(&turn(), request())
        .await
        .expect("big answers");
    assert_eq!(done.content.as_deref(), Some("fits"));
    assert!(connector.calls_to("same").is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancellation_mid_backoff_ends_recovery_at_once() {
    let connector = ScriptedConnector::new()
        .on("a", [Step::rate_limited(S(10))])
        .otherwise(Step::answer("too late"));
    let turn = turn();
    let cancel = turn.cancellation().clone();
    let start = Instant::now();
    let router = router(&connector, RetryConfig::default(), &["a"]);
    let (result, ()) = tokio::join!(router.complete(&turn, request()), async {
        tokio::time::sleep(S(4)).await;
        cancel.cancel();
    });
    let err = result.expect_err("cancelled");
    assert_eq!(Instant::now() - start, S(4));
    assert_eq!(connector.calls().len(), 1);
    assert!(!err.retryable());
    assert_eq!(recovery(&turn).gave_up.as_deref(), Some("cancelled"));
}

#[tokio::test(start_paused = true)]
async fn cancellation_mid_attempt_ends_recovery_at_once_and_leaves_no_task() {
    let connector = ScriptedConnector::new().otherwise(Step::stall());
    let turn = turn();
    let cancel = turn.cancellation().clone();
    let start = Instant::now();
    let router = router(&connector, RetryConfig::default(), &["a", "b"]);
    let (result, ()) = tokio::join!(router.complete(&turn, request()), async {
        tokio::time::sleep(MS(2500)).await;
        cancel.cancel();
    });
    assert!(result.is_err());
    assert_eq!(Instant::now() - start, MS(2500));
    assert_eq!(connector.calls().len(), 1);
    let report = recovery(&turn);
    assert_eq!(
        report.attempts()[0].outcome,
        AttemptOutcome::Stopped(StopReason::Cancelled)
    );
    assert_eq!(report.attempts()[0].duration, MS(2500));
    assert_eq!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        0,
        "the router spawned nothing that outlives the call"
    );
}

#[tokio::test(start_paused = true)]
async fn losing_ownership_stops_recovery_at_once() {
    let connector = ScriptedConnector::new().otherwise(Step::stall());
    let turn = turn();
    let ownership = turn.ownership().clone();
    let start = Instant::now();
    let router = router(&connector, RetryConfig::default(), &["a"]);
    let (result, ()) = tokio::join!(router.complete(&turn, request()), async {
        tokio::time::sleep(S(7)).await;
        ownership.revoke();
    });
    assert!(!result.expect_err("disowned").retryable());
    assert_eq!(Instant::now() - start, S(7));
    assert_eq!(recovery(&turn).gave_up.as_deref(), Some("ownership_lost"));

    // A caller-supplied check that already fails stops recovery before any call.
    let connector = ScriptedConnector::new().otherwise(Step::answer("no"));
    let turn =
        Turn::new(Attribution::new("a", "c", "r")).with_ownership(Ownership::checked(|| false));
    let _ = router_for(&connector)
        .complete(&turn, request())
        .await
        .expect_err("disowned");
    assert!(connector.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_ownership_check_is_asked_once_before_the_call_and_its_no_stands() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    // The check says no the first time only: the answer it gave is the one that counts.
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let ownership = Ownership::checked(move || counter.fetch_add(1, Ordering::SeqCst) > 0);
    let turn = Turn::new(Attribution::new("a", "c", "r")).with_ownership(ownership);
    let connector = ScriptedConnector::new().otherwise(Step::answer("no"));
    let err = router_for(&connector)
        .complete(&turn, request())
        .await
        .expect_err("disowned");
    assert!(!err.retryable());
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(connector.calls().is_empty());
    let report = recovery(&turn);
    assert_eq!(report.gave_up.as_deref(), Some("ownership_lost"));
    assert!(report.attempts().is_empty());
}

fn router_for(connector: &ScriptedConnector) -> Router<ScriptedConnector> {
    router(connector, RetryConfig::default(), &["a"])
}

#[tokio::test(start_paused = true)]
async fn the_turns_deadline_caps_recovery() {
    let connector = ScriptedConnector::new().otherwise(Step::stall());
    let turn = turn().with_timeout(S(25));
    let start = Instant::now();
    let err = router_for(&connector)
        .complete(&turn, request())
        .await
        .expect_err("deadline");
    assert_eq!(Instant::now() - start, S(25));
    assert!(err.retryable());
    assert_eq!(recovery(&turn).gave_up.as_deref(), Some("deadline_reached"));
}

/// The healthy path asks the primary only when the call has time left: none with a zero total
/// deadline or a turn whose deadline is now, and then recovery ends at once without asking any
/// model (`total_deadline`); a turn with a moment left is answered.
#[tokio::test(start_paused = true)]
async fn a_call_with_no_time_left_asks_no_model_and_one_with_a_moment_left_is_answered() {
    let now = Instant::now();
    let no_time = [
        (
            RetryConfig::default().with_total_deadline(Duration::ZERO),
            turn(),
        ),
        (RetryConfig::default(), turn().with_deadline(now)),
    ];
    for (config, turn) in no_time {
        let connector = ScriptedConnector::new().on("a", [Step::answer("ok")]);
        let err = router(&connector, config, &["a"])
            .complete(&turn, request())
            .await
            .expect_err("no time left");
        assert!(connector.calls().is_empty());
        assert!(err.retryable());
        let report = recovery(&turn);
        assert_eq!(report.gave_up.as_deref(), Some("total_deadline"));
        assert!(report.attempts().is_empty());
        assert_eq!(Instant::now(), now);
    }
    let connector = ScriptedConnector::new().on("a", [Step::answer("ok")]);
    let turn = turn().with_deadline(now + Duration::from_nanos(1));
    let completion = router(&connector, RetryConfig::default(), &["a"])
        .complete(&turn, request())
        .await
        .expect("answered");
    assert_eq!(completion.content.as_deref(), Some("ok"));
    let report = recovery(&turn);
    assert_eq!(report.answered_by, Some(0));
    assert_eq!(report.attempts().len(), 1);
    assert_eq!(report.attempts()[0].outcome, AttemptOutcome::Answered);
    assert_eq!(report.attempts()[0].duration, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn one_attempt_disables_retries_but_not_fallback_or_deadlines() {
    let config = lookup(&[("MESH_MODEL_RETRY_ATTEMPTS", "1")]);
    let connector = ScriptedConnector::new().on("a", [Step::status(503)]);
    let err = router(&connector, config.clone(), &["a"])
        .complete(&turn(), request())
        .await
        .expect_err("no retry");
    assert_eq!(connector.calls().len(), 1);
    assert_eq!(err.attempt(), 1);

    let connector = ScriptedConnector::new()
        .on("a", [Step::status(503)])
        .on("b", [Step::stall()]);
    let start = Instant::now();
    let _ = router(&connector, config, &["a", "b"])
        .complete(&turn(), request())
        .await
        .expect_err("b stalls");
    assert_eq!(call_times(&connector, "b", start), [Duration::ZERO]);
    // b is the last route with one attempt: bounded by the attempt timeout.
    assert_eq!(Instant::now() - start, S(60));
}

#[tokio::test(start_paused = true)]
async fn retryable_failures_retry_the_same_route_with_backoff_first() {
    let connector = ScriptedConnector::new()
        .on(
            "a",
            [Step::status(502), Step::connection_reset(), Step::empty()],
        )
        .on("b", [Step::answer("b")]);
    let turn = turn();
    let start = Instant::now();
    router(&connector, RetryConfig::default(), &["a", "b"])
        .complete(&turn, request())
        .await
        .expect("b answers");
    assert_eq!(
        call_times(&connector, "a", start),
        [Duration::ZERO, MS(500), MS(1500)]
    );
    assert_eq!(call_times(&connector, "b", start), [MS(1500)]);
    let outcomes: Vec<_> = recovery(&turn)
        .attempts()
        .iter()
        .map(|a| (a.outcome.to_string(), a.wait))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("server_error".to_owned(), Some(MS(500))),
            ("connection".to_owned(), Some(MS(1000))),
            ("empty_completion".to_owned(), None),
            ("ok".to_owned(), None),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn logs_and_ledger_never_carry_provider_text() {
    let (logs, _guard) = support::capture();
    let connector = ScriptedConnector::new().on(
        "a",
        [Step::fail(|| {
            mesh_egress::model::ModelError::status(400)
                .with_provider_message("SECRET-PROVIDER-TEXT")
        })],
    );
    let turn = turn();
    let err = router_for(&connector)
        .complete(&turn, request())
        .await
        .expect_err("terminal");
    assert!(
        err.internal_cause()
            .to_string()
            .contains("SECRET-PROVIDER-TEXT")
    );
    for event in logs.events() {
        assert!(!format!("{event:?}").contains("SECRET"), "{event:?}");
    }
    assert!(!format!("{:?}", turn.ledger().entries()).contains("SECRET"));
}

#[tokio::test(start_paused = true)]
async fn duration_max_total_deadline_attempt_timeout_and_retry_after_never_panic() {
    // The total deadline and the attempt timeout at Duration::MAX: the waits are the ordinary
    // ones, and a Retry-After of Duration::MAX is clamped to the 20 s max delay.
    let connector = ScriptedConnector::new().on(
        "a",
        [
            Step::status(503),
            Step::rate_limited(Duration::MAX),
            Step::answer("ok"),
        ],
    );
    let config = RetryConfig::default()
        .with_total_deadline(Duration::MAX)
        .with_attempt_timeout(Some(Duration::MAX));
    let start = Instant::now();
    let completion = router(&connector, config, &["a", "b"])
        .complete(&turn(), request())
        .await
        .expect("answered");
    assert_eq!(completion.content.as_deref(), Some("ok"));
    assert_eq!(
        call_times(&connector, "a", start),
        [S(0), MS(500), MS(20_500)]
    );

    // A max delay and base delay of Duration::MAX: the wait cannot fit, so the route's budget is
    // spent at once and the fallback answers, at the same instant.
    let connector = ScriptedConnector::new()
        .on("a", [Step::rate_limited(Duration::MAX)])
        .on("b", [Step::answer("fallback")]);
    let config = RetryConfig::default()
        .with_total_deadline(Duration::MAX)
        .with_max_delay(Duration::MAX)
        .with_base_delay(Duration::MAX);
    let start = Instant::now();
    let turn = turn();
    let completion = router(&connector, config, &["a", "b"])
        .complete(&turn, request())
        .await
        .expect("fell back");
    assert_eq!(completion.content.as_deref(), Some("fallback"));
    assert_eq!(call_times(&connector, "b", start), [S(0)]);

    // The turn's own deadline still bounds a call whose policy says "forever".
    let connector = ScriptedConnector::new().on("a", [Step::stall()]);
    let config = RetryConfig::default()
        .with_total_deadline(Duration::MAX)
        .with_attempt_timeout(None);
    let turn = Turn::new(Attribution::new("agent", "conv", "run")).with_timeout(S(7));
    let start = Instant::now();
    let error = router(&connector, config, &["a"])
        .complete(&turn, request())
        .await
        .expect_err("the turn's deadline ends it");
    assert_eq!(Instant::now() - start, S(7));
    assert!(error.retryable());
}
