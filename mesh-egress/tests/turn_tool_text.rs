//! `turn` as a black box against what open-weight models write into `content` when served
//! without their tool parser, and against an agent's control tokens: nothing of it reaches
//! stdout. Gate off and on, whole and streamed, against the loopback fake provider.

mod example_binary;

use std::process::{Command, Output};
use std::time::Duration;

use example_binary::example_binary;
use mesh_egress::testing::{FakeProvider, FakeResponse, Step};

/// Layer A's corpus of text tool calls (one sample of each format is played).
const CORPUS: &str = include_str!("../../tests/tests/data/text_tool_calls.json");

/// What the retry (or the fallback) answers.
const ANSWER: &str = "It is 18°C in Paris.";

// Longer than the default minimum block (80 bytes), so it is a block of its own.
const P1: &str =
    "The build finished a few minutes ago and every one of the integration tests passed.\n\n";

async fn run(base_url: &str, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(example_binary("turn"));
    command
        .args(args)
        .env_remove("MESH_GATE_JUDGE_MODEL")
        .env_remove("MESH_MODEL_FALLBACK_MODELS")
        .env_remove("MESH_SILENCE_TOKENS")
        .env_remove("MESH_STORE_URL")
        .env("MESH_MODEL_BASE_URL", base_url)
        .env("MESH_MODEL", "fake-model")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "20")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "3000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "2000");
    for (key, value) in envs {
        command.env(key, value);
    }
    // The fake provider runs on this runtime's other worker while the child runs.
    tokio::task::spawn_blocking(move || command.output().expect("turn runs"))
        .await
        .expect("join")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// One call sample per format of the corpus: (format, text).
fn one_per_format() -> Vec<(String, String)> {
    let corpus: serde_json::Value = serde_json::from_str(CORPUS).expect("corpus");
    let mut seen: Vec<(String, String)> = Vec::new();
    for sample in corpus["calls"].as_array().expect("calls") {
        let format = sample["format"].as_str().expect("format").to_owned();
        if sample.get("calls").is_some() && !seen.iter().any(|(f, _)| *f == format) {
            seen.push((format, sample["text"].as_str().expect("text").to_owned()));
        }
    }
    seen
}

/// Bits of markup no format's call leaves out; none may reach stdout.
fn leaks(printed: &str) -> Option<&'static str> {
    [
        "tool_call",
        "TOOL_CALLS",
        "python_tag",
        "function=",
        "tool▁",
        "functools",
        ">>>",
        "tool_code",
        "to=functions",
        "\"name\"",
        "get_weather(",
        "<|",
    ]
    .into_iter()
    .find(|marker| printed.contains(marker))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_familys_text_tool_call_is_a_failed_attempt_and_the_retry_answers_gate_off_and_on() {
    let formats = one_per_format();
    assert!(formats.len() >= 15, "{} formats", formats.len());
    for gate in ["off", "on"] {
        for (format, text) in &formats {
            let provider = FakeProvider::start([FakeResponse::completion(text)])
                .await
                .expect("provider")
                .otherwise(FakeResponse::completion(ANSWER));
            let out = run(
                &provider.base_url(),
                &[],
                &["--gate", gate, "What's the weather in Paris?"],
            )
            .await;
            assert_eq!(out.status.code(), Some(0), "{format}: {}", stderr(&out));
            let printed = stdout(&out);
            assert_eq!(printed, format!("{ANSWER}\n"), "{format} (gate {gate})");
            assert_eq!(provider.received().len(), 2, "{format}: one retry");
            assert!(
                stderr(&out).contains("malformed_tool_call"),
                "{format}: the failed attempt is logged by its class"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_tool_call_on_the_primary_falls_back_and_one_on_every_try_ends_in_layer_c() {
    let call = r#"<tool_call>{"name": "search_logs", "arguments": {"q": "deploy"}}</tool_call>"#;
    // One attempt per route: the primary's call is a failed attempt, the fallback answers.
    let provider = FakeProvider::start([
        FakeResponse::completion(call),
        FakeResponse::completion(ANSWER),
    ])
    .await
    .expect("provider");
    let out = run(
        &provider.base_url(),
        &[
            ("MESH_MODEL_RETRY_ATTEMPTS", "1"),
            ("MESH_MODEL_FALLBACK_MODELS", "backup-model"),
        ],
        &["Did the deploy go out?"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{ANSWER}\n"));
    let received = provider.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].body["model"], "backup-model");

    // Every try writes a call: Layer C's holding line, never the markup.
    for gate in ["off", "on"] {
        let provider = FakeProvider::start([])
            .await
            .expect("provider")
            .otherwise(FakeResponse::completion(call));
        let out = run(
            &provider.base_url(),
            &[],
            &["--gate", gate, "Did the deploy go out?"],
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let printed = stdout(&out);
        assert_eq!(printed.lines().count(), 1, "a holding line: {printed:?}");
        assert_eq!(leaks(&printed), None, "{printed:?}");
        assert!(provider.received().len() >= 3, "retried before Layer C");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_is_only_a_silence_token_prints_nothing_and_exits_0() {
    for gate in ["off", "on"] {
        for (token, mode) in [("NO_REPLY", "interactive"), ("HEARTBEAT_OK", "proactive")] {
            let provider = FakeProvider::start([FakeResponse::completion(token)])
                .await
                .expect("provider");
            let out = run(
                &provider.base_url(),
                &[("MESH_SILENCE_TOKENS", "NO_REPLY, HEARTBEAT_OK")],
                &["--gate", gate, "--mode", mode, "Anything new?"],
            )
            .await;
            assert_eq!(out.status.code(), Some(0), "{token}: {}", stderr(&out));
            assert_eq!(stdout(&out), "", "{token} (gate {gate}, {mode}): silence");
            assert_eq!(
                provider.received().len(),
                1,
                "silence is not a failure: no retry"
            );
        }
    }
    // Without the tokens declared, the same reply is an ordinary answer.
    let provider = FakeProvider::start([FakeResponse::completion("NO_REPLY")])
        .await
        .expect("provider");
    let out = run(&provider.base_url(), &[], &["Anything new?"]).await;
    assert_eq!(stdout(&out), "NO_REPLY\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silence_token_after_an_answer_prints_only_the_answer() {
    for gate in ["off", "on"] {
        for reply in [
            "The deploy finished at 09:12.\n\nNO_REPLY",
            "The deploy finished at 09:12. NO_REPLY",
        ] {
            let provider = FakeProvider::start([FakeResponse::completion(reply)])
                .await
                .expect("provider");
            let out = run(
                &provider.base_url(),
                &[("MESH_SILENCE_TOKENS", "NO_REPLY")],
                &["--gate", gate, "Did the deploy go out?"],
            )
            .await;
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_eq!(stdout(&out), "The deploy finished at 09:12.\n", "{reply:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_opens_with_tool_call_markup_fails_its_attempt_before_anything_is_shown() {
    for gate in ["off", "on"] {
        let provider = FakeProvider::start_steps([
            Step::chunks([
                "<tool_",
                "call>\n{\"name\": \"get_weather\", ",
                "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
            ]),
            Step::chunks(["It is 18°C ", "in Paris."]),
        ])
        .await
        .expect("provider");
        let out = run(
            &provider.base_url(),
            &[],
            &["--stream", "--gate", gate, "What's the weather in Paris?"],
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), format!("{ANSWER}\n"), "gate {gate}");
        assert_eq!(provider.received().len(), 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markup_after_delivered_blocks_is_cut_and_layer_c_answers_for_the_rest() {
    let provider = FakeProvider::start_steps([Step::chunks([
        P1,
        "<tool_call>{\"name\": \"notify_channel\", \"arguments\": {\"channel\": \"#ops\"}}</tool_call>",
    ])
    .chunk_delay(Duration::from_millis(100))])
    .await
    .expect("provider");
    let out = run(
        &provider.base_url(),
        &[],
        &["--stream", "--gate", "on", "Is the build green?"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = stdout(&out);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "the delivered block, then Layer C's line: {printed:?}"
    );
    assert_eq!(lines[0], P1.trim());
    assert_eq!(leaks(&printed), None, "{printed:?}");
    assert!(
        stderr(&out).contains("tool.call_markup"),
        "the gate's rule is logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_silence_token_split_across_deltas_never_shows() {
    for (chunks, expected) in [
        (
            vec!["Done, the ", "report is sent.\n\nNO_", "REP", "LY"],
            "Done, the report is sent.\n",
        ),
        (vec!["NO_", "REPLY"], ""),
    ] {
        let provider = FakeProvider::start_steps([Step::chunks(chunks.clone())])
            .await
            .expect("provider");
        let out = run(
            &provider.base_url(),
            &[("MESH_SILENCE_TOKENS", "NO_REPLY")],
            &["--stream", "Send the report"],
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), expected, "{chunks:?}");
        assert_eq!(provider.received().len(), 1, "{chunks:?}: no retry");
    }
}
