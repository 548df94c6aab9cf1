//! `turn --deliver slack|discord|telegram` as a black box: the reply goes through the real
//! connector to a loopback fake of the surface's API, stdout shows what went (with the platform
//! ids under `--json`), and the exit code says whether delivery worked. `cargo test` builds the
//! examples before it runs this file.

mod example_binary;

use std::path::PathBuf;
use std::process::{Command, Output};

use example_binary::example_binary;

use mesh_egress::Surface;
use mesh_egress::testing::{FakeApi, FakeProvider, FakeResponse};
use serde_json::{Value, json};

const TOKEN: &str = "123456:turn-deliver-SECRET";

/// Every variable `--deliver` reads, cleared so the host's own never leak into a run.
const DELIVER_ENV: [&str; 14] = [
    "SLACK_BOT_TOKEN",
    "MESH_SLACK_CHANNEL",
    "MESH_SLACK_API_URL",
    "MESH_SLACK_THREAD_TS",
    "MESH_SLACK_RECIPIENT_USER",
    "MESH_SLACK_RECIPIENT_TEAM",
    "MESH_STREAM_MODE",
    "DISCORD_BOT_TOKEN",
    "MESH_DISCORD_CHANNEL",
    "MESH_DISCORD_API_URL",
    "TELEGRAM_BOT_TOKEN",
    "MESH_TELEGRAM_CHAT",
    "MESH_TELEGRAM_TOPIC",
    "MESH_TELEGRAM_API_URL",
];

fn turn_binary() -> PathBuf {
    example_binary("turn")
}

/// The surface's name on the command line, and its token, target and API variables.
fn flag_and_env(surface: Surface) -> (&'static str, [&'static str; 3]) {
    match surface {
        Surface::Slack => (
            "slack",
            [
                "SLACK_BOT_TOKEN",
                "MESH_SLACK_CHANNEL",
                "MESH_SLACK_API_URL",
            ],
        ),
        Surface::Discord => (
            "discord",
            [
                "DISCORD_BOT_TOKEN",
                "MESH_DISCORD_CHANNEL",
                "MESH_DISCORD_API_URL",
            ],
        ),
        _ => (
            "telegram",
            [
                "TELEGRAM_BOT_TOKEN",
                "MESH_TELEGRAM_CHAT",
                "MESH_TELEGRAM_API_URL",
            ],
        ),
    }
}

/// The target each surface's run posts to (a Telegram chat id is numeric).
fn target(surface: Surface) -> &'static str {
    match surface {
        Surface::Slack => "C024BE91L",
        Surface::Discord => "1100000000000000001",
        _ => "-1001234567890",
    }
}

/// Extra variables for one run.
type Env = Vec<(&'static str, String)>;

/// The variables that point `--deliver <surface>` at `api`.
fn deliver_env(surface: Surface, api: &FakeApi) -> Env {
    let [token, to, url] = flag_and_env(surface).1;
    vec![
        (token, TOKEN.to_owned()),
        (to, target(surface).to_owned()),
        (url, api.base_url()),
    ]
}

/// Runs `turn` with `args` against `provider` and the extra variables `envs`.
async fn run(provider: &FakeProvider, envs: &[(&str, String)], args: &[&str]) -> Output {
    let mut command = Command::new(turn_binary());
    command
        .args(args)
        .env("MESH_MODEL_BASE_URL", provider.base_url())
        .env("MESH_MODEL", "fake-model")
        .env_remove("MESH_GATE_JUDGE_MODEL")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "50")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "3000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "2000");
    for name in DELIVER_ENV {
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

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

const SURFACES: [Surface; 3] = [Surface::Slack, Surface::Discord, Surface::Telegram];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_surface_receives_the_reply_and_stdout_shows_what_went_with_its_id() {
    for surface in SURFACES {
        let (flag, _) = flag_and_env(surface);
        let provider = FakeProvider::start([FakeResponse::completion(
            "Deploy **done**. @everyone <@&41771983423143936>",
        )])
        .await
        .expect("provider");
        let api = FakeApi::start(surface, TOKEN).await.expect("fake api");

        let out = run(
            &provider,
            &deliver_env(surface, &api),
            &["--deliver", flag, "--json", "Is the deploy done?"],
        )
        .await;

        assert_eq!(out.status.code(), Some(0), "{surface}: {}", stderr(&out));
        let received = api.received();
        assert_eq!(received.len(), 1, "{surface}");
        let sent = &received[0];
        assert_eq!(sent.target, target(surface), "{surface}");
        assert!(sent.text.contains("done"), "{surface}: {}", sent.text);
        let lines: Vec<Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(
            lines,
            [json!({"part": 1, "text": sent.text, "id": sent.id})],
            "{surface}"
        );
        match surface {
            Surface::Slack => assert!(sent.text.contains("*done*"), "mrkdwn: {}", sent.text),
            Surface::Discord => {
                assert_eq!(sent.body["allowed_mentions"], json!({"parse": []}));
                assert!(sent.text.contains("**done**"), "markdown: {}", sent.text);
            }
            _ => {
                assert_eq!(sent.body["parse_mode"], "HTML");
                assert!(sent.text.contains("<b>done</b>"), "html: {}", sent.text);
            }
        }
        let logs = stderr(&out);
        assert!(
            !logs.contains(TOKEN),
            "{surface}: the token was logged: {logs}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_goes_as_numbered_parts_and_plain_stdout_prints_each_parts_text() {
    let paragraph = "Every service was redeployed and its health checks passed. ".repeat(20);
    let reply = [paragraph.as_str(); 4].join("\n\n");
    let provider = FakeProvider::start([
        FakeResponse::completion(&reply),
        FakeResponse::completion(&reply),
    ])
    .await
    .expect("provider");
    let api = FakeApi::start(Surface::Discord, TOKEN)
        .await
        .expect("fake api");
    let env = deliver_env(Surface::Discord, &api);

    let out = run(
        &provider,
        &env,
        &["--deliver", "discord", "--json", "status?"],
    )
    .await;

    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let received = api.received();
    assert!(received.len() >= 2, "{} parts", received.len());
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let expected: Vec<Value> = received
        .iter()
        .enumerate()
        .map(|(i, sent)| json!({"part": i + 1, "text": sent.text, "id": sent.id}))
        .collect();
    assert_eq!(lines, expected);
    for sent in &received {
        assert_eq!(sent.body["allowed_mentions"], json!({"parse": []}));
    }

    // Without --json, the same delivery prints each part's text and a newline.
    let plain = run(
        &provider,
        &env,
        &["--channel", "discord", "--deliver", "discord", "status?"],
    )
    .await;
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    let second: Vec<String> = api.texts().split_off(received.len());
    let printed: String = second.iter().map(|text| format!("{text}\n")).collect();
    assert_eq!(stdout(&plain), printed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_the_surface_refuses_exits_1_with_one_error_line_and_no_cause() {
    for surface in SURFACES {
        let (flag, _) = flag_and_env(surface);
        let provider = FakeProvider::start([FakeResponse::completion("All green.")])
            .await
            .expect("provider");
        let api = FakeApi::start(surface, TOKEN).await.expect("fake api");
        api.script([FakeResponse::chat_refusal(surface, "MARKER-not_in_channel")]);

        let out = run(
            &provider,
            &deliver_env(surface, &api),
            &["--deliver", flag, "hi"],
        )
        .await;

        assert_eq!(out.status.code(), Some(1), "{surface}: {}", stderr(&out));
        assert!(
            stdout(&out).is_empty(),
            "{surface}: nothing went, nothing printed"
        );
        let logs = stderr(&out);
        let errors: Vec<&str> = logs.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{surface}: {logs}");
        assert!(errors[0].contains(flag), "{surface}: {}", errors[0]);
        assert!(
            !logs.contains("MARKER"),
            "{surface}: the cause was shown: {logs}"
        );
        assert!(
            !logs.contains(TOKEN),
            "{surface}: the token was shown: {logs}"
        );
        assert_eq!(api.attempts(), 1, "{surface}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_usage_errors_exit_2_with_one_line_and_send_nothing() {
    let provider = FakeProvider::start([]).await.expect("provider");
    let api = FakeApi::start(Surface::Slack, TOKEN)
        .await
        .expect("fake api");
    let slack = deliver_env(Surface::Slack, &api);
    let without =
        |name: &str| -> Env { slack.iter().filter(|(k, _)| *k != name).cloned().collect() };
    /// What is wrong, the environment, and the arguments.
    type Case<'a> = (&'a str, Env, &'a [&'a str]);
    let cases: [Case<'_>; 9] = [
        (
            "a different --channel",
            slack.clone(),
            &["--channel", "discord", "--deliver", "slack", "hi"],
        ),
        (
            "plain is no chat surface",
            slack.clone(),
            &["--channel", "plain", "--deliver", "slack", "hi"],
        ),
        (
            "an unknown surface",
            slack.clone(),
            &["--deliver", "irc", "hi"],
        ),
        (
            "no token",
            without("SLACK_BOT_TOKEN"),
            &["--deliver", "slack", "hi"],
        ),
        (
            "no target",
            without("MESH_SLACK_CHANNEL"),
            &["--deliver", "slack", "hi"],
        ),
        (
            "an API base that is no URL",
            [
                without("MESH_SLACK_API_URL"),
                vec![("MESH_SLACK_API_URL", "slack.example".to_owned())],
            ]
            .concat(),
            &["--deliver", "slack", "hi"],
        ),
        (
            "a destination no Slack id can be",
            [
                without("MESH_SLACK_CHANNEL"),
                vec![("MESH_SLACK_CHANNEL", "C0 1".to_owned())],
            ]
            .concat(),
            &["--deliver", "slack", "hi"],
        ),
        (
            "a recipient user without a team",
            [
                slack.clone(),
                vec![("MESH_SLACK_RECIPIENT_USER", "U1".to_owned())],
            ]
            .concat(),
            &["--deliver", "slack", "hi"],
        ),
        (
            "a blank conversation",
            slack.clone(),
            &["--deliver", "slack", "--conversation", " ", "hi"],
        ),
    ];
    for (name, env, args) in cases {
        let out = run(&provider, &env, args).await;
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{name}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.starts_with("error: "), "{name}: {err}");
        assert!(!err.contains(TOKEN), "{name}: {err}");
    }
    assert!(provider.received().is_empty(), "usage errors ask no model");
    assert_eq!(api.attempts(), 0, "usage errors send nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reply_goes_to_the_thread_or_topic_the_surfaces_variables_name() {
    use mesh_egress::Address;
    use mesh_egress::address::{SlackAddress, TelegramAddress};
    let cases: [(Surface, (&str, &str), Address); 2] = [
        (
            Surface::Slack,
            ("MESH_SLACK_THREAD_TS", "1700000000.000100"),
            SlackAddress::new(target(Surface::Slack))
                .in_thread("1700000000.000100")
                .into(),
        ),
        (
            Surface::Telegram,
            ("MESH_TELEGRAM_TOPIC", "42"),
            TelegramAddress::new(target(Surface::Telegram))
                .in_topic(42)
                .into(),
        ),
    ];
    for (surface, (variable, value), expected) in cases {
        let provider = FakeProvider::start([FakeResponse::completion("Done.")])
            .await
            .expect("provider");
        let api = FakeApi::start(surface, TOKEN).await.expect("fake api");
        let env = [
            deliver_env(surface, &api),
            vec![(variable, value.to_owned())],
        ]
        .concat();
        let (flag, _) = flag_and_env(surface);
        let out = run(&provider, &env, &["--deliver", flag, "hi"]).await;
        assert_eq!(out.status.code(), Some(0), "{surface}: {}", stderr(&out));
        assert_eq!(api.destinations(), [expected], "{surface}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holding_line_and_its_follow_up_both_go_through_the_connector() {
    let provider = FakeProvider::start((0..3).map(|_| FakeResponse::status(503)))
        .await
        .expect("provider")
        .otherwise(FakeResponse::completion("The real answer."));
    let api = FakeApi::start(Surface::Telegram, TOKEN)
        .await
        .expect("fake api");
    let mut env = deliver_env(Surface::Telegram, &api);
    env.extend([
        ("MESH_MODEL_RETRY_ATTEMPTS", "3".to_owned()),
        ("MESH_FOLLOW_UP_DELAY_MS", "10".to_owned()),
        ("MESH_FOLLOW_UP_ATTEMPTS", "2".to_owned()),
    ]);

    let out = run(
        &provider,
        &env,
        &["--deliver", "telegram", "--follow-up", "status?"],
    )
    .await;

    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let texts = api.texts();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_ne!(texts[0], "The real answer.");
    assert_eq!(texts[1], "The real answer.");
    assert_eq!(stdout(&out), format!("{}\n{}\n", texts[0], texts[1]));
}

/// Telegram's description when its parser rejects the formatted text (the Bot API's own words).
const CANT_PARSE: &str =
    "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 11";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_telegram_cannot_parse_goes_once_as_plain_text_and_exits_0() {
    let provider = FakeProvider::start([FakeResponse::completion(
        "**Deployed** <v2> & [notes](https://example.com/notes)",
    )])
    .await
    .expect("provider");
    let api = FakeApi::start(Surface::Telegram, TOKEN)
        .await
        .expect("fake api");
    api.script([FakeResponse::chat_refusal(Surface::Telegram, CANT_PARSE)]);

    let out = run(
        &provider,
        &deliver_env(Surface::Telegram, &api),
        &["--deliver", "telegram", "--json", "ship it"],
    )
    .await;

    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The refused try, then one message: the text a person reads, not parsed as anything.
    assert_eq!(api.attempts(), 2);
    let received = api.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(
        received[0].text,
        "Deployed <v2> & notes (https://example.com/notes)"
    );
    assert!(
        received[0].body.get("parse_mode").is_none(),
        "{}",
        received[0].body
    );
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], json!(received[0].id));
    assert!(
        stderr(&out).contains("plain text"),
        "the fallback is logged: {}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains(TOKEN));
}
