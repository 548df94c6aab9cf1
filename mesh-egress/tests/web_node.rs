//! The `web` example read by clients nobody here wrote, with the versions pinned in
//! `examples/web/page/package-lock.json`:
//!
//! - the `ai` package's own `DefaultChatTransport` and `readUIMessageStream` read our stream
//!   for a healthy reply, a burst, a mid-stream fallback, a total outage and a gate block
//!   (`page/test/read-stream.mjs`): the expected text, never a cause, no client error, and
//!   the SDK's resume replays a kept promise once;
//! - Chromium (Debian's `chromium`, launched by `puppeteer-core` with its executable path)
//!   loads the page, sends a message, waits for the streamed reply and saves a screenshot
//!   under `target/web-example/`; with the provider down it shows the holding line and no
//!   cause, then the follow-up once the promise is kept (`page/test/browser.mjs`);
//! - esbuild rebuilds the committed bundle byte for byte (`node build.mjs --check`).
//!
//! Node, npm and Chromium are required, as PostgreSQL is for the store tests: a missing one
//! fails with one line naming its package. `npm ci` runs when `node_modules` is missing or
//! older than the lockfile (`PUPPETEER_SKIP_DOWNLOAD`: nothing downloads a browser). `cargo
//! test` builds the example before it runs this file.

mod web_support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use web_support::{ANSWER, QUESTION, WebServer, assert_no_cause};

/// How long one Node script may run.
const SCRIPT_BOUND: Duration = Duration::from_secs(90);
/// How long `npm ci` may run.
const INSTALL_BOUND: Duration = Duration::from_secs(600);

fn page() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/web/page")
}

/// Fails with one line naming the package when `program` does not run.
fn require(program: &str, package: &str) {
    let ran = std::process::Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(ran, "{program} not found: install the `{package}` package");
}

/// Chromium's executable: `CHROMIUM`, else Debian's `/usr/bin/chromium`.
fn chromium() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.is_file(),
        "Chromium not found at {}: install the `chromium` package (or set CHROMIUM)",
        path.display()
    );
    path
}

/// Whether `node_modules` is missing or older than the lockfile (npm writes its own copy,
/// `node_modules/.package-lock.json`, on every install).
fn node_modules_stale(page: &Path) -> bool {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    match (
        modified(page.join("node_modules/.package-lock.json")),
        modified(page.join("package-lock.json")),
    ) {
        (Some(installed), Some(locked)) => installed < locked,
        _ => true,
    }
}

/// `npm ci` once per process when `node_modules` is missing or stale (every test needs it).
fn node_modules() {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    require("node", "nodejs");
    require("npm", "npm");
    if *installed || !node_modules_stale(&page()) {
        *installed = true;
        return;
    }
    let mut child = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--prefer-offline"])
        .current_dir(page())
        .env("PUPPETEER_SKIP_DOWNLOAD", "1")
        .stdin(Stdio::null())
        .spawn()
        .expect("npm ci starts");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("npm ci") {
            break status;
        }
        if started.elapsed() > INSTALL_BOUND {
            let _ = child.kill();
            panic!("npm ci did not finish within {INSTALL_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "npm ci failed in {}", page().display());
    *installed = true;
}

/// Runs `node script args…` in the page folder, bounded; its last stdout line as JSON.
async fn node(script: &str, args: &[&str], chromium: Option<&Path>) -> Value {
    let mut command = tokio::process::Command::new("node");
    command
        .arg(script)
        .args(args)
        .current_dir(page())
        .env("PUPPETEER_SKIP_DOWNLOAD", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(chromium) = chromium {
        command.env("CHROMIUM", chromium);
    }
    let child = command.spawn().expect("node starts");
    let output = tokio::time::timeout(SCRIPT_BOUND, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within {SCRIPT_BOUND:?}"))
        .expect("node ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|_| panic!("{script} printed no JSON: {stdout}"))
}

fn texts(reply: &Value) -> Vec<String> {
    reply["texts"]
        .as_array()
        .expect("texts")
        .iter()
        .map(|t| t.as_str().expect("a text").to_owned())
        .collect()
}

/// The reply the SDK read: no client error, the chunks in protocol order, never a cause.
fn clean(name: &str, reply: &Value) -> Vec<String> {
    assert_eq!(
        reply["errors"],
        serde_json::json!([]),
        "{name}: client errors"
    );
    let types: Vec<&str> = reply["types"]
        .as_array()
        .expect("types")
        .iter()
        .map(|t| t.as_str().expect("a type"))
        .collect();
    assert_eq!(types.first(), Some(&"start"), "{name}: {types:?}");
    assert_eq!(types.last(), Some(&"finish"), "{name}: {types:?}");
    let texts = texts(reply);
    assert_no_cause(&texts.join("\n"));
    texts
}

#[tokio::test]
async fn the_ai_packages_own_reader_reads_our_stream() {
    node_modules();
    let server = WebServer::start("node-client");
    let seen = node("test/read-stream.mjs", &[&server.base], None).await;
    let answer = ANSWER.join("\n\n");
    for fault in ["healthy", "burst", "stall"] {
        let texts = clean(fault, &seen[fault]["reply"]);
        assert_eq!(texts.join("\n\n"), answer, "{fault}");
        assert_eq!(seen[fault]["reply"]["metadata"], Value::Null, "{fault}");
    }
    let held = clean("outage", &seen["outage"]["reply"]);
    assert_eq!(held.len(), 1);
    assert_eq!(
        seen["outage"]["reply"]["metadata"],
        serde_json::json!({"followUp": true})
    );
    let kept = clean("outage follow-up", &seen["outage"]["followUp"]["reply"]);
    assert_eq!(kept.join("\n\n"), answer);
    let listed = &seen["outage"]["listed"];
    assert_eq!(listed["status"], 200);
    assert_eq!(listed["messages"].as_array().map(Vec::len), Some(3));
    assert_eq!(listed["messages"][0]["parts"][0]["text"], QUESTION);
    assert_eq!(seen["outage"]["resumeAfterListing"], "none");

    let blocked = clean("leak", &seen["leak"]["reply"]);
    assert_eq!(blocked.len(), 2);
    assert_eq!(blocked[0], ANSWER[0]);
    let rest = clean("leak follow-up", &seen["leak"]["followUp"]["reply"]);
    assert_eq!(rest.join("\n\n"), ANSWER[1..].join("\n\n"));
}

/// Where the browser test saves its screenshots: `target/web-example/`.
fn screenshot_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    // target/<profile>/deps/<test> → target/
    let target = exe.ancestors().nth(3).expect("target/").to_path_buf();
    let dir = target.join("web-example");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

#[tokio::test]
async fn chromium_shows_the_reply_the_holding_line_and_the_kept_promise() {
    node_modules();
    let chromium = chromium();
    let server = WebServer::start("browser");
    let shot = screenshot_dir().join("chat.png");
    let _ = std::fs::remove_file(&shot);
    let seen = node(
        "test/browser.mjs",
        &[&server.base, shot.to_str().expect("a UTF-8 path")],
        Some(&chromium),
    )
    .await;
    assert_eq!(seen["consoleErrors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["failedResponses"], serde_json::json!([]), "{seen}");
    let rendered = |list: &Value| -> Vec<String> {
        list.as_array()
            .expect("texts")
            .iter()
            .map(|t| t.as_str().expect("text").to_owned())
            .collect()
    };
    // The page renders the Markdown: `**green**` is bold, so its text reads "green".
    let healthy = rendered(&seen["healthy"]);
    assert_eq!(healthy.len(), 1);
    assert!(healthy[0].contains("Release 2.4 is green: all 412 tests passed"));
    assert!(healthy[0].contains("The rollout starts at 14:00"));
    assert!(!healthy[0].contains("**"), "rendered, not shown as source");

    let holding = rendered(&seen["holding"]);
    assert_eq!(holding.len(), 2);
    assert!(!holding[1].is_empty());
    assert_eq!(seen["causesWhileHolding"], serde_json::json!([]), "{seen}");
    assert_no_cause(seen["holdingPage"].as_str().expect("page text"));

    let followed = rendered(&seen["followedUp"]);
    assert_eq!(followed.len(), 3);
    assert_eq!(followed[1], holding[1], "the holding line stays");
    assert!(
        followed[2].contains("You asked: And the deploy?"),
        "{followed:?}"
    );
    assert!(followed[2].contains("The rollout starts at 14:00"));
    assert_eq!(seen["causesAfter"], serde_json::json!([]));
    assert_no_cause(seen["finalHtml"].as_str().expect("html"));
    assert_eq!(seen["error"], Value::Null);
    assert_eq!(
        rendered(&seen["afterReload"]),
        followed,
        "the server's record"
    );
    assert!(shot.is_file(), "a screenshot at {}", shot.display());
}

#[tokio::test]
async fn esbuild_rebuilds_the_committed_bundle_byte_for_byte() {
    node_modules();
    let mut check = tokio::process::Command::new("node");
    check
        .args(["build.mjs", "--check"])
        .current_dir(page())
        .kill_on_drop(true);
    let status = tokio::time::timeout(SCRIPT_BOUND, check.status())
        .await
        .expect("bounded")
        .expect("node runs");
    assert!(
        status.success(),
        "dist/ is stale: run `node build.mjs` in {}",
        page().display()
    );
}
