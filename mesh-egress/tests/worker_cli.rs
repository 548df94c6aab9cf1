//! `turn --store` and `worker` as black boxes, on a SQLite file and on a throwaway PostgreSQL
//! cluster: a promise stored by `turn` is kept once by `worker --once`; promises made in two
//! conversations in two Slack channels are each kept in their own channel by one worker that
//! knows no channel; a worker killed during a follow-up (at a named failpoint) leaves nothing
//! lost and nothing doubled; SIGTERM gives the claim back at once; a promise in the form an
//! older `turn --store` wrote is kept after what was shown. `cargo test` builds the examples
//! before it runs this file (`--test worker_cli` alone does not: `cargo build --examples` first).

mod example_binary;
#[path = "../../tests/tests/support/postgres.rs"]
#[allow(dead_code, unreachable_pub)]
mod postgres;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use example_binary::example_binary;
use mesh_egress::Surface as Api;
use mesh_egress::store::{CommitmentStatus, PartState, Store};
use mesh_egress::testing::{FakeApi, FakeProvider, FakeResponse};
use serde_json::{Value, json};

const TOKEN: &str = "discord-worker-cli-SECRET";
const SLACK_TOKEN: &str = "xoxb-worker-cli-SECRET";
const DISCORD_TARGET: &str = "1100000000000000001";
const ANSWER: &str = "The deploy finished at noon.";
/// How long any child may run before the test fails.
const BOUND: Duration = Duration::from_secs(30);
/// The lease of the worker killed mid-follow-up: the restarted one waits just past it.
const SHORT_LEASE_MS: u64 = 800;

/// Variables the host may set that would change a run.
const CLEARED: [&str; 16] = [
    "MESH_STORE_URL",
    "MESH_FAILPOINT",
    "MESH_GATE_JUDGE_MODEL",
    "RUST_LOG",
    "SLACK_BOT_TOKEN",
    "MESH_SLACK_CHANNEL",
    "MESH_SLACK_THREAD_TS",
    "MESH_SLACK_RECIPIENT_USER",
    "MESH_SLACK_RECIPIENT_TEAM",
    "MESH_TELEGRAM_TOPIC",
    "MESH_SLACK_API_URL",
    "DISCORD_BOT_TOKEN",
    "MESH_DISCORD_CHANNEL",
    "TELEGRAM_BOT_TOKEN",
    "MESH_TELEGRAM_CHAT",
    "MESH_TELEGRAM_API_URL",
];

/// Where one test's store lives.
struct Place {
    url: String,
    _dir: Option<TempDir>,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn place(self, name: &str) -> Place {
        match self {
            Backend::Sqlite => {
                let dir = std::env::temp_dir()
                    .join(format!("mesh-worker-cli-{}-{name}", std::process::id()));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                Place {
                    url: format!("sqlite:{}", dir.join("store.db").display()),
                    _dir: Some(TempDir(dir)),
                }
            }
            Backend::Postgres => Place {
                url: postgres::fresh_database_url(),
                _dir: None,
            },
        }
    }
}

/// A command for example `name` against `provider` and the store at `url`.
fn command(name: &str, provider: &FakeProvider, url: &str) -> Command {
    let mut command = Command::new(example_binary(name));
    command
        .env("MESH_MODEL_BASE_URL", provider.base_url())
        .env("MESH_MODEL", "fake-model")
        .env("MESH_MODEL_RETRY_ATTEMPTS", "1")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "50")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "3000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "2000")
        .env("MESH_FOLLOW_UP_DELAY_MS", "1")
        .env("MESH_FOLLOW_UP_ATTEMPTS", "3")
        .env("MESH_WORKER_LEASE_MS", "5000")
        .arg("--store")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in CLEARED {
        command.env_remove(name);
    }
    command
}

fn discord_env(command: &mut Command, api: &FakeApi) {
    command
        .env("DISCORD_BOT_TOKEN", TOKEN)
        .env("MESH_DISCORD_CHANNEL", DISCORD_TARGET)
        .env("MESH_DISCORD_API_URL", api.base_url());
}

fn slack_env(command: &mut Command, api: &FakeApi, channel: &str) {
    command
        .env("SLACK_BOT_TOKEN", SLACK_TOKEN)
        .env("MESH_SLACK_CHANNEL", channel)
        .env("MESH_SLACK_API_URL", api.base_url());
}

/// Runs `command` to its end within [`BOUND`] (the fakes keep serving on the test runtime).
async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || {
        let child = command.spawn().expect("example starts");
        wait_bounded(child)
    })
    .await
    .expect("join")
}

/// Waits for `child` with a deadline, collecting its output; kills it and fails past it.
fn wait_bounded(mut child: Child) -> Output {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the example ran past {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// A child stopped at a failpoint: started, its stderr read until the failpoint line.
struct Stopped {
    child: Child,
    reached: bool,
    /// What it logged until then (for a failure message).
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

/// Starts `command` with `MESH_FAILPOINT=point` and waits (bounded) until it says it is there.
async fn start_until_failpoint(mut command: Command, point: &'static str) -> Stopped {
    command.env("MESH_FAILPOINT", point);
    tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().expect("example starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let seen = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            let wanted = format!("{{\"failpoint\":\"{point}\"}}");
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line == wanted {
                    let _ = tx.send(());
                }
                let mut log = seen.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let reached = rx.recv_timeout(BOUND).is_ok();
        Stopped {
            child,
            reached,
            log,
        }
    })
    .await
    .expect("join")
}

impl Stopped {
    /// SIGKILL, then reap.
    fn kill(mut self) -> Result<(), String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.reached {
            Ok(())
        } else {
            Err(self.log.lock().unwrap().clone())
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

async fn failing_provider() -> FakeProvider {
    FakeProvider::start([FakeResponse::status(503)])
        .await
        .expect("provider")
        .otherwise(FakeResponse::status(503))
}

async fn healthy_provider() -> FakeProvider {
    FakeProvider::start([FakeResponse::completion(ANSWER)])
        .await
        .expect("provider")
        .otherwise(FakeResponse::completion(ANSWER))
}

async fn statuses(url: &str) -> Vec<CommitmentStatus> {
    statuses_of(url, "cli").await
}

async fn statuses_of(url: &str, conversation: &str) -> Vec<CommitmentStatus> {
    let store = Store::open(url).await.expect("store");
    let found = store
        .commitments(conversation)
        .await
        .expect("commitments")
        .iter()
        .map(|c| c.status)
        .collect();
    store.close().await;
    found
}

/// `turn --store` with a failing primary prints a holding line and stores the promise.
async fn hold(provider: &FakeProvider, url: &str, api: Option<&FakeApi>) -> String {
    let mut turn = command("turn", provider, url);
    if let Some(api) = api {
        discord_env(&mut turn, api);
        turn.args(["--deliver", "discord"]);
    }
    turn.arg("Is the deploy done?");
    let out = run(turn).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert_eq!(printed.lines().count(), 1, "one holding line: {printed:?}");
    assert!(!printed.contains("503"), "the cause was shown: {printed}");
    assert_eq!(statuses(url).await, [CommitmentStatus::Pending]);
    printed
}

async fn a_stored_promise_is_kept_once_by_worker_once(backend: Backend) {
    let place = backend.place("kept-once");
    let failing = failing_provider().await;
    hold(&failing, &place.url, None).await;

    let healthy = healthy_provider().await;
    let mut worker = command("worker", &healthy, &place.url);
    worker.args(["--once", "--json"]);
    let out = run(worker).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines, [json!({"part": 1, "text": ANSWER})]);
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Fulfilled]);
    // The handler re-asked the model the stored prompt.
    let asked = healthy.received();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].body.to_string().contains("Is the deploy done?"),
        "{}",
        asked[0].body
    );
    for line in text(&out.stderr).lines() {
        serde_json::from_str::<Value>(line).expect("stderr carries JSON log lines");
    }

    let mut again = command("worker", &healthy, &place.url);
    again.arg("--once");
    let out = run(again).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "nothing pending, nothing printed");
    assert_eq!(healthy.received().len(), 1, "the promise is not kept twice");
}

/// Two conversations in two Slack channels end on holding lines (`turn --conversation`, each
/// with its own `MESH_SLACK_CHANNEL`); one `worker --once --deliver slack` whose environment
/// names a third channel keeps both promises, each in its own channel, and posts nothing in
/// the third.
async fn each_conversations_follow_up_goes_to_its_own_channel(backend: Backend) {
    let place = backend.place("own-channels");
    let api = FakeApi::start(Api::Slack, SLACK_TOKEN)
        .await
        .expect("fake api");
    let failing = failing_provider().await;
    let mut holding = Vec::new();
    for (conversation, channel) in [("ops", "C0OPS0001"), ("dev", "C0DEV0001")] {
        let mut turn = command("turn", &failing, &place.url);
        slack_env(&mut turn, &api, channel);
        turn.args(["--deliver", "slack", "--conversation", conversation])
            .arg(format!("Is the {conversation} deploy done?"));
        let out = run(turn).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(
            statuses_of(&place.url, conversation).await,
            [CommitmentStatus::Pending]
        );
        holding.push(text(&out.stdout).trim_end().to_owned());
    }

    let healthy = healthy_provider().await;
    let mut worker = command("worker", &healthy, &place.url);
    slack_env(&mut worker, &api, "C0WORKER1");
    worker.args(["--once", "--deliver", "slack", "--json"]);
    let out = run(worker).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 2, "two follow-ups: {lines:?}");

    let received: Vec<(String, String)> = api
        .received()
        .into_iter()
        .map(|m| (m.target, m.text))
        .collect();
    assert_eq!(
        received,
        [
            ("C0OPS0001".to_owned(), holding[0].clone()),
            ("C0DEV0001".to_owned(), holding[1].clone()),
            ("C0OPS0001".to_owned(), ANSWER.to_owned()),
            ("C0DEV0001".to_owned(), ANSWER.to_owned()),
        ],
        "each follow-up in its own channel"
    );
    for to in api.destinations() {
        assert_ne!(
            to.to_string(),
            "slack:C0WORKER1",
            "the worker's own variable was used"
        );
    }
    for conversation in ["ops", "dev"] {
        assert_eq!(
            statuses_of(&place.url, conversation).await,
            [CommitmentStatus::Fulfilled]
        );
    }
    // Each re-asked the prompt of its own conversation.
    let asked: Vec<String> = healthy
        .received()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(asked.len(), 2);
    assert!(
        asked.iter().any(|b| b.contains("Is the ops deploy done?")),
        "{asked:?}"
    );
    assert!(
        asked.iter().any(|b| b.contains("Is the dev deploy done?")),
        "{asked:?}"
    );
}

/// Kills a worker at `point` during the follow-up, restarts one, and checks what Discord got.
async fn a_worker_killed_during_a_follow_up_loses_and_doubles_nothing(
    backend: Backend,
    point: &'static str,
) {
    let place = backend.place(point);
    let api = FakeApi::start(Api::Discord, TOKEN).await.expect("fake api");
    let failing = failing_provider().await;
    let holding = hold(&failing, &place.url, Some(&api)).await;
    assert_eq!(api.texts(), [holding.trim_end()]);

    let healthy = healthy_provider().await;
    let mut doomed = command("worker", &healthy, &place.url);
    discord_env(&mut doomed, &api);
    doomed
        .args(["--once", "--deliver", "discord"])
        .env("MESH_WORKER_LEASE_MS", SHORT_LEASE_MS.to_string());
    let stopped = start_until_failpoint(doomed, point).await;
    if let Err(log) = stopped.kill() {
        panic!("the worker never reached {point}: {log}");
    }
    assert_eq!(api.texts().len(), 1, "nothing was posted before the crash");

    // The killed worker's claim and lease run out; a new worker takes over.
    tokio::time::sleep(Duration::from_millis(SHORT_LEASE_MS + 400)).await;
    let mut next = command("worker", &healthy, &place.url);
    discord_env(&mut next, &api);
    next.args(["--once", "--deliver", "discord", "--json"])
        .env("MESH_WORKER_LEASE_MS", SHORT_LEASE_MS.to_string());
    let out = run(next).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let received = api.received();
    let texts: Vec<&str> = received.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, [holding.trim_end(), ANSWER], "exactly one follow-up");
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        lines,
        [json!({"part": 1, "text": ANSWER, "id": received[1].id})]
    );
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Fulfilled]);
    let store = Store::open(&place.url).await.unwrap();
    let parts: Vec<PartState> = store
        .parts("cli")
        .await
        .unwrap()
        .iter()
        .map(|p| p.state)
        .collect();
    assert_eq!(parts, [PartState::Sent, PartState::Sent]);
    // Killed before asking (claimed) or after committing the answer with the promise's end
    // (committed): either way the model was asked for the answer once.
    assert_eq!(healthy.received().len(), 1, "{point}");
}

async fn killed_after_claim(backend: Backend) {
    a_worker_killed_during_a_follow_up_loses_and_doubles_nothing(backend, "follow_up_claimed")
        .await;
}

async fn killed_after_commit(backend: Backend) {
    a_worker_killed_during_a_follow_up_loses_and_doubles_nothing(backend, "follow_up_committed")
        .await;
}

async fn sigterm_mid_wait_gives_the_claim_back_at_once(backend: Backend) {
    let place = backend.place("sigterm");
    let failing = failing_provider().await;
    hold(&failing, &place.url, None).await;

    // A worker whose model never answers, holding a claim far longer than the test.
    let stalled = FakeProvider::start([FakeResponse::never_answer()])
        .await
        .expect("provider")
        .otherwise(FakeResponse::never_answer());
    let mut slow = command("worker", &stalled, &place.url);
    slow.env("MESH_WORKER_LEASE_MS", "600000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "120000")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "180000");
    let child = slow.spawn().expect("worker starts");
    let deadline = Instant::now() + BOUND;
    while stalled.received().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the worker never asked the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Claimed]);

    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = tokio::task::spawn_blocking(move || wait_bounded(child))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "nothing was delivered");
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Pending]);

    // Another worker takes it at once: the 10-minute claim was given back.
    let healthy = healthy_provider().await;
    let mut next = command("worker", &healthy, &place.url);
    next.arg("--once");
    let started = Instant::now();
    let out = run(next).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{ANSWER}\n"));
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Fulfilled]);
}

async fn turn_follow_up_keeps_the_stored_promise_itself_and_ends_it_on_the_store(backend: Backend) {
    let place = backend.place("follow-up");
    // The turn's one try fails; the follow-up's succeeds.
    let provider =
        FakeProvider::start([FakeResponse::status(503), FakeResponse::completion(ANSWER)])
            .await
            .expect("provider");
    let mut turn = command("turn", &provider, &place.url);
    turn.args(["--follow-up", "Is the deploy done?"]);
    let out = run(turn).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "holding line, then the answer: {printed:?}");
    assert_eq!(lines[1], ANSWER);
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Fulfilled]);
    let store = Store::open(&place.url).await.unwrap();
    let parts = store.parts("cli").await.unwrap();
    assert_eq!(parts.len(), 2, "both went through the outbox");
    assert!(parts.iter().all(|p| p.state == PartState::Sent));

    // Nothing is left for a worker.
    let mut worker = command("worker", &provider, &place.url);
    worker.arg("--once");
    let out = run(worker).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(provider.received().len(), 2);
}

async fn usage_errors_exit_2_with_one_error_line(backend: Backend) {
    let place = backend.place("usage");
    let provider = healthy_provider().await;
    for args in [
        vec!["--once", "--bogus"],
        vec!["--once", "a prompt"],
        vec!["--once", "--channel", "fax"],
        vec!["--once", "--channel", "slack", "--deliver", "discord"],
    ] {
        let mut worker = command("worker", &provider, &place.url);
        worker.args(&args);
        let out = run(worker).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    // No store at all.
    let mut bare = Command::new(example_binary("worker"));
    bare.env("MESH_MODEL_BASE_URL", provider.base_url())
        .env("MESH_MODEL", "fake-model")
        .env_remove("MESH_STORE_URL")
        .arg("--once")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = run(bare).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: missing --store"));
}

/// Rewrites the one promise stored at `url` into the form an older `turn --store` wrote: the
/// example's handler name and `{"prompt": .., "delivered": ..}` as input; `one_try` leaves it
/// a single follow-up try.
async fn make_legacy(url: &str, input: &Value, one_try: bool) {
    const LEGACY: &str = "UPDATE mesh_commitments SET handler = 'turn-example.answer', input = $1";
    const ONE_TRY: &str = "UPDATE mesh_commitments SET handler = 'turn-example.answer', \
         input = $1, plan = '{\"first_delay_ms\":0,\"max_delay_ms\":0,\"attempts\":1}'";
    let input = input.to_string();
    let statement = if one_try { ONE_TRY } else { LEGACY };
    let changed = if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
        let done = sqlx::query(statement).bind(&input).execute(&pool).await;
        pool.close().await;
        done.expect("update").rows_affected()
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("postgres");
        let done = sqlx::query(statement).bind(&input).execute(&pool).await;
        pool.close().await;
        done.expect("update").rows_affected()
    };
    assert_eq!(changed, 1, "one stored promise");
}

/// A promise an older `turn --store` stored (the example's legacy handler, its input the prompt
/// and what a stream had shown) is kept by `worker`: the model is asked the stored prompt, only
/// what follows the shown text goes; an answer that does not continue it is never sent (its
/// last try failed, so the person is handed off, without the cause); one stored without a shown
/// text gets the whole answer.
async fn legacy_promises_are_kept_after_what_was_shown(backend: Backend) {
    let healthy = healthy_provider().await;
    let failing = failing_provider().await;
    let keep = |url: &str| {
        let mut worker = command("worker", &healthy, url);
        worker.args(["--once", "--json"]);
        worker
    };
    let printed = |out: &Output| -> Vec<Value> {
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect()
    };

    // Shown: the answer's first words; sent: only the rest.
    let place = backend.place("legacy-rest");
    hold(&failing, &place.url, None).await;
    make_legacy(
        &place.url,
        &json!({"prompt": "Is the deploy done?", "delivered": "The deploy finished  \n"}),
        false,
    )
    .await;
    let out = run(keep(&place.url)).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(printed(&out), [json!({"part": 1, "text": "at noon."})]);
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Fulfilled]);
    let asked = healthy.received();
    assert!(
        asked
            .last()
            .is_some_and(|r| r.body.to_string().contains("Is the deploy done?")),
        "the stored prompt was asked"
    );

    // Shown: text the fresh answer does not continue, on the promise's one try: none of the
    // answer goes, nor why; the person is handed off.
    let place = backend.place("legacy-unjoinable");
    hold(&failing, &place.url, None).await;
    make_legacy(
        &place.url,
        &json!({"prompt": "Is the deploy done?", "delivered": "Something else entirely."}),
        true,
    )
    .await;
    let out = run(keep(&place.url)).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = printed(&out);
    assert_eq!(lines.len(), 1, "one handoff line: {lines:?}");
    let line = lines[0]["text"].as_str().expect("text");
    for leaked in ["noon", "deploy", "continue", "Unjoinable"] {
        assert!(
            !line.contains(leaked),
            "{leaked:?} reached the person: {line}"
        );
    }
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::HandedOff]);

    // No shown text: the whole answer.
    let place = backend.place("legacy-whole");
    hold(&failing, &place.url, None).await;
    make_legacy(&place.url, &json!({"prompt": "Is the deploy done?"}), false).await;
    let out = run(keep(&place.url)).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(printed(&out), [json!({"part": 1, "text": ANSWER})]);
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Fulfilled]);
}

macro_rules! on_both_backends {
    ($($name:ident => $body:ident),* $(,)?) => {
        mod sqlite {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { $body(Backend::Sqlite).await })*
        }
        mod pg {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { $body(Backend::Postgres).await })*
        }
    };
}

on_both_backends!(
    turn_stores_the_promise_and_worker_once_keeps_it_once => a_stored_promise_is_kept_once_by_worker_once,
    worker_once_sends_each_conversations_follow_up_to_its_own_channel =>
        each_conversations_follow_up_goes_to_its_own_channel,
    a_worker_killed_after_its_claim_is_replaced_and_the_follow_up_goes_once => killed_after_claim,
    a_worker_killed_after_the_sealed_commit_is_replaced_and_the_follow_up_goes_once =>
        killed_after_commit,
    sigterm_of_a_worker_mid_wait_releases_its_claim => sigterm_mid_wait_gives_the_claim_back_at_once,
    worker_usage_errors_exit_2 => usage_errors_exit_2_with_one_error_line,
    worker_keeps_promises_an_older_turn_stored => legacy_promises_are_kept_after_what_was_shown,
    turn_store_follow_up_keeps_and_ends_the_promise_itself =>
        turn_follow_up_keeps_the_stored_promise_itself_and_ends_it_on_the_store,
);
