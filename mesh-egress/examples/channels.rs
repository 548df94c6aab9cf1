//! Delivers one long reply to loopback fakes of Slack, Discord and Telegram, and prints what
//! each API received.
//!
//! ```text
//! cargo run -p mesh-egress --example channels
//! ```
//!
//! Each surface gets the reply split to its own limit, one API call per part, in order. The fakes
//! also throw in each surface's own trouble (a Slack `429` with `Retry-After`, a Discord global
//! rate limit, a Telegram flood wait), which the connectors ride out within their `SendPolicy`.
//!
//! Then one streamed reply per surface through the front door (`Bot::send_to`, streaming onto
//! each surface's own mechanism): a Slack native stream
//! in a thread (`chat.startStream` / `appendStream` / `stopStream`), Telegram drafts in a
//! private chat then one permanent message, and a Discord message posted then edited, each
//! under its conversation's rate budget. The calls each surface received are printed.

use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{BudgetConfig, StreamingChannel};
use mesh_egress::channel::{BoxedChannel, Deliver, DiscordChannel, SlackChannel, TelegramChannel};
use mesh_egress::stream::CutterConfig;
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{
    Address, AgentMessage, AnswerStream, Attribution, Bot, EgressError, Turn, egress_boundary,
};

/// The streamed reply: paragraphs arriving one every 150 ms, as a model writes them.
const STREAMED: [&str; 4] = [
    "Checking the deploy now.\n\n",
    "Staging is green: every test passed and p99 is 48 ms.\n\n",
    "Production is rolling out region by region; two of five are done.\n\n",
    "All five regions are live. **Release 2.4 is out.**\n\n",
];

/// The streamed answer: [`STREAMED`], one paragraph every 150 ms.
#[egress_boundary(interactive)]
async fn streamed(turn: &Turn) -> Result<AnswerStream, EgressError> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        for block in STREAMED {
            tokio::time::sleep(Duration::from_millis(150)).await;
            if tx.send(Ok(block.to_owned())).await.is_err() {
                return;
            }
        }
    });
    Ok(AnswerStream::from_receiver(turn, rx))
}

/// Streams [`STREAMED`] onto `channel` through the front door, then prints the calls `api`
/// received.
async fn stream_onto<C: StreamingChannel>(
    api: &FakeApi,
    channel: &C,
) -> Result<(), Box<dyn std::error::Error>> {
    let bot = Bot::new()
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None);
    let turn = bot.turn(Address::Plain, Attribution::new("release-bot", "c2", "r2"));
    let delivery = bot.send_to(&turn, channel, streamed(&turn).await).await?;
    let surface = delivery.surface().ok_or("no surface receipt")?;
    println!(
        "==== {} streamed ({:?} mode): {} calls, {} previews, {} message(s)",
        api.surface(),
        surface.mode(),
        surface.calls(),
        surface.previews(),
        surface.messages().len()
    );
    for call in api.calls() {
        println!("  {}", call.method);
    }
    for message in surface.messages() {
        println!("---- message {}\n{}", message.id(), message.text());
    }
    println!();
    Ok(())
}

/// A long mixed reply: a heading, emoji, a table, a code block, a long list and a long link.
fn reply() -> String {
    let mut text = String::from(
        "## Release 2.4 is out 🚀\n\n\
         Thanks, everyone 🎉 — here is what changed since 2.3, and what to do about it.\n\n\
         | service | p50 before | p50 after |\n\
         |---------|-----------:|----------:|\n\
         | api     | 120 ms     | 45 ms     |\n\
         | search  | 340 ms     | 210 ms    |\n\
         | billing | 95 ms      | 90 ms     |\n\n\
         To pin the new client:\n\n\
         ```rust\n\
         let client = Client::builder()\n    .timeout(Duration::from_secs(10))\n    .build()?;\n\
         ```\n\n",
    );
    for i in 1..=60 {
        let mood = ["✅", "🛠️", "📈", "👩‍💻"][i % 4];
        text.push_str(&format!(
            "- {mood} change {i}: tightened the retry budget of worker pool {i} and moved its \
             metrics to the shared dashboard\n"
        ));
    }
    text.push_str(
        "\nFull notes: https://example.com/releases/2.4/notes?utm_source=chat&utm_medium=bot\
         &utm_campaign=release-2-4&section=performance-and-reliability-improvements#p50-latency\n",
    );
    text
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = SendPolicy::new().max_wait(Duration::from_secs(3));

    let slack_api = FakeApi::start(Surface::Slack, "xoxb-demo").await?;
    slack_api.script([
        ChatStep::Accept,
        FakeResponse::chat_rate_limited(Surface::Slack, Duration::from_secs(1)).into(),
    ]);
    let discord_api = FakeApi::start(Surface::Discord, "discord-demo").await?;
    discord_api.script([FakeResponse::chat_global_rate_limited(
        Surface::Discord,
        Duration::from_millis(250),
    )]);
    let telegram_api = FakeApi::start(Surface::Telegram, "123:telegram-demo").await?;
    // A flood wait posted nothing: waited out and sent again. (A 503 may have posted, and a
    // `sendMessage` is never repeated after one.)
    telegram_api.script([FakeResponse::chat_rate_limited(
        Surface::Telegram,
        Duration::from_secs(1),
    )]);

    // One bot, three surfaces, one type, each with its own default renderer and limits.
    let surfaces = [
        (
            &slack_api,
            BoxedChannel::new(
                SlackChannel::new("xoxb-demo", "C024BE91L")
                    .base_url(slack_api.base_url())
                    .policy(policy),
            ),
        ),
        (
            &discord_api,
            BoxedChannel::new(
                DiscordChannel::new("discord-demo", "1100000000000000001")
                    .base_url(discord_api.base_url())
                    .policy(policy),
            ),
        ),
        (
            &telegram_api,
            BoxedChannel::new(
                TelegramChannel::new("123:telegram-demo", "-1001234567890")
                    .base_url(telegram_api.base_url())
                    .policy(policy),
            ),
        ),
    ];

    let text = reply();
    println!("reply: {} characters\n", text.chars().count());
    for (api, channel) in &surfaces {
        let message = AgentMessage::new(text.clone(), Attribution::new("release-bot", "c1", "r1"));
        let receipt = channel.deliver(message).await?;
        let received = api.received();
        println!(
            "==== {}: {} parts delivered in {} requests; ids {:?}",
            api.surface(),
            receipt.len(),
            api.attempts(),
            receipt.ids()
        );
        for (n, got) in received.iter().enumerate() {
            println!(
                "---- part {} of {} to {} ({} characters)\n{}",
                n + 1,
                received.len(),
                got.target,
                got.text.chars().count(),
                got.text
            );
        }
        println!();
    }

    // One streamed reply per surface, each with its own streaming mechanism.
    let budget = BudgetConfig::new(Duration::from_millis(100));
    let slack_api = FakeApi::start(Surface::Slack, "xoxb-demo").await?;
    let slack = SlackChannel::new("xoxb-demo", "C024BE91L")
        .with_renderer(SlackMarkdown::new())
        .in_thread("1700000000.000100")
        .with_stream_recipient("U0123456789", "T0123456789")
        .with_stream_budget(budget)
        .base_url(slack_api.base_url())
        .policy(policy);
    stream_onto(&slack_api, &slack).await?;
    let telegram_api = FakeApi::start(Surface::Telegram, "123:telegram-demo").await?;
    // A positive chat id is a private chat, where drafts are allowed.
    let telegram = TelegramChannel::new("123:telegram-demo", "42")
        .with_stream_budget(budget)
        .base_url(telegram_api.base_url())
        .policy(policy);
    stream_onto(&telegram_api, &telegram).await?;
    let discord_api = FakeApi::start(Surface::Discord, "discord-demo").await?;
    let discord = DiscordChannel::new("discord-demo", "1100000000000000001")
        .with_stream_budget(budget)
        .base_url(discord_api.base_url())
        .policy(policy);
    stream_onto(&discord_api, &discord).await?;
    Ok(())
}
