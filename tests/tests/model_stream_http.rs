//! Streaming over loopback HTTP, in real time with short deadlines: `OpenAiCompatible` reading
//! the drip-feeding `FakeProvider`'s server-sent events through the Router.

use std::time::{Duration, Instant};

use mesh_egress::model::{
    ChatMessage, ChatRequest, FailureReason, Jitter, ModelConnector, ModelError, ModelErrorKind,
    OpenAiCompatible, RecoveryError, RetryConfig, Route, RoutedStream, Router,
};
use mesh_egress::testing::{FakeProvider, Step};
use mesh_egress::{Attribution, EgressError, Turn};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "conv", "run"))
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("status?")])
}

fn router(
    provider: &FakeProvider,
    config: RetryConfig,
    routes: &[&str],
) -> Router<OpenAiCompatible> {
    let connector = OpenAiCompatible::new(provider.base_url()).expect("valid url");
    let fallbacks = routes[1..].iter().map(|m| Route::new(*m));
    Router::with_routes(connector, Route::new(routes[0]), fallbacks, config)
        .with_jitter(Jitter::fixed(0.0))
}

/// Short bounds, so a stall costs a test a fraction of a second.
fn config() -> RetryConfig {
    RetryConfig::default()
        .with_total_deadline(Duration::from_secs(10))
        .with_stream_first_token_timeout(Some(MS(2000)))
        .with_stream_idle_timeout(Some(MS(300)))
        .with_base_delay(MS(10))
}

/// Reads `stream` to its end, marking every delta delivered; each delta with when it came.
async fn consume(stream: &mut RoutedStream<'_>) -> (Vec<(Instant, String)>, Option<EgressError>) {
    let mut deltas = Vec::new();
    for _ in 0..1000 {
        match stream.next().await {
            Some(Ok(delta)) => {
                stream.mark_delivered(&delta);
                deltas.push((Instant::now(), delta));
            }
            Some(Err(error)) => return (deltas, Some(error)),
            None => break,
        }
    }
    (deltas, None)
}

fn text(deltas: &[(Instant, String)]) -> String {
    deltas.iter().map(|(_, d)| d.as_str()).collect()
}

fn cause(error: &EgressError) -> &RecoveryError {
    error
        .internal_cause()
        .downcast_ref::<RecoveryError>()
        .expect("a recovery error")
}

#[tokio::test]
async fn the_first_chunk_arrives_long_before_the_stream_ends() {
    let provider =
        FakeProvider::start_steps([Step::chunks(["one ", "two ", "three"]).chunk_delay(MS(150))])
            .await
            .expect("fake provider");
    let router = router(&provider, config(), &["m"]);
    let turn = turn();
    let request = request();
    let mut stream = router.stream(&turn, &request);
    let (deltas, error) = consume(&mut stream).await;
    let ended = Instant::now();
    assert!(error.is_none());
    assert_eq!(text(&deltas), "one two three");
    // Two more chunks and the finish chunk, 150 ms apart, come after the first.
    assert!(
        ended - deltas[0].0 >= MS(400),
        "first delta only {:?} before the end",
        ended - deltas[0].0
    );
    assert_eq!(
        provider.received()[0].body["stream"],
        serde_json::json!(true)
    );
}

#[tokio::test]
async fn a_stall_mid_stream_is_recovered_on_the_fallback_with_no_repeated_text() {
    let provider = FakeProvider::start_steps([
        Step::chunks(["The build ", "is green", " and never"])
            .chunk_delay(MS(20))
            .stall_after(2),
        Step::chunks(["The build is ", "green and the tests pass."]),
    ])
    .await
    .expect("fake provider");
    let router = router(&provider, config(), &["primary", "fb"]);
    let turn = turn();
    let request = request();
    let mut stream = router.stream(&turn, &request);
    let (deltas, error) = consume(&mut stream).await;
    assert!(error.is_none());
    assert_eq!(text(&deltas), "The build is green and the tests pass.");
    let received = provider.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].body["model"], serde_json::json!("fb"));
}

#[tokio::test]
async fn an_in_stream_error_after_two_chunks_ends_the_stream_for_layer_c() {
    let provider =
        FakeProvider::start_steps([Step::chunks(["Deploy ", "step one", "never"])
            .fail_after(2, || ModelError::status(503))])
        .await
        .expect("fake provider");
    let router = router(&provider, config(), &["m"]);
    let turn = turn();
    let request = request();
    let mut stream = router.stream(&turn, &request);
    let (deltas, error) = consume(&mut stream).await;
    assert_eq!(text(&deltas), "Deploy step one");
    let error = error.expect("failed after delivery");
    let cause = cause(&error);
    assert_eq!(cause.gave_up(), "stream_failed_after_delivery");
    assert_eq!(cause.last_reason(), Some(FailureReason::ServerError));
    assert_eq!(cause.delivered_bytes(), "Deploy step one".len());
    assert_eq!(
        provider.received().len(),
        1,
        "a started answer is never asked again"
    );
}

#[tokio::test]
async fn keep_alive_comments_are_not_chunks() {
    let provider = FakeProvider::start_steps([Step::chunks(["a", "b", "c"]).keep_alive()])
        .await
        .expect("fake provider");
    let router = router(&provider, config(), &["m"]);
    let turn = turn();
    let request = request();
    let mut stream = router.stream(&turn, &request);
    let (deltas, error) = consume(&mut stream).await;
    assert!(error.is_none());
    let pieces: Vec<&str> = deltas.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(pieces, ["a", "b", "c"]);
}

#[tokio::test]
async fn a_malformed_chunk_is_a_classified_failure() {
    let provider = FakeProvider::start_steps([Step::chunks(["fine ", "then"]).malformed_after(1)])
        .await
        .expect("fake provider");
    let router = router(&provider, config(), &["m"]);
    let turn = turn();
    let request = request();
    let mut stream = router.stream(&turn, &request);
    let (deltas, error) = consume(&mut stream).await;
    assert_eq!(text(&deltas), "fine ");
    let error = error.expect("malformed");
    assert_eq!(
        cause(&error).last_reason(),
        Some(FailureReason::InvalidResponse)
    );
}

#[tokio::test]
async fn a_reset_before_delivery_is_retried_and_the_stream_body_cap_covers_the_whole_stream() {
    let provider = FakeProvider::start_steps([
        Step::chunks(["x"]).reset_after(0),
        Step::chunks(["ok"]),
        Step::chunks(vec!["0123456789"; 50]),
    ])
    .await
    .expect("fake provider");
    let router = router(&provider, config(), &["m"]);
    let turn = turn();
    let request = request();
    let mut stream = router.stream(&turn, &request);
    let (deltas, error) = consume(&mut stream).await;
    assert!(error.is_none());
    assert_eq!(text(&deltas), "ok");
    drop(stream);

    let capped = OpenAiCompatible::new(provider.base_url())
        .expect("valid url")
        .with_max_completion_body(2048);
    let mut stream = capped.stream("m", &request).await.expect("opened");
    let mut failure = None;
    for _ in 0..1000 {
        match stream.next().await {
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                failure = Some(error);
                break;
            }
            None => break,
        }
    }
    assert_eq!(
        failure.map(|e| e.kind()),
        Some(ModelErrorKind::ResponseTooLarge)
    );
}
