//! A streamed reply killed between two stream calls, on both backends: a real child process
//! (`src/bin/outbox_child.rs stream`) commits a four-block reply through the durable outbox and
//! streams it onto the Slack or Discord fake's own stream (Slack's native stream, Discord's
//! post-then-edit), one call per block; it stops at the failpoint `between_stream_calls` (the
//! first block confirmed and `sent`, the second marked `sending`, its call not made, the last
//! two never given to a call) and is SIGKILLed there. A second process runs `Store::resend`.
//!
//! The rules under test: what the surface confirmed before the crash is never sent again; the
//! in-flight part follows the unknown-outcome knob (`uncertain` by default, never looked up or
//! deduped by nonce: a streamed part may sit inside a growing message); the parts never given
//! to a call are sent once, as messages of their own. And a Telegram reply killed while it was
//! only a draft (`drafts`, the failpoint `drafts_only`) is sent once, as messages, after the
//! restart: a draft is not a message.
//!
//! Run with `--nocapture` to see one line per case.

mod store_support;

use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::store::{PartState, Store, StoredPart};
use mesh_egress::testing::FakeApi;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use store_support::Backend;

const TOKEN: &str = "crash-token";
/// The child's reply (`outbox_child`'s `STREAM_BLOCKS`).
const BLOCKS: [&str; 4] = [
    "Block one: the build is green.",
    "Block two: staging is deploying.",
    "Block three: production is next.",
    "Block four: notes follow soon.",
];
const POINT: &str = "between_stream_calls";
/// How long a child may take to reach its point, or to finish.
const BOUND: Duration = Duration::from_secs(60);

both_backends!(
    a_stream_killed_between_calls_never_resends_the_confirmed_and_leaves_the_in_flight_uncertain,
    a_stream_killed_between_calls_sends_the_in_flight_part_again_when_the_knob_says_so,
    a_telegram_reply_killed_while_only_drafts_exist_arrives_once_as_messages_after_the_restart,
);

fn name(surface: Surface) -> &'static str {
    match surface {
        Surface::Slack => "slack",
        Surface::Telegram => "telegram",
        _ => "discord",
    }
}

struct Case {
    place: store_support::Place,
    api: FakeApi,
    surface: Surface,
    conversation: String,
}

impl Case {
    async fn new(backend: Backend, surface: Surface) -> Self {
        Self {
            place: backend.place(),
            api: FakeApi::start(surface, TOKEN).await.unwrap(),
            surface,
            conversation: format!("stream-crash-{}", name(surface)),
        }
    }

    fn child(&self, mode: &str, failpoint: Option<&str>, env: &[(&str, &str)]) -> Child {
        let mut command = Command::new(env!("CARGO_BIN_EXE_outbox_child"));
        command
            .arg(mode)
            .env("MESH_STORE_URL", &self.place.url)
            .env("CHILD_SURFACE", name(self.surface))
            .env("CHILD_API_URL", self.api.base_url())
            .env("CHILD_CONVERSATION", &self.conversation)
            // The resend goes to the destination the streamed parts are stored for.
            .env("CHILD_IN_THREAD", "1")
            .env_remove("MESH_FAILPOINT")
            .env_remove("CHILD_UNKNOWN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(point) = failpoint {
            command.env("MESH_FAILPOINT", point);
        }
        for (key, value) in env {
            command.env(key, value);
        }
        command.spawn().expect("start the child")
    }

    /// Streams until the child reports [`POINT`], then kills it there.
    async fn stream_until_killed(&self) {
        self.run_until_killed("stream", POINT).await;
    }

    /// Runs a child in `mode` until it reports `point`, then kills it there with SIGKILL.
    async fn run_until_killed(&self, mode: &str, point: &str) {
        let mut child = self.child(mode, Some(point), &[]);
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let wanted = format!("{{\"failpoint\":\"{point}\"}}");
        let mut seen = Vec::new();
        let reached = tokio::time::timeout(BOUND, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line == wanted {
                    return true;
                }
                seen.push(line);
            }
            false
        })
        .await
        .unwrap_or(false);
        assert!(
            reached,
            "{point} was never reached; the child said {seen:?}"
        );
        child.start_kill().unwrap();
        let status = tokio::time::timeout(BOUND, child.wait())
            .await
            .expect("the killed child exits")
            .unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "the child died of SIGKILL: {status}"
        );
    }

    /// Runs a child in `mode` to its end and returns its JSON line.
    async fn run(&self, mode: &str, env: &[(&str, &str)]) -> serde_json::Value {
        let child = self.child(mode, None, env);
        let output = tokio::time::timeout(BOUND, child.wait_with_output())
            .await
            .expect("the child finishes")
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{mode} failed: {}{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(stdout.trim()).expect("one JSON line")
    }

    async fn rows(&self) -> Vec<StoredPart> {
        let store = Store::open(&self.place.url).await.unwrap();
        let rows = store.parts(&self.conversation).await.unwrap();
        store.close().await;
        rows
    }

    /// Every message's text the fake holds: the Slack stream's, then posts (Discord: its
    /// messages, as last edited).
    fn shown(&self) -> Vec<String> {
        let mut shown: Vec<String> = self.api.streams().into_iter().map(|s| s.text).collect();
        shown.extend(self.api.texts());
        shown
    }

    /// How many times `block` is on the fake, over all its messages.
    fn times_shown(&self, block: &str) -> usize {
        self.shown().iter().map(|t| t.matches(block).count()).sum()
    }

    /// Kills a streaming child at the point and checks what the outbox and the fake hold there.
    async fn crash(&self) -> String {
        self.stream_until_killed().await;
        let rows = self.rows().await;
        let surface = self.surface;
        assert_eq!(
            states(&rows),
            [
                PartState::Sent,
                PartState::Sending,
                PartState::Pending,
                PartState::Pending
            ],
            "{surface}: at the crash"
        );
        assert!(rows[0].streamed && rows[1].streamed, "{surface}: {rows:?}");
        assert!(
            !rows[2].streamed && !rows[3].streamed,
            "{surface}: never given to a call"
        );
        assert_eq!(
            self.shown(),
            [BLOCKS[0]],
            "{surface}: only the first call went"
        );
        rows[0]
            .platform_id
            .clone()
            .expect("the confirming message's id")
    }

    fn report(&self, knob: &str, rows: &[StoredPart], resend: &serde_json::Value) {
        eprintln!(
            "| {} | {POINT} | {knob} | {} calls | {:?} | {resend} |",
            name(self.surface),
            self.api.calls().len(),
            states(rows),
        );
    }
}

fn states(rows: &[StoredPart]) -> Vec<PartState> {
    rows.iter().map(|r| r.state).collect()
}

async fn a_stream_killed_between_calls_never_resends_the_confirmed_and_leaves_the_in_flight_uncertain(
    backend: Backend,
) {
    for surface in [Surface::Discord, Surface::Slack] {
        let case = Case::new(backend, surface).await;
        let first_id = case.crash().await;

        let resend = case.run("resend", &[]).await;

        let rows = case.rows().await;
        case.report("uncertain (default)", &rows, &resend);
        assert_eq!(
            (resend["sent"].as_u64(), resend["uncertain"].as_u64()),
            (Some(2), Some(1)),
            "{surface}: {resend}"
        );
        assert_eq!(resend["reconciled"], 0, "{surface}: never a lookup");
        assert_eq!(case.api.lookups(), 0, "{surface}: never a lookup");
        assert_eq!(
            states(&rows),
            [
                PartState::Sent,
                PartState::Uncertain,
                PartState::Sent,
                PartState::Sent
            ],
            "{surface}"
        );
        assert!(rows[1].maybe_delivered, "{surface}: {:?}", rows[1]);
        assert_eq!(rows[0].platform_id.as_deref(), Some(first_id.as_str()));
        assert_eq!(
            case.times_shown(BLOCKS[0]),
            1,
            "{surface}: confirmed, never again"
        );
        assert_eq!(
            case.times_shown(BLOCKS[1]),
            0,
            "{surface}: not re-sent blindly"
        );
        assert_eq!(case.times_shown(BLOCKS[2]), 1, "{surface}: sent once");
        assert_eq!(case.times_shown(BLOCKS[3]), 1, "{surface}: sent once");
    }
}

async fn a_stream_killed_between_calls_sends_the_in_flight_part_again_when_the_knob_says_so(
    backend: Backend,
) {
    for surface in [Surface::Discord, Surface::Slack] {
        let case = Case::new(backend, surface).await;
        let first_id = case.crash().await;

        let resend = case.run("resend", &[("CHILD_UNKNOWN", "send_again")]).await;

        let rows = case.rows().await;
        case.report("send again", &rows, &resend);
        assert_eq!(
            (resend["sent"].as_u64(), resend["uncertain"].as_u64()),
            (Some(3), Some(0)),
            "{surface}: {resend}"
        );
        assert_eq!(case.api.lookups(), 0, "{surface}: never a lookup");
        assert_eq!(states(&rows), [PartState::Sent; 4], "{surface}");
        assert!(
            !rows[1].streamed,
            "{surface}: re-sent as a message of its own"
        );
        assert_eq!(rows[0].platform_id.as_deref(), Some(first_id.as_str()));
        assert_eq!(
            case.times_shown(BLOCKS[0]),
            1,
            "{surface}: confirmed, never again"
        );
        for block in &BLOCKS[1..] {
            assert_eq!(case.times_shown(block), 1, "{surface}: {block:?} once");
        }
    }
}

/// A Telegram reply in a private chat exists only as a draft (`sendMessageDraft`, the whole
/// reply) when its process is SIGKILLed at the failpoint `drafts_only`. No message ever
/// existed: every part is still `pending` (a draft is not a message), and after the restart
/// each drafted paragraph arrives once, as a message of its own. (Before issue 21 each part was
/// marked `sending` before its draft, and the restart left them `uncertain`, never sent.)
async fn a_telegram_reply_killed_while_only_drafts_exist_arrives_once_as_messages_after_the_restart(
    backend: Backend,
) {
    let case = Case::new(backend, Surface::Telegram).await;
    case.run_until_killed("drafts", "drafts_only").await;
    let drafts = case.api.drafts();
    assert_eq!(
        drafts.last().map(|d| d.text.clone()),
        Some(BLOCKS.join("\n\n")),
        "the whole reply was on screen as a draft"
    );
    assert_eq!(case.api.calls_to("sendMessage"), 0, "no message existed");
    let rows = case.rows().await;
    assert_eq!(
        states(&rows),
        [PartState::Pending; 4],
        "a draft is not a message: {rows:?}"
    );

    let resend = case.run("resend", &[]).await;

    let rows = case.rows().await;
    case.report("uncertain (default)", &rows, &resend);
    assert_eq!(
        (resend["sent"].as_u64(), resend["uncertain"].as_u64()),
        (Some(4), Some(0)),
        "{resend}"
    );
    assert_eq!(states(&rows), [PartState::Sent; 4]);
    assert_eq!(
        case.api.texts(),
        BLOCKS,
        "each paragraph once, as a message"
    );
}
