//! `turn --stream` as a black box against the loopback fake provider, in real time with short
//! delays: parts appear while the model is still writing, `--json` lines carry a non-decreasing
//! `t_ms`, a stall mid-stream is continued on the fallback with no repeated text, and an error
//! after some parts ends with Layer C's line for the rest, and events whose lines end in a
//! lone CR are read on the primary like any other.

mod example_binary;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use example_binary::example_binary;
use mesh_egress::model::ModelError;
use mesh_egress::testing::{FakeProvider, SseLineEnding, Step};

const MS: fn(u64) -> Duration = Duration::from_millis;

// Each paragraph is longer than the default minimum block (80 bytes), so each is a block.
const P1: &str =
    "The build finished a few minutes ago and every one of the integration tests passed.\n\n";
const P2: &str =
    "Deploying to staging now; the rollout usually takes about a minute to settle down.\n\n";
const P3: &str =
    "Production follows once the staging checks are green and the error budget allows it.\n\n";
const P4: &str =
    "I will post the link to the release notes here as soon as the new version is live.\n\n";

/// What one run printed: each stdout line with when it arrived, when the process ended, its
/// exit status and stderr.
struct Run {
    lines: Vec<(Instant, String)>,
    ended: Instant,
    status: ExitStatus,
    stderr: String,
}

/// Runs `turn` with `args` against `base_url`, reading stdout line by line as it is written.
async fn run(base_url: &str, envs: &[(&str, &str)], args: &[&str]) -> Run {
    let mut command = Command::new(example_binary("turn"));
    command
        .args(args)
        .env_remove("MESH_GATE_JUDGE_MODEL")
        .env_remove("MESH_MODEL_FALLBACK_MODELS")
        .env_remove("MESH_STREAM_MODE")
        .env("MESH_MODEL_BASE_URL", base_url)
        .env("MESH_MODEL", "fake-model")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "50")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "5000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "3000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in envs {
        command.env(key, value);
    }
    // The fake provider runs on this runtime's other worker while the child runs.
    tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().expect("turn runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().take(1000) {
            lines.push((Instant::now(), line.expect("utf-8 line")));
        }
        let output = child.wait_with_output().expect("turn ends");
        Run {
            lines,
            ended: Instant::now(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    })
    .await
    .expect("join")
}

fn trimmed(blocks: &[&str]) -> Vec<String> {
    blocks.iter().map(|b| b.trim().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_parts_appear_while_the_model_writes_each_with_a_non_decreasing_t_ms() {
    let provider = FakeProvider::start_steps([Step::chunks([P1, P2, P3, P4]).chunk_delay(MS(200))])
        .await
        .expect("provider");
    let run = run(
        &provider.base_url(),
        &[],
        &["--stream", "--json", "status?"],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let first = run.lines.first().expect("a part").0;
    // Three more chunks and the finish chunk, 200 ms apart, come after the first part.
    assert!(
        run.ended - first >= MS(500),
        "the first part appeared only {:?} before the end",
        run.ended - first
    );
    let parsed: Vec<serde_json::Value> = run
        .lines
        .iter()
        .map(|(_, l)| serde_json::from_str(l).expect("a json line"))
        .collect();
    let parts: Vec<u64> = parsed
        .iter()
        .map(|v| v["part"].as_u64().expect("part"))
        .collect();
    assert_eq!(parts, [1, 2, 3, 4]);
    let texts: Vec<String> = parsed
        .iter()
        .map(|v| v["text"].as_str().expect("text").to_owned())
        .collect();
    assert_eq!(texts, trimmed(&[P1, P2, P3, P4]));
    let t_ms: Vec<u64> = parsed
        .iter()
        .map(|v| v["t_ms"].as_u64().expect("t_ms"))
        .collect();
    assert!(t_ms.windows(2).all(|w| w[0] <= w[1]), "{t_ms:?}");
    assert!(
        t_ms[3] - t_ms[0] >= 400,
        "parts were stamped as they went: {t_ms:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_mid_stream_is_continued_on_the_fallback_with_no_repeated_text() {
    let provider = FakeProvider::start_steps([
        Step::chunks([P1, "Deploying to staging now; ", "the rollout"])
            .chunk_delay(MS(50))
            .stall_after(2),
        Step::chunks([P1, P2, P3]),
    ])
    .await
    .expect("provider");
    let run = run(
        &provider.base_url(),
        &[
            ("MESH_MODEL_FALLBACK_MODELS", "fallback-model"),
            ("MESH_MODEL_STREAM_IDLE_TIMEOUT_MS", "300"),
        ],
        &["--stream", "status?"],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let lines: Vec<String> = run.lines.into_iter().map(|(_, l)| l).collect();
    assert_eq!(lines, trimmed(&[P1, P2, P3]));
    assert_eq!(provider.received().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_two_parts_ends_with_a_holding_line_for_the_rest_and_never_the_cause() {
    let provider = FakeProvider::start_steps([Step::chunks([P1, P2, P3])
        .chunk_delay(MS(20))
        .fail_after(2, || ModelError::status(500))])
    .await
    .expect("provider");
    let run = run(&provider.base_url(), &[], &["--stream", "status?"]).await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let lines: Vec<String> = run.lines.into_iter().map(|(_, l)| l).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[..2], trimmed(&[P1, P2]));
    assert!(!lines[2].contains("500"), "{}", lines[2]);
    assert!(!lines[2].contains("Production"), "{}", lines[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_lines_end_in_a_lone_cr_is_answered_by_the_primary() {
    // The WHATWG standard allows CR-only line ends and some gateways send them; the fallback
    // would answer too, so only a decoder that reads the primary's stream passes.
    let provider = FakeProvider::start_steps([
        Step::chunks([P1, P2, P3])
            .chunk_delay(MS(10))
            .keep_alive()
            .line_ending(SseLineEnding::Cr),
        Step::chunks(["The fallback answered.\n\n"]),
    ])
    .await
    .expect("provider");
    let run = run(
        &provider.base_url(),
        &[("MESH_MODEL_FALLBACK_MODELS", "fallback-model")],
        &["--stream", "status?"],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let lines: Vec<String> = run.lines.into_iter().map(|(_, l)| l).collect();
    assert_eq!(lines, trimmed(&[P1, P2, P3]));
    let models: Vec<serde_json::Value> = provider
        .received()
        .into_iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(models, ["fake-model"]);
}
