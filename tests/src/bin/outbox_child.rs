//! The crash tests' child process (`tests/tests/store_crash.rs`, `store_stream_crash.rs`): one
//! durable delivery of a three-part message to a loopback chat fake, a streamed four-block
//! reply onto the surface's own stream through the outbox (`stream`: Slack or Discord;
//! `drafts`: Telegram's drafts in a private chat), or the restarted worker's `Store::resend`.
//!
//! `outbox_child deliver|stream|drafts|resend`, configured by the environment: `MESH_STORE_URL`,
//! `CHILD_SURFACE` (`slack`, `discord`, `telegram`), `CHILD_API_URL` (the fake's base URL),
//! `CHILD_CONVERSATION`, `CHILD_TRIES` (the connector's tries per part, default 1),
//! `CHILD_TIMEOUT_MS` (its request timeout, default 2000), `CHILD_UNKNOWN` (`send_again`: the
//! resend's `UnknownOutcome::SendAgain`; default `Uncertain`), `CHILD_IN_THREAD` (`1`: the
//! Slack connector posts in the streamed reply's thread, for its recipient, so a resend after
//! a streaming child goes to the destination its parts are stored for) and, for the crash
//! itself, `MESH_FAILPOINT`. It prints one JSON line on stdout with what it did.

use std::process::ExitCode;
use std::time::Duration;

use mesh_egress::channel::Channel;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{BudgetConfig, StreamProgress, StreamingChannel};
use mesh_egress::channel::{
    BoxedChannel, Deliver, DiscordChannel, PlainText, SlackChannel, TelegramChannel,
};
use mesh_egress::store::{Durable, Lease, Store, UnknownOutcome};
use mesh_egress::{AgentMessage, Attribution, CommittedPart, Outbound};

/// The bot token every fake accepts.
const TOKEN: &str = "crash-token";
/// The message: three parts of at most 10 code points.
const BODY: &str = "alpha one. bravo two. charlie 3.";
/// The worker's name, the same after the restart (a restarted worker keeps its identity).
const HOLDER: &str = "worker-1";
/// The streamed reply: four blocks, one part each.
const STREAM_BLOCKS: [&str; 4] = [
    "Block one: the build is green.",
    "Block two: staging is deploying.",
    "Block three: production is next.",
    "Block four: notes follow soon.",
];
/// The thread the streaming child streams into, and the stream's recipient.
const THREAD_TS: &str = "1699999999.000100";
const RECIPIENT: (&str, &str) = ("U0123456789", "T0123456789");
/// How long the streaming child waits for the surface to confirm its first block.
const CONFIRM_BOUND: Duration = Duration::from_secs(20);

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

fn connector(
    surface: &str,
    url: String,
    tries: u32,
    timeout_ms: u64,
) -> Result<BoxedChannel, String> {
    let policy = SendPolicy::new()
        .max_tries(tries)
        .backoff(Duration::from_millis(1))
        .max_wait(Duration::from_millis(200))
        .request_timeout(Duration::from_millis(timeout_ms));
    let renderer = PlainText::new().with_limit(10);
    Ok(match surface {
        "slack" => {
            let slack = SlackChannel::new(TOKEN, "C1")
                .with_renderer(renderer)
                .base_url(url)
                .policy(policy);
            BoxedChannel::new(
                if std::env::var("CHILD_IN_THREAD").ok().as_deref() == Some("1") {
                    slack
                        .in_thread(THREAD_TS)
                        .with_stream_recipient(RECIPIENT.0, RECIPIENT.1)
                } else {
                    slack
                },
            )
        }
        "discord" => BoxedChannel::new(
            DiscordChannel::new(TOKEN, "1")
                .with_renderer(renderer)
                .base_url(url)
                .policy(policy),
        ),
        "telegram" => BoxedChannel::new(
            TelegramChannel::new(TOKEN, "1")
                .with_renderer(renderer)
                .base_url(url)
                .policy(policy),
        ),
        other => return Err(format!("unknown surface {other:?}")),
    })
}

async fn run(mode: &str) -> Result<serde_json::Value, String> {
    let url = env("MESH_STORE_URL")?;
    let channel = connector(
        &env("CHILD_SURFACE")?,
        env("CHILD_API_URL")?,
        std::env::var("CHILD_TRIES")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(1),
        std::env::var("CHILD_TIMEOUT_MS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(2000),
    )?;
    let conversation = env("CHILD_CONVERSATION")?;
    let store = Store::open(&url).await.map_err(|e| e.to_string())?;
    let lease = store
        .acquire(&conversation, HOLDER, Duration::from_secs(60))
        .await
        .map_err(|e| e.to_string())?;
    if mode == "drafts" {
        // Telegram, a private chat (chat `1`, the resend's): drafts while the reply grows.
        let telegram = TelegramChannel::new(TOKEN, "1")
            .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)))
            .base_url(env("CHILD_API_URL")?);
        let answer = drafts(&store.channel(telegram), &lease, &conversation).await?;
        store.close().await;
        return Ok(answer);
    }
    if mode == "stream" {
        let api = env("CHILD_API_URL")?;
        let answer = match env("CHILD_SURFACE")?.as_str() {
            "slack" => {
                let slack = SlackChannel::new(TOKEN, "C1")
                    .with_renderer(SlackMarkdown::new())
                    .in_thread(THREAD_TS)
                    .with_stream_recipient(RECIPIENT.0, RECIPIENT.1)
                    .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)))
                    .base_url(api);
                stream(&store.channel(slack), &lease, &conversation).await?
            }
            "discord" => {
                let discord = DiscordChannel::new(TOKEN, "1")
                    .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)))
                    .base_url(api);
                stream(&store.channel(discord), &lease, &conversation).await?
            }
            other => return Err(format!("no stream for surface {other:?}")),
        };
        store.close().await;
        return Ok(answer);
    }
    let mut channel = store.channel(channel);
    if std::env::var("CHILD_UNKNOWN").ok().as_deref() == Some("send_again") {
        channel = channel.with_unknown_outcome(UnknownOutcome::SendAgain);
    }
    let answer = match mode {
        "deliver" => {
            let message = AgentMessage::new(BODY, Attribution::new("ops", &conversation, "r1"))
                .with_ownership(lease.ownership());
            match channel.deliver(message).await {
                Ok(receipt) => serde_json::json!({ "delivered": receipt.len() }),
                Err(error) => serde_json::json!({ "error": error.to_string() }),
            }
        }
        "resend" => {
            let report = store
                .resend(&channel, &lease)
                .await
                .map_err(|e| e.to_string())?;
            serde_json::json!({
                "sent": report.sent,
                "reconciled": report.reconciled,
                "uncertain": report.uncertain,
                "failed": report.failed,
                "stopped": report.stopped,
            })
        }
        other => return Err(format!("unknown mode {other:?}: deliver or resend")),
    };
    store.close().await;
    Ok(answer)
}

/// Renders and commits every block of [`STREAM_BLOCKS`] through the outbox, under `lease`.
async fn commit_blocks<C: StreamingChannel>(
    channel: &Durable<C>,
    lease: &Lease,
    attribution: &Attribution,
) -> Result<Vec<CommittedPart>, String> {
    let mut parts = Vec::new();
    for block in STREAM_BLOCKS {
        let message =
            AgentMessage::new(block, attribution.clone()).with_ownership(lease.ownership());
        let committed = Outbound::new(message)
            .render(channel.renderer())
            .map_err(|e| e.to_string())?
            .commit(channel)
            .await
            .map_err(|e| e.to_string())?;
        parts.extend(committed.into_parts());
    }
    Ok(parts)
}

/// Commits every block of [`STREAM_BLOCKS`] through the outbox, then streams them one call at
/// a time: each block is appended once the surface confirmed the one before, so with
/// `MESH_FAILPOINT=between_stream_calls` the process stops after the first block is `sent`,
/// the second `sending` and its call not made, the last two `pending` (never given to a call).
async fn stream<C: StreamingChannel>(
    channel: &Durable<C>,
    lease: &Lease,
    conversation: &str,
) -> Result<serde_json::Value, String> {
    let attribution = Attribution::new("ops", conversation, "r1");
    let parts = commit_blocks(channel, lease, &attribution).await?;
    let mut stream = channel
        .open_stream(&attribution)
        .map_err(|e| e.to_string())?;
    let (confirmed, mut watch) = tokio::sync::watch::channel(0usize);
    stream.observe(move |progress: &StreamProgress<'_>| {
        confirmed.send_replace(progress.confirmed().len());
    });
    for (sent, part) in parts.into_iter().enumerate() {
        stream.append(part);
        tokio::time::timeout(CONFIRM_BOUND, watch.wait_for(|n| *n > sent))
            .await
            .map_err(|_| format!("block {} was never confirmed", sent + 1))?
            .map_err(|e| e.to_string())?;
    }
    let receipt = stream.finish().await.map_err(|e| e.to_string())?;
    Ok(serde_json::json!({ "streamed": receipt.messages().len() }))
}

/// Commits every block of [`STREAM_BLOCKS`] through the outbox and appends them all to one
/// Telegram stream before it makes a call, so its first call is a draft of the whole reply:
/// with `MESH_FAILPOINT=drafts_only` the process stops there, the reply on screen as a draft
/// only and every part `pending`.
async fn drafts<C: StreamingChannel>(
    channel: &Durable<C>,
    lease: &Lease,
    conversation: &str,
) -> Result<serde_json::Value, String> {
    let attribution = Attribution::new("ops", conversation, "r1");
    let parts = commit_blocks(channel, lease, &attribution).await?;
    let mut stream = channel
        .open_stream(&attribution)
        .map_err(|e| e.to_string())?;
    let (drafted, mut watch) = tokio::sync::watch::channel(false);
    stream.observe(move |progress: &StreamProgress<'_>| {
        if progress.updates().iter().any(|u| u.is_preview()) {
            drafted.send_replace(true);
        }
    });
    // No await between the appends: the stream's worker (on this current-thread runtime)
    // takes them all at its first flush.
    for part in parts {
        stream.append(part);
    }
    tokio::time::timeout(CONFIRM_BOUND, watch.wait_for(|drafted| *drafted))
        .await
        .map_err(|_| "the reply was never drafted".to_owned())?
        .map_err(|e| e.to_string())?;
    let receipt = stream.finish().await.map_err(|e| e.to_string())?;
    Ok(serde_json::json!({ "streamed": receipt.messages().len() }))
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    // `drafts` appends a whole reply before its stream's first call: one thread, so nothing
    // runs between the appends.
    let runtime = if mode == "drafts" {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(&mode)) {
        Ok(answer) => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}
