//! Streaming one reply onto Slack, Telegram and Discord against loopback fakes of their
//! streaming APIs: a long reply arrives complete and in order; a Slack stream that expires
//! mid-reply rolls over with nothing lost or doubled; a Telegram flood wait is honoured; Discord
//! edits follow rate-limit headers that change mid-stream and split at 2,000 code points.

use std::time::{Duration, Instant};

use mesh_egress::Surface;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{
    BLOCK_SEPARATOR, BudgetConfig, ReplyStream, StreamMode, StreamProgress, StreamingChannel,
    SurfaceStreamReceipt,
};
use mesh_egress::channel::{Channel, DiscordChannel, SlackChannel, TelegramChannel};
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{AgentMessage, Attribution, Outbound, Ownership};

const TOKEN: &str = "123456789:AAF-secret_TOKEN_value";
const THREAD: &str = "1699999999.000100";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

fn attribution() -> Attribution {
    Attribution::new("ops-bot", "conv-1", "run-1")
}

fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(5)
        .max_wait(Duration::from_secs(5))
        .backoff(Duration::from_millis(2))
        .request_timeout(Duration::from_secs(5))
}

fn fast() -> BudgetConfig {
    BudgetConfig::new(Duration::from_millis(5))
}

/// Block `i` of a long reply: `words` words, plain enough to render unchanged.
fn block(i: usize, words: usize) -> String {
    let mut text = format!("Block {i:02} says");
    for w in 0..words {
        text.push_str(&format!(" word{w}"));
    }
    text
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

/// Whether `messages`, split at block separators, are exactly `reply`'s blocks in order: every
/// message holds whole blocks (blocks that queued behind the budget go together), nothing lost
/// or doubled.
fn whole_blocks_in_order<S: AsRef<str>>(messages: &[S], reply: &[String]) -> bool {
    let blocks: Vec<&str> = messages
        .iter()
        .flat_map(|m| m.as_ref().split(BLOCK_SEPARATOR))
        .collect();
    blocks == reply.iter().map(String::as_str).collect::<Vec<_>>()
}

/// Streams `blocks` with `gap` between them; returns the receipt and the reply's rendered parts.
async fn stream_reply<C: StreamingChannel>(
    channel: &C,
    blocks: &[String],
    gap: Duration,
) -> (SurfaceStreamReceipt, Vec<String>) {
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let mut reply = Vec::new();
    for text in blocks {
        reply.extend(append(channel, &mut stream, text).await);
        tokio::time::sleep(gap).await;
    }
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("the stream finished in time")
        .expect("the stream confirmed everything");
    (receipt, reply)
}

fn slack(api: &FakeApi) -> SlackChannel<SlackMarkdown> {
    SlackChannel::new(TOKEN, "C024BE91L")
        .with_renderer(SlackMarkdown::new())
        .in_thread(THREAD)
        .with_stream_recipient("U0123456789", "T0123456789")
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy())
}

#[tokio::test]
async fn slack_a_long_reply_streams_into_one_message_complete_and_in_order() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    assert_eq!(channel.stream_mode(), StreamMode::Stream);
    let blocks: Vec<String> = (0..24).map(|i| block(i, 12)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::from_millis(3)).await;
    let whole = reply.join(BLOCK_SEPARATOR);
    assert_eq!(receipt.confirmed_text(), whole);
    let streams = api.streams();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].text, whole, "in order, each block once");
    assert!(!streams[0].open, "stopped");
    assert_eq!(streams[0].thread_ts.as_deref(), Some(THREAD));
    assert_eq!(api.calls_to("chat.startStream"), 1);
    assert_eq!(api.calls_to("chat.stopStream"), 1);
    assert_eq!(api.calls_to("chat.postMessage"), 0);
    let start = &api.calls()[0];
    assert_eq!(start.method, "chat.startStream");
    assert_eq!(start.body["recipient_user_id"], "U0123456789");
    assert_eq!(start.body["recipient_team_id"], "T0123456789");
    assert_eq!(receipt.calls(), api.calls().len());
    assert!(api.calls().iter().all(|c| {
        c.body["markdown_text"]
            .as_str()
            .map_or(0, |t| t.chars().count())
            <= 12_000
    }));
}

#[tokio::test]
async fn slack_a_stream_that_expires_mid_reply_rolls_over_and_the_rest_arrives_once() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api);
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let (confirmed_tx, mut confirmed) = tokio::sync::watch::channel(0usize);
    stream.observe(move |progress: &StreamProgress<'_>| {
        confirmed_tx.send_replace(progress.confirmed().len());
    });
    let mut reply = Vec::new();
    for i in 0..10 {
        reply.extend(append(&channel, &mut stream, &block(i, 6)).await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Once the first ten are confirmed, Slack closes the stream: the next append is answered
    // `message_not_in_streaming_state`.
    let shown = reply.len();
    tokio::time::timeout(BOUND, confirmed.wait_for(|&n| n >= shown))
        .await
        .expect("confirmed in time")
        .expect("the stream is alive");
    api.expire_streams();
    for i in 10..20 {
        reply.extend(append(&channel, &mut stream, &block(i, 6)).await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        api.calls_to("chat.startStream"),
        2,
        "a fresh stream, not the fallback"
    );
    assert_eq!(api.calls_to("chat.postMessage"), 0);
    assert_eq!(receipt.rollovers(), 1);
    let streams = api.streams();
    let shown: Vec<&str> = streams.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(
        shown.join(BLOCK_SEPARATOR),
        reply.join(BLOCK_SEPARATOR),
        "nothing lost or doubled"
    );
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
    assert_eq!(
        receipt.ids(),
        streams.iter().map(|s| s.ts.as_str()).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn slack_without_the_scope_falls_back_to_posts_of_whole_blocks() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    api.script_method(
        "chat.startStream",
        [FakeResponse::chat_refusal(Surface::Slack, "missing_scope")],
    );
    let channel = slack(&api);
    let blocks: Vec<String> = (0..4).map(|i| block(i, 3)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::from_millis(2)).await;
    assert!(receipt.fell_back());
    assert_eq!(receipt.mode(), StreamMode::Blocks);
    let posted: Vec<String> = api
        .received()
        .iter()
        .map(|m| {
            m.body["markdown_text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(api.calls_to("chat.postMessage"), posted.len());
    assert!(whole_blocks_in_order(&posted, &reply), "{posted:?}");
    assert_eq!(receipt.messages().len(), posted.len());
}

#[tokio::test]
async fn slack_outside_a_thread_posts_blocks_and_never_starts_a_stream() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = SlackChannel::new(TOKEN, "C024BE91L")
        .with_renderer(SlackMarkdown::new())
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy());
    let blocks: Vec<String> = (0..3).map(|i| block(i, 3)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::ZERO).await;
    assert!(receipt.fell_back());
    assert_eq!(api.calls_to("chat.startStream"), 0);
    assert_eq!(api.calls_to("chat.postMessage"), receipt.messages().len());
    assert!(whole_blocks_in_order(&api.texts(), &reply));
}

fn telegram(api: &FakeApi, chat: &str) -> TelegramChannel {
    TelegramChannel::new(TOKEN, chat)
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy())
}

#[tokio::test]
async fn telegram_a_long_reply_shows_drafts_then_permanent_messages_within_the_limit() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = telegram(&api, "123456789");
    assert_eq!(channel.stream_mode(), StreamMode::Stream);
    // About 5,000 characters: two permanent messages.
    let blocks: Vec<String> = (0..14).map(|i| block(i, 50)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::from_millis(8)).await;
    let texts = api.texts();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts.iter().all(|t| t.encode_utf16().count() <= 4096));
    assert_eq!(texts.join(BLOCK_SEPARATOR), reply.join(BLOCK_SEPARATOR));
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
    let drafts = api.drafts();
    assert!(!drafts.is_empty());
    assert_eq!(receipt.previews(), api.calls_to("sendMessageDraft"));
    // Each message's drafts only grow towards it, under one draft id per message.
    for draft in &drafts {
        let message = &texts[usize::try_from(draft.draft_id - 1).unwrap()];
        assert!(
            message.starts_with(&draft.text),
            "a draft is a prefix of its message"
        );
    }
}

#[tokio::test]
async fn telegram_a_flood_wait_is_honoured_without_a_cascade_and_the_reply_completes() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = telegram(&api, "123456789");
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let mut reply = Vec::new();
    for i in 0..3 {
        reply.extend(append(&channel, &mut stream, &block(i, 4)).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = api.calls().len();
    let flood = Duration::from_millis(1200);
    api.flood_wait(flood);
    let flooded_at = Instant::now();
    for i in 3..8 {
        reply.extend(append(&channel, &mut stream, &block(i, 4)).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .unwrap()
        .unwrap();
    assert!(
        flooded_at.elapsed() >= flood,
        "the reply waited the flood out"
    );
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
    assert_eq!(
        api.texts().join(BLOCK_SEPARATOR),
        reply.join(BLOCK_SEPARATOR)
    );
    // Inside the flood window exactly one call arrived (and was told to wait): no retries,
    // no hammering.
    let calls = api.calls();
    let after = &calls[before..];
    let first = after.first().expect("a call after the flood began").at;
    let inside = after
        .iter()
        .filter(|c| c.at < first + flood - Duration::from_millis(100))
        .count();
    assert_eq!(inside, 1, "{after:?}");
    assert_eq!(api.calls_to("editMessageText"), 0);
}

#[tokio::test]
async fn telegram_a_refused_draft_turns_the_reply_into_messages_of_whole_blocks() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    api.script_method(
        "sendMessageDraft",
        [FakeResponse::chat_refusal(
            Surface::Telegram,
            "Bad Request: method is available only to bots with topics enabled",
        )],
    );
    let channel = telegram(&api, "123456789");
    let blocks: Vec<String> = (0..5).map(|i| block(i, 3)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::from_millis(3)).await;
    assert!(receipt.fell_back());
    assert_eq!(
        api.calls_to("sendMessageDraft"),
        1,
        "no second draft after a refusal"
    );
    assert!(
        whole_blocks_in_order(&api.texts(), &reply),
        "{:?}",
        api.texts()
    );
}

#[tokio::test]
async fn telegram_groups_get_blocks_by_default() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = telegram(&api, "-1001234567890");
    assert_eq!(channel.stream_mode(), StreamMode::Blocks);
    let blocks: Vec<String> = (0..3).map(|i| block(i, 3)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::ZERO).await;
    assert_eq!(api.calls_to("sendMessageDraft"), 0);
    assert!(
        whole_blocks_in_order(&api.texts(), &reply),
        "{:?}",
        api.texts()
    );
    assert_eq!(receipt.messages().len(), api.texts().len());
}

fn discord(api: &FakeApi) -> DiscordChannel {
    DiscordChannel::new(TOKEN, "1100000000000000001")
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy())
}

#[tokio::test]
async fn discord_edits_follow_changing_rate_limit_headers_and_split_at_2000_code_points() {
    let api = FakeApi::start(Surface::Discord, TOKEN).await.unwrap();
    // The bucket runs dry twice, with a different reset each time, and one edit meets a 429.
    let headers = [(4, 1.0), (0, 0.15), (4, 1.0), (4, 1.0), (0, 0.3), (4, 1.0)];
    api.rate_limit_headers(headers);
    api.script_method(
        "editMessage",
        [
            ChatStep::Accept,
            ChatStep::Accept,
            ChatStep::Accept,
            FakeResponse::chat_rate_limited(Surface::Discord, Duration::from_millis(200)).into(),
        ],
    );
    let channel = discord(&api);
    // About 4,700 code points: three messages.
    let blocks: Vec<String> = (0..16).map(|i| block(i, 40)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::from_millis(15)).await;
    let texts = api.texts();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts.iter().all(|t| t.chars().count() <= 2000));
    assert_eq!(texts.join(BLOCK_SEPARATOR), reply.join(BLOCK_SEPARATOR));
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
    let calls = api.calls();
    assert!(calls.iter().any(|c| c.method == "editMessage"));
    for (i, (remaining, reset)) in headers.iter().enumerate() {
        if *remaining == 0 {
            let gap = calls[i + 1].at - calls[i].at;
            assert!(
                gap >= Duration::from_secs_f64(*reset),
                "call {i}: waited {gap:?}"
            );
        }
    }
    let limited = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.method == "editMessage")
        .nth(3)
        .map(|(i, _)| i)
        .unwrap();
    let gap = calls[limited + 1].at - calls[limited].at;
    assert!(
        gap >= Duration::from_millis(200),
        "the 429's retry_after: {gap:?}"
    );
    assert!(
        calls
            .iter()
            .all(|c| c.body["allowed_mentions"] == serde_json::json!({ "parse": [] })),
        "every create and edit carries allowed_mentions"
    );
}

#[tokio::test]
async fn every_surface_in_final_mode_sends_only_when_the_reply_is_complete() {
    let slack_api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let discord_api = FakeApi::start(Surface::Discord, TOKEN).await.unwrap();
    let telegram_api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let blocks: Vec<String> = (0..4).map(|i| block(i, 3)).collect();
    let slack = slack(&slack_api).with_stream_mode(StreamMode::Final);
    let discord = discord(&discord_api).with_stream_mode(StreamMode::Final);
    let telegram = telegram(&telegram_api, "123456789").with_stream_mode(StreamMode::Final);
    for (api, (receipt, reply)) in [
        (
            &slack_api,
            stream_reply(&slack, &blocks, Duration::ZERO).await,
        ),
        (
            &discord_api,
            stream_reply(&discord, &blocks, Duration::ZERO).await,
        ),
        (
            &telegram_api,
            stream_reply(&telegram, &blocks, Duration::ZERO).await,
        ),
    ] {
        assert_eq!(api.calls().len(), 1, "{:?}: one message", api.surface());
        assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
    }
}

#[tokio::test]
async fn a_failed_stream_hands_back_the_unconfirmed_parts_to_resume_from() {
    let api = FakeApi::start(Surface::Discord, TOKEN).await.unwrap();
    let channel = discord(&api).with_stream_mode(StreamMode::Blocks);
    api.script_method(
        "createMessage",
        [
            ChatStep::Accept,
            ChatStep::Accept,
            FakeResponse::chat_refusal(Surface::Discord, "Missing Permissions").into(),
        ],
    );
    let blocks: Vec<String> = (0..5).map(|i| block(i, 3)).collect();
    let mut stream = channel.open_stream(&attribution()).unwrap();
    // Each block is appended once the one before was confirmed, so each is a message of its
    // own (blocks that queue behind the budget would go together).
    let (confirmed_tx, mut confirmed) = tokio::sync::watch::channel(0usize);
    stream.observe(move |progress: &StreamProgress<'_>| {
        confirmed_tx.send_replace(progress.confirmed().len());
    });
    let mut reply = Vec::new();
    for (i, text) in blocks.iter().enumerate() {
        reply.extend(append(&channel, &mut stream, text).await);
        if i < 2 {
            tokio::time::timeout(BOUND, confirmed.wait_for(|&n| n > i))
                .await
                .expect("confirmed in time")
                .expect("the stream is alive");
        }
    }
    let error = stream.finish().await.unwrap_err();
    assert_eq!(
        error.receipt().confirmed_text(),
        reply[..2].join(BLOCK_SEPARATOR)
    );
    assert_eq!(error.unconfirmed().len(), 3);
    // Resuming sends exactly what was not confirmed.
    let mut again = channel.open_stream(&attribution()).unwrap();
    for part in error.into_unconfirmed() {
        again.append(part);
    }
    let receipt = again.finish().await.unwrap();
    assert_eq!(receipt.confirmed_text(), reply[2..].join(BLOCK_SEPARATOR));
    assert!(
        whole_blocks_in_order(&api.texts(), &reply),
        "{:?}",
        api.texts()
    );
}

#[tokio::test]
async fn blocks_that_queue_behind_the_budget_go_in_one_message_not_one_each() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    // A group: blocks, and twenty messages a minute to spend them on.
    let channel = TelegramChannel::new(TOKEN, "-1001234567890")
        .with_stream_budget(BudgetConfig::new(Duration::from_secs(1)))
        .base_url(api.base_url())
        .policy(policy());
    let blocks: Vec<String> = (0..5).map(|i| block(i, 3)).collect();
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let (confirmed_tx, mut confirmed) = tokio::sync::watch::channel(0usize);
    stream.observe(move |progress: &StreamProgress<'_>| {
        confirmed_tx.send_replace(progress.confirmed().len());
    });
    let mut reply = append(&channel, &mut stream, &blocks[0]).await;
    tokio::time::timeout(BOUND, confirmed.wait_for(|&n| n >= 1))
        .await
        .expect("confirmed in time")
        .expect("the stream is alive");
    // Four more while the next call must wait a second: they go together.
    for text in &blocks[1..] {
        reply.extend(append(&channel, &mut stream, text).await);
    }
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("finished in time")
        .expect("confirmed");
    assert_eq!(
        api.texts(),
        [reply[0].clone(), reply[1..].join(BLOCK_SEPARATOR)]
    );
    assert_eq!(receipt.messages().len(), 2);
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
}

/// The calls a 600-token reply costs on each surface with its default pacing, time scaled by
/// 1/50 so the test takes a fraction of a second: six blocks of about 100 tokens, one every 2 s
/// at 50 tokens/s (40 ms scaled), against a budget of one call a second (20 ms scaled; Discord
/// 0.5 s, 10 ms scaled). Each block then gets its own call and nothing is coalesced.
#[tokio::test]
async fn a_600_token_reply_costs_seven_slack_calls_seven_telegram_calls_and_six_discord_calls() {
    let scaled = |ms: u64| BudgetConfig::new(Duration::from_millis(ms));
    let blocks: Vec<String> = (0..6).map(|i| block(i, 55)).collect();
    let total: usize = blocks.iter().map(String::len).sum();
    assert!(
        (2_300..2_700).contains(&total),
        "about 600 tokens: {total} bytes"
    );
    let gap = Duration::from_millis(40);

    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api).with_stream_budget(scaled(20));
    let (receipt, _) = stream_reply(&channel, &blocks, gap).await;
    // chat.startStream, five chat.appendStream, chat.stopStream.
    assert_eq!(receipt.calls(), 7, "{:?}", api.calls());

    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = telegram(&api, "123456789").with_stream_budget(scaled(20));
    let (receipt, _) = stream_reply(&channel, &blocks, gap).await;
    // Six drafts, one permanent sendMessage (2,400 characters fit one message).
    assert_eq!(
        (receipt.previews(), receipt.calls()),
        (6, 7),
        "{:?}",
        api.calls()
    );

    let api = FakeApi::start(Surface::Discord, TOKEN).await.unwrap();
    let channel = discord(&api).with_stream_budget(scaled(10));
    let (receipt, _) = stream_reply(&channel, &blocks, gap).await;
    // Two messages (2,000 code points each at most): two creates and four edits.
    assert_eq!(receipt.calls(), 6, "{:?}", api.calls());
    assert_eq!(receipt.messages().len(), 2);
}

#[tokio::test]
async fn slack_rolls_over_into_a_fresh_stream_before_the_expiry_without_an_error() {
    let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
    let channel = slack(&api).with_stream_rollover(Duration::from_millis(120));
    let blocks: Vec<String> = (0..8).map(|i| block(i, 5)).collect();
    let (receipt, reply) = stream_reply(&channel, &blocks, Duration::from_millis(25)).await;
    let streams = api.streams();
    assert!(streams.len() >= 2, "{streams:?}");
    assert_eq!(api.calls_to("chat.startStream"), streams.len());
    assert_eq!(
        api.calls_to("chat.stopStream"),
        streams.len(),
        "each stream stopped by us"
    );
    let accepted: usize = streams.iter().map(|s| s.appends).sum();
    assert_eq!(
        api.calls_to("chat.appendStream"),
        accepted,
        "every append was accepted: the rollover came before any expiry"
    );
    assert_eq!(receipt.rollovers(), streams.len() - 1);
    let shown: Vec<&str> = streams.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(shown.join(BLOCK_SEPARATOR), reply.join(BLOCK_SEPARATOR));
}

#[tokio::test]
async fn telegram_a_waiting_draft_is_shown_again_before_it_lapses() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = telegram(&api, "123456789").with_draft_refresh(Duration::from_millis(40));
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let mut reply = append(&channel, &mut stream, &block(0, 4)).await;
    // The model stalls: the draft is refreshed meanwhile, unchanged (polled, bounded).
    let waiting = Instant::now();
    while api.drafts().len() < 3 && waiting.elapsed() < BOUND {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let drafts = api.drafts();
    assert!(drafts.len() >= 3, "{drafts:?}");
    assert!(
        drafts
            .iter()
            .all(|d| d.text == reply[0] && d.draft_id == drafts[0].draft_id)
    );
    reply.extend(append(&channel, &mut stream, &block(1, 4)).await);
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(api.texts(), [reply.join(BLOCK_SEPARATOR)]);
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
}

#[tokio::test]
async fn the_last_text_is_reported_before_the_slack_stream_is_stopped() {
    let api = std::sync::Arc::new(FakeApi::start(Surface::Slack, TOKEN).await.unwrap());
    // A stop inside the last flush would wait its 300 ms turn before the last text was reported.
    let channel = slack(&api).with_stream_budget(BudgetConfig::new(Duration::from_millis(300)));
    let blocks: Vec<String> = (0..3).map(|i| block(i, 3)).collect();
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let reports = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&reports);
    let fake = std::sync::Arc::clone(&api);
    stream.observe(move |progress: &StreamProgress<'_>| {
        let stops = fake.calls_to("chat.stopStream");
        seen.lock()
            .unwrap()
            .push((progress.confirmed().len(), stops));
    });
    let mut reply = Vec::new();
    for text in &blocks {
        reply.extend(append(&channel, &mut stream, text).await);
    }
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("finished in time")
        .expect("confirmed");
    assert_eq!(receipt.confirmed_text(), reply.join(BLOCK_SEPARATOR));
    let reports = reports.lock().unwrap().clone();
    let last = *reports.last().expect("a report");
    assert_eq!(last, (reply.len(), 0), "{reports:?}");
    assert_eq!(api.calls_to("chat.stopStream"), 1);
}

#[tokio::test]
async fn telegram_a_permanent_message_whose_answer_was_lost_comes_back_uncertain_not_unconfirmed() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    api.script_method("sendMessage", [ChatStep::lost_response()]);
    let channel = telegram(&api, "123456789");
    let blocks: Vec<String> = (0..3).map(|i| block(i, 3)).collect();
    let mut stream = channel.open_stream(&attribution()).unwrap();
    let mut reply = Vec::new();
    for text in &blocks {
        reply.extend(append(&channel, &mut stream, text).await);
    }
    let error = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("finished in time")
        .expect_err("the message's outcome is unknown");
    // Posted once, never repeated: every part is uncertain, none left to send again.
    assert_eq!(api.calls_to("sendMessage"), 1);
    assert_eq!(api.texts(), [reply.join(BLOCK_SEPARATOR)]);
    assert_eq!(error.uncertain().len(), reply.len());
    assert!(error.unconfirmed().is_empty());
    assert_eq!(error.receipt().confirmed_text(), "");
}
