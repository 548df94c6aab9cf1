//! One agent turn against any OpenAI-compatible endpoint, through the whole pipeline:
//! Router (Layer A) -> boundary -> Layer C -> render -> deliver to stdout.
//!
//! ```text
//! cargo run -q -p mesh-egress --example turn -- \
//!     [--mode interactive|proactive] [--channel plain|slack|discord|telegram] [--gate on|off] \
//!     [--system-prompt FILE] [--json] [--follow-up] PROMPT
//! ```
//!
//! Environment: `MESH_MODEL_BASE_URL` (e.g. `http://127.0.0.1:8080/v1`), `MESH_MODEL`
//! (the primary model), `MESH_MODEL_API_KEY`, and the `MESH_MODEL_RETRY_*` /
//! `MESH_MODEL_FALLBACK_MODELS` variables of the deadline policy, `MESH_GATE_JUDGE_MODEL` (the
//! gate's judge, on the same endpoint; without it the gate runs heuristics only and fails closed
//! on known leaks), and `MESH_FOLLOW_UP_DELAY_MS` (default 30000) / `MESH_FOLLOW_UP_ATTEMPTS`
//! (default 3) for `--follow-up`.
//!
//! Stdout carries exactly what the person would see (nothing on silence); stderr carries JSON
//! log lines. Exit 0 whenever the turn ended as the contract says (answered, held, handed off,
//! silent), 2 with one `error: ...` line for a usage error.
//!
//! `--channel` renders for that surface (Telegram in HTML parse mode) and prints its parts;
//! `--json` prints `{"part": N, "text": "..."}` per part, `text` being the exact payload.
//! Without `--follow-up` a holding line is printed and the program exits; with it, the promised
//! follow-ups run first and print the real answer (or a handoff) when they end.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use mesh_egress::channel::{
    Deliver, DiscordMarkdown, PlainText, Render, SlackMrkdwn, Stdout, TelegramHtml,
};
use mesh_egress::degrade::{DegradationPolicy, FollowUp, FollowUpRunner, Mode, resolve};
use mesh_egress::gate::{ModelJudge, QualityGate};
use mesh_egress::model::{ChatMessage, ChatRequest, OpenAiCompatible, RetryConfig, Route, Router};
use mesh_egress::{AgentMessage, Attribution, EgressError, Turn};

const USAGE: &str = "usage: turn [--mode interactive|proactive] \
                     [--channel plain|slack|discord|telegram] [--gate on|off] \
                     [--system-prompt FILE] [--json] [--follow-up] PROMPT";

/// The chat surface whose format the parts are rendered in.
#[derive(Clone, Copy, Debug)]
enum Surface {
    Plain,
    Slack,
    Discord,
    Telegram,
}

impl Surface {
    fn renderer(self) -> Box<dyn Render> {
        match self {
            Self::Plain => Box::new(PlainText::new()),
            Self::Slack => Box::new(SlackMrkdwn::new()),
            Self::Discord => Box::new(DiscordMarkdown::new()),
            Self::Telegram => Box::new(TelegramHtml::new()),
        }
    }
}

/// The parsed command line.
#[derive(Debug)]
struct Args {
    mode: Mode,
    surface: Surface,
    gate: bool,
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
    let mut surface = Surface::Plain;
    let mut gate = false;
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
                surface = match value(flag, inline, &mut rest)? {
                    "plain" => Surface::Plain,
                    "slack" => Surface::Slack,
                    "discord" => Surface::Discord,
                    "telegram" => Surface::Telegram,
                    other => {
                        return Err(format!(
                            "unknown --channel {other:?} (plain|slack|discord|telegram)"
                        ));
                    }
                }
            }
            "--gate" => {
                gate = match value(flag, inline, &mut rest)? {
                    "off" => false,
                    "on" => true,
                    other => return Err(format!("unknown --gate {other:?} (on|off)")),
                }
            }
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
        surface,
        gate,
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
    let gate = if args.gate {
        let mut builder = QualityGate::builder();
        if let Some(prompt) = &args.system_prompt {
            builder = builder.system_prompt(prompt.clone(), 0.5);
        }
        if let Ok(judge_model) = required_env("MESH_GATE_JUDGE_MODEL") {
            // The judge rides the same endpoint and plumbing as the turn, on one route of its own.
            let judge = Router::with_routes(
                connector.clone(),
                Route::new(judge_model),
                [],
                RetryConfig::from_env(),
            );
            builder = builder.judge(ModelJudge::new(judge));
        }
        match builder.build() {
            Ok(gate) => gate,
            Err(error) => return usage_error(&format!("--gate on: {error}")),
        }
    } else {
        QualityGate::off()
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
    if let Some(system) = &args.system_prompt {
        messages.push(ChatMessage::system(system.clone()));
    }
    messages.push(ChatMessage::user(args.prompt.clone()));
    let request = ChatRequest::new(messages);

    // The un-annotated turn: Layer A, then the opt-in gate. Follow-ups run it again.
    let answer = || async {
        let result = router
            .complete(&turn, &request)
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
        gate.check(&turn, args.prompt.as_str(), result).await
    };

    let (follow_up, _warnings) = FollowUp::from_env();
    let policy = DegradationPolicy::default()
        .with_follow_up(follow_up.first_delay, follow_up.attempts)
        .with_ledger(turn.ledger().clone());
    let reply = resolve(args.mode, &policy, answer().await);
    tracing::info!(target: "mesh_egress::degrade", reply = reply.kind(), mode = args.mode.as_str(), "turn ended");

    let channel = Stdout::with_renderer(args.surface.renderer()).json(args.json);
    let mut receipt = match channel.deliver(reply).await {
        Ok(receipt) => receipt,
        Err(error) => {
            tracing::error!(target: "mesh_egress::egress", error = %error, "delivery to stdout failed");
            return ExitCode::FAILURE;
        }
    };
    let Some(commitment) = receipt.take_commitment() else {
        return ExitCode::SUCCESS;
    };
    if !args.follow_up {
        // The promise is on the ledger and in the log; without --follow-up this process does
        // not keep it (a long-running bot hands it to a FollowUpRunner).
        tracing::info!(
            target: "mesh_egress::degrade",
            commitment = %commitment.id(),
            first_delay_ms = u64::try_from(commitment.first_delay().as_millis()).unwrap_or(u64::MAX),
            attempts = commitment.attempts(),
            "holding line sent; follow-up not run (no --follow-up)"
        );
        return ExitCode::SUCCESS;
    }
    match FollowUpRunner::new(policy)
        .run(commitment, &channel, answer)
        .await
    {
        Ok(outcome) => {
            tracing::info!(target: "mesh_egress::degrade", outcome = ?outcome, "follow-up ended");
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(target: "mesh_egress::egress", error = %error, "follow-up delivery to stdout failed");
            ExitCode::FAILURE
        }
    }
}
