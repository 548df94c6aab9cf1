//! The ingress classifier over a stream of raw surface events: is each message addressed to
//! us, and how hard is it?
//!
//! ```text
//! cargo run -q -p mesh-egress --example ingress < events.jsonl
//! ```
//!
//! Stdin: one JSON object per line, `{"surface": "slack"|"discord"|"telegram", "event": <the
//! surface's raw event>}` (Slack: the Events API envelope or its inner `event`; Discord: a
//! gateway dispatch `{"op": 0, "t": "MESSAGE_CREATE", "d": …}` or the message object; Telegram:
//! an `Update`). State carries across lines (threads answered in, deliveries seen), and time is
//! the events' own.
//!
//! Stdout: one line per input line, in order,
//! `{"decision": "engage"|"observe"|"ignore", "reason": R, "complexity": "quick"|"deep"|null}`
//! with R one of `dm`, `mention`, `reply`, `name`, `command`, `thread`, `ambient`,
//! `other_mention`, `everyone`, `bot`, `self`, `duplicate`, `edit`, `judge`; a line that cannot
//! be read gets `{"error": "..."}` (never quoting the line) and the run goes on. Stderr carries
//! the logs as JSON lines.
//!
//! Who we are: `MESH_BOT_NAME`, `MESH_BOT_ALIASES` (comma-separated), `MESH_SLACK_BOT_USER`
//! (`U…`), `MESH_DISCORD_BOT_USER` (a snowflake), `MESH_TELEGRAM_BOT_USERNAME`,
//! `MESH_TELEGRAM_BOT_ID`. The judge for ambiguous messages: `MESH_INGRESS_JUDGE_MODEL` on the
//! endpoint `MESH_MODEL_BASE_URL` (with `MESH_MODEL_API_KEY` and the `MESH_MODEL_RETRY_*`
//! variables); without it the heuristic decision stands.
//!
//! Exit 0 at the end of input; 2 with one `error: …` line for a usage error (an argument, a
//! `MESH_TELEGRAM_BOT_ID` that is not a number, a judge model without `MESH_MODEL_BASE_URL`).

use std::io::{BufRead, Write};
use std::process::ExitCode;

use mesh_egress::Surface;
use mesh_egress::engagement::{Complexity, Engagement};
use mesh_egress::ingress::{Identity, Ingress, MAX_EVENT_BYTES, check_document};
use mesh_egress::model::{RetryConfig, Router};

// Only the judge's settings are read here; the rest serves `turn`, `worker` and `web`.
#[allow(dead_code)]
#[path = "support/providers.rs"]
mod providers;

/// The longest input line read: an event at its bound plus the wrapper around it.
const MAX_LINE: usize = MAX_EVENT_BYTES + 4096;

fn main() -> ExitCode {
    if let Some(arg) = std::env::args().nth(1) {
        return usage(&format!(
            "unexpected argument {arg:?}: events come on stdin"
        ));
    }
    init_logs();
    let ingress = match build() {
        Ok(ingress) => ingress,
        Err(message) => return usage(&message),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: no runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut line = Vec::new();
    loop {
        let read = match read_line(&mut input, &mut line) {
            Ok(read) => read,
            Err(error) => {
                eprintln!("error: reading stdin: {error}");
                return ExitCode::FAILURE;
            }
        };
        let answer = match read {
            Line::End => return ExitCode::SUCCESS,
            Line::TooLong => error_line(&format!("the line is longer than {MAX_LINE} bytes")),
            Line::Read => match runtime.block_on(decide(&ingress, &line)) {
                Ok(decided) => decision_line(&decided),
                Err(message) => error_line(&message),
            },
        };
        // A closed stdout ends the run: nobody is reading the decisions.
        if out
            .write_all(answer.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::SUCCESS;
        }
    }
}

/// The classifier the environment describes.
fn build() -> Result<Ingress, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let mut identity = Identity::new(env("MESH_BOT_NAME").unwrap_or_default());
    for alias in env("MESH_BOT_ALIASES").unwrap_or_default().split(',') {
        identity = identity.alias(alias);
    }
    if let Some(user) = env("MESH_SLACK_BOT_USER") {
        identity = identity.slack_user(user.trim());
    }
    if let Some(user) = env("MESH_DISCORD_BOT_USER") {
        identity = identity.discord_user(user.trim());
    }
    if let Some(username) = env("MESH_TELEGRAM_BOT_USERNAME") {
        identity = identity.telegram_username(username);
    }
    if let Some(id) = env("MESH_TELEGRAM_BOT_ID") {
        let id = id
            .trim()
            .parse()
            .map_err(|_| format!("MESH_TELEGRAM_BOT_ID {id:?} is not a number"))?;
        identity = identity.telegram_id(id);
    }
    let mut builder = Ingress::builder(identity);
    if let Some(entry) = env("MESH_INGRESS_JUDGE_MODEL") {
        // The judge's entry takes the fallback entries' syntax (`anthropic=claude-haiku-4-5`,
        // or a model on the primary's API, base URL and key).
        if env("MESH_MODEL_BASE_URL").is_none() {
            return Err(
                "MESH_INGRESS_JUDGE_MODEL needs MESH_MODEL_BASE_URL (the judge's endpoint)"
                    .to_owned(),
            );
        }
        let primary = providers::provider_of(providers::primary_api()?, true)?;
        let config = RetryConfig::from_env();
        for warning in config.warnings() {
            tracing::warn!(target: "mesh_egress::model", warning = %warning, "retry setting ignored");
        }
        let route = providers::route_of(&entry)?;
        builder = builder.judge(Router::with_routes(primary, route, [], config));
    }
    builder.build().map_err(|error| error.to_string())
}

/// One input line's decision, or what was wrong with it (never quoting it).
async fn decide(ingress: &Ingress, line: &[u8]) -> Result<Engagement, String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err("an empty line".to_owned());
    }
    let text = check_document(line).map_err(|e| e.to_string())?;
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("not JSON (line 1 column {})", e.column()))?;
    let surface = value
        .get("surface")
        .and_then(serde_json::Value::as_str)
        .ok_or("no \"surface\"")?;
    let surface = match Surface::parse(surface) {
        Some(s @ (Surface::Slack | Surface::Discord | Surface::Telegram)) => s,
        _ => return Err("\"surface\" is not slack, discord or telegram".to_owned()),
    };
    let event = value.get("event").ok_or("no \"event\"")?;
    let event = serde_json::to_vec(event).map_err(|_| "an event that cannot be re-read")?;
    let inbound = ingress
        .parse(surface, &event)
        .map_err(|error| error.to_string())?;
    Ok(ingress.decide(&inbound).await)
}

/// `{"decision": "engage", "reason": "mention", "complexity": "quick"}`, in the contract's
/// field order and spacing.
fn decision_line(decided: &Engagement) -> String {
    let complexity = decided.decision().complexity().map_or_else(
        || "null".to_owned(),
        |c: Complexity| format!("\"{}\"", c.as_str()),
    );
    format!(
        "{{\"decision\": \"{}\", \"reason\": \"{}\", \"complexity\": {complexity}}}\n",
        decided.decision().as_str(),
        decided.reason().as_str(),
    )
}

fn error_line(message: &str) -> String {
    format!("{{\"error\": {}}}\n", serde_json::Value::from(message))
}

enum Line {
    Read,
    TooLong,
    End,
}

/// Reads one line into `line` (without its `\n`/`\r\n`), never holding more than [`MAX_LINE`]
/// bytes: the rest of a longer line is skipped.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        any = true;
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !too_long {
            if line.len() + chunk.len() > MAX_LINE {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buffer.len());
        input.consume(used);
        if done.is_some() {
            break;
        }
    }
    if !any {
        return Ok(Line::End);
    }
    if too_long {
        return Ok(Line::TooLong);
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Line::Read)
}

fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
