//! `OpenAiCompatible` + `Router` against a fault-injecting fake provider on 127.0.0.1. Real time,
//! short deadlines (paused time and real sockets do not mix).

use std::time::Duration;

use mesh_egress::ledger::LedgerRecord;
use mesh_egress::model::{
    ChatMessage, ChatRequest, FailureReason, Jitter, ModelConnector, ModelErrorKind,
    OpenAiCompatible, RecoveryError, RetryConfig, Route, Router, classify,
};
use mesh_egress::testing::{FakeProvider, FakeResponse};
use mesh_egress::{Attribution, Turn};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "conv", "run"))
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("status?")])
}

/// Short deadlines: 500 ms attempts, 3 s total, 50 ms base backoff, 300 ms max wait.
fn config() -> RetryConfig {
    RetryConfig::default()
        .with_attempt_timeout(Some(MS(500)))
        .with_total_deadline(MS(3000))
        .with_base_delay(MS(50))
        .with_max_delay(MS(300))
}

fn connector(provider: &FakeProvider) -> OpenAiCompatible {
    OpenAiCompatible::with_timeouts(provider.base_url(), Duration::from_secs(5), MS(500))
        .expect("valid base url")
        .with_api_key("test-key")
}

fn router(provider: &FakeProvider, routes: &[&str]) -> Router<OpenAiCompatible> {
    Router::with_routes(
        connector(provider),
        Route::new(routes[0]),
        routes[1..].iter().map(|m| Route::new(*m)),
        config(),
    )
    .with_jitter(Jitter::fixed(0.0))
}

fn outcomes(turn: &Turn) -> Vec<String> {
    turn.ledger()
        .entries()
        .into_iter()
        .filter_map(|e| match e.into_record() {
            LedgerRecord::Recovery(r) => Some(r),
            _ => None,
        })
        .flat_map(|r| {
            r.attempts()
                .iter()
                .map(|a| a.outcome.to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn server_errors_are_retried_until_the_provider_answers() {
    for status in [500, 502, 503] {
        let provider = FakeProvider::start([
            FakeResponse::status(status),
            FakeResponse::completion("recovered"),
        ])
        .await
        .expect("binds");
        let turn = turn();
        let done = router(&provider, &["m"])
            .complete(&turn, request())
            .await
            .expect("answered");
        assert_eq!(done.content.as_deref(), Some("recovered"));
        assert_eq!(outcomes(&turn), ["server_error", "ok"], "status {status}");
        let received = provider.received();
        assert_eq!(received.len(), 2);
        assert_eq!(received[0].path, "/v1/chat/completions");
        assert_eq!(
            received[0].authorization.as_deref(),
            Some("Bearer test-key")
        );
        assert_eq!(received[0].body["model"], "m");
        assert_eq!(received[0].body["messages"][0]["content"], "status?");
    }
}

#[tokio::test]
async fn every_retry_after_form_is_read_from_a_429() {
    for (header, value, expected) in [
        ("retry-after-ms", "120", MS(120)),
        ("x-ms-retry-after-ms", "80", MS(80)),
        ("retry-after", "0.15", MS(150)),
    ] {
        let provider =
            FakeProvider::start(
                [FakeResponse::error(429, "rate_limit_exceeded", "slow down")
                    .with_header(header, value)],
            )
            .await
            .expect("binds");
        let err = connector(&provider)
            .complete("m", &request())
            .await
            .expect_err("429");
        assert_eq!(err.kind(), ModelErrorKind::Status(429));
        assert_eq!(err.retry_after(), Some(expected), "{header}");
        assert!(classify(&err).retryable);
    }

    let date = httpdate_in(Duration::from_secs(30));
    let provider =
        FakeProvider::start([FakeResponse::status(429).with_header("retry-after", &date)])
            .await
            .expect("binds");
    let err = connector(&provider)
        .complete("m", &request())
        .await
        .expect_err("429");
    let wait = err.retry_after().expect("an HTTP-date is read");
    assert!(
        wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
        "{wait:?}"
    );
}

fn httpdate_in(d: Duration) -> String {
    httpdate::fmt_http_date(std::time::SystemTime::now() + d)
}

#[tokio::test]
async fn a_429_with_a_huge_retry_after_is_clamped_not_obeyed() {
    let provider = FakeProvider::start([
        FakeResponse::error(429, "rate_limit_exceeded", "slow down")
            .with_header("retry-after", "3600"),
        FakeResponse::completion("after the clamp"),
    ])
    .await
    .expect("binds");
    let started = std::time::Instant::now();
    let done = router(&provider, &["m"])
        .complete(&turn(), request())
        .await
        .expect("answered");
    assert_eq!(done.content.as_deref(), Some("after the clamp"));
    // Waited the 300 ms max delay, not an hour.
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_connection_closed_mid_response_is_a_retryable_connection_failure() {
    let provider = FakeProvider::start([
        FakeResponse::close_mid_response(),
        FakeResponse::completion("second time lucky"),
    ])
    .await
    .expect("binds");
    let turn = turn();
    let done = router(&provider, &["m"])
        .complete(&turn, request())
        .await
        .expect("answered");
    assert_eq!(done.content.as_deref(), Some("second time lucky"));
    assert_eq!(outcomes(&turn), ["connection", "ok"]);
}

#[tokio::test]
async fn a_provider_that_never_answers_is_abandoned_for_the_fallback_at_the_attempt_timeout() {
    let provider = FakeProvider::start([
        FakeResponse::never_answer(),
        FakeResponse::completion("fallback answers"),
    ])
    .await
    .expect("binds");
    let turn = turn();
    let started = std::time::Instant::now();
    let done = router(&provider, &["primary", "fallback"])
        .complete(&turn, request())
        .await
        .expect("fallback answers");
    let elapsed = started.elapsed();
    assert_eq!(done.content.as_deref(), Some("fallback answers"));
    assert!(elapsed >= MS(500) && elapsed < MS(2500), "{elapsed:?}");
    assert_eq!(outcomes(&turn), ["attempt_timeout", "ok"]);
    let models: Vec<_> = provider
        .received()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(models, ["primary", "fallback"]);
}

#[tokio::test]
async fn an_empty_completion_is_retried() {
    let provider = FakeProvider::start([
        FakeResponse::empty_completion(),
        FakeResponse::completion("now with words"),
    ])
    .await
    .expect("binds");
    let turn = turn();
    router(&provider, &["m"])
        .complete(&turn, request())
        .await
        .expect("answered");
    assert_eq!(outcomes(&turn), ["empty_completion", "ok"]);
}

#[tokio::test]
async fn a_malformed_tool_call_gets_one_repair_inside_the_attempt() {
    let provider = FakeProvider::start([
        FakeResponse::tool_call("lookup", "{\"id\": 7"),
        FakeResponse::tool_call("lookup", "{\"id\": 7}"),
    ])
    .await
    .expect("binds");
    let turn = turn();
    let done = router(&provider, &["m"])
        .complete(&turn, request())
        .await
        .expect("repaired");
    assert_eq!(
        done.tool_calls[0].parsed_arguments().expect("valid json"),
        serde_json::json!({"id": 7})
    );
    // One attempt, two HTTP requests: the repair re-asks with the reply and a correction.
    assert_eq!(outcomes(&turn), ["ok"]);
    let received = provider.received();
    assert_eq!(received.len(), 2);
    let repair = received[1].body["messages"].as_array().expect("messages");
    assert_eq!(repair.len(), 3);
    assert_eq!(repair[1]["role"], "assistant");
    assert_eq!(repair[2]["role"], "user");
}

#[tokio::test]
async fn a_tool_call_still_malformed_after_the_repair_is_a_retryable_failure_never_a_second_repair()
{
    let provider = FakeProvider::start([
        FakeResponse::tool_call("lookup", "{oops"),
        FakeResponse::tool_call("lookup", "{still oops"),
    ])
    .await
    .expect("binds");
    let err = connector(&provider)
        .complete("m", &request())
        .await
        .expect_err("malformed");
    assert_eq!(err.kind(), ModelErrorKind::MalformedToolCall);
    assert!(classify(&err).retryable);
    assert_eq!(provider.received().len(), 2);
}

#[tokio::test]
async fn context_length_exceeded_is_terminal_and_not_retried() {
    let provider = FakeProvider::start([FakeResponse::error(
        400,
        "context_length_exceeded",
        "This model's maximum context length is 8192 tokens",
    )])
    .await
    .expect("binds")
    .otherwise(FakeResponse::completion("must not be asked"));
    let turn = turn();
    let err = router(&provider, &["m", "fallback"])
        .complete(&turn, request())
        .await
        .expect_err("terminal");
    assert!(!err.retryable());
    assert_eq!(provider.received().len(), 1);
    assert_eq!(outcomes(&turn), ["context_overflow"]);
    let cause = err
        .internal_cause()
        .downcast_ref::<RecoveryError>()
        .expect("a recovery error");
    assert_eq!(cause.last_reason(), Some(FailureReason::ContextOverflow));
    // The provider's text lives only in the internal cause.
    assert!(
        err.internal_cause()
            .to_string()
            .contains("maximum context length")
    );
}

#[tokio::test]
async fn unauthorised_is_terminal_and_not_retried() {
    let provider = FakeProvider::start([FakeResponse::error(401, "invalid_api_key", "bad key")])
        .await
        .expect("binds")
        .otherwise(FakeResponse::completion("must not be asked"));
    let turn = turn();
    let err = router(&provider, &["m"])
        .complete(&turn, request())
        .await
        .expect_err("terminal");
    assert!(!err.retryable());
    assert_eq!(err.attempt(), 1);
    assert_eq!(outcomes(&turn), ["auth"]);
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_connection_failure() {
    // Bind then drop, so the port is (almost certainly) closed.
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        listener.local_addr().expect("addr")
    };
    let connector = OpenAiCompatible::new(format!("http://{addr}/v1")).expect("valid");
    let err = connector
        .complete("m", &request())
        .await
        .expect_err("refused");
    assert_eq!(err.kind(), ModelErrorKind::Connection);
    assert!(classify(&err).retryable);
}

#[tokio::test(flavor = "current_thread")]
async fn cancelling_an_in_flight_http_call_leaves_no_task_of_ours_running() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let turn = turn();
    let cancel = turn.cancellation().clone();
    {
        let provider = FakeProvider::start([FakeResponse::never_answer()])
            .await
            .expect("binds");
        let router = router(&provider, &["m"]);
        let started = std::time::Instant::now();
        let (result, ()) = tokio::join!(router.complete(&turn, request()), async {
            tokio::time::sleep(MS(100)).await;
            cancel.cancel();
        });
        assert!(result.is_err());
        assert!(started.elapsed() < MS(400));
        // Dropping the router (its HTTP client) and the provider ends their connections.
    }
    for _ in 0..100 {
        if metrics.num_alive_tasks() == 0 {
            break;
        }
        tokio::time::sleep(MS(10)).await;
    }
    assert_eq!(metrics.num_alive_tasks(), 0);
}

#[test]
fn a_router_call_is_a_send_future_so_it_can_be_spawned() {
    fn assert_send<T: Send>(_: &T) {}
    let connector = OpenAiCompatible::new("http://127.0.0.1:9/v1").expect("valid");
    let router = Router::new(connector, "m", RetryConfig::default());
    let turn = turn();
    let call = router.complete(&turn, request());
    assert_send(&call);
    drop(call);
}

#[tokio::test]
async fn a_completion_body_over_the_cap_fails_the_attempt_and_the_route_falls_back() {
    // 1 MiB of body against a 4 KiB cap: the read stops at the cap, the route is left.
    let provider = FakeProvider::start([
        FakeResponse::large_body(200, 1024 * 1024),
        FakeResponse::large_body(200, 1024 * 1024),
        FakeResponse::completion("fallback answers"),
    ])
    .await
    .expect("fake provider");
    let connector = connector(&provider).with_max_completion_body(4 * 1024);
    let direct = connector.complete("primary", &request()).await;
    let error = direct.expect_err("over the cap");
    assert_eq!(error.kind(), ModelErrorKind::ResponseTooLarge);
    assert_eq!(classify(&error).reason, FailureReason::ResponseTooLarge);

    let router = Router::with_routes(
        connector,
        Route::new("primary"),
        [Route::new("fallback")],
        config(),
    )
    .with_jitter(Jitter::fixed(0.0));
    let turn = turn();
    let completion = router.complete(&turn, request()).await.expect("fell back");
    assert_eq!(completion.content.as_deref(), Some("fallback answers"));
    assert_eq!(outcomes(&turn), ["response_too_large", "ok"]);
}

#[tokio::test]
async fn an_error_body_over_the_cap_is_cut_and_the_status_still_decides() {
    let provider = FakeProvider::start([FakeResponse::large_body(503, 1024 * 1024)])
        .await
        .expect("fake provider");
    let connector = connector(&provider).with_max_error_body(2 * 1024);
    let error = connector.complete("m", &request()).await.expect_err("503");
    assert_eq!(error.kind(), ModelErrorKind::Status(503));
    assert!(classify(&error).retryable);
    assert!(error.provider_message().is_none_or(|m| m.len() <= 2 * 1024));
}

#[tokio::test]
async fn extra_choices_are_skipped_not_materialised() {
    let choices: Vec<String> = (0..500)
        .map(|i| {
            format!(r#"{{"index":{i},"message":{{"role":"assistant","content":"choice {i}"}}}}"#)
        })
        .collect();
    let body = format!(r#"{{"model":"m","choices":[{}]}}"#, choices.join(","));
    let provider = FakeProvider::start([FakeResponse::raw(200, body)])
        .await
        .expect("fake provider");
    let completion = connector(&provider)
        .complete("m", &request())
        .await
        .expect("answered");
    assert_eq!(completion.content.as_deref(), Some("choice 0"));
}

#[tokio::test]
async fn one_script_plays_the_same_in_memory_and_over_http() {
    use mesh_egress::testing::{ScriptedConnector, Step};
    let script = || {
        [
            Step::status(503),
            Step::rate_limited(MS(40)),
            Step::connection_reset(),
            Step::empty(),
            Step::answer("same answer"),
        ]
    };
    let in_memory = ScriptedConnector::new().on("m", script());
    let provider = FakeProvider::start_steps(script())
        .await
        .expect("fake provider");
    let over_http = connector(&provider);
    for _ in 0..5 {
        // The HTTP connector reports an empty completion as an error; the in-memory one hands
        // it to the Router, which does the same.
        let a = in_memory.complete("m", &request()).await.and_then(|c| {
            if c.is_empty() {
                Err(mesh_egress::model::ModelError::empty_completion())
            } else {
                Ok(c)
            }
        });
        let b = over_http.complete("m", &request()).await;
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a.content, b.content),
            (Err(a), Err(b)) => {
                let (ca, cb) = (classify(&a), classify(&b));
                assert_eq!(
                    (ca.reason, ca.retryable, ca.retry_after),
                    (cb.reason, cb.retryable, cb.retry_after)
                );
            }
            (a, b) => panic!("differ: {a:?} vs {b:?}"),
        }
    }
}
