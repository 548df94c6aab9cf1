//! One rate budget per conversation, spent by plain sends and streams alike, against loopback
//! fakes: a flood wait on a plain send pauses a stream to the same chat; a Slack append whose
//! answer was lost is neither lost nor doubled. (The budget's window and final reserve, spent
//! by hand, are the crate's unit tests: `channel/http/budget_tests.rs`.)

use std::time::{Duration, Instant};

use mesh_egress::Surface;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{
    BLOCK_SEPARATOR, BudgetConfig, ReplyStream, StreamingChannel, SurfaceStreamReceipt,
};
use mesh_egress::channel::{Channel, PlainText, SlackChannel, TelegramChannel};
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{AgentMessage, Attribution, CommittedPart, Outbound, Ownership};

const TOKEN: &str = "123456789:AAF-secret_TOKEN_value";
const GROUP: &str = "-1001234567890";
const THREAD: &str = "1699999999.000100";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

fn attribution() -> Attribution {
    Attribution::new("ops-bot", "conv-1", "run-1")
}

fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(3)
        .max_wait(Duration::from_secs(2))
        .backoff(Duration::from_millis(2))
        .request_timeout(Duration::from_secs(2))
}

/// `n` one-character parts of one message, committed as a turn commits them.
async fn parts(n: usize) -> Vec<CommittedPart> {
    let message = AgentMessage::new("x".repeat(n), attribution());
    let rendered = Outbound::new(message)
        .render(&PlainText::new().with_limit(1))
        .unwrap();
    rendered
        .commit(&Ownership::held())
        .await
        .unwrap()
        .into_parts()
        .collect()
}

#[tokio::test]
async fn a_flood_wait_on_a_plain_send_pauses_a_stream_on_the_same_chat() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = TelegramChannel::new(TOKEN, GROUP)
        .with_renderer(PlainText::new())
        .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)))
        .base_url(api.base_url())
        .policy(policy().max_tries(1));
    api.script([FakeResponse::chat_rate_limited(
        Surface::Telegram,
        Duration::from_secs(1),
    )]);
    let mut sent = parts(2).await.into_iter();
    let error = channel.send(sent.next().unwrap()).await.unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_secs(1)));
    let flooded = Instant::now();
    let mut stream = channel.open_stream(&attribution()).unwrap();
    stream.append(sent.next().unwrap());
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(receipt.confirmed_text(), "x");
    let calls = api.calls();
    let gap = calls[1].at - calls[0].at;
    assert!(
        gap >= Duration::from_millis(900),
        "the stream waited: {gap:?}"
    );
    assert!(flooded.elapsed() >= Duration::from_millis(900));
}

fn slack(api: &FakeApi) -> SlackChannel<SlackMarkdown> {
    SlackChannel::new(TOKEN, "C024BE91L")
        .with_renderer(SlackMarkdown::new())
        .in_thread(THREAD)
        .with_stream_recipient("U0123456789", "T0123456789")
        .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)))
        .base_url(api.base_url())
        .policy(policy())
}

/// Renders and commits `block` with `channel`'s renderer, as the streamed turn does.
async fn append<C: Channel>(channel: &C, stream: &mut ReplyStream, block: &str) -> Vec<String> {
    let message = AgentMessage::new(block, attribution());
    let rendered = Outbound::new(message).render(channel.renderer()).unwrap();
    let committed = rendered.commit(&Ownership::held()).await.unwrap();
    let mut texts = Vec::new();
    for part in committed.into_parts() {
        texts.push(part.text().to_owned());
        stream.append(part);
    }
    texts
}

/// Streams three blocks far enough apart that each goes in a call of its own: the start, one
/// append, and (after whatever the script does to that append) the third.
async fn three_blocks(
    channel: &SlackChannel<SlackMarkdown>,
) -> (SurfaceStreamReceipt, Vec<String>) {
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let mut reply = Vec::new();
    for text in ["First block.", "Second block.", "Third block."] {
        reply.extend(append(channel, &mut stream, text).await);
        tokio::time::sleep(Duration::from_millis(80)).await;
    }
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("bounded")
        .expect("everything confirmed");
    (receipt, reply)
}

/// How often `needle` shows in every stream the fake holds.
fn shown(api: &FakeApi, needle: &str) -> usize {
    api.streams()
        .iter()
        .map(|s| s.text.matches(needle).count())
        .sum()
}

#[tokio::test]
async fn slack_an_applied_append_whose_answer_was_lost_shows_once() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.script_method("chat.appendStream", [ChatStep::lost_response()]);
    let channel = slack(&api);
    let (receipt, reply) = three_blocks(&channel).await;
    let whole = reply.join(BLOCK_SEPARATOR);
    assert_eq!(receipt.confirmed_text(), whole);
    for text in &reply {
        assert_eq!(shown(&api, text), 1, "{text:?} shows exactly once");
    }
    let streams = api.streams();
    // The stop read the append back: the second block stays in the first message, the rest
    // goes into a fresh stream.
    assert_eq!(streams.len(), 2, "{streams:?}");
    assert_eq!(streams[0].text, reply[..2].join(BLOCK_SEPARATOR));
    assert_eq!(streams[1].text, reply[2]);
    assert_eq!(receipt.messages()[0].text(), streams[0].text);
    assert_eq!(api.calls_to("chat.stopStream"), 2);
    assert_eq!(receipt.rollovers(), 1);
}

#[tokio::test]
async fn slack_an_append_lost_before_slack_applied_it_goes_into_a_fresh_stream_once() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.script_method(
        "chat.appendStream",
        [ChatStep::Answer(FakeResponse::close_mid_response())],
    );
    let channel = slack(&api);
    let (receipt, reply) = three_blocks(&channel).await;
    let whole = reply.join(BLOCK_SEPARATOR);
    assert_eq!(receipt.confirmed_text(), whole);
    for text in &reply {
        assert_eq!(shown(&api, text), 1, "{text:?} shows exactly once");
    }
    let streams = api.streams();
    assert_eq!(streams.len(), 2, "{streams:?}");
    assert_eq!(
        streams[0].text, reply[0],
        "never re-appended to the first stream"
    );
    assert_eq!(streams[1].text, reply[1..].join(BLOCK_SEPARATOR));
    assert_eq!(receipt.rollovers(), 1);
}

/// A lost append whose stop answers without the message: the stop is repeated (it adds no
/// text), finds the stream closed, and the message is read back from its thread.
#[tokio::test]
async fn slack_a_lost_append_whose_stop_answers_no_text_is_read_back_from_the_thread() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.script_method("chat.appendStream", [ChatStep::lost_response()]);
    api.script_method(
        "chat.stopStream",
        [ChatStep::AcceptThen(FakeResponse::raw(
            200,
            r#"{"ok":true,"channel":"C024BE91L"}"#,
        ))],
    );
    let channel = slack(&api);
    let (receipt, reply) = three_blocks(&channel).await;
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
    for text in &reply {
        assert_eq!(shown(&api, text), 1, "{text:?} shows exactly once");
    }
    let streams = api.streams();
    assert_eq!(streams[0].text, reply[..2].join(BLOCK_SEPARATOR));
    assert!(api.lookups() >= 1, "read back from the thread");
}

#[tokio::test]
async fn slack_a_lost_append_that_cannot_be_read_back_is_uncertain_and_never_shown_twice() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.script_method("chat.appendStream", [ChatStep::lost_response()]);
    // The stop goes through but answers without the message, and the token cannot read the
    // thread: nothing can tell whether the append went.
    api.script_method(
        "chat.stopStream",
        [ChatStep::AcceptThen(FakeResponse::raw(
            200,
            r#"{"ok":true,"channel":"C024BE91L"}"#,
        ))],
    );
    api.deny_history();
    let channel = slack(&api);
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let mut reply = Vec::new();
    for text in ["First block.", "Second block.", "Third block."] {
        reply.extend(append(&channel, &mut stream, text).await);
        tokio::time::sleep(Duration::from_millis(80)).await;
    }
    let stopped = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("bounded")
        .expect_err("the append's block cannot be settled");
    // The second block may be on the surface (here it is, at the end of the stopped message)
    // and nothing can tell: it is uncertain, never appended or posted again; the rest comes
    // back to be sent as messages.
    let uncertain: Vec<&str> = stopped.uncertain().iter().map(|p| p.text()).collect();
    assert_eq!(uncertain, [reply[1].as_str()]);
    let rest: Vec<&str> = stopped.unconfirmed().iter().map(|p| p.text()).collect();
    assert_eq!(rest, [reply[2].as_str()]);
    assert_eq!(stopped.receipt().confirmed_text(), reply[0]);
    for text in &reply[..2] {
        assert_eq!(shown(&api, text), 1, "{text:?} shows exactly once");
    }
    assert_eq!(api.streams().len(), 1, "no fresh stream for it");
}
