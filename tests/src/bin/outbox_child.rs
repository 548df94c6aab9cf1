//! The crash tests' child process (`tests/tests/store_crash.rs`): one durable delivery of a
//! three-part message to a loopback chat fake, or the restarted worker's `Store::resend`.
//!
//! `outbox_child deliver|resend`, configured by the environment: `MESH_STORE_URL`,
//! `CHILD_SURFACE` (`slack`, `discord`, `telegram`), `CHILD_API_URL` (the fake's base URL),
//! `CHILD_CONVERSATION`, `CHILD_TRIES` (the connector's tries per part, default 1),
//! `CHILD_TIMEOUT_MS` (its request timeout, default 2000) and, for
//! the crash itself, `MESH_FAILPOINT`. It prints one JSON line on stdout with what it did.

use std::process::ExitCode;
use std::time::Duration;

use mesh_egress::channel::http::SendPolicy;
use mesh_egress::channel::{
    BoxedChannel, Deliver, DiscordChannel, PlainText, SlackChannel, TelegramChannel,
};
use mesh_egress::store::{Store, Surface};
use mesh_egress::{AgentMessage, Attribution};

/// The bot token every fake accepts.
const TOKEN: &str = "crash-token";
/// The message: three parts of at most 10 code points.
const BODY: &str = "alpha one. bravo two. charlie 3.";
/// The worker's name, the same after the restart (a restarted worker keeps its identity).
const HOLDER: &str = "worker-1";

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

fn connector(
    surface: &str,
    url: String,
    tries: u32,
    timeout_ms: u64,
) -> Result<(BoxedChannel, Surface), String> {
    let policy = SendPolicy::new()
        .max_tries(tries)
        .backoff(Duration::from_millis(1))
        .max_wait(Duration::from_millis(200))
        .request_timeout(Duration::from_millis(timeout_ms));
    let renderer = PlainText::new().with_limit(10);
    Ok(match surface {
        "slack" => (
            BoxedChannel::new(
                SlackChannel::new(TOKEN, "C1")
                    .with_renderer(renderer)
                    .base_url(url)
                    .policy(policy),
            ),
            Surface::Slack,
        ),
        "discord" => (
            BoxedChannel::new(
                DiscordChannel::new(TOKEN, "1")
                    .with_renderer(renderer)
                    .base_url(url)
                    .policy(policy),
            ),
            Surface::Discord,
        ),
        "telegram" => (
            BoxedChannel::new(
                TelegramChannel::new(TOKEN, "1")
                    .with_renderer(renderer)
                    .base_url(url)
                    .policy(policy),
            ),
            Surface::Telegram,
        ),
        other => return Err(format!("unknown surface {other:?}")),
    })
}

async fn run(mode: &str) -> Result<serde_json::Value, String> {
    let url = env("MESH_STORE_URL")?;
    let (channel, surface) = connector(
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
    let channel = store.channel(channel, surface);
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

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
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
