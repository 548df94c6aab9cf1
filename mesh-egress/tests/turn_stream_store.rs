//! `turn --stream --store URL --deliver discord` as a black box, on a SQLite file and on a
//! throwaway PostgreSQL cluster, against the loopback model provider and the Discord fake: the
//! streamed reply goes onto Discord's own stream (post, then edits) through the durable outbox,
//! so every part ends `sent` under the message that holds it and `worker --once` then has
//! nothing to send; a failure mid-stream stores the holding line's promise with what was shown,
//! and `worker --once` delivers only what follows; a store that stops answering mid-stream ends
//! the turn with exit 1 and one `error:` line, and `worker --once` sends the rest. `cargo test`
//! builds the examples first.

mod example_binary;
#[path = "../../tests/tests/support/postgres.rs"]
#[allow(dead_code, unreachable_pub)]
mod postgres;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use example_binary::example_binary;
use mesh_egress::Surface as Api;
use mesh_egress::model::ModelError;
use mesh_egress::store::{CommitmentStatus, PartState, Store, StoredPart};
use mesh_egress::testing::{FakeApi, FakeProvider, FakeResponse, Step};

const TOKEN: &str = "discord-turn-stream-store-SECRET";
const DISCORD_TARGET: &str = "1100000000000000001";
/// How long any child may run before the test fails.
const BOUND: Duration = Duration::from_secs(30);

// Each paragraph is longer than the default minimum block (80 bytes), so each is a block.
const P1: &str =
    "The build finished a few minutes ago and every one of the integration tests passed.\n\n";
const P2: &str =
    "Deploying to staging now; the rollout usually takes about a minute to settle down.\n\n";
const P3: &str =
    "Production follows once the staging checks are green and the error budget allows it.\n\n";

/// Variables the host may set that would change a run.
const CLEARED: [&str; 8] = [
    "MESH_STORE_URL",
    "MESH_FAILPOINT",
    "MESH_GATE_JUDGE_MODEL",
    "MESH_MODEL_FALLBACK_MODELS",
    "MESH_STREAM_MODE",
    "RUST_LOG",
    "SLACK_BOT_TOKEN",
    "TELEGRAM_BOT_TOKEN",
];

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
                let dir = std::env::temp_dir().join(format!(
                    "mesh-turn-stream-store-{}-{name}",
                    std::process::id()
                ));
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

/// Example `name` against `provider`, the Discord fake and the store at `url`.
fn command(name: &str, provider: &FakeProvider, api: &FakeApi, url: &str) -> Command {
    let mut command = Command::new(example_binary(name));
    command
        .env("MESH_MODEL_BASE_URL", provider.base_url())
        .env("MESH_MODEL", "fake-model")
        .env("MESH_MODEL_RETRY_ATTEMPTS", "1")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "50")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "5000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "3000")
        .env("MESH_FOLLOW_UP_DELAY_MS", "1")
        .env("MESH_FOLLOW_UP_ATTEMPTS", "3")
        .env("MESH_WORKER_LEASE_MS", "5000")
        .env("DISCORD_BOT_TOKEN", TOKEN)
        .env("MESH_DISCORD_CHANNEL", DISCORD_TARGET)
        .env("MESH_DISCORD_API_URL", api.base_url())
        .args(["--store", url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in CLEARED {
        command.env_remove(name);
    }
    command
}

/// Runs `command` to its end within [`BOUND`] (the fakes keep serving on the test runtime).
async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || wait_bounded(command.spawn().expect("example starts")))
        .await
        .expect("join")
}

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

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

async fn rows(url: &str) -> Vec<StoredPart> {
    let store = Store::open(url).await.expect("store");
    let rows = store.parts("cli").await.expect("parts");
    store.close().await;
    rows
}

async fn statuses(url: &str) -> Vec<CommitmentStatus> {
    let store = Store::open(url).await.expect("store");
    let found = store
        .commitments("cli")
        .await
        .expect("commitments")
        .iter()
        .map(|c| c.status)
        .collect();
    store.close().await;
    found
}

async fn a_streamed_reply_is_recorded_sent_and_worker_once_has_nothing_to_send(backend: Backend) {
    let place = backend.place("answered");
    let api = FakeApi::start(Api::Discord, TOKEN).await.expect("fake api");
    let provider = FakeProvider::start_steps([
        Step::chunks([P1, P2, P3]).chunk_delay(Duration::from_millis(60))
    ])
    .await
    .expect("provider");
    let mut turn = command("turn", &provider, &api, &place.url);
    turn.args(["--deliver", "discord", "--stream", "Is the deploy done?"]);
    let out = run(turn).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let whole = [P1, P2, P3].map(str::trim).join("\n\n");
    assert_eq!(api.texts(), [whole.as_str()], "one message, grown by edits");
    assert!(api.calls_to("editMessage") >= 1, "{:?}", api.calls());
    let message_id = api.received()[0].id.clone();

    let parts = rows(&place.url).await;
    assert_eq!(parts.len(), 3, "{parts:?}");
    for (part, block) in parts.iter().zip([P1, P2, P3]) {
        assert_eq!(part.state, PartState::Sent, "{part:?}");
        assert_eq!(part.text, block.trim());
        assert!(part.streamed, "{part:?}");
        assert_eq!(part.platform_id.as_deref(), Some(message_id.as_str()));
    }

    let calls = api.calls().len();
    let mut worker = command("worker", &provider, &api, &place.url);
    worker.args(["--once", "--deliver", "discord"]);
    let out = run(worker).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "nothing pending, nothing printed");
    assert_eq!(api.calls().len(), calls, "nothing more reached Discord");
}

async fn a_promise_made_mid_stream_is_kept_by_worker_once_with_only_what_follows(backend: Backend) {
    let place = backend.place("held");
    let api = FakeApi::start(Api::Discord, TOKEN).await.expect("fake api");
    let failing = FakeProvider::start_steps([Step::chunks([P1, P2, P3])
        .chunk_delay(Duration::from_millis(40))
        .fail_after(2, || ModelError::status(500))])
    .await
    .expect("provider");
    let mut turn = command("turn", &failing, &api, &place.url);
    turn.args(["--deliver", "discord", "--stream", "Is the deploy done?"]);
    let out = run(turn).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = api.texts();
    assert_eq!(
        shown.len(),
        2,
        "the streamed message and the holding line: {shown:?}"
    );
    assert_eq!(shown[0], [P1, P2].map(str::trim).join("\n\n"));
    assert!(
        !shown[1].contains("500"),
        "the cause was shown: {}",
        shown[1]
    );
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Pending]);
    let at_turn = rows(&place.url).await;
    assert!(
        at_turn.iter().all(|p| p.state == PartState::Sent),
        "{at_turn:?}"
    );

    // The follow-up's model answers the whole reply afresh: only its third block is new.
    let whole: String = [P1, P2, P3].concat();
    let healthy = FakeProvider::start([FakeResponse::completion(whole.trim_end())])
        .await
        .expect("provider");
    let mut worker = command("worker", &healthy, &api, &place.url);
    worker.args(["--once", "--deliver", "discord"]);
    let out = run(worker).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{}\n", P3.trim()));
    assert_eq!(statuses(&place.url).await, [CommitmentStatus::Fulfilled]);
    let shown = api.texts();
    assert_eq!(shown.len(), 3, "{shown:?}");
    assert_eq!(shown[2], P3.trim(), "only what follows what was shown");

    let mut again = command("worker", &healthy, &api, &place.url);
    again.args(["--once", "--deliver", "discord"]);
    let out = run(again).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "nothing left");
}

async fn a_streamed_reply_to_stdout_goes_through_the_outbox_block_by_block(backend: Backend) {
    let place = backend.place("stdout");
    let api = FakeApi::start(Api::Discord, TOKEN).await.expect("fake api");
    let provider = FakeProvider::start_steps([
        Step::chunks([P1, P2, P3]).chunk_delay(Duration::from_millis(30))
    ])
    .await
    .expect("provider");
    let mut turn = command("turn", &provider, &api, &place.url);
    turn.args(["--stream", "Is the deploy done?"]);
    let out = run(turn).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let blocks = [P1, P2, P3].map(str::trim);
    assert_eq!(text(&out.stdout), format!("{}\n", blocks.join("\n")));
    let parts = rows(&place.url).await;
    let texts: Vec<&str> = parts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        texts, blocks,
        "each block committed as a message of its own"
    );
    assert!(
        parts
            .iter()
            .all(|p| p.state == PartState::Sent && !p.streamed && p.surface == "plain"),
        "{parts:?}"
    );
    assert!(api.calls().is_empty(), "stdout only");

    let mut worker = command("worker", &provider, &api, &place.url);
    worker.arg("--once");
    let out = run(worker).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "nothing pending, nothing printed");
}

/// The store stops answering mid-reply (`MESH_FAILPOINT=journal_unwritable`: the journal's
/// first write after the surface confirmed a block fails, as a database in failover would).
/// That is not a lost conversation: the turn ends with exit 1 and one `error:` line, never
/// the cause; what was not shown stays `pending`; and `worker --once`, with the store back,
/// sends the rest, each block once.
async fn a_store_failure_mid_stream_exits_1_and_worker_once_sends_the_rest(backend: Backend) {
    let place = backend.place("unwritable");
    let api = FakeApi::start(Api::Discord, TOKEN).await.expect("fake api");
    let provider = FakeProvider::start_steps([
        Step::chunks([P1, P2, P3]).chunk_delay(Duration::from_millis(60))
    ])
    .await
    .expect("provider");
    let mut turn = command("turn", &provider, &api, &place.url);
    turn.env("MESH_FAILPOINT", "journal_unwritable").args([
        "--deliver",
        "discord",
        "--stream",
        "Is the deploy done?",
    ]);
    let out = run(turn).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        errors,
        ["error: the store failed during delivery to discord"],
        "{stderr}"
    );
    assert_eq!(api.texts(), [P1.trim()], "the first block only");
    let parts = rows(&place.url).await;
    let states: Vec<PartState> = parts.iter().map(|p| p.state).collect();
    assert_eq!(
        states,
        [PartState::Sent, PartState::Pending, PartState::Pending],
        "{parts:?}"
    );

    let mut worker = command("worker", &provider, &api, &place.url);
    worker.args(["--once", "--deliver", "discord"]);
    let out = run(worker).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        api.texts(),
        [P1.trim(), P2.trim(), P3.trim()],
        "the rest, each block once"
    );
    let parts = rows(&place.url).await;
    assert!(
        parts.iter().all(|p| p.state == PartState::Sent),
        "{parts:?}"
    );
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
    turn_stream_store_deliver_discord_then_worker_once_sends_nothing =>
        a_streamed_reply_is_recorded_sent_and_worker_once_has_nothing_to_send,
    turn_stream_store_holding_line_promise_delivers_only_the_rest =>
        a_promise_made_mid_stream_is_kept_by_worker_once_with_only_what_follows,
    turn_stream_store_to_stdout_then_worker_once_sends_nothing =>
        a_streamed_reply_to_stdout_goes_through_the_outbox_block_by_block,
    turn_stream_store_failure_exits_1_then_worker_once_sends_the_rest =>
        a_store_failure_mid_stream_exits_1_and_worker_once_sends_the_rest,
);
