//! Layer A for a streamed answer, rule by rule, in paused time against the scripted connector:
//! the first-token and idle bounds at exact instants, invisible recovery before anything was
//! delivered, route abandonment after, and continuation on a fallback route (prefill and
//! afresh, overlap dropped, an unjoinable answer ending the stream).

use std::time::Duration;

use mesh_egress::ledger::JoinedBy;
use mesh_egress::model::{FailureReason, RecoveryReport, RetryConfig, Route, RoutedStream};
use mesh_egress::testing::{ScriptedConnector, Step};
use tokio::time::Instant;

mod model_support;
use model_support::{MS, S, Streamed, cause, recovery, router, router_over, stream_to_end, turn};

fn outcomes(report: &RecoveryReport) -> Vec<(usize, String)> {
    report
        .attempts()
        .iter()
        .map(|a| (a.route_index, a.outcome.to_string()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_healthy_stream_yields_each_chunk_as_it_arrives() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [Step::chunks(["All ", "green", "."]).chunk_delay(MS(100))],
    );
    let router = router(&connector, RetryConfig::default(), &["primary", "fb"]);
    let Streamed { turn, seen, .. } = stream_to_end(&router, true).await;
    assert!(seen.error.is_none());
    let times: Vec<Duration> = seen.deltas.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, [MS(100), MS(200), MS(300)]);
    assert_eq!(seen.text(), "All green.");
    assert_eq!(seen.finish_reason.as_deref(), Some("stop"));
    let report = recovery(&turn);
    assert_eq!(report.answered_by, Some(0));
    assert_eq!(outcomes(&report), [(0, "ok".to_owned())]);
    let stream = report.stream.expect("a stream report");
    assert_eq!(stream.delivered_bytes, "All green.".len());
    assert_eq!(stream.failed_route, None);
}

#[tokio::test(start_paused = true)]
async fn no_first_token_within_its_bound_abandons_the_route_at_that_instant() {
    let connector = ScriptedConnector::new()
        .on("primary", [Step::chunks(["late"]).chunk_delay(S(5))])
        .on("fb", [Step::chunks(["on time"])]);
    let config = RetryConfig::default().with_stream_first_token_timeout(Some(S(2)));
    let router = router(&connector, config, &["primary", "fb"]);
    let Streamed { turn, start, seen } = stream_to_end(&router, true).await;
    assert_eq!(seen.deltas, [(S(2), "on time".to_owned())]);
    assert_eq!(connector.calls_to("fb")[0].at - start, S(2));
    let report = recovery(&turn);
    assert_eq!(
        outcomes(&report),
        [(0, "first_token_timeout".to_owned()), (1, "ok".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn the_attempt_timeout_bounds_only_the_time_to_the_first_token() {
    // 10 chunks 300 ms apart take 3 s, three times the attempt timeout: never cut.
    let long = Step::chunks(vec!["w "; 10]).chunk_delay(MS(300));
    let late = Step::chunks(["x"]).chunk_delay(MS(1500));
    let connector = ScriptedConnector::new().on("primary", [late, long]);
    let config = RetryConfig::default()
        .with_attempt_timeout(Some(S(1)))
        .with_stream_first_token_timeout(None);
    let router = router(&connector, config, &["primary"]);
    let Streamed { start, seen, .. } = stream_to_end(&router, true).await;
    assert!(seen.error.is_none());
    assert_eq!(seen.text(), "w ".repeat(10));
    // The first attempt was cut at 1 s (no token yet), the retry started after the 500 ms
    // backoff, and its tenth chunk arrived 3 s later.
    assert_eq!(connector.calls_to("primary")[1].at - start, MS(1500));
    assert_eq!(seen.deltas.last().map(|(t, _)| *t), Some(MS(4500)));
}

#[tokio::test(start_paused = true)]
async fn silence_between_chunks_past_the_idle_bound_is_a_stalled_route_at_that_instant() {
    let connector = ScriptedConnector::new()
        .on(
            "primary",
            [Step::chunks(["a", "b", "c", "d"])
                .chunk_delay(MS(100))
                .stall_after(2)],
        )
        .on("fb", [Step::chunks(["a", "b", "c", "d"])]);
    let config = RetryConfig::default().with_stream_idle_timeout(Some(MS(500)));
    let router = router(&connector, config, &["primary", "fb"]);
    // Nothing is marked delivered: recovery is invisible, and the fallback's whole answer
    // replaces what was yielded (the stream says it restarted), so no letter comes twice.
    let Streamed { turn, start, seen } = stream_to_end(&router, false).await;
    assert!(seen.error.is_none());
    assert_eq!(seen.text(), "abcd");
    assert_eq!(seen.restarts, 1);
    // Last content at 200 ms, idle bound 500 ms.
    assert_eq!(connector.calls_to("fb")[0].at - start, MS(700));
    let report = recovery(&turn);
    assert_eq!(
        outcomes(&report),
        [(0, "stream_idle_timeout".to_owned()), (1, "ok".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn before_anything_is_delivered_a_broken_stream_retries_the_same_route_invisibly() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [
            Step::chunks(["Hel", "lo"]).reset_after(1),
            Step::chunks(["Hel", "lo"]),
        ],
    );
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let Streamed { start, seen, .. } = stream_to_end(&router, false).await;
    assert!(seen.error.is_none());
    assert_eq!(seen.text(), "Hello");
    assert_eq!(
        seen.restarts, 1,
        "the retry's whole answer replaces the unshown 'Hel'"
    );
    let calls = connector.calls_to("primary");
    assert_eq!(calls.len(), 2);
    // The first backoff step (500 ms, no jitter).
    assert_eq!(calls[1].at - start, MS(500));
}

#[tokio::test(start_paused = true)]
async fn after_delivery_a_failure_abandons_the_route_and_without_a_fallback_ends_the_stream() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [
            Step::chunks(["The ", "build ", "is"])
                .chunk_delay(MS(100))
                .stall_after(2),
            Step::chunks(["never asked"]),
        ],
    );
    let config = RetryConfig::default().with_stream_idle_timeout(Some(S(1)));
    let router = router(&connector, config, &["primary"]);
    let Streamed { turn, start, seen } = stream_to_end(&router, true).await;
    assert_eq!(seen.text(), "The build ");
    let error = seen.error.expect("the stream failed after delivery");
    assert_eq!(Instant::now() - start, MS(1200));
    let cause = cause(&error);
    assert_eq!(cause.gave_up(), "stream_failed_after_delivery");
    assert!(cause.failed_after_delivery());
    assert_eq!(cause.delivered_bytes(), "The build ".len());
    assert_eq!(seen.delivered, "The build ");
    // Three attempts were allowed, yet the route was not retried: the answer was under way.
    assert_eq!(connector.calls_to("primary").len(), 1);
    let report = recovery(&turn);
    let stream = report.stream.expect("a stream report");
    assert_eq!(stream.failed_route, Some(0));
    assert_eq!(stream.failure, Some(FailureReason::StreamIdleTimeout));
    assert_eq!(stream.failed_after_bytes, Some("The build ".len()));
    assert_eq!(stream.rest_answered_by, None);
    assert_eq!(
        report.gave_up.as_deref(),
        Some("stream_failed_after_delivery")
    );
}

#[tokio::test(start_paused = true)]
async fn a_prefill_route_continues_from_the_delivered_text_and_its_restated_overlap_is_dropped() {
    let connector = ScriptedConnector::new()
        .on(
            "primary",
            [Step::chunks(["The build ", "is green", " and"])
                .chunk_delay(MS(100))
                .reset_after(2)],
        )
        .on("fb", [Step::chunks(["is green", " and the tests pass."])]);
    let routes = vec![Route::new("primary"), Route::new("fb").with_prefill(true)];
    let router = router_over(connector.clone(), RetryConfig::default(), routes);
    let Streamed { turn, start, seen } = stream_to_end(&router, true).await;
    assert!(seen.error.is_none());
    assert_eq!(seen.text(), "The build is green and the tests pass.");
    assert_eq!(seen.delivered, "The build is green and the tests pass.");
    let fb = connector.calls_to("fb");
    assert_eq!(fb[0].prefill.as_deref(), Some("The build is green"));
    assert_eq!(fb[0].at - start, MS(300));
    let report = recovery(&turn);
    assert_eq!(report.answered_by, Some(1));
    let stream = report.stream.expect("a stream report");
    assert_eq!(stream.failed_route, Some(0));
    assert_eq!(stream.failure, Some(FailureReason::Connection));
    assert_eq!(stream.rest_answered_by, Some(1));
    assert_eq!(stream.joined_by, Some(JoinedBy::Prefill));
}

#[tokio::test(start_paused = true)]
async fn a_route_without_prefill_is_asked_afresh_and_only_what_follows_the_delivered_text_is_yielded()
 {
    let connector = ScriptedConnector::new()
        .on(
            "primary",
            [Step::chunks(["The build ", "is green", " and"])
                .fail_after(2, || mesh_egress::model::ModelError::status(500))],
        )
        .on(
            "fb",
            [Step::chunks(["The build is ", "green and the tests pass."])],
        );
    let router = router(&connector, RetryConfig::default(), &["primary", "fb"]);
    let Streamed { turn, seen, .. } = stream_to_end(&router, true).await;
    assert!(seen.error.is_none());
    assert_eq!(seen.text(), "The build is green and the tests pass.");
    assert_eq!(connector.calls_to("fb")[0].prefill, None);
    let stream = recovery(&turn).stream.expect("a stream report");
    assert_eq!(stream.failure, Some(FailureReason::ServerError));
    assert_eq!(stream.joined_by, Some(JoinedBy::Afresh));
    assert_eq!(stream.rest_answered_by, Some(1));
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_cannot_be_joined_to_the_delivered_text_ends_the_stream_for_layer_c() {
    let connector = ScriptedConnector::new()
        .on(
            "primary",
            [Step::chunks(["Deploy ", "step one"]).reset_after(2)],
        )
        .on("fb", [Step::chunks(["Something else entirely."])]);
    let router = router(&connector, RetryConfig::default(), &["primary", "fb"]);
    let Streamed { turn, seen, .. } = stream_to_end(&router, true).await;
    assert_eq!(seen.text(), "Deploy step one");
    let error = seen.error.expect("unjoinable");
    assert_eq!(cause(&error).gave_up(), "stream_unjoinable");
    assert_eq!(cause(&error).delivered_bytes(), "Deploy step one".len());
    let report = recovery(&turn);
    assert_eq!(report.gave_up.as_deref(), Some("stream_unjoinable"));
    assert_eq!(
        outcomes(&report),
        [
            (0, "connection".to_owned()),
            (1, "stream_unjoinable".to_owned())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_connector_without_streaming_answers_as_one_chunk() {
    let connector = ScriptedConnector::new().on("primary", [Step::answer("whole").after(MS(250))]);
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let Streamed { seen, .. } = stream_to_end(&router, true).await;
    assert_eq!(seen.deltas, [(MS(250), "whole".to_owned())]);
}

#[tokio::test(start_paused = true)]
async fn from_chunks_plays_its_script_and_stops_when_the_turn_does() {
    let turn = turn();
    let mut stream = RoutedStream::from_chunks(&turn, vec![Ok("a".to_owned()), Ok("b".to_owned())]);
    assert_eq!(
        stream.next().await.and_then(Result::ok).as_deref(),
        Some("a")
    );
    stream.mark_delivered("a");
    turn.cancellation().cancel();
    let error = stream.next().await.expect("an item").expect_err("stopped");
    assert_eq!(cause(&error).gave_up(), "cancelled");
    assert!(stream.next().await.is_none());
    assert_eq!(stream.delivered(), "a");
}
