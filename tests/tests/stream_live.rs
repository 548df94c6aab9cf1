//! A streamed turn onto a surface's own streaming mechanism through the front door
//! (`Bot::send_to` to a Slack channel, which streams natively), against the loopback Slack fake. The checked blocks become one Slack stream (`chat.startStream`,
//! appends, `chat.stopStream`) instead of one `chat.postMessage` per block; a failure after two
//! blocks ends the stream first, then Layer C's holding line goes out as a message of its own;
//! a block the gate blocks never reaches the stream.

use std::time::Duration;

use mesh_egress::bot::Outcome;
use mesh_egress::bot::Promise;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackChannel;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{BLOCK_SEPARATOR, BudgetConfig};
use mesh_egress::degrade::Mode;
use mesh_egress::gate::QualityGate;
use mesh_egress::ledger::{DegradationOutcome, LedgerRecord};
use mesh_egress::stream::CutterConfig;
use mesh_egress::testing::FakeApi;
use mesh_egress::{
    Address, AnswerStream, Attribution, Bot, EgressError, Surface, Turn, egress_boundary,
};

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

/// Blocks of at least 20 bytes, no idle flush.
fn bot() -> Bot {
    Bot::new()
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None)
}

fn turn(bot: &Bot) -> Turn {
    bot.turn(Address::Plain, attribution())
}

/// `blocks` as a model sends them, 5 ms apart, then `failure` if there is one.
fn chunks(turn: &Turn, blocks: &[&str], failure: Option<EgressError>) -> AnswerStream {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let blocks: Vec<String> = blocks.iter().map(|b| b.to_string()).collect();
    tokio::spawn(async move {
        for block in blocks {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if tx.send(Ok(block)).await.is_err() {
                return;
            }
        }
        if let Some(failure) = failure {
            let _ = tx.send(Err(failure)).await;
        }
    });
    AnswerStream::from_receiver(turn, rx)
}

/// A person is waiting on the streamed answer.
#[egress_boundary(interactive)]
async fn answer(_turn: &Turn, stream: AnswerStream) -> Result<AnswerStream, EgressError> {
    Ok(stream)
}

/// Nobody asked for it.
#[egress_boundary(proactive)]
async fn digest(_turn: &Turn, stream: AnswerStream) -> Result<AnswerStream, EgressError> {
    Ok(stream)
}

#[tokio::test]
async fn a_streamed_turn_becomes_one_slack_stream_not_a_post_per_block() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    let bot = bot();
    let turn = turn(&bot);
    let reply = answer(&turn, chunks(&turn, &[B1, B2, B3], None)).await;
    let run = bot.send_to(&turn, &channel, reply);
    let delivery = tokio::time::timeout(BOUND, run)
        .await
        .expect("in time")
        .expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(api.calls_to("chat.startStream"), 1);
    assert_eq!(api.calls_to("chat.stopStream"), 1);
    assert_eq!(
        api.calls_to("chat.postMessage"),
        0,
        "no block posted on its own"
    );
    let whole = [B1, B2, B3].map(str::trim).join(BLOCK_SEPARATOR);
    let surface = delivery.surface().expect("a surface receipt");
    assert_eq!(surface.confirmed_text(), whole);
    let streams = api.streams();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].text, whole, "each block once, in order");
    assert!(delivery.receipts().is_empty(), "nothing had to be re-sent");
}

#[tokio::test]
async fn an_error_after_two_blocks_ends_the_stream_then_sends_the_holding_line_alone() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    let bot = bot();
    let turn = turn(&bot);
    let failure = EgressError::transport("stream reset by peer: 502 upstream", attribution());
    let reply = answer(&turn, chunks(&turn, &[B1, B2], Some(failure))).await;
    let run = bot.send_to(&turn, &channel, reply);
    let delivery = tokio::time::timeout(BOUND, run)
        .await
        .expect("in time")
        .expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Holding, "{delivery:?}");
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
    let Some(Promise::Caller(_promise)) = delivery.promise() else {
        panic!("a promise for the rest")
    };
    assert_eq!(
        delivery.delivered(),
        [B1, B2].concat(),
        "the follow-up continues after both"
    );
}

#[tokio::test]
async fn a_block_the_gate_blocks_never_reaches_the_stream() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    let gate = QualityGate::builder().build().unwrap();
    let bot = bot().with_gate(gate);
    let turn = turn(&bot).with_input("status?");
    let leak = "Traceback (most recent call last):\n  File \"agent.py\", line 12, in run\nKeyError: 'price'\n\n";
    let reply = digest(&turn, chunks(&turn, &[B1, leak, B3], None)).await;
    let run = bot.send_to(&turn, &channel, reply);
    let delivery = tokio::time::timeout(BOUND, run)
        .await
        .expect("in time")
        .expect("delivered");
    // Layer C answered for the rest, with silence (not the agent's own silence token).
    assert_eq!(delivery.outcome(), Outcome::Silent, "{delivery:?}");
    assert!(
        turn.ledger().entries().iter().any(|e| matches!(
            e.record(),
            LedgerRecord::Degradation(d)
                if d.mode() == Mode::Proactive
                    && matches!(d.outcome(), DegradationOutcome::Silence { .. })
        )),
        "{:?}",
        turn.ledger().entries()
    );
    let shown: String = api.streams().iter().map(|s| s.text.clone()).collect();
    assert_eq!(shown, B1.trim(), "only the block before the leak");
    assert!(!shown.contains("Traceback") && !shown.contains(B3.trim()));
    assert_eq!(api.calls_to("chat.postMessage"), 0);
}
