//! The `turn` example as a black box: its flags, exit codes and stdout contract, against a
//! loopback fake provider. `cargo test` builds the examples before it runs this file.

mod example_binary;

use std::path::PathBuf;
use std::process::{Command, Output};

use example_binary::example_binary;

use mesh_egress::Markdown;
use mesh_egress::channel::{PlainText, Render};
use mesh_egress::testing::{FakeProvider, FakeResponse};

const CORPUS: &str = include_str!("data/gate_corpus.json");

fn turn_binary() -> PathBuf {
    example_binary("turn")
}

/// Runs `turn` with `args` against `base_url` (or without the model variables when `None`).
async fn run(base_url: Option<&str>, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(turn_binary());
    command
        .args(args)
        .env_remove("MESH_MODEL_BASE_URL")
        .env_remove("MESH_MODEL")
        .env_remove("MESH_GATE_JUDGE_MODEL")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "50")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "3000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "2000");
    if let Some(base_url) = base_url {
        command
            .env("MESH_MODEL_BASE_URL", base_url)
            .env("MESH_MODEL", "fake-model");
    }
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
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_turn_prints_exactly_the_rendered_answer() {
    let provider = FakeProvider::start([FakeResponse::completion("Deploy **done**.")])
        .await
        .expect("provider");
    let out = run(Some(&provider.base_url()), &[], &["Is the deploy done?"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Deploy done.\n");
    let logs = stderr(&out);
    assert!(
        logs.lines().all(|l| l.starts_with('{')),
        "stderr is JSON lines: {logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_gives_one_object_per_part_with_the_exact_telegram_payload() {
    let provider = FakeProvider::start([FakeResponse::completion("**Hi** <you> & me")])
        .await
        .expect("provider");
    let out = run(
        Some(&provider.base_url()),
        &[],
        &["--channel", "telegram", "--json", "hello"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        lines,
        [serde_json::json!({"part": 1, "text": "<b>Hi</b> &lt;you&gt; &amp; me"})]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_end_as_the_contract_says_and_never_print_the_cause() {
    /// Name, script, extra args, and the exact stdout (`None`: exactly one line).
    type Case<'a> = (&'a str, Vec<FakeResponse>, &'a [&'a str], Option<&'a str>);
    let cases: [Case<'_>; 3] = [
        (
            "proactive, everything down: silence",
            vec![],
            &["--mode", "proactive"],
            Some(""),
        ),
        (
            "interactive, everything down: a holding line",
            vec![],
            &[],
            None,
        ),
        (
            "a 401: a handoff",
            vec![FakeResponse::error(
                401,
                "invalid_api_key",
                "Incorrect API key provided: sk-proj-abcd",
            )],
            &[],
            None,
        ),
    ];
    for (name, script, extra, expected) in cases {
        let provider = FakeProvider::start(script)
            .await
            .expect("provider")
            .otherwise(FakeResponse::error(
                503,
                "overloaded_error",
                "MARKER-upstream-down",
            ));
        let mut args = extra.to_vec();
        args.push("status?");
        let out = run(Some(&provider.base_url()), &[], &args).await;
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let printed = stdout(&out);
        match expected {
            Some(exact) => assert_eq!(printed, exact, "{name}"),
            None => assert_eq!(printed.lines().count(), 1, "{name}: {printed}"),
        }
        for leak in ["MARKER", "invalid_api_key", "sk-proj", "503", "401"] {
            assert!(!printed.contains(leak), "{name}: printed {printed:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_prints_the_real_answer_after_the_holding_line() {
    let provider = FakeProvider::start((0..3).map(|_| FakeResponse::status(503)))
        .await
        .expect("provider")
        .otherwise(FakeResponse::completion("The real answer."));
    let out = run(
        Some(&provider.base_url()),
        &[
            ("MESH_MODEL_RETRY_ATTEMPTS", "3"),
            ("MESH_FOLLOW_UP_DELAY_MS", "10"),
            ("MESH_FOLLOW_UP_ATTEMPTS", "2"),
        ],
        &["--follow-up", "status?"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = stdout(&out);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "{printed}");
    assert_ne!(lines[0], "The real answer.");
    assert_eq!(lines[1], "The real answer.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_2_with_one_plain_line() {
    let provider = FakeProvider::start([]).await.expect("provider");
    let url = provider.base_url();
    let cases: [(Option<&str>, &[&str]); 6] = [
        (Some(&url), &["--channel", "irc", "hi"]),
        (Some(&url), &["--gate", "maybe", "hi"]),
        (Some(&url), &["--bogus", "hi"]),
        (Some(&url), &[]),
        (Some(&url), &["one", "two"]),
        (None, &["hi"]),
    ];
    for (base_url, args) in cases {
        let out = run(base_url, &[], args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stdout(&out).is_empty(), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    assert!(provider.received().is_empty(), "usage errors ask no model");
}

/// The gate's "never" corpus, served by a fake provider as the completion: none of it reaches
/// stdout of `turn --gate on`, and the benign look-alikes arrive intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_on_keeps_every_never_string_off_stdout_and_lets_benign_text_through() {
    let corpus: serde_json::Value = serde_json::from_str(CORPUS).expect("corpus");
    let canary = corpus["canary"].as_str().unwrap_or_default().to_owned();
    let prompt_file = std::env::temp_dir().join(format!("turn-cli-prompt-{}", std::process::id()));
    std::fs::write(
        &prompt_file,
        corpus["system_prompt"].as_str().expect("prompt"),
    )
    .expect("write prompt");
    let prompt_path = prompt_file.to_str().expect("utf-8 path").to_owned();
    let provider = FakeProvider::start([]).await.expect("provider");
    let url = provider.base_url();

    let mut checked = 0;
    for entry in corpus["never"].as_array().expect("never") {
        let candidate = entry["candidate"].as_str().expect("candidate");
        if !canary.is_empty() && candidate.contains(&canary) {
            continue; // `turn` has no flag for a per-request canary
        }
        let leak = entry["leak"].as_str().expect("leak");
        let user = entry["user"].as_str().expect("user");
        provider.push([FakeResponse::completion(candidate)]);
        let out = run(
            Some(&url),
            &[],
            &["--gate", "on", "--system-prompt", &prompt_path, user],
        )
        .await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            entry["id"],
            stderr(&out)
        );
        let printed = stdout(&out);
        assert!(
            !printed.contains(leak),
            "{}: {leak:?} reached stdout: {printed}",
            entry["id"]
        );
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} never-strings checked");

    for entry in corpus["benign"].as_array().expect("benign") {
        let candidate = entry["candidate"].as_str().expect("candidate");
        let user = entry["user"].as_str().expect("user");
        provider.push([FakeResponse::completion(candidate)]);
        let out = run(
            Some(&url),
            &[],
            &["--gate", "on", "--system-prompt", &prompt_path, user],
        )
        .await;
        let expected: String = PlainText::new()
            .render(&Markdown::new(candidate))
            .expect("renders")
            .iter()
            .map(|part| format!("{part}\n"))
            .collect();
        assert_eq!(
            stdout(&out),
            expected,
            "{} did not arrive intact",
            entry["id"]
        );
    }
    let _ = std::fs::remove_file(prompt_file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_renders_to_nothing_ends_as_the_contract_says_on_every_channel() {
    // A lone quote marker, an empty fence, only a link reference definition: nothing to show.
    for body in [">", "```\n```", "[a]: https://example.com"] {
        for channel in ["plain", "slack", "discord", "telegram"] {
            let provider = FakeProvider::start([FakeResponse::completion(body)])
                .await
                .expect("provider");
            let interactive = run(
                Some(&provider.base_url()),
                &[],
                &["--channel", channel, "Say something"],
            )
            .await;
            assert_eq!(
                interactive.status.code(),
                Some(0),
                "{body:?} on {channel}: {}",
                stderr(&interactive)
            );
            let seen = stdout(&interactive);
            assert!(
                !seen.trim().is_empty() && !seen.contains("render"),
                "{body:?} on {channel}: a holding line, got {seen:?}"
            );

            let provider = FakeProvider::start([FakeResponse::completion(body)])
                .await
                .expect("provider");
            let proactive = run(
                Some(&provider.base_url()),
                &[],
                &["--mode", "proactive", "--channel", channel, "Digest"],
            )
            .await;
            assert_eq!(proactive.status.code(), Some(0), "{}", stderr(&proactive));
            assert_eq!(stdout(&proactive), "", "{body:?} on {channel}: silence");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_inside_geminis_openai_compatible_error_is_retried_after_the_clamped_hint() {
    // Gemini's OpenAI-compatible endpoint (RooCodeInc/Roo-Code#3883): the native document, a
    // per-minute free-tier QuotaFailure with RetryInfo 26s, is the string in error.message.
    // Read as prose it says "exceeded your current quota" and would be handed to the fallback.
    let native = serde_json::json!({"error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
                "quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier",
                "quotaValue": "250000"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}]}});
    let pretty = serde_json::to_string_pretty(&native).expect("json") + "\n";
    let body = serde_json::json!({"error": {
        "message": pretty, "code": 429, "status": "Too Many Requests"}});
    let provider = FakeProvider::start([
        FakeResponse::raw(429, body.to_string()),
        FakeResponse::completion("The deploy is done."),
    ])
    .await
    .expect("provider")
    .otherwise(FakeResponse::completion("The fallback answered."));
    let started = std::time::Instant::now();
    let out = run(
        Some(&provider.base_url()),
        &[
            ("MESH_MODEL_RETRY_MAX_DELAY_MS", "300"),
            ("MESH_MODEL_FALLBACK_MODELS", "fallback-model"),
        ],
        &["status?"],
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "The deploy is done.\n");
    let models: Vec<serde_json::Value> = provider
        .received()
        .into_iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(
        models,
        ["fake-model", "fake-model"],
        "answered by the primary"
    );
    let failed: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "model attempt failed")
        .collect();
    assert_eq!(failed.len(), 1, "{}", stderr(&out));
    let fields = &failed[0]["fields"];
    assert_eq!(fields["classification"], "rate_limited");
    assert_eq!(fields["retryable"], true);
    // The 26 s hint, clamped to the 300 ms max delay, and waited in full.
    assert_eq!(fields["wait_ms"], 300, "{fields}");
    assert!(
        elapsed >= std::time::Duration::from_millis(300),
        "{elapsed:?}"
    );
}
