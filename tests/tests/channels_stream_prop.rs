//! A property per surface: whatever the block timings and the API failures (an expired Slack
//! stream, 5xx answers to calls a repeat cannot double, Discord rate limits with changing
//! headers, failed Telegram drafts and flood waits),
//! the text the surface confirmed is the reply, each block exactly once, and what the fake
//! shows is the same.

use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{
    BLOCK_SEPARATOR, BudgetConfig, ReplyStream, StreamingChannel, SurfaceStreamReceipt,
};
use mesh_egress::channel::{DiscordChannel, SlackChannel, TelegramChannel};
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{AgentMessage, Attribution, Outbound, Ownership};
use proptest::prelude::*;

const TOKEN: &str = "123456789:AAF-secret_TOKEN_value";
const BOUND: Duration = Duration::from_secs(20);

fn attribution() -> Attribution {
    Attribution::new("ops-bot", "conv-1", "run-1")
}

fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(5)
        .max_wait(Duration::from_secs(3))
        .backoff(Duration::from_millis(1))
        .request_timeout(Duration::from_secs(5))
}

fn budget() -> BudgetConfig {
    BudgetConfig::new(Duration::from_millis(2))
}

/// One block of the reply: `words` words after its number.
fn block(i: usize, words: usize) -> String {
    let mut text = format!("Block {i:02}");
    for w in 0..words {
        text.push_str(&format!(" w{w}"));
    }
    text
}

/// A script where no two failures are adjacent, so a retried call always gets through within
/// the policy's tries.
fn script(failures: &[bool], fail: impl Fn() -> FakeResponse) -> Vec<ChatStep> {
    let mut steps = Vec::new();
    for &failed in failures {
        if failed {
            steps.push(fail().into());
        }
        steps.push(ChatStep::Accept);
    }
    steps
}

/// Streams blocks of `sizes` words with `gaps` (ms) between them; `each` runs after a block.
async fn run<C: StreamingChannel>(
    channel: &C,
    sizes: &[usize],
    gaps: &[u64],
    each: impl Fn(usize),
) -> (SurfaceStreamReceipt, String) {
    let mut stream: ReplyStream = channel.open_stream(&attribution()).unwrap();
    let mut reply = Vec::new();
    for (i, words) in sizes.iter().enumerate() {
        let message = AgentMessage::new(block(i, *words), attribution());
        let rendered = Outbound::new(message).render(channel.renderer()).unwrap();
        for part in rendered
            .commit(&Ownership::held())
            .await
            .unwrap()
            .into_parts()
        {
            reply.push(part.text().to_owned());
            stream.append(part);
        }
        each(i);
        tokio::time::sleep(Duration::from_millis(gaps.get(i).copied().unwrap_or(0))).await;
    }
    let receipt = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("finished in time")
        .expect("confirmed");
    (receipt, reply.join(BLOCK_SEPARATOR))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn slack_confirms_the_reply_once_through_expiries_and_server_errors(
        sizes in prop::collection::vec(1usize..80, 2..10),
        gaps in prop::collection::vec(0u64..12, 10),
        expire_after in prop::option::of(0usize..9),
        append_failures in prop::collection::vec(prop::bool::weighted(0.3), 0..8),
    ) {
        runtime().block_on(async {
            let api = FakeApi::start(Surface::Slack, TOKEN).await.unwrap();
            api.script_method("chat.appendStream", script(&append_failures, || FakeResponse::chat_server_error(Surface::Slack, 503)));
            let channel = SlackChannel::new(TOKEN, "C024BE91L")
                .with_renderer(SlackMarkdown::new())
                .in_thread("1699999999.000100")
                .with_stream_budget(budget())
                .base_url(api.base_url())
                .policy(policy());
            let (receipt, reply) = run(&channel, &sizes, &gaps, |i| {
                if expire_after == Some(i) {
                    api.expire_streams();
                }
            }).await;
            prop_assert_eq!(receipt.confirmed_text(), reply.clone());
            let shown: Vec<String> = api.streams().into_iter().map(|s| s.text).collect();
            prop_assert_eq!(shown.join(BLOCK_SEPARATOR), reply);
            prop_assert_eq!(api.calls_to("chat.postMessage"), 0);
            Ok(())
        })?;
    }

    #[test]
    fn telegram_confirms_the_reply_once_through_failed_drafts_and_sends(
        sizes in prop::collection::vec(1usize..400, 2..10),
        gaps in prop::collection::vec(0u64..12, 10),
        draft_failures in prop::collection::vec(prop::bool::weighted(0.4), 0..8),
        send_failures in prop::collection::vec(prop::bool::weighted(0.3), 0..4),
    ) {
        runtime().block_on(async {
            let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
            api.script_method("sendMessageDraft", script(&draft_failures, || FakeResponse::chat_server_error(Surface::Telegram, 502)));
            // A `sendMessage` 5xx may have posted, so it is never repeated (its parts come back
            // uncertain: `store_at_most_once.rs`); a flood wait posted nothing.
            api.script_method("sendMessage", script(&send_failures, || FakeResponse::chat_rate_limited(Surface::Telegram, Duration::from_millis(1))));
            let channel = TelegramChannel::new(TOKEN, "123456789")
                .with_stream_budget(budget())
                .base_url(api.base_url())
                .policy(policy());
            let (receipt, reply) = run(&channel, &sizes, &gaps, |_| {}).await;
            prop_assert_eq!(receipt.confirmed_text(), reply.clone());
            let texts = api.texts();
            prop_assert!(texts.iter().all(|t| t.encode_utf16().count() <= 4096));
            prop_assert_eq!(texts.join(BLOCK_SEPARATOR), reply);
            Ok(())
        })?;
    }

    #[test]
    fn discord_confirms_the_reply_once_through_rate_limits_and_changing_headers(
        sizes in prop::collection::vec(1usize..300, 2..10),
        gaps in prop::collection::vec(0u64..12, 10),
        edit_failures in prop::collection::vec(prop::bool::weighted(0.3), 0..8),
        create_failures in prop::collection::vec(prop::bool::weighted(0.3), 0..4),
        headers in prop::collection::vec((0u32..3, 0u64..30), 0..10),
    ) {
        runtime().block_on(async {
            let api = FakeApi::start(Surface::Discord, TOKEN).await.unwrap();
            api.script_method("editMessage", script(&edit_failures, || FakeResponse::chat_rate_limited(Surface::Discord, Duration::from_millis(15))));
            api.script_method("createMessage", script(&create_failures, || FakeResponse::chat_server_error(Surface::Discord, 502)));
            api.rate_limit_headers(headers.iter().map(|(remaining, ms)| (*remaining, *ms as f64 / 1000.0)));
            let channel = DiscordChannel::new(TOKEN, "1100000000000000001")
                .with_stream_budget(budget())
                .base_url(api.base_url())
                .policy(policy());
            let (receipt, reply) = run(&channel, &sizes, &gaps, |_| {}).await;
            prop_assert_eq!(receipt.confirmed_text(), reply.clone());
            let texts = api.texts();
            prop_assert!(texts.iter().all(|t| t.chars().count() <= 2000));
            prop_assert_eq!(texts.join(BLOCK_SEPARATOR), reply);
            Ok(())
        })?;
    }
}
