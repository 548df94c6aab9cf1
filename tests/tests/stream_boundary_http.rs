//! `boundary::stream` over loopback HTTP against the drip-feeding `FakeProvider`, in real time
//! with short deadlines: the first block is shown before the stream ends, a stall mid-stream
//! is continued on the fallback with no repeated text, an error after two blocks sends Layer
//! C's line for the rest, and a block the gate blocks stops everything after it.

use std::time::Duration;

use mesh_egress::boundary::{StreamEnd, StreamPlan, stream};
use mesh_egress::degrade::{DegradationPolicy, Mode, ReplyKind};
use mesh_egress::gate::QualityGate;
use mesh_egress::model::{
    ChatMessage, ChatRequest, Jitter, ModelError, OpenAiCompatible, RetryConfig, Route, Router,
};
use mesh_egress::stream::CutterConfig;
use mesh_egress::testing::{FakeProvider, Step};
use mesh_egress::{Attribution, Turn};

mod stream_support;
use stream_support::Timed;

const MS: fn(u64) -> Duration = Duration::from_millis;

const B1: &str = "The build finished and every test passed.\n\n";
const B2: &str = "Deploying to staging now, it takes a minute.\n\n";
const B3: &str = "Then production follows after the checks.\n\n";
const B4: &str = "I will post the link when it is live.\n\n";

fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "conv", "run"))
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("status?")])
}

fn router(provider: &FakeProvider, routes: &[&str]) -> Router<OpenAiCompatible> {
    let connector = OpenAiCompatible::new(provider.base_url()).expect("valid url");
    let fallbacks = routes[1..].iter().map(|m| Route::new(*m));
    // Short bounds, so a stall costs a test a fraction of a second.
    let config = RetryConfig::default()
        .with_total_deadline(Duration::from_secs(10))
        .with_stream_first_token_timeout(Some(MS(2000)))
        .with_stream_idle_timeout(Some(MS(300)))
        .with_base_delay(MS(10));
    Router::with_routes(connector, Route::new(routes[0]), fallbacks, config)
        .with_jitter(Jitter::fixed(0.0))
}

fn plan(mode: Mode, policy: &DegradationPolicy) -> StreamPlan<'_> {
    StreamPlan::new(mode, policy)
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None)
}

fn trimmed(blocks: &[&str]) -> Vec<String> {
    blocks.iter().map(|b| b.trim().to_owned()).collect()
}

#[tokio::test]
async fn the_first_block_is_delivered_before_the_stream_ends() {
    let provider = FakeProvider::start_steps([Step::chunks([B1, B2, B3, B4]).chunk_delay(MS(120))])
        .await
        .expect("fake provider");
    let router = router(&provider, &["m"]);
    let turn = turn();
    let policy = DegradationPolicy::default();
    let channel = Timed::new();
    let request = request();
    let receipt = stream(
        &turn,
        &plan(Mode::Interactive, &policy),
        &channel,
        router.stream(&turn, &request),
    )
    .await
    .expect("delivered");
    let ended = channel.elapsed();
    assert_eq!(receipt.end(), StreamEnd::Answered);
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
    let provider = FakeProvider::start_steps([
        Step::chunks([B1, "Deploying to staging ", "now"])
            .chunk_delay(MS(50))
            .stall_after(2),
        Step::chunks([B1, B2, B3]),
    ])
    .await
    .expect("fake provider");
    let router = router(&provider, &["primary", "fb"]);
    let turn = turn();
    let policy = DegradationPolicy::default();
    let channel = Timed::new();
    let request = request();
    let receipt = stream(
        &turn,
        &plan(Mode::Interactive, &policy),
        &channel,
        router.stream(&turn, &request),
    )
    .await
    .expect("delivered");
    assert_eq!(receipt.end(), StreamEnd::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, B2, B3]));
    assert_eq!(provider.received().len(), 2);
}

#[tokio::test]
async fn an_in_stream_error_after_two_blocks_sends_layer_cs_line_for_the_rest() {
    let provider = FakeProvider::start_steps([Step::chunks([B1, B2, B3])
        .chunk_delay(MS(20))
        .fail_after(2, || ModelError::status(500))])
    .await
    .expect("fake provider");
    let router = router(&provider, &["m"]);
    let turn = turn();
    let policy = DegradationPolicy::default();
    let channel = Timed::new();
    let request = request();
    let mut receipt = stream(
        &turn,
        &plan(Mode::Interactive, &policy),
        &channel,
        router.stream(&turn, &request),
    )
    .await
    .expect("delivered");
    assert_eq!(
        receipt.end(),
        StreamEnd::Degraded {
            reply: ReplyKind::Holding,
            after_blocks: 2
        }
    );
    let sent = channel.texts();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[..2], trimmed(&[B1, B2]));
    assert!(!sent[2].contains("500"));
    assert!(!sent[2].contains("production"));
    let _promise = receipt.take_rest().expect("a promise");
    assert_eq!(receipt.delivered(), [B1, B2].concat());
}

#[tokio::test]
async fn the_gate_blocking_the_third_block_means_blocks_four_and_on_are_never_sent() {
    let leak = "Traceback (most recent call last):\n  File \"agent.py\", line 12, in run\nKeyError: 'price'\n\n";
    let provider =
        FakeProvider::start_steps([Step::chunks([B1, B2, leak, B3, B4]).chunk_delay(MS(20))])
            .await
            .expect("fake provider");
    let router = router(&provider, &["m"]);
    let turn = turn();
    let policy = DegradationPolicy::default();
    let gate = QualityGate::builder().build().expect("gate");
    let channel = Timed::new();
    let request = request();
    let plan = plan(Mode::Interactive, &policy).with_gate(&gate, "status?");
    let receipt = stream(&turn, &plan, &channel, router.stream(&turn, &request))
        .await
        .expect("delivered");
    assert!(
        matches!(
            receipt.end(),
            StreamEnd::Degraded {
                after_blocks: 2,
                ..
            }
        ),
        "{:?}",
        receipt.end()
    );
    let sent = channel.texts();
    assert_eq!(sent[..2], trimmed(&[B1, B2]));
    assert_eq!(sent.len(), 3, "two blocks and Layer C's line: {sent:?}");
    for text in &sent {
        assert!(!text.contains("Traceback"), "{text}");
        assert!(!text.contains("production"), "block four was sent: {text}");
        assert!(
            !text.contains("post the link"),
            "block five was sent: {text}"
        );
    }
}
