//! One agent turn against any OpenAI-compatible endpoint, through the whole pipeline:
//! Router (Layer A) -> boundary -> Layer C -> render -> deliver to stdout.
//!
//! ```text
//! cargo run -q -p mesh-egress --features http --example turn -- \
//!     [--mode interactive|proactive] [--channel plain] [--gate off] \
//!     [--system-prompt FILE] [--json] [--follow-up] PROMPT
//! ```
//!
//! Environment: `MESH_MODEL_BASE_URL` (e.g. `http://127.0.0.1:8080/v1`), `MESH_MODEL`
//! (the primary model), `MESH_MODEL_API_KEY`, and the `MESH_MODEL_RETRY_*` /
//! `MESH_MODEL_FALLBACK_MODELS` variables of the deadline policy.
//!
//! Stdout carries exactly what the person would see (nothing on silence); stderr carries JSON
//! log lines. Exit 0 whenever the turn ended as the contract says (answered, held, handed off,
//! silent), 2 with one `error: ...` line for a usage error.
//!
//! Not yet here (their issues land later): channels other than `plain` and `--gate on` are
//! usage errors; `--follow-up` is accepted but runs no follow-ups yet.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use mesh_egress::channel::{Deliver, Stdout};
use mesh_egress::degrade::{DegradationPolicy, Mode, resolve};
use mesh_egress::model::{ChatMessage, ChatRequest, OpenAiCompatible, RetryConfig, Router};
use mesh_egress::{AgentMessage, Attribution, EgressError, Turn};

const USAGE: &str = "usage: turn [--mode interactive|proactive] [--channel plain] [--gate off] \
                     [--system-prompt FILE] [--json] [--follow-up] PROMPT";

/// The parsed command line.
#[derive(Debug)]
struct Args {
    mode: Mode,
    json: bool,
    follow_up: bool,
    system_prompt: Option<String>,
    prompt: String,
}

/// What the command line asked for: a turn, or the usage text.
enum Parsed {
    Run(Args),
    Help,
}

fn value<'a>(
    flag: &str,
    inline: Option<&'a str>,
    rest: &mut impl Iterator<Item = &'a String>,
) -> Result<&'a str, String> {
    inline
        .or_else(|| rest.next().map(String::as_str))
        .ok_or_else(|| format!("{flag} needs a value"))
}

fn parse(argv: &[String]) -> Result<Parsed, String> {
    let mut mode = Mode::Interactive;
    let (mut json, mut follow_up) = (false, false);
    let mut system_prompt_file = None;
    let mut positionals: Vec<&str> = Vec::new();
    let mut rest = argv.iter();
    let mut flags_done = false;
    while let Some(arg) = rest.next() {
        if flags_done || arg == "-" || !arg.starts_with('-') {
            positionals.push(arg);
            continue;
        }
        if arg == "-h" {
            return Ok(Parsed::Help);
        }
        if !arg.starts_with("--") {
            return Err(format!("unknown flag {arg}"));
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, v)) => (flag, Some(v)),
            None => (arg.as_str(), None),
        };
        match flag {
            "--" if inline.is_none() => flags_done = true,
            "--help" => return Ok(Parsed::Help),
            "--mode" => {
                mode = match value(flag, inline, &mut rest)? {
                    "interactive" => Mode::Interactive,
                    "proactive" => Mode::Proactive,
                    other => {
                        return Err(format!("unknown --mode {other:?} (interactive|proactive)"));
                    }
                };
            }
            "--channel" => {
                let channel = value(flag, inline, &mut rest)?;
                match channel {
                    "plain" => {}
                    "slack" | "discord" | "telegram" => {
                        return Err(format!(
                            "--channel {channel} is not available in this build yet (only plain)"
                        ));
                    }
                    other => return Err(format!("unknown --channel {other:?} (plain)")),
                }
            }
            "--gate" => match value(flag, inline, &mut rest)? {
                "off" => {}
                "on" => {
                    return Err("--gate on is not available in this build yet (only off)".into());
                }
                other => return Err(format!("unknown --gate {other:?} (on|off)")),
            },
            "--system-prompt" => system_prompt_file = Some(value(flag, inline, &mut rest)?),
            "--json" if inline.is_none() => json = true,
            "--follow-up" if inline.is_none() => follow_up = true,
            _ => return Err(format!("unknown flag {arg}")),
        }
    }
    let prompt = match positionals.as_slice() {
        [] => return Err("missing PROMPT".into()),
        [prompt] => (*prompt).to_owned(),
        [_, extra, ..] => return Err(format!("unexpected argument {extra:?} (one PROMPT only)")),
    };
    let system_prompt = system_prompt_file
        .map(|path| {
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --system-prompt {path}: {e}"))
        })
        .transpose()?;
    Ok(Parsed::Run(Args {
        mode,
        json,
        follow_up,
        system_prompt,
        prompt,
    }))
}

fn required_env(name: &str) -> Result<String, String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| format!("{name} is not set"))
}

fn usage_error(message: &str) -> ExitCode {
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => return usage_error(&message),
    };
    let (base_url, model) = match (
        required_env("MESH_MODEL_BASE_URL"),
        required_env("MESH_MODEL"),
    ) {
        (Ok(base_url), Ok(model)) => (base_url, model),
        (Err(message), _) | (_, Err(message)) => return usage_error(&message),
    };
    init_logs();

    let connector = match OpenAiCompatible::new(&base_url) {
        Ok(connector) => {
            connector.with_api_key(std::env::var("MESH_MODEL_API_KEY").unwrap_or_default())
        }
        Err(_) => {
            return usage_error(&format!(
                "MESH_MODEL_BASE_URL {base_url:?} is not a valid URL"
            ));
        }
    };
    let router = Router::new(connector, model, RetryConfig::from_env());

    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let turn = Turn::new(Attribution::new(
        "turn-example",
        "cli",
        format!("run-{run}"),
    ));
    let mut messages = Vec::new();
    if let Some(system) = args.system_prompt {
        messages.push(ChatMessage::system(system));
    }
    messages.push(ChatMessage::user(args.prompt));

    let result = router
        .complete(&turn, ChatRequest::new(messages))
        .await
        .and_then(|completion| match completion.content {
            Some(text) if !text.trim().is_empty() => {
                Ok(AgentMessage::new(text, turn.attribution().clone()))
            }
            // This example offers the model no tools, so a tool-only answer has nothing to say.
            _ => Err(EgressError::semantic(
                "the model answered with tool calls only, and this turn offers no tools",
                turn.attribution().clone(),
            )
            .with_retryable(false)),
        });
    let policy = DegradationPolicy::default().with_ledger(turn.ledger().clone());
    let reply = resolve(args.mode, &policy, result);
    tracing::info!(target: "mesh_egress::degrade", reply = reply.kind(), mode = args.mode.as_str(), "turn ended");

    let channel = Stdout::new().json(args.json);
    match channel.deliver(reply).await {
        Ok(mut receipt) => {
            if let Some(commitment) = receipt.take_commitment() {
                // The follow-up runner lands with its own issue; until then the promise is
                // logged (and on the ledger) and `--follow-up` does nothing more.
                tracing::info!(
                    target: "mesh_egress::degrade",
                    commitment = %commitment.id(),
                    first_delay_ms = u64::try_from(commitment.first_delay().as_millis()).unwrap_or(u64::MAX),
                    attempts = commitment.attempts(),
                    follow_up = args.follow_up,
                    "holding line sent; follow-up promised"
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(target: "mesh_egress::egress", error = %error, "delivery to stdout failed");
            ExitCode::FAILURE
        }
    }
}
