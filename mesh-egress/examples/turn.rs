//! One agent turn against any OpenAI-compatible endpoint, through the whole pipeline:
//! Router (Layer A) -> boundary -> Layer C -> render -> deliver to stdout.
//!
//! ```text
//! cargo run -q -p mesh-egress --example turn -- \
//!     [--mode interactive|proactive] [--channel plain|slack|discord|telegram] [--gate on|off] \
//!     [--system-prompt FILE] [--json] [--follow-up] [--deliver slack|discord|telegram] \
//!     [--stream] PROMPT
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
//! silent), 2 with one `error: ...` line for a usage error, 1 with one `error: ...` line (never
//! the cause) when delivery itself failed after its retries.
//!
//! `--channel` renders for that surface (Telegram in HTML parse mode) and prints its parts;
//! `--json` prints `{"part": N, "text": "..."}` per part, `text` being the exact payload.
//!
//! `--deliver slack|discord|telegram` sends the parts through that surface's real connector
//! (and implies the matching `--channel`; a different `--channel` is a usage error), then
//! prints each part that went, with `--json` as `{"part": N, "text": "...", "id": "..."}` (`id`
//! is the platform's message id). Credentials and target: `SLACK_BOT_TOKEN` +
//! `MESH_SLACK_CHANNEL`, `DISCORD_BOT_TOKEN` + `MESH_DISCORD_CHANNEL`, `TELEGRAM_BOT_TOKEN` +
//! `MESH_TELEGRAM_CHAT`; the public API unless `MESH_SLACK_API_URL` / `MESH_DISCORD_API_URL` /
//! `MESH_TELEGRAM_API_URL` names another base (a proxy, a loopback fake).
//! Without `--follow-up` a holding line is printed and the program exits; with it, the promised
//! follow-ups run first and print the real answer (or a handoff) when they end.
//!
//! `--stream` streams the answer through the whole pipeline (`boundary::stream`: routed stream
//! -> block cutter -> the gate's block check -> render -> commit -> send), each block a message
//! of its own, printed (or, with `--deliver`, sent) and flushed as it is delivered. With
//! `--json` each line also carries `"t_ms"`, the milliseconds since the turn started, and
//! `part` counts across the whole reply. The stream's bounds are
//! `MESH_MODEL_STREAM_FIRST_TOKEN_TIMEOUT_MS` and `MESH_MODEL_STREAM_IDLE_TIMEOUT_MS`. A failure
//! after blocks were shown never repeats them: a fallback route continues after them, or Layer
//! C answers for the rest (with `--follow-up`, the follow-up prints only what follows).

use std::future::Future;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use mesh_egress::CommittedPart;
use mesh_egress::boundary::{StreamPlan, deliver};
use mesh_egress::channel::{
    BoxedChannel, Channel, DiscordChannel, DiscordMarkdown, PartReceipt, PlainText, Render,
    SendError, SlackChannel, SlackMrkdwn, Stdout, TelegramChannel, TelegramHtml,
};
use mesh_egress::degrade::{DegradationPolicy, FollowUp, FollowUpRunner, Mode, resolve_in};
use mesh_egress::gate::{ModelJudge, QualityGate};
use mesh_egress::model::{ChatMessage, ChatRequest, OpenAiCompatible, RetryConfig, Route, Router};
use mesh_egress::{Attribution, Turn};

const USAGE: &str = "usage: turn [--mode interactive|proactive] \
                     [--channel plain|slack|discord|telegram] [--gate on|off] \
                     [--system-prompt FILE] [--json] [--follow-up] \
                     [--deliver slack|discord|telegram] [--stream] PROMPT";

/// The chat surface whose format the parts are rendered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

    fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Slack => "slack",
            Self::Discord => "discord",
            Self::Telegram => "telegram",
        }
    }

    /// The variables `--deliver` reads for this surface: bot token, target, API base.
    fn deliver_env(self) -> Option<[&'static str; 3]> {
        match self {
            Self::Plain => None,
            Self::Slack => Some([
                "SLACK_BOT_TOKEN",
                "MESH_SLACK_CHANNEL",
                "MESH_SLACK_API_URL",
            ]),
            Self::Discord => Some([
                "DISCORD_BOT_TOKEN",
                "MESH_DISCORD_CHANNEL",
                "MESH_DISCORD_API_URL",
            ]),
            Self::Telegram => Some([
                "TELEGRAM_BOT_TOKEN",
                "MESH_TELEGRAM_CHAT",
                "MESH_TELEGRAM_API_URL",
            ]),
        }
    }
}

/// Where `--deliver` sends the parts: one surface's real connector. (No `Debug`: it holds the
/// bot token.)
struct Delivery {
    surface: Surface,
    token: String,
    target: String,
    api_url: Option<String>,
}

impl Delivery {
    /// The credentials, target and API base for `surface`, from the environment.
    fn from_env(surface: Surface) -> Result<Self, String> {
        let [token, target, api_url] = surface
            .deliver_env()
            .ok_or_else(|| format!("--deliver {} is not a chat surface", surface.name()))?;
        let api_url = std::env::var(api_url)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|url| {
                if url.starts_with("http://") || url.starts_with("https://") {
                    Ok(url)
                } else {
                    Err(format!("{api_url} {url:?} is not an http(s) URL"))
                }
            })
            .transpose()?;
        Ok(Self {
            surface,
            token: required_env(token)?,
            target: required_env(target)?,
            api_url,
        })
    }

    /// The connector, printing each part that went.
    fn channel(self, json: bool) -> BoxedChannel {
        let Self {
            surface,
            token,
            target,
            api_url,
        } = self;
        match surface {
            Surface::Slack => {
                let mut slack = SlackChannel::new(token, target);
                if let Some(url) = api_url {
                    slack = slack.base_url(url);
                }
                BoxedChannel::new(Tee::new(slack, json))
            }
            Surface::Discord => {
                let mut discord = DiscordChannel::new(token, target);
                if let Some(url) = api_url {
                    discord = discord.base_url(url);
                }
                BoxedChannel::new(Tee::new(discord, json))
            }
            // `from_env` refuses plain; it shares Telegram's arm only to keep the match total.
            Surface::Telegram | Surface::Plain => {
                let mut telegram = TelegramChannel::new(token, target);
                if let Some(url) = api_url {
                    telegram = telegram.base_url(url);
                }
                BoxedChannel::new(Tee::new(telegram, json))
            }
        }
    }
}

/// A connector that, once a part has gone, prints it as `turn` prints parts: the text, or with
/// `--json` `{"part": N, "text": "...", "id": "..."}`.
struct Tee<C> {
    inner: C,
    json: bool,
}

impl<C: Channel> Tee<C> {
    fn new(inner: C, json: bool) -> Self {
        Self { inner, json }
    }
}

impl<C: Channel> Channel for Tee<C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        self.inner.renderer()
    }

    fn commit(
        &self,
        record: &mesh_egress::CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), mesh_egress::CommitError>> + Send {
        self.inner.commit(record)
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let number = part.index() + 1;
        let text = part.text().to_owned();
        let sent = self.inner.send(part);
        let json = self.json;
        async move {
            let receipt = sent.await?;
            let line = if json {
                format!(
                    "{{\"part\":{number},\"text\":{},\"id\":{}}}\n",
                    serde_json::Value::from(text),
                    serde_json::Value::from(receipt.id())
                )
            } else {
                format!("{text}\n")
            };
            // The part went: a closed stdout cannot undo that, so it does not fail the send.
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
            Ok(receipt)
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
    deliver: Option<Surface>,
    stream: bool,
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

fn surface_named(name: &str) -> Option<Surface> {
    [
        Surface::Plain,
        Surface::Slack,
        Surface::Discord,
        Surface::Telegram,
    ]
    .into_iter()
    .find(|s| s.name() == name)
}

fn parse(argv: &[String]) -> Result<Parsed, String> {
    let mut mode = Mode::Interactive;
    let mut channel = None;
    let mut deliver = None;
    let mut gate = false;
    let (mut json, mut follow_up, mut stream) = (false, false, false);
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
                let name = value(flag, inline, &mut rest)?;
                channel = Some(surface_named(name).ok_or_else(|| {
                    format!("unknown --channel {name:?} (plain|slack|discord|telegram)")
                })?);
            }
            "--deliver" => {
                let name = value(flag, inline, &mut rest)?;
                deliver = Some(
                    surface_named(name)
                        .filter(|s| s.deliver_env().is_some())
                        .ok_or_else(|| {
                            format!("unknown --deliver {name:?} (slack|discord|telegram)")
                        })?,
                );
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
            "--stream" if inline.is_none() => stream = true,
            _ => return Err(format!("unknown flag {arg}")),
        }
    }
    let surface = match (channel, deliver) {
        (Some(channel), Some(deliver)) if channel != deliver => {
            return Err(format!(
                "--channel {} does not match --deliver {} (--deliver implies its channel)",
                channel.name(),
                deliver.name()
            ));
        }
        (_, Some(surface)) | (Some(surface), None) => surface,
        (None, None) => Surface::Plain,
    };
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
        stream,
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
    let delivery = match args.deliver.map(Delivery::from_env).transpose() {
        Ok(delivery) => delivery,
        Err(message) => return usage_error(&message),
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

    let started = Instant::now();
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

    // The un-annotated turn: Layer A, then the opt-in gate. Follow-ups run it again. A tool-only
    // or empty completion is an EgressError (this turn offers no tools), never an empty body.
    let answer = || async {
        let result = router
            .complete(&turn, &request)
            .await
            .and_then(|completion| completion.into_message(&turn));
        gate.check(&turn, args.prompt.as_str(), result).await
    };

    let (follow_up, _warnings) = FollowUp::from_env();
    let policy =
        DegradationPolicy::default().with_follow_up(follow_up.first_delay, follow_up.attempts);
    if args.stream {
        let plan = StreamPlan::new(args.mode, &policy).with_gate(&gate, args.prompt.as_str());
        let channel = match delivery {
            Some(delivery) => delivery.stream_channel(args.json, started),
            None => BoxedChannel::new(Printed::new(
                Rendering(args.surface.renderer()),
                args.json,
                started,
            )),
        };
        return stream_turn(&args, &turn, &plan, &channel, &router, &request, answer).await;
    }
    // The turn-aware boundary: Layer C's rows land on the turn's ledger, and every message of the
    // reply is refused by the channel once the turn no longer owns the conversation.
    let reply = resolve_in(&turn, args.mode, &policy, answer().await);
    tracing::info!(target: "mesh_egress::degrade", reply = reply.kind(), mode = args.mode.as_str(), "turn ended");

    let target = args.deliver.unwrap_or(Surface::Plain);
    let channel = match delivery {
        Some(delivery) => delivery.channel(args.json),
        None => BoxedChannel::new(Stdout::with_renderer(args.surface.renderer()).json(args.json)),
    };
    // Rendered for the channel before anything is committed: a reply that renders to nothing
    // (a lone `>`, an empty fence) or that the channel cannot carry goes to Layer C too.
    let mut receipt = match deliver(&turn, args.mode, &policy, &channel, reply).await {
        Ok(receipt) => receipt,
        Err(error) => return delivery_failed(target, &error),
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
        .with_ledger(turn.ledger().clone())
        .run(commitment, &channel, answer)
        .await
    {
        Ok(outcome) => {
            tracing::info!(target: "mesh_egress::degrade", outcome = ?outcome, "follow-up ended");
            ExitCode::SUCCESS
        }
        Err(error) => delivery_failed(target, &error),
    }
}

/// Exit 1 after a delivery that failed after its retries: one plain `error:` line naming where
/// it went, never the cause (the log line carries only the delivery error's own text, which
/// names parts, not causes).
fn delivery_failed(target: Surface, error: &mesh_egress::channel::DeliveryError) -> ExitCode {
    let to = match target {
        Surface::Plain => "stdout",
        surface => surface.name(),
    };
    tracing::error!(target: "mesh_egress::egress", error = %error, to, "delivery failed");
    eprintln!("error: delivery to {to} failed");
    ExitCode::FAILURE
}

// ---- `--stream` ----

impl Delivery {
    /// The connector for `--stream --deliver`: each block that went is printed like `turn`
    /// prints parts, with `"t_ms"` under `--json`.
    fn stream_channel(self, json: bool, started: Instant) -> BoxedChannel {
        let Self {
            surface,
            token,
            target,
            api_url,
        } = self;
        match surface {
            Surface::Slack => {
                let mut slack = SlackChannel::new(token, target);
                if let Some(url) = api_url {
                    slack = slack.base_url(url);
                }
                BoxedChannel::new(Printed::new(slack, json, started).with_ids())
            }
            Surface::Discord => {
                let mut discord = DiscordChannel::new(token, target);
                if let Some(url) = api_url {
                    discord = discord.base_url(url);
                }
                BoxedChannel::new(Printed::new(discord, json, started).with_ids())
            }
            // `from_env` refuses plain; it shares Telegram's arm only to keep the match total.
            Surface::Telegram | Surface::Plain => {
                let mut telegram = TelegramChannel::new(token, target);
                if let Some(url) = api_url {
                    telegram = telegram.base_url(url);
                }
                BoxedChannel::new(Printed::new(telegram, json, started).with_ids())
            }
        }
    }
}

/// A surface's format with nothing behind it: what `--stream` prints to stdout through.
struct Rendering(Box<dyn Render>);

impl Channel for Rendering {
    type Renderer = Box<dyn Render>;

    fn renderer(&self) -> &Box<dyn Render> {
        &self.0
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}

/// Prints each part once it has gone through `inner`, flushed at once: its text, or with
/// `--json` `{"part": N, "text": "...", "t_ms": N}` (plus `"id"` for a real surface). Streamed
/// blocks are messages of their own, so `part` is counted here, across the whole reply.
struct Printed<C> {
    inner: C,
    json: bool,
    ids: bool,
    started: Instant,
    printed: AtomicUsize,
}

impl<C: Channel> Printed<C> {
    fn new(inner: C, json: bool, started: Instant) -> Self {
        Self {
            inner,
            json,
            ids: false,
            started,
            printed: AtomicUsize::new(0),
        }
    }

    fn with_ids(mut self) -> Self {
        self.ids = true;
        self
    }
}

impl<C: Channel> Channel for Printed<C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        self.inner.renderer()
    }

    fn commit(
        &self,
        record: &mesh_egress::CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), mesh_egress::CommitError>> + Send {
        self.inner.commit(record)
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let text = part.text().to_owned();
        let sent = self.inner.send(part);
        async move {
            let receipt = sent.await?;
            let number = self.printed.fetch_add(1, Ordering::Relaxed) + 1;
            let t_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let line = match (self.json, self.ids) {
                (false, _) => format!("{text}\n"),
                (true, false) => format!(
                    "{{\"part\":{number},\"text\":{},\"t_ms\":{t_ms}}}\n",
                    serde_json::Value::from(text)
                ),
                (true, true) => format!(
                    "{{\"part\":{number},\"text\":{},\"id\":{},\"t_ms\":{t_ms}}}\n",
                    serde_json::Value::from(text),
                    serde_json::Value::from(receipt.id())
                ),
            };
            // The part went: a closed stdout cannot undo that, so it does not fail the send.
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
            Ok(receipt)
        }
    }
}

/// The streamed turn: `boundary::stream` from the Router's stream to `channel`, then the
/// follow-up for the rest when Layer C promised one and `--follow-up` asks for it.
async fn stream_turn<F, Fut>(
    args: &Args,
    turn: &Turn,
    plan: &StreamPlan<'_>,
    channel: &BoxedChannel,
    router: &Router<OpenAiCompatible>,
    request: &ChatRequest,
    answer: F,
) -> ExitCode
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<mesh_egress::AgentMessage, mesh_egress::EgressError>>,
{
    let target = args.deliver.unwrap_or(Surface::Plain);
    let source = router.stream(turn, request);
    let mut receipt = match mesh_egress::boundary::stream(turn, plan, channel, source).await {
        Ok(receipt) => receipt,
        Err(error) => return delivery_failed(target, &error),
    };
    tracing::info!(
        target: "mesh_egress::degrade",
        end = ?receipt.end(),
        blocks = receipt.blocks().len(),
        delivered_bytes = receipt.delivered().len(),
        mode = args.mode.as_str(),
        "streamed turn ended"
    );
    let Some(rest) = receipt.take_rest() else {
        return ExitCode::SUCCESS;
    };
    if !args.follow_up {
        let commitment = rest.commitment();
        tracing::info!(
            target: "mesh_egress::degrade",
            commitment = %commitment.id(),
            first_delay_ms = u64::try_from(commitment.first_delay().as_millis()).unwrap_or(u64::MAX),
            attempts = commitment.attempts(),
            delivered_bytes = rest.delivered().len(),
            "holding line sent; follow-up not run (no --follow-up)"
        );
        let _kept_on_the_ledger = rest.into_parts();
        return ExitCode::SUCCESS;
    }
    let runner = FollowUpRunner::new(plan.policy().clone()).with_ledger(turn.ledger().clone());
    match rest.keep(&runner, channel, answer).await {
        Ok(outcome) => {
            tracing::info!(target: "mesh_egress::degrade", outcome = ?outcome, "follow-up ended");
            ExitCode::SUCCESS
        }
        Err(error) => delivery_failed(target, &error),
    }
}
