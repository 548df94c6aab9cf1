//! A streamed turn through the front door (`Bot::send_to`) over loopback HTTP against the drip-feeding `FakeProvider`, in real time
//! with short deadlines: the first block is shown before the stream ends, a stall mid-stream
//! is continued on the fallback with no repeated text, an error after two blocks sends Layer
//! C's line for the rest, and a block the gate blocks stops everything after it.

use std::sync::Arc;
use std::time::Duration;

use mesh_egress::bot::Outcome;
use mesh_egress::bot::Promise;
use mesh_egress::model::{Jitter, ModelError, OpenAiCompatible, RetryConfig, Route, Router};
use mesh_egress::testing::{FakeProvider, Step};

mod stream_support;
use stream_support::{
    B1, B2, B3, B4, MS, assert_held_after, assert_nothing_from_the_blocked_block_on, stream_gated,
    stream_interactive, trimmed,
};

/// A fake provider playing `steps` in order, and a router over it with `routes` (the first the
/// primary).
async fn serve(
    steps: impl IntoIterator<Item = Step>,
    routes: &[&str],
) -> (FakeProvider, Arc<Router<OpenAiCompatible>>) {
    let provider = FakeProvider::start_steps(steps)
        .await
        .expect("fake provider");
    let connector = OpenAiCompatible::new(provider.base_url()).expect("valid url");
    let fallbacks = routes[1..].iter().map(|m| Route::new(*m));
    // Short bounds, so a stall costs a test a fraction of a second.
    let config = RetryConfig::default()
        .with_total_deadline(Duration::from_secs(10))
        .with_stream_first_token_timeout(Some(MS(2000)))
        .with_stream_idle_timeout(Some(MS(300)))
        .with_base_delay(MS(10));
    let router = Router::with_routes(connector, Route::new(routes[0]), fallbacks, config)
        .with_jitter(Jitter::fixed(0.0));
    (provider, Arc::new(router))
}

#[tokio::test]
async fn the_first_block_is_delivered_before_the_stream_ends() {
    let (_provider, router) = serve(
        [Step::chunks([B1, B2, B3, B4]).chunk_delay(MS(120))],
        &["m"],
    )
    .await;
    let (_turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("delivered");
    let ended = channel.elapsed();
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, B2, B3, B4]));
    let first = channel.times()[0];
    // Three more chunks and the finish chunk, 120 ms apart, come after the first block.
    assert!(
        ended - first >= MS(400),
        "the first block went only {:?} before the end",
        ended - first
    );
}

#[tokio::test]
async fn a_stall_mid_stream_is_continued_on_the_fallback_with_no_repeated_text() {
    let (provider, router) = serve(
        [
            Step::chunks([B1, "Deploying to staging ", "now"])
                .chunk_delay(MS(50))
                .stall_after(2),
            Step::chunks([B1, B2, B3]),
        ],
        &["primary", "fb"],
    )
    .await;
    let (_turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, B2, B3]));
    assert_eq!(provider.received().len(), 2);
}

#[tokio::test]
async fn an_in_stream_error_after_two_blocks_sends_layer_cs_line_for_the_rest() {
    let (_provider, router) = serve(
        [Step::chunks([B1, B2, B3])
            .chunk_delay(MS(20))
            .fail_after(2, || ModelError::status(500))],
        &["m"],
    )
    .await;
    let (_turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("delivered");
    assert_held_after(&delivery, 2);
    let sent = channel.texts();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[..2], trimmed(&[B1, B2]));
    assert!(!sent[2].contains("500"));
    assert!(!sent[2].contains("production"));
    let Some(Promise::Caller(_promise)) = delivery.promise() else {
        panic!("a promise")
    };
    assert_eq!(delivery.delivered(), [B1, B2].concat());
}

#[tokio::test]
async fn the_gate_blocking_the_third_block_means_blocks_four_and_on_are_never_sent() {
    let leak = "Traceback (most recent call last):\n  File \"agent.py\", line 12, in run\nKeyError: 'price'\n\n";
    let (_provider, router) = serve(
        [Step::chunks([B1, B2, leak, B3, B4]).chunk_delay(MS(20))],
        &["m"],
    )
    .await;
    let (_turn, channel, result) = stream_gated(&router).await;
    let delivery = result.expect("delivered");
    // Layer C answered after the two blocks (its line is the third message).
    assert!(
        matches!(delivery.outcome(), Outcome::Holding | Outcome::Handoff),
        "{delivery:?}"
    );
    assert_eq!(delivery.receipts().len(), 3, "{delivery:?}");
    assert_eq!(delivery.delivered(), [B1, B2].concat());
    let sent = channel.texts();
    assert_eq!(sent[..2], trimmed(&[B1, B2]));
    assert_eq!(sent.len(), 3, "two blocks and Layer C's line: {sent:?}");
    assert_nothing_from_the_blocked_block_on(&sent, "Traceback");
}
