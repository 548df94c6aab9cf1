//! The `ingress` example as a black box: JSON lines of surface events in, one decision line out
//! per input line, in order; `{"error": ...}` for a line it cannot read, and the run goes on;
//! identity from the `MESH_*` variables; the judge through `MESH_INGRESS_JUDGE_MODEL` on a
//! loopback fake provider. `cargo test` builds the examples before it runs this file.
#![cfg(all(feature = "ingress", feature = "testing"))]

mod example_binary;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use example_binary::example_binary;
use mesh_egress::Surface;
use mesh_egress::ingress::{Identity, Ingress};
use mesh_egress::testing::{FakeProvider, FakeResponse};
use serde_json::{Value, json};

const CORPUS: &str = include_str!("data/ingress_corpus.json");

/// The identity the corpus is labelled for, as the example's variables.
const IDENTITY: &[(&str, &str)] = &[
    ("MESH_BOT_NAME", "Atlas"),
    ("MESH_BOT_ALIASES", "atlas-bot, Atty"),
    ("MESH_SLACK_BOT_USER", "U0BOTATLAS"),
    ("MESH_DISCORD_BOT_USER", "1100000000000000001"),
    ("MESH_TELEGRAM_BOT_USERNAME", "atlas_support_bot"),
    ("MESH_TELEGRAM_BOT_ID", "7000000001"),
];

/// Runs `ingress` with `envs`, `stdin` on its standard input.
async fn run(envs: &[(&str, &str)], args: &[&str], stdin: Vec<u8>) -> Output {
    let mut command = Command::new(example_binary("ingress"));
    command
        .args(args)
        .env_remove("MESH_INGRESS_JUDGE_MODEL")
        .env_remove("MESH_MODEL_BASE_URL")
        .env("MESH_MODEL_RETRY_ATTEMPTS", "1")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "3000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "2000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in IDENTITY.iter().map(|(name, _)| name) {
        command.env_remove(name);
    }
    for (key, value) in envs {
        command.env(key, value);
    }
    // A fake provider may run on this runtime's other worker while the child runs.
    tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().expect("ingress runs");
        let mut pipe = child.stdin.take().expect("stdin");
        // Written from its own thread: the child answers each line while it reads, so its
        // stdout must be drained at the same time.
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(&stdin);
        });
        let output = child.wait_with_output().expect("ingress ends");
        writer.join().expect("writer");
        output
    })
    .await
    .expect("join")
}

fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8(output.stdout.clone())
        .expect("utf-8 stdout")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn line(surface: &str, event: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({"surface": surface, "event": event})).expect("json");
    line.push(b'\n');
    line
}

/// The contract's line for a decision the library made.
fn expected_line(decided: &mesh_egress::engagement::Engagement) -> String {
    let complexity = decided
        .decision()
        .complexity()
        .map_or_else(|| "null".to_owned(), |c| format!("\"{}\"", c.as_str()));
    format!(
        "{{\"decision\": \"{}\", \"reason\": \"{}\", \"complexity\": {complexity}}}",
        decided.decision().as_str(),
        decided.reason().as_str()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_through_the_binary_decides_as_the_library_does_line_by_line() {
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus");
    let cases = corpus["cases"].as_array().expect("cases");
    let mut input = Vec::new();
    for case in cases {
        input.extend(line(
            case["surface"].as_str().expect("surface"),
            &case["event"],
        ));
    }
    let out = run(IDENTITY, &[], input).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), cases.len(), "one line per input line");

    let library = Ingress::builder(
        Identity::new("Atlas")
            .alias("atlas-bot")
            .alias("Atty")
            .slack_user("U0BOTATLAS")
            .discord_user("1100000000000000001")
            .telegram("atlas_support_bot", 7_000_000_001),
    )
    .build()
    .expect("classifier");
    for (case, printed) in cases.iter().zip(&lines) {
        let surface = Surface::parse(case["surface"].as_str().expect("surface")).expect("surface");
        let event = serde_json::to_vec(&case["event"]).expect("event");
        let inbound = library.parse(surface, &event).expect("a message");
        let decided = library.decide(&inbound).await;
        assert_eq!(printed, &expected_line(&decided), "{}", case["id"]);
    }
    assert!(
        lines
            .iter()
            .any(|l| l == r#"{"decision": "engage", "reason": "mention", "complexity": "quick"}"#)
    );
    let logs = stderr(&out);
    assert!(
        logs.lines().all(|l| l.starts_with('{')),
        "stderr is JSON lines: {logs}"
    );
    assert!(
        !logs.contains("shipment NW-4471"),
        "no message text in the logs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_it_cannot_read_gets_an_error_and_the_run_goes_on() {
    let mention = json!({"type": "message", "channel": "C1", "channel_type": "channel",
        "user": "U1", "text": "<@U0BOTATLAS> where is my order?", "ts": "1741078800.000100"});
    let ambient = json!({"type": "message", "channel": "C1", "channel_type": "channel",
        "user": "U2", "text": "nice", "ts": "1741078860.000100"});
    let mut input = Vec::new();
    input.extend(line("slack", &mention));
    input.extend(b"this is not json\n");
    input.extend(b"\n");
    input.extend(b"{\"surface\": \"slack\", \"event\": {\"text\": \"\xff\"}}\n");
    input.extend(format!("{}\n", "[".repeat(10_000)).as_bytes());
    input.extend(vec![b'x'; 2 * 1024 * 1024]);
    input.push(b'\n');
    input.extend(line("web", &json!({})));
    input.extend(line(
        "slack",
        &json!({"type": "reaction_added", "user": "U1"}),
    ));
    input.extend(line(
        "discord",
        &json!({"op": 0, "t": "MESSAGE_CREATE", "d": {"id": "x"}}),
    ));
    input.extend(line("slack", &mention));
    input.extend(line("slack", &ambient));
    let out = run(IDENTITY, &[], input).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 11, "{lines:#?}");
    assert_eq!(
        lines[0],
        r#"{"decision": "engage", "reason": "mention", "complexity": "quick"}"#
    );
    for (i, printed) in lines[1..9].iter().enumerate() {
        let value: Value = serde_json::from_str(printed).expect("a JSON line");
        let error = value["error"]
            .as_str()
            .unwrap_or_else(|| panic!("line {}: {printed}", i + 2));
        assert!(!error.is_empty());
        assert_eq!(value.as_object().expect("object").len(), 1, "{printed}");
    }
    assert!(lines[4].contains("deeper"), "{}", lines[4]);
    assert!(lines[5].contains("longer"), "{}", lines[5]);
    assert_eq!(
        lines[9], r#"{"decision": "ignore", "reason": "duplicate", "complexity": null}"#,
        "state carried across the bad lines"
    );
    assert_eq!(
        lines[10],
        r#"{"decision": "observe", "reason": "ambient", "complexity": null}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_2_with_one_error_line() {
    for (envs, args) in [
        (vec![("MESH_TELEGRAM_BOT_ID", "atlas")], vec![]),
        (vec![("MESH_INGRESS_JUDGE_MODEL", "fast")], vec![]),
        (vec![], vec!["--gate"]),
    ] {
        let out = run(&envs, &args, Vec::new()).await;
        assert_eq!(out.status.code(), Some(2), "{envs:?} {args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// An ambient message with our name in passing: only the judge can tell.
fn in_passing() -> Value {
    json!({"type": "message", "channel": "C7", "channel_type": "channel", "user": "U3",
        "text": "I asked atlas about the Leeds van yesterday", "ts": "1741078900.000100"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_rides_the_model_variables_and_is_asked_only_for_the_ambiguous() {
    let provider = FakeProvider::start([FakeResponse::completion("YES")])
        .await
        .expect("provider");
    let base = provider.base_url();
    let mut envs = IDENTITY.to_vec();
    envs.extend([
        ("MESH_INGRESS_JUDGE_MODEL", "fast-judge"),
        ("MESH_MODEL_BASE_URL", base.as_str()),
    ]);
    let mention = json!({"type": "message", "channel": "C1", "channel_type": "channel",
        "user": "U1", "text": "<@U0BOTATLAS> hi", "ts": "1741078800.000100"});
    let mut input = line("slack", &mention);
    input.extend(line("slack", &in_passing()));
    let out = run(&envs, &[], input).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout_lines(&out),
        [
            r#"{"decision": "engage", "reason": "mention", "complexity": "quick"}"#,
            r#"{"decision": "engage", "reason": "judge", "complexity": "quick"}"#,
        ]
    );
    let received = provider.received();
    assert_eq!(
        received.len(),
        1,
        "only the ambiguous message reached the judge"
    );
    assert_eq!(received[0].body["model"], "fast-judge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_judge_leaves_the_heuristic_decision() {
    let provider = FakeProvider::start([
        FakeResponse::status(500),
        FakeResponse::completion("perhaps"),
    ])
    .await
    .expect("provider");
    let base = provider.base_url();
    let mut envs = IDENTITY.to_vec();
    envs.extend([
        ("MESH_INGRESS_JUDGE_MODEL", "fast-judge"),
        ("MESH_MODEL_BASE_URL", base.as_str()),
    ]);
    let mut second = in_passing();
    second["ts"] = json!("1741078960.000100");
    second["channel"] = json!("C8");
    let mut input = line("slack", &in_passing());
    input.extend(line("slack", &second));
    let out = run(&envs, &[], input).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let observe = r#"{"decision": "observe", "reason": "ambient", "complexity": null}"#;
    assert_eq!(stdout_lines(&out), [observe, observe]);
    assert_eq!(provider.received().len(), 2, "each asked once, never twice");
}
