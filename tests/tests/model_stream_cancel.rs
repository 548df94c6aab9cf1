//! `RoutedStream::next` is cancel-safe, as `stream::TextSource` demands: a read dropped by a
//! racing timer (the block reader's idle flush) loses no text, and no bound, attempt or
//! backoff wait restarts. Paused time, scripted connector: every instant is exact.

use std::time::Duration;

use mesh_egress::model::{
    ChatMessage, ChatRequest, Jitter, RetryConfig, Route, RoutedStream, Router,
};
use mesh_egress::testing::{ScriptedConnector, Step};
use mesh_egress::{Attribution, Turn};
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn router(connector: &ScriptedConnector, config: RetryConfig) -> Router<ScriptedConnector> {
    Router::with_routes(connector.clone(), Route::new("primary"), [], config)
        .with_jitter(Jitter::fixed(0.0))
}

/// Reads `stream` to its end, abandoning every read after `every` (as an idle flush does) and
/// starting a new one: each delta with its instant, and how many reads were abandoned.
async fn read_with_interruptions(
    stream: &mut RoutedStream<'_>,
    start: Instant,
    every: Duration,
) -> (Vec<(Duration, String)>, usize) {
    let mut seen = Vec::new();
    let mut abandoned = 0;
    for _ in 0..10_000 {
        match tokio::time::timeout(every, stream.next()).await {
            Err(_elapsed) => abandoned += 1,
            Ok(Some(Ok(delta))) => {
                stream.mark_delivered(&delta);
                seen.push((Instant::now() - start, delta));
            }
            Ok(Some(Err(_))) => panic!("the stream failed"),
            Ok(None) => break,
        }
    }
    (seen, abandoned)
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_read_loses_no_chunk_and_restarts_no_delay() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [Step::chunks(["one ", "two ", "three"]).chunk_delay(MS(300))],
    );
    let router = router(&connector, RetryConfig::default());
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    let request = ChatRequest::new(vec![ChatMessage::user("count")]);
    let start = Instant::now();
    let mut stream = router.stream(&turn, &request);
    let (seen, abandoned) = read_with_interruptions(&mut stream, start, MS(70)).await;
    assert!(abandoned > 5, "the race was exercised ({abandoned})");
    assert_eq!(
        seen,
        [
            (MS(300), "one ".to_owned()),
            (MS(600), "two ".to_owned()),
            (MS(900), "three".to_owned()),
        ]
    );
    assert_eq!(connector.calls_to("primary").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_read_while_the_stream_opens_resumes_the_same_attempt() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [Step::chunks(["late but whole"]).after(MS(1000))],
    );
    let router = router(&connector, RetryConfig::default());
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    let request = ChatRequest::new(vec![ChatMessage::user("hi")]);
    let start = Instant::now();
    let mut stream = router.stream(&turn, &request);
    let (seen, abandoned) = read_with_interruptions(&mut stream, start, MS(150)).await;
    assert!(abandoned >= 6, "the open was interrupted ({abandoned})");
    assert_eq!(seen, [(MS(1000), "late but whole".to_owned())]);
    // One request, not one per interruption.
    assert_eq!(connector.calls_to("primary").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_read_during_a_backoff_wait_neither_skips_nor_restarts_it() {
    let connector =
        ScriptedConnector::new().on("primary", [Step::status(503), Step::chunks(["recovered"])]);
    let router = router(&connector, RetryConfig::default());
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    let request = ChatRequest::new(vec![ChatMessage::user("hi")]);
    let start = Instant::now();
    let mut stream = router.stream(&turn, &request);
    let (seen, abandoned) = read_with_interruptions(&mut stream, start, MS(120)).await;
    assert!(abandoned >= 3, "the wait was interrupted ({abandoned})");
    assert_eq!(seen, [(MS(500), "recovered".to_owned())]);
    let calls = connector.calls_to("primary");
    assert_eq!(calls.len(), 2);
    // The first backoff step (500 ms, no jitter), exactly.
    assert_eq!(calls[1].at - start, MS(500));
}
