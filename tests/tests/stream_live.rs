//! `boundary::stream_live`: a streamed turn onto a surface's own streaming mechanism, against
//! the loopback Slack fake. The checked blocks become one Slack stream (`chat.startStream`,
//! appends, `chat.stopStream`) instead of one `chat.postMessage` per block; a failure after two
//! blocks ends the stream first, then Layer C's holding line goes out as a message of its own;
//! a block the gate blocks never reaches the stream.

use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::boundary::{StreamEnd, StreamPlan, stream_live};
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackChannel;
use mesh_egress::channel::stream::{BLOCK_SEPARATOR, BudgetConfig, SlackMarkdown};
use mesh_egress::degrade::{DegradationPolicy, Mode, ReplyKind};
use mesh_egress::gate::QualityGate;
use mesh_egress::stream::{ChunkSource, CutterConfig};
use mesh_egress::testing::FakeApi;
use mesh_egress::{Attribution, EgressError, Turn};

const TOKEN: &str = "xoxb-test-token";
const THREAD: &str = "1699999999.000100";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

const B1: &str = "The build finished and every test passed.\n\n";
const B2: &str = "Deploying to staging now, it takes a minute.\n\n";
const B3: &str = "Then production follows after the checks.\n\n";

fn attribution() -> Attribution {
    Attribution::new("ops-bot", "conv-1", "run-1")
}

fn slack(api: &FakeApi) -> SlackChannel<SlackMarkdown> {
    SlackChannel::new(TOKEN, "C024BE91L")
        .with_renderer(SlackMarkdown::new())
        .in_thread(THREAD)
        .with_stream_recipient("U0123456789", "T0123456789")
        .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)))
        .base_url(api.base_url())
        .policy(
            SendPolicy::new()
                .max_tries(3)
                .backoff(Duration::from_millis(2))
                .request_timeout(Duration::from_secs(5)),
        )
}

fn plan<'a>(mode: Mode, policy: &'a DegradationPolicy) -> StreamPlan<'a> {
    StreamPlan::new(mode, policy)
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None)
}

fn chunks(blocks: &[&str]) -> ChunkSource<EgressError> {
    ChunkSource::delayed(
        blocks
            .iter()
            .map(|b| (Duration::from_millis(5), b.to_string())),
    )
}

#[tokio::test]
async fn a_streamed_turn_becomes_one_slack_stream_not_a_post_per_block() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    let turn = Turn::new(attribution());
    let policy = DegradationPolicy::default();
    let plan = plan(Mode::Interactive, &policy);
    let run = stream_live(&turn, &plan, &channel, chunks(&[B1, B2, B3]));
    let receipt = tokio::time::timeout(BOUND, run)
        .await
        .expect("in time")
        .expect("delivered");
    assert_eq!(receipt.end(), StreamEnd::Answered);
    assert_eq!(api.calls_to("chat.startStream"), 1);
    assert_eq!(api.calls_to("chat.stopStream"), 1);
    assert_eq!(
        api.calls_to("chat.postMessage"),
        0,
        "no block posted on its own"
    );
    let whole = [B1, B2, B3].map(str::trim).join(BLOCK_SEPARATOR);
    let surface = receipt.surface().expect("a surface receipt");
    assert_eq!(surface.confirmed_text(), whole);
    let streams = api.streams();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].text, whole, "each block once, in order");
    assert!(receipt.blocks().is_empty(), "nothing had to be re-sent");
}

#[tokio::test]
async fn an_error_after_two_blocks_ends_the_stream_then_sends_the_holding_line_alone() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    let turn = Turn::new(attribution());
    let policy = DegradationPolicy::default();
    let source = chunks(&[B1, B2]).then_fail(EgressError::transport(
        "stream reset by peer: 502 upstream",
        attribution(),
    ));
    let plan = plan(Mode::Interactive, &policy);
    let run = stream_live(&turn, &plan, &channel, source);
    let mut receipt = tokio::time::timeout(BOUND, run)
        .await
        .expect("in time")
        .expect("delivered");
    assert!(
        matches!(
            receipt.end(),
            StreamEnd::Degraded {
                reply: ReplyKind::Holding,
                ..
            }
        ),
        "{:?}",
        receipt.end()
    );
    let streamed = [B1, B2].map(str::trim).join(BLOCK_SEPARATOR);
    assert_eq!(api.streams()[0].text, streamed, "the two blocks, once");
    assert!(!api.streams()[0].open, "the stream was stopped first");
    let posted = api.texts();
    assert_eq!(
        posted.len(),
        1,
        "only the holding line is a message of its own"
    );
    assert!(!posted[0].contains("502"), "never the cause: {posted:?}");
    let _promise = receipt.take_rest().expect("a promise for the rest");
    assert_eq!(
        receipt.delivered(),
        [B1, B2].concat(),
        "the follow-up continues after both"
    );
}

#[tokio::test]
async fn a_block_the_gate_blocks_never_reaches_the_stream() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    let turn = Turn::new(attribution());
    let policy = DegradationPolicy::default();
    let gate = QualityGate::builder().build().unwrap();
    let leak = "Traceback (most recent call last):\n  File \"agent.py\", line 12, in run\nKeyError: 'price'\n\n";
    let plan = plan(Mode::Proactive, &policy).with_gate(&gate, "status?");
    let run = stream_live(&turn, &plan, &channel, chunks(&[B1, leak, B3]));
    let receipt = tokio::time::timeout(BOUND, run)
        .await
        .expect("in time")
        .expect("delivered");
    assert!(
        matches!(
            receipt.end(),
            StreamEnd::Degraded {
                reply: ReplyKind::Silence,
                ..
            }
        ),
        "{:?}",
        receipt.end()
    );
    let shown: String = api.streams().iter().map(|s| s.text.clone()).collect();
    assert_eq!(shown, B1.trim(), "only the block before the leak");
    assert!(!shown.contains("Traceback") && !shown.contains(B3.trim()));
    assert_eq!(api.calls_to("chat.postMessage"), 0);
}
