//! `turn --stream --deliver slack|discord|telegram` as a black box: the streamed reply goes onto
//! the surface's own stream (a Slack stream in the thread, Telegram drafts then one message,
//! Discord post-then-edit) on the loopback fakes, and `--json` prints every change of a message
//! as an edit (`"edit": true`) carrying the message's full current text.

mod example_binary;

use std::process::{Command, Output};
use std::time::Duration;

use example_binary::example_binary;
use mesh_egress::Surface;
use mesh_egress::testing::{FakeApi, FakeProvider, Step};
use serde_json::Value;

const TOKEN: &str = "123456:turn-stream-SECRET";
const THREAD: &str = "1700000000.000100";

// Each paragraph is longer than the default minimum block (80 bytes), so each is a block.
const P: [&str; 4] = [
    "The build finished a few minutes ago and every one of the integration tests passed.\n\n",
    "Deploying to staging now; the rollout usually takes about a minute to settle down.\n\n",
    "Production follows once the staging checks are green and the error budget allows it.\n\n",
    "I will post the link to the release notes here as soon as the new version is live.",
];

/// Every variable `--deliver` and `--stream` read, cleared so the host's own never leak in.
const ENV: [&str; 13] = [
    "SLACK_BOT_TOKEN",
    "MESH_SLACK_CHANNEL",
    "MESH_SLACK_API_URL",
    "MESH_SLACK_THREAD_TS",
    "MESH_SLACK_RECIPIENT_USER",
    "MESH_SLACK_RECIPIENT_TEAM",
    "DISCORD_BOT_TOKEN",
    "MESH_DISCORD_CHANNEL",
    "MESH_DISCORD_API_URL",
    "TELEGRAM_BOT_TOKEN",
    "MESH_TELEGRAM_CHAT",
    "MESH_TELEGRAM_API_URL",
    "MESH_STREAM_MODE",
];

fn whole_reply() -> String {
    P.map(str::trim).join("\n\n")
}

/// The flag and variables that point `--deliver` at `api` (Slack in a thread, for a
/// recipient; Telegram a private chat, where drafts work).
fn deliver(surface: Surface, api: &FakeApi) -> (&'static str, Env) {
    match surface {
        Surface::Slack => (
            "slack",
            vec![
                ("SLACK_BOT_TOKEN", TOKEN.to_owned()),
                ("MESH_SLACK_CHANNEL", "C024BE91L".to_owned()),
                ("MESH_SLACK_API_URL", api.base_url()),
                ("MESH_SLACK_THREAD_TS", THREAD.to_owned()),
                ("MESH_SLACK_RECIPIENT_USER", "U0123ABCD".to_owned()),
                ("MESH_SLACK_RECIPIENT_TEAM", "T0123ABCD".to_owned()),
            ],
        ),
        Surface::Discord => (
            "discord",
            vec![
                ("DISCORD_BOT_TOKEN", TOKEN.to_owned()),
                ("MESH_DISCORD_CHANNEL", "1100000000000000001".to_owned()),
                ("MESH_DISCORD_API_URL", api.base_url()),
            ],
        ),
        _ => (
            "telegram",
            vec![
                ("TELEGRAM_BOT_TOKEN", TOKEN.to_owned()),
                ("MESH_TELEGRAM_CHAT", "123456789".to_owned()),
                ("MESH_TELEGRAM_API_URL", api.base_url()),
            ],
        ),
    }
}

/// Extra variables for one run.
type Env = Vec<(&'static str, String)>;

async fn run(provider: &FakeProvider, envs: &[(&'static str, String)], args: &[&str]) -> Output {
    let mut command = Command::new(example_binary("turn"));
    command
        .args(args)
        .env("MESH_MODEL_BASE_URL", provider.base_url())
        .env("MESH_MODEL", "fake-model")
        .env_remove("MESH_GATE_JUDGE_MODEL")
        .env_remove("MESH_MODEL_FALLBACK_MODELS")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "50")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "5000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "3000");
    for name in ENV {
        command.env_remove(name);
    }
    for (key, value) in envs {
        command.env(key, value);
    }
    // The fakes run on this runtime's other worker while the child runs.
    tokio::task::spawn_blocking(move || command.output().expect("turn runs"))
        .await
        .expect("join")
}

async fn streaming_provider() -> FakeProvider {
    FakeProvider::start_steps([Step::chunks(P).chunk_delay(Duration::from_millis(150))])
        .await
        .expect("provider")
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .expect("utf-8 stdout")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a json line"))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn text(line: &Value) -> &str {
    line["text"].as_str().expect("text")
}

fn is_edit(line: &Value) -> bool {
    line.get("edit") == Some(&Value::Bool(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_surface_streams_one_message_and_prints_every_edit_with_its_full_text() {
    for surface in [Surface::Slack, Surface::Discord, Surface::Telegram] {
        let provider = streaming_provider().await;
        let api = FakeApi::start(surface, TOKEN).await.expect("fake api");
        let (flag, envs) = deliver(surface, &api);
        let out = run(
            &provider,
            &envs,
            &["--stream", "--deliver", flag, "--json", "status?"],
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{surface}: {}", stderr(&out));
        let lines = json_lines(&out);
        assert!(lines.len() >= 2, "{surface}: {lines:?}");

        // One growing message: shown once, then edited, each edit its full current text.
        assert!(lines.iter().all(|l| l["part"] == 1), "{surface}: {lines:?}");
        assert!(!is_edit(&lines[0]), "{surface}: {}", lines[0]);
        assert!(lines[1..].iter().all(is_edit), "{surface}: {lines:?}");
        for pair in lines.windows(2) {
            // Each edit carries the whole message, grown; only a draft made permanent may
            // keep the text it had.
            let kept = pair[0]["preview"] == true && pair[1].get("preview").is_none();
            assert!(
                text(&pair[1]).starts_with(text(&pair[0]))
                    && (kept || text(&pair[1]) != text(&pair[0])),
                "{surface}: an edit carries the whole message: {pair:?}"
            );
        }
        let last = lines.last().expect("a line");
        assert_eq!(text(last), whole_reply(), "{surface}");
        assert!(
            last["id"].as_str().is_some_and(|id| !id.is_empty()),
            "{surface}: {last}"
        );
        let t_ms: Vec<u64> = lines
            .iter()
            .map(|l| l["t_ms"].as_u64().expect("t_ms"))
            .collect();
        assert!(t_ms.windows(2).all(|w| w[0] <= w[1]), "{surface}: {t_ms:?}");

        // The surface's own mechanism, never the per-block fallback.
        match surface {
            Surface::Slack => {
                assert_eq!(api.calls_to("chat.startStream"), 1);
                assert_eq!(api.calls_to("chat.postMessage"), 0);
                let streams = api.streams();
                assert_eq!(streams.len(), 1);
                assert_eq!(streams[0].text, whole_reply());
                assert_eq!(streams[0].thread_ts.as_deref(), Some(THREAD));
                let start = api
                    .calls()
                    .into_iter()
                    .find(|c| c.method == "chat.startStream")
                    .expect("a start");
                assert_eq!(start.body["recipient_user_id"], "U0123ABCD");
                assert_eq!(start.body["recipient_team_id"], "T0123ABCD");
            }
            Surface::Discord => {
                assert_eq!(api.calls_to("createMessage"), 1);
                assert!(api.calls_to("editMessage") >= 1);
            }
            _ => {
                assert!(!api.drafts().is_empty());
                assert_eq!(api.calls_to("sendMessage"), 1);
                assert_eq!(api.received()[0].text, whole_reply());
                // Drafts are previews: flagged, without a message id; the message is not.
                assert!(
                    lines[..lines.len() - 1]
                        .iter()
                        .all(|l| l["preview"] == true)
                );
                assert!(last.get("preview").is_none(), "{last}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_json_stdout_reads_as_the_reply_each_block_once() {
    for surface in [Surface::Discord, Surface::Telegram] {
        let provider = streaming_provider().await;
        let api = FakeApi::start(surface, TOKEN).await.expect("fake api");
        let (flag, envs) = deliver(surface, &api);
        let out = run(
            &provider,
            &envs,
            &["--stream", "--deliver", flag, "status?"],
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{surface}: {}", stderr(&out));
        let stdout = String::from_utf8(out.stdout.clone()).expect("utf-8");
        // Blocks that went in one call print together, with their blank line between.
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines, P.map(str::trim), "{surface}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_mode_blocks_and_final_are_selectable_per_run() {
    let provider = streaming_provider().await;
    let api = FakeApi::start(Surface::Slack, TOKEN)
        .await
        .expect("fake api");
    let (flag, envs) = deliver(Surface::Slack, &api);
    let out = run(
        &provider,
        &envs,
        &[
            "--stream",
            "--stream-mode",
            "blocks",
            "--deliver",
            flag,
            "--json",
            "status?",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = json_lines(&out);
    // A message per block, as it arrives; blocks that arrived while Slack's budget (one post a
    // second) held the next call back went together, whole.
    let parts: Vec<u64> = lines
        .iter()
        .map(|l| l["part"].as_u64().expect("part"))
        .collect();
    let numbered: Vec<u64> = (1..=parts.len() as u64).collect();
    assert_eq!(parts, numbered);
    assert!(!lines.iter().any(is_edit));
    let joined: Vec<&str> = lines.iter().map(text).collect();
    assert_eq!(joined.join("\n\n"), whole_reply());
    assert_eq!(api.calls_to("chat.startStream"), 0);
    assert_eq!(api.calls_to("chat.postMessage"), lines.len());

    // `final` by the environment: one message once the reply is complete.
    let provider = streaming_provider().await;
    let api = FakeApi::start(Surface::Discord, TOKEN)
        .await
        .expect("fake api");
    let (flag, mut envs) = deliver(Surface::Discord, &api);
    envs.push(("MESH_STREAM_MODE", "final".to_owned()));
    let out = run(
        &provider,
        &envs,
        &["--stream", "--deliver", flag, "--json", "status?"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(text(&lines[0]), whole_reply());
    assert_eq!(api.calls_to("createMessage"), 1);
    assert_eq!(api.calls_to("editMessage"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_settings_that_cannot_work_are_usage_errors() {
    let provider = streaming_provider().await;
    let api = FakeApi::start(Surface::Slack, TOKEN)
        .await
        .expect("fake api");
    let (_, envs) = deliver(Surface::Slack, &api);
    let cases: [(&[&str], Env); 3] = [
        (&["--stream-mode", "blocks", "status?"], Vec::new()),
        (
            &[
                "--stream",
                "--stream-mode",
                "sideways",
                "--deliver",
                "slack",
                "status?",
            ],
            envs.clone(),
        ),
        (
            &["--stream", "--deliver", "slack", "status?"],
            envs.iter()
                .filter(|(k, _)| *k != "MESH_SLACK_RECIPIENT_TEAM")
                .cloned()
                .collect(),
        ),
    ];
    for (args, envs) in cases {
        let out = run(&provider, &envs, args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(out.stdout.is_empty());
    }
    assert!(api.calls().is_empty(), "a usage error sends nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_final_message_telegram_cannot_parse_goes_once_as_plain_text() {
    let provider = FakeProvider::start_steps([Step::chunks([
        "**Deployed** <v2> to production; ",
        "the error budget is fine & the notes are at [notes](https://example.com/notes).",
    ])])
    .await
    .expect("provider");
    let api = FakeApi::start(Surface::Telegram, TOKEN)
        .await
        .expect("fake api");
    api.script([mesh_egress::testing::FakeResponse::chat_refusal(
        Surface::Telegram,
        "Bad Request: can't parse entities: Unsupported start tag \"v2\" at byte offset 14",
    )]);
    let (flag, envs) = deliver(Surface::Telegram, &api);
    let out = run(
        &provider,
        &envs,
        &[
            "--stream",
            "--stream-mode",
            "final",
            "--deliver",
            flag,
            "--json",
            "status?",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        api.calls_to("sendMessage"),
        2,
        "the refused try, then the plain one"
    );
    let received = api.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(
        received[0].text,
        "Deployed <v2> to production; the error budget is fine & the notes are at notes (https://example.com/notes)."
    );
    assert!(received[0].body.get("parse_mode").is_none());
    assert_eq!(json_lines(&out).len(), 1);
}
