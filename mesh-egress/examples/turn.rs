//! One agent turn against any OpenAI-compatible endpoint, through the whole pipeline:
//! Router (Layer A) -> boundary -> Layer C -> render -> deliver to stdout.
//!
//! ```text
//! cargo run -q -p mesh-egress --example turn -- \
//!     [--mode interactive|proactive] [--channel plain|slack|discord|telegram] [--gate on|off] \
//!     [--system-prompt FILE] [--json] [--follow-up] [--deliver slack|discord|telegram] \
//!     [--conversation ID] PROMPT
//! ```
//!
//! Environment: `MESH_MODEL_BASE_URL` (e.g. `http://127.0.0.1:8080/v1`), `MESH_MODEL`
//! (the primary model), `MESH_MODEL_API_KEY`, and the `MESH_MODEL_RETRY_*` /
//! `MESH_MODEL_FALLBACK_MODELS` variables of the deadline policy, `MESH_GATE_JUDGE_MODEL` (the
//! gate's judge, on the same endpoint; without it the gate runs heuristics only and fails closed
//! on known leaks), and `MESH_FOLLOW_UP_DELAY_MS` (default 30000) / `MESH_FOLLOW_UP_ATTEMPTS`
//! (default 3) for `--follow-up`. `MESH_SILENCE_TOKENS` (comma-separated, default none, e.g.
//! `NO_REPLY,HEARTBEAT_OK`) names the agent's control tokens: a reply that is only one is
//! silence (nothing printed, exit 0), one inside an answer is cut before rendering.
//!
//! Stdout carries exactly what the person would see (nothing on silence); stderr carries JSON
//! log lines. Exit 0 whenever the turn ended as the contract says (answered, held, handed off,
//! silent), 2 with one `error: ...` line for a usage error, 1 with one `error: ...` line (never
//! the cause) when delivery itself failed after its retries.
//!
//! `--channel` renders for that surface (Telegram in HTML parse mode) and prints its parts;
//! `--json` prints `{"part": N, "text": "..."}` per part, `text` being the exact payload.
//!
//! `--deliver slack|discord|telegram` sends the parts through that surface's real connector
//! (and implies the matching `--channel`; a different `--channel` is a usage error), then
//! prints each part that went, with `--json` as `{"part": N, "text": "...", "id": "..."}` (`id`
//! is the platform's message id). Credentials: `SLACK_BOT_TOKEN`, `DISCORD_BOT_TOKEN`,
//! `TELEGRAM_BOT_TOKEN`; the public API unless `MESH_SLACK_API_URL` / `MESH_DISCORD_API_URL` /
//! `MESH_TELEGRAM_API_URL` names another base (a proxy, a loopback fake). The conversation's
//! destination comes from the surface's variables: `MESH_SLACK_CHANNEL` (and
//! `MESH_SLACK_THREAD_TS`, `MESH_SLACK_RECIPIENT_USER` + `MESH_SLACK_RECIPIENT_TEAM`),
//! `MESH_DISCORD_CHANNEL`, `MESH_TELEGRAM_CHAT` (and `MESH_TELEGRAM_TOPIC`, a forum topic);
//! without `--deliver` it is stdout's.
//!
//! `--conversation ID` (default `cli`) names the conversation the turn belongs to: its lease,
//! its outbox rows and its promise are that conversation's, stored with its destination, so a
//! `worker` keeps each conversation's promise in its own chat.
//! Without `--follow-up` a holding line is printed and the program exits; with it, the promised
//! follow-ups run first and print the real answer (or a handoff) when they end.
//!
//! `--store URL` (`sqlite:PATH` or `postgres://…`; default `MESH_STORE_URL`) makes the turn
//! persistent: it holds the conversation's lease (`MESH_WORKER_LEASE_MS`), its parts go through
//! the durable outbox, and a holding line's promise is stored by the store's promise keeper
//! (the front door's route and its typed input: the prompt, the system prompt and the gate
//! settings; the mode and the plan of `MESH_FOLLOW_UP_*`) for `worker` to keep by re-running
//! the same route; with `--follow-up` this process keeps it itself, recorded on the store.
//!
//! `--stream` streams the answer through the whole pipeline (the front door's one path: routed
//! stream -> block cutter -> the gate's block check -> render -> commit -> send), each block a
//! message of its own, printed (or, with `--deliver`, sent) and flushed as it is delivered. With
//! `--json` each line also carries `"t_ms"`, the milliseconds since the turn started, and
//! `part` counts across the whole reply. The stream's bounds are
//! `MESH_MODEL_STREAM_FIRST_TOKEN_TIMEOUT_MS` and `MESH_MODEL_STREAM_IDLE_TIMEOUT_MS`. A failure
//! after blocks were shown never repeats them: a fallback route continues after them, or Layer
//! C answers for the rest (with `--follow-up`, the follow-up prints only what follows).
//!
//! `--stream --deliver slack|discord|telegram` streams onto the surface's own mechanism
//! (`Bot::send_to` a channel that streams natively): a Slack stream in the thread `MESH_SLACK_THREAD_TS` (for the
//! recipient `MESH_SLACK_RECIPIENT_USER` + `MESH_SLACK_RECIPIENT_TEAM`, which Slack needs outside
//! a DM; rendered as standard Markdown), Telegram drafts then one message in a private chat,
//! Discord post-then-edit. Each message is printed when the surface confirms it, and every later
//! change as an edit: with `--json`, `{"part": N, "text": "<the message's full current text>",
//! "id": "...", "t_ms": T, "edit": true}` (`part` is the message's place in the reply; a Telegram
//! draft also carries `"preview": true` and no id); without `--json`, the text it gained.
//! `--stream-mode stream|blocks|final` (or `MESH_STREAM_MODE`) picks how the surface shows it:
//! one growing message (the default where the surface can), a message per block, or the
//! whole reply once complete.
//!
//! `--stream --store URL` streams through the durable outbox under the conversation's lease:
//! to stdout, each block is committed and recorded like any message; with `--deliver`, each
//! block is committed (`pending`), marked `sending` before the surface stream's call that may
//! show it and `sent` with the id of the message that holds it once the surface confirms it, and
//! what the stream did not confirm is re-sent as messages of their own through the outbox. A
//! holding line's promise after a failure mid-stream is stored with the Markdown already shown,
//! so the follow-up (`worker`, or this process with `--follow-up`) delivers only what follows;
//! it is stored before the holding line goes, as on the non-streamed path.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/turn_bot.rs"]
mod turn_bot;
#[path = "support/turn_live.rs"]
mod turn_live;
#[path = "support/turn_store.rs"]
mod turn_store;
#[path = "support/turn_stream.rs"]
mod turn_stream;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cli::{
    Delivery, Surface, build_gate, channel_flag, chosen_surface, deliver_flag, init_logs,
    model_from_env, usage_error, value,
};
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::StreamMode;
use mesh_egress::channel::{BoxedChannel, Stdout};
use mesh_egress::degrade::{DegradationPolicy, FollowUp, Mode};
use mesh_egress::gate::QualityGate;

use mesh_egress::silence::SilenceTokens;
use mesh_egress::{Address, Attribution, Bot};

const USAGE: &str = "usage: turn [--mode interactive|proactive] \
                     [--channel plain|slack|discord|telegram] [--gate on|off] \
                     [--system-prompt FILE] [--json] [--follow-up] \
                     [--deliver slack|discord|telegram] [--store URL] [--stream] \
                     [--stream-mode stream|blocks|final] [--conversation ID] PROMPT";

/// The parsed command line.
#[derive(Debug)]
struct Args {
    mode: Mode,
    surface: Surface,
    gate: bool,
    json: bool,
    follow_up: bool,
    deliver: Option<Surface>,
    system_prompt: Option<String>,
    prompt: String,
    /// `--store URL`: the parts go through the durable outbox and a promise is stored.
    store: Option<String>,
    /// `--stream`: the answer is streamed block by block.
    stream: bool,
    /// `--stream-mode` (or `MESH_STREAM_MODE`): how the surface shows the stream.
    stream_mode: Option<StreamMode>,
    /// `--conversation ID` (default `cli`): the conversation the turn belongs to.
    conversation: String,
}

/// What the command line asked for: a turn, or the usage text.
enum Parsed {
    Run(Args),
    Help,
}

fn parse(argv: &[String]) -> Result<Parsed, String> {
    let mut mode = Mode::Interactive;
    let mut channel = None;
    let mut deliver = None;
    let mut gate = false;
    let (mut json, mut follow_up, mut stream) = (false, false, false);
    let mut system_prompt_file = None;
    let mut store = None;
    let mut stream_mode = None;
    let mut conversation = None;
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
            "--channel" => channel = Some(channel_flag(value(flag, inline, &mut rest)?)?),
            "--deliver" => deliver = Some(deliver_flag(value(flag, inline, &mut rest)?)?),
            "--gate" => {
                gate = match value(flag, inline, &mut rest)? {
                    "off" => false,
                    "on" => true,
                    other => return Err(format!("unknown --gate {other:?} (on|off)")),
                }
            }
            "--system-prompt" => system_prompt_file = Some(value(flag, inline, &mut rest)?),
            "--store" => store = Some(value(flag, inline, &mut rest)?.to_owned()),
            "--conversation" => {
                conversation = Some(conversation_flag(value(flag, inline, &mut rest)?)?)
            }
            "--json" if inline.is_none() => json = true,
            "--follow-up" if inline.is_none() => follow_up = true,
            "--stream" if inline.is_none() => stream = true,
            "--stream-mode" => {
                stream_mode = Some(stream_mode_flag(value(flag, inline, &mut rest)?)?)
            }
            _ => return Err(format!("unknown flag {arg}")),
        }
    }
    let surface = chosen_surface(channel, deliver)?;
    let stream_mode = match stream_mode {
        Some(mode) => Some(mode),
        None => std::env::var("MESH_STREAM_MODE")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| stream_mode_flag(&v))
            .transpose()?,
    };
    if stream_mode.is_some() && !(stream && deliver.is_some()) {
        return Err("--stream-mode (or MESH_STREAM_MODE) needs --stream and --deliver".into());
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
        deliver,
        system_prompt,
        prompt,
        store,
        stream,
        stream_mode,
        conversation: conversation.unwrap_or_else(|| "cli".to_owned()),
    }))
}

/// `--conversation ID`: any id but a blank one.
fn conversation_flag(id: &str) -> Result<String, String> {
    if id.trim().is_empty() {
        return Err("--conversation needs a non-empty ID".into());
    }
    Ok(id.to_owned())
}

fn stream_mode_flag(name: &str) -> Result<StreamMode, String> {
    StreamMode::parse(name)
        .ok_or_else(|| format!("unknown --stream-mode {name:?} (stream|blocks|final)"))
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
    let models = match model_from_env() {
        Ok(found) => found,
        Err(message) => return usage_error(&message),
    };
    let delivery = match args.deliver.map(Delivery::from_env).transpose() {
        Ok(delivery) => delivery,
        Err(message) => return usage_error(&message),
    };
    // Where the parts go: the surface's chat from its variables, or stdout.
    let address = match args.deliver.map(cli::destination_from_env).transpose() {
        Ok(address) => address.unwrap_or(Address::Plain),
        Err(message) => return usage_error(&message),
    };
    // The agent's control tokens: a reply that is only one is silence, one inside an answer is
    // cut before rendering.
    let silence = match SilenceTokens::from_env() {
        Ok(tokens) => tokens,
        Err(error) => return usage_error(&format!("MESH_SILENCE_TOKENS: {error}")),
    };
    let store_url = cli::store_url(args.store.clone());
    init_logs();

    let gate = if args.gate {
        match build_gate(&models, args.system_prompt.as_deref(), judge_model()) {
            Ok(gate) => gate,
            Err(message) => return usage_error(&message),
        }
    } else {
        QualityGate::off()
    };
    // `--store`: the conversation's lease backs the turn's ownership from the start, so losing
    // it stops recovery as well as delivery.
    let persistent = match turn_store::Persistent::start(store_url, &args.conversation).await {
        Ok(persistent) => persistent,
        Err(code) => return code,
    };
    let router = Arc::new(models.router());

    let started = Instant::now();
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let attribution = Attribution::new(
        "turn-example",
        args.conversation.as_str(),
        format!("run-{run}"),
    );
    let (follow_up, _warnings) = FollowUp::from_env();
    let policy = DegradationPolicy::default()
        .with_follow_up(follow_up.first_delay, follow_up.attempts)
        .with_silence_tokens(silence);
    let target = args.deliver.unwrap_or(Surface::Plain);
    // The front door: one bot, its one client the channel this turn prints (or delivers)
    // through, so a follow-up goes there too; with `--store`, the store's outbox under the
    // conversation's lease, and the store's promise keeper.
    let channel = if args.stream {
        match stream_channel(&args, delivery, &address, started) {
            Ok(channel) => channel,
            Err(code) => return code,
        }
    } else {
        match delivery.map(|delivery| delivery.channel(&address, args.json)) {
            Some(Ok(channel)) => channel,
            Some(Err(error)) => return usage_error(&error.to_string()),
            None => {
                BoxedChannel::new(Stdout::with_renderer(args.surface.renderer()).json(args.json))
            }
        }
    };
    let mut bot = Bot::new()
        .with_policy(policy)
        .with_gate(gate)
        .with_client(cli::OwnConversation(channel));
    if let Some(persistent) = &persistent {
        bot = bot.with_store(persistent.store().clone());
    }
    let turn = turn_bot::turn(&bot, address, attribution, args.mode, &args.prompt);
    let model = turn_bot::Model { router };
    // What the route is asked, stored with its promise: the gate's settings too, so `worker`
    // checks the follow-up as this turn checks its answer.
    let asked = turn_bot::Asked {
        prompt: args.prompt.clone(),
        system_prompt: args.system_prompt.clone(),
        gate: args.gate.then(|| turn_bot::GateSettings {
            judge_model: judge_model(),
        }),
    };
    match (persistent, args.stream) {
        (None, false) => {
            let handler = turn_bot::whole(model);
            turn_bot::run(&bot, &turn, handler, asked, args.follow_up, target).await
        }
        (None, true) => {
            let handler = turn_bot::streamed(model);
            turn_bot::run(&bot, &turn, handler, asked, args.follow_up, target).await
        }
        (Some(persistent), false) => {
            let turn = persistent.turn(turn);
            let handler = turn_bot::whole(model);
            persistent
                .run(&bot, &turn, handler, asked, args.follow_up, target)
                .await
        }
        (Some(persistent), true) => {
            let turn = persistent.turn(turn);
            let handler = turn_bot::streamed(model);
            persistent
                .run(&bot, &turn, handler, asked, args.follow_up, target)
                .await
        }
    }
}

/// `MESH_GATE_JUDGE_MODEL`, when set and not blank: the gate's judge.
fn judge_model() -> Option<String> {
    std::env::var("MESH_GATE_JUDGE_MODEL")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// The channel `--stream` goes through: stdout's (each block a message of its
/// own, printed as it is delivered), or the surface's own stream under `--deliver` (a Slack
/// stream in the thread, Telegram drafts, Discord edits, or blocks, or the final reply, as
/// `--stream-mode` says), each message printed when the surface confirms it.
fn stream_channel(
    args: &Args,
    delivery: Option<Delivery>,
    address: &Address,
    started: Instant,
) -> Result<BoxedChannel, ExitCode> {
    let Some(delivery) = delivery else {
        return Ok(BoxedChannel::new(cli::Tee::new(
            turn_stream::Rendering(args.surface.renderer()),
            cli::Printing::streamed(args.json, started),
        )));
    };
    let printer = turn_live::LivePrinter::new(args.json, started);
    let connector = delivery
        .with_stream_mode(args.stream_mode)
        .connector(address)
        .map_err(|error| usage_error(&error.to_string()))?;
    Ok(match connector {
        // Slack's streams take standard Markdown (`markdown_text`).
        cli::Connector::Slack(slack) => BoxedChannel::streaming(turn_live::Live::new(
            slack.with_renderer(SlackMarkdown::new()),
            printer,
        )),
        cli::Connector::Discord(discord) => {
            BoxedChannel::streaming(turn_live::Live::new(discord, printer))
        }
        cli::Connector::Telegram(telegram) => {
            BoxedChannel::streaming(turn_live::Live::new(telegram, printer))
        }
    })
}
