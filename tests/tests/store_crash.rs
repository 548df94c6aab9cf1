//! The crash matrix, on both backends: a real child process (`src/bin/outbox_child.rs`)
//! delivers a three-part message through the durable outbox to a loopback chat fake and is
//! stopped at a named failpoint (or while its request sits unanswered on the fake); the test
//! asserts the point was reached and what the outbox held there, sends SIGKILL, restarts a
//! child that runs `Store::resend`, then asserts the end state of every part and exactly what
//! the fake received.
//!
//! The rules under test (the store's duplicate rules): Discord re-sends are deduplicated by
//! the nonce inside the window; Slack parts are reconciled through their metadata (found: not
//! posted again); Telegram parts whose outcome is unknown are `uncertain`, never doubled.
//!
//! Run with `--nocapture` to see one line per case (the table in the crash-matrix notes).

mod store_support;

use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::channel::{PlainText, Render};
use mesh_egress::store::{PartState, Store, StoredPart};
use mesh_egress::testing::{ChatStep, FakeApi};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use store_support::Backend;

const TOKEN: &str = "crash-token";
const BODY: &str = "alpha one. bravo two. charlie 3.";
/// How long a child may take to reach its point, or to finish.
const BOUND: Duration = Duration::from_secs(60);

both_backends!(
    a_crash_after_commit_sends_every_part_once_on_restart,
    a_crash_between_parts_sends_the_rest_once_on_restart,
    a_crash_after_a_send_before_its_mark_is_deduped_reconciled_or_uncertain,
    a_crash_while_the_response_is_lost_in_flight_is_deduped_reconciled_or_uncertain,
    a_slack_part_without_history_scope_is_uncertain_after_a_crash,
    a_lost_slack_response_is_reconciled_without_a_crash,
);

const SURFACES: [Surface; 3] = [Surface::Slack, Surface::Discord, Surface::Telegram];

fn parts() -> Vec<String> {
    let parts = PlainText::new()
        .with_limit(10)
        .render(&mesh_egress::Markdown::new(BODY))
        .unwrap();
    assert_eq!(parts.len(), 3, "the message must have three parts");
    parts
}

fn name(surface: Surface) -> &'static str {
    match surface {
        Surface::Slack => "slack",
        Surface::Discord => "discord",
        _ => "telegram",
    }
}

/// One run of the matrix: where the store lives, the fake, and the conversation.
struct Case {
    backend: Backend,
    place: store_support::Place,
    api: FakeApi,
    surface: Surface,
    conversation: String,
}

impl Case {
    async fn new(backend: Backend, surface: Surface) -> Self {
        Self {
            backend,
            place: backend.place(),
            api: FakeApi::start(surface, TOKEN).await.unwrap(),
            surface,
            conversation: format!("crash-{}", name(surface)),
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
            .env_remove("MESH_FAILPOINT")
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

    /// Starts a delivering child with `MESH_FAILPOINT=point`, waits for it to report the point,
    /// and kills it there.
    async fn deliver_until(&self, point: &str) {
        let mut child = self.child("deliver", Some(point), &[]);
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
        kill(child).await;
    }

    /// Starts a delivering child whose first request the fake posts and never answers, and
    /// kills it once the fake holds the message.
    async fn deliver_until_the_fake_holds_one(&self) {
        self.api.script([ChatStep::accept_then_stall()]);
        let child = self.child("deliver", None, &[("CHILD_TIMEOUT_MS", "30000")]);
        let held = tokio::time::timeout(BOUND, async {
            while self.api.received().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(held.is_ok(), "the fake never received the first part");
        kill(child).await;
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

    /// What the fake holds, in order.
    fn received(&self) -> Vec<String> {
        self.api.texts()
    }

    fn report(&self, crash: &str, rows: &[StoredPart], resend: &serde_json::Value) {
        let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
        eprintln!(
            "| {:?} | {} | {crash} | {} posts, {} lookups, {} received | {states:?} | {resend} |",
            self.backend,
            name(self.surface),
            self.api.attempts(),
            self.api.lookups(),
            self.received().len(),
        );
    }
}

async fn kill(mut child: Child) {
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

fn states(rows: &[StoredPart]) -> Vec<PartState> {
    rows.iter().map(|r| r.state).collect()
}

async fn a_crash_after_commit_sends_every_part_once_on_restart(backend: Backend) {
    for surface in SURFACES {
        let case = Case::new(backend, surface).await;
        case.deliver_until("after_commit").await;
        let at_crash = case.rows().await;
        assert_eq!(states(&at_crash), [PartState::Pending; 3], "{surface}");
        assert!(
            case.received().is_empty(),
            "{surface}: nothing was sent yet"
        );

        let resend = case.run("resend", &[]).await;

        let rows = case.rows().await;
        case.report("after_commit", &rows, &resend);
        assert_eq!(resend["sent"], 3, "{surface}: {resend}");
        assert_eq!(states(&rows), [PartState::Sent; 3], "{surface}");
        assert_eq!(
            case.received(),
            parts(),
            "{surface}: each part once, in order"
        );
    }
}

async fn a_crash_between_parts_sends_the_rest_once_on_restart(backend: Backend) {
    for surface in SURFACES {
        let case = Case::new(backend, surface).await;
        case.deliver_until("between_parts").await;
        let at_crash = case.rows().await;
        assert_eq!(
            states(&at_crash),
            [PartState::Sent, PartState::Pending, PartState::Pending],
            "{surface}"
        );
        assert_eq!(case.received(), parts()[..1], "{surface}");

        let resend = case.run("resend", &[]).await;

        let rows = case.rows().await;
        case.report("between_parts", &rows, &resend);
        assert_eq!(resend["sent"], 2, "{surface}: {resend}");
        assert_eq!(states(&rows), [PartState::Sent; 3], "{surface}");
        assert_eq!(
            case.received(),
            parts(),
            "{surface}: each part once, in order"
        );
    }
}

/// After a crash that left the first part posted but not marked (the row `sending`), the
/// restart ends in the surface's rule; the fake holds every part exactly once either way.
async fn assert_unconfirmed_first_part_settled(case: &Case, crash: &str) {
    let surface = case.surface;
    let at_crash = case.rows().await;
    assert_eq!(
        states(&at_crash),
        [PartState::Sending, PartState::Pending, PartState::Pending],
        "{surface}: the first part is mid-send"
    );
    assert_eq!(
        case.received(),
        parts()[..1],
        "{surface}: it reached the fake"
    );
    let first_id = case.api.received()[0].id.clone();

    let resend = case.run("resend", &[]).await;

    let rows = case.rows().await;
    case.report(crash, &rows, &resend);
    assert_eq!(
        case.received(),
        parts(),
        "{surface}: each part once, in order"
    );
    match surface {
        // Re-sent with the same nonce: Discord answers with the message it already has.
        Surface::Discord => {
            assert_eq!(resend["sent"], 3, "{surface}: {resend}");
            assert_eq!(states(&rows), [PartState::Sent; 3]);
            assert_eq!(rows[0].platform_id.as_deref(), Some(first_id.as_str()));
            assert_eq!(
                case.api.attempts(),
                4,
                "the first part was re-sent, and deduped"
            );
        }
        // Looked up by its metadata and found: marked sent with that message's ts.
        Surface::Slack => {
            assert_eq!(
                (resend["reconciled"].as_u64(), resend["sent"].as_u64()),
                (Some(1), Some(2)),
                "{resend}"
            );
            assert_eq!(states(&rows), [PartState::Sent; 3]);
            assert_eq!(rows[0].platform_id.as_deref(), Some(first_id.as_str()));
            assert_eq!(case.api.attempts(), 3, "the first part was not re-sent");
            assert!(case.api.lookups() >= 1);
        }
        // No dedupe, no lookup: uncertain, not re-sent; the rest goes.
        _ => {
            assert_eq!(
                (resend["uncertain"].as_u64(), resend["sent"].as_u64()),
                (Some(1), Some(2)),
                "{resend}"
            );
            assert_eq!(
                states(&rows),
                [PartState::Uncertain, PartState::Sent, PartState::Sent]
            );
            assert!(rows[0].maybe_delivered);
            assert_eq!(case.api.attempts(), 3, "the first part was not re-sent");
        }
    }
}

async fn a_crash_after_a_send_before_its_mark_is_deduped_reconciled_or_uncertain(backend: Backend) {
    for surface in SURFACES {
        let case = Case::new(backend, surface).await;
        case.deliver_until("after_send_before_mark").await;
        assert_unconfirmed_first_part_settled(&case, "after_send_before_mark").await;
    }
}

async fn a_crash_while_the_response_is_lost_in_flight_is_deduped_reconciled_or_uncertain(
    backend: Backend,
) {
    for surface in SURFACES {
        let case = Case::new(backend, surface).await;
        case.deliver_until_the_fake_holds_one().await;
        assert_unconfirmed_first_part_settled(&case, "killed, response lost").await;
    }
}

async fn a_slack_part_without_history_scope_is_uncertain_after_a_crash(backend: Backend) {
    for crash in ["after_send_before_mark", "killed, response lost"] {
        let case = Case::new(backend, Surface::Slack).await;
        case.api.deny_history();
        if crash == "after_send_before_mark" {
            case.deliver_until(crash).await;
        } else {
            case.deliver_until_the_fake_holds_one().await;
        }

        let resend = case.run("resend", &[]).await;

        let rows = case.rows().await;
        case.report(&format!("{crash}, no history scope"), &rows, &resend);
        assert_eq!(resend["uncertain"], 1, "{crash}: {resend}");
        assert_eq!(
            states(&rows),
            [PartState::Uncertain, PartState::Sent, PartState::Sent],
            "{crash}"
        );
        assert!(
            rows[0]
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("missing_scope")),
            "{crash}: {:?}",
            rows[0].last_error
        );
        assert!(case.api.lookups() >= 1, "{crash}: it asked");
        assert_eq!(case.received(), parts(), "{crash}: never doubled");
    }
}

async fn a_lost_slack_response_is_reconciled_without_a_crash(backend: Backend) {
    // One try per part: the outbox's own lookup settles it. Two: the connector's lookup
    // before its retry does. Without the history scope, the part is uncertain and the rest
    // waits for the resend.
    for (tries, history) in [("1", true), ("2", true), ("1", false)] {
        let case = Case::new(backend, Surface::Slack).await;
        if !history {
            case.api.deny_history();
        }
        case.api.script([ChatStep::lost_response()]);

        let delivered = case.run("deliver", &[("CHILD_TRIES", tries)]).await;
        let resend = case.run("resend", &[]).await;

        let rows = case.rows().await;
        let crash = format!("none, response lost, {tries} tries, history {history}");
        case.report(&crash, &rows, &resend);
        assert_eq!(case.received(), parts(), "{crash}: never doubled");
        assert!(case.api.lookups() >= 1, "{crash}: it asked");
        assert_eq!(
            case.api.attempts(),
            3,
            "{crash}: the lost part was not re-sent"
        );
        if history {
            assert_eq!(delivered["delivered"], 3, "{crash}: {delivered}");
            assert_eq!(states(&rows), [PartState::Sent; 3], "{crash}");
            assert_eq!(
                rows[0].platform_id.as_deref(),
                Some(case.api.received()[0].id.as_str())
            );
            assert_eq!(resend["sent"], 0, "{crash}: nothing left");
        } else {
            assert!(delivered["error"].is_string(), "{crash}: {delivered}");
            assert_eq!(resend["sent"], 2, "{crash}: {resend}");
            assert_eq!(
                states(&rows),
                [PartState::Uncertain, PartState::Sent, PartState::Sent],
                "{crash}"
            );
        }
    }
}
