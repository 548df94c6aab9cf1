//! What the `turn` and `worker` examples share: the surfaces and their connectors from the
//! environment, the printing connector, the model and gate settings, the follow-up handler
//! both register, and the small command-line helpers. Both examples include this file with
//! `#[path]`, so each uses only part of it.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use mesh_egress::CommittedPart;
use mesh_egress::channel::stream::StreamMode;
use mesh_egress::channel::{
    BoxedChannel, Channel, DiscordChannel, DiscordMarkdown, PartReceipt, PlainText, Render,
    SendError, SlackChannel, SlackMrkdwn, TelegramChannel, TelegramHtml,
};
use mesh_egress::gate::{ModelJudge, QualityGate};
use mesh_egress::model::{ChatMessage, ChatRequest, OpenAiCompatible, RetryConfig, Route, Router};
use mesh_egress::{AgentMessage, EgressError, Turn};

/// The chat surface whose format the parts are rendered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Surface {
    Plain,
    Slack,
    Discord,
    Telegram,
}

impl Surface {
    pub(crate) fn renderer(self) -> Box<dyn Render> {
        match self {
            Self::Plain => Box::new(PlainText::new()),
            Self::Slack => Box::new(SlackMrkdwn::new()),
            Self::Discord => Box::new(DiscordMarkdown::new()),
            Self::Telegram => Box::new(TelegramHtml::new()),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Slack => "slack",
            Self::Discord => "discord",
            Self::Telegram => "telegram",
        }
    }

    /// The variables `--deliver` reads for this surface: bot token, target, API base.
    pub(crate) fn deliver_env(self) -> Option<[&'static str; 3]> {
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
pub(crate) struct Delivery {
    surface: Surface,
    token: String,
    target: String,
    api_url: Option<String>,
    /// Slack: the thread to post in (`MESH_SLACK_THREAD_TS`), where native streams work.
    thread_ts: Option<String>,
    /// Slack: the user and team a stream outside a DM is for (`MESH_SLACK_RECIPIENT_USER`,
    /// `MESH_SLACK_RECIPIENT_TEAM`).
    recipient: Option<(String, String)>,
    /// `--stream-mode`: how the connector streams (else its surface's default).
    stream_mode: Option<StreamMode>,
}

/// A surface's connector, built from a [`Delivery`].
pub(crate) enum Connector {
    Slack(SlackChannel),
    Discord(DiscordChannel),
    Telegram(TelegramChannel),
}

fn optional_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Delivery {
    /// The credentials, target and API base for `surface`, from the environment.
    pub(crate) fn from_env(surface: Surface) -> Result<Self, String> {
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
        let (thread_ts, recipient) = if surface == Surface::Slack {
            let user = optional_env("MESH_SLACK_RECIPIENT_USER");
            let team = optional_env("MESH_SLACK_RECIPIENT_TEAM");
            let recipient = match (user, team) {
                (Some(user), Some(team)) => Some((user, team)),
                (None, None) => None,
                _ => {
                    return Err(
                        "MESH_SLACK_RECIPIENT_USER and MESH_SLACK_RECIPIENT_TEAM go \
                                together (Slack needs both to stream outside a DM)"
                            .into(),
                    );
                }
            };
            (optional_env("MESH_SLACK_THREAD_TS"), recipient)
        } else {
            (None, None)
        };
        Ok(Self {
            surface,
            token: required_env(token)?,
            target: required_env(target)?,
            api_url,
            thread_ts,
            recipient,
            stream_mode: None,
        })
    }

    /// Streams in `mode` when one is given (`--stream-mode`).
    pub(crate) fn with_stream_mode(mut self, mode: Option<StreamMode>) -> Self {
        self.stream_mode = mode;
        self
    }

    /// The surface's connector (Slack in its thread, with its stream's recipient).
    pub(crate) fn connector(self) -> Connector {
        let Self {
            surface,
            token,
            target,
            api_url,
            thread_ts,
            recipient,
            stream_mode,
        } = self;
        match surface {
            Surface::Slack => {
                let mut slack = SlackChannel::new(token, target);
                if let Some(url) = api_url {
                    slack = slack.base_url(url);
                }
                if let Some(ts) = thread_ts {
                    slack = slack.in_thread(ts);
                }
                if let Some((user, team)) = recipient {
                    slack = slack.with_stream_recipient(user, team);
                }
                if let Some(mode) = stream_mode {
                    slack = slack.with_stream_mode(mode);
                }
                Connector::Slack(slack)
            }
            Surface::Discord => {
                let mut discord = DiscordChannel::new(token, target);
                if let Some(url) = api_url {
                    discord = discord.base_url(url);
                }
                if let Some(mode) = stream_mode {
                    discord = discord.with_stream_mode(mode);
                }
                Connector::Discord(discord)
            }
            // `from_env` refuses plain; it shares Telegram's arm only to keep the match total.
            Surface::Telegram | Surface::Plain => {
                let mut telegram = TelegramChannel::new(token, target);
                if let Some(url) = api_url {
                    telegram = telegram.base_url(url);
                }
                if let Some(mode) = stream_mode {
                    telegram = telegram.with_stream_mode(mode);
                }
                Connector::Telegram(telegram)
            }
        }
    }

    /// The connector, printing each part that went.
    pub(crate) fn channel(self, json: bool) -> BoxedChannel {
        self.printing(Printing::parts(json).with_ids())
    }

    fn printing(self, printing: Printing) -> BoxedChannel {
        match self.connector() {
            Connector::Slack(slack) => BoxedChannel::new(Tee::new(slack, printing)),
            Connector::Discord(discord) => BoxedChannel::new(Tee::new(discord, printing)),
            Connector::Telegram(telegram) => BoxedChannel::new(Tee::new(telegram, printing)),
        }
    }
}

/// How a [`Tee`] prints a part that went.
pub(crate) struct Printing {
    json: bool,
    ids: bool,
    /// `--stream`: when the turn started (for `"t_ms"`) and the parts printed so far (streamed
    /// blocks are messages of their own, so `part` is counted here, across the whole reply).
    streamed: Option<(Instant, AtomicUsize)>,
}

impl Printing {
    /// Parts numbered within their message, as `turn` prints them.
    pub(crate) fn parts(json: bool) -> Self {
        Self {
            json,
            ids: false,
            streamed: None,
        }
    }

    /// Streamed blocks: numbered across the reply, with `"t_ms"` since `started`.
    pub(crate) fn streamed(json: bool, started: Instant) -> Self {
        Self {
            json,
            ids: false,
            streamed: Some((started, AtomicUsize::new(0))),
        }
    }

    /// Adds the surface's message id (`"id"`) under `--json`.
    pub(crate) fn with_ids(mut self) -> Self {
        self.ids = true;
        self
    }

    fn line(&self, index: usize, text: String, id: &str) -> String {
        if !self.json {
            return format!("{text}\n");
        }
        let number = match &self.streamed {
            Some((_, printed)) => printed.fetch_add(1, Ordering::Relaxed) + 1,
            None => index + 1,
        };
        // Field by field, in the contract's order: `part`, `text`, then `id`, then `t_ms`.
        let mut line = format!(
            "{{\"part\":{number},\"text\":{}",
            serde_json::Value::from(text)
        );
        if self.ids {
            line.push_str(&format!(",\"id\":{}", serde_json::Value::from(id)));
        }
        if let Some((started, _)) = &self.streamed {
            let t_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            line.push_str(&format!(",\"t_ms\":{t_ms}"));
        }
        line.push_str("}\n");
        line
    }
}

/// A connector that, once a part has gone, prints it as `turn` prints parts: the text, or with
/// `--json` `{"part": N, "text": "...", "id": "..."}` (see [`Printing`]), flushed at once.
pub(crate) struct Tee<C> {
    inner: C,
    printing: Printing,
}

impl<C: Channel> Tee<C> {
    pub(crate) fn new(inner: C, printing: Printing) -> Self {
        Self { inner, printing }
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

    // A part found on the surface was shown by an earlier process: it is reconciled, not
    // printed again.
    fn look_up(
        &self,
        part: &CommittedPart,
        since: std::time::SystemTime,
    ) -> impl Future<Output = mesh_egress::channel::PartLookup> + Send {
        self.inner.look_up(part, since)
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let index = part.index();
        let text = part.text().to_owned();
        let sent = self.inner.send(part);
        async move {
            let receipt = sent.await?;
            let line = self.printing.line(index, text, receipt.id());
            // The part went: a closed stdout cannot undo that, so it does not fail the send.
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
            Ok(receipt)
        }
    }
}

pub(crate) fn value<'a>(
    flag: &str,
    inline: Option<&'a str>,
    rest: &mut impl Iterator<Item = &'a String>,
) -> Result<&'a str, String> {
    inline
        .or_else(|| rest.next().map(String::as_str))
        .ok_or_else(|| format!("{flag} needs a value"))
}

pub(crate) fn surface_named(name: &str) -> Option<Surface> {
    [
        Surface::Plain,
        Surface::Slack,
        Surface::Discord,
        Surface::Telegram,
    ]
    .into_iter()
    .find(|s| s.name() == name)
}

pub(crate) fn required_env(name: &str) -> Result<String, String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| format!("{name} is not set"))
}

pub(crate) fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

pub(crate) fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Exit 1 after a delivery that failed after its retries: one plain `error:` line naming where
/// it went, never the cause (the log line carries only the delivery error's own text, which
/// names parts, not causes).
pub(crate) fn delivery_failed(
    target: Surface,
    error: &mesh_egress::channel::DeliveryError,
) -> ExitCode {
    let to = match target {
        Surface::Plain => "stdout",
        surface => surface.name(),
    };
    tracing::error!(target: "mesh_egress::egress", error = %error, to, "delivery failed");
    eprintln!("error: delivery to {to} failed");
    ExitCode::FAILURE
}

impl Surface {
    /// The outbox surface parts for this target are recorded under: stdout cannot dedupe, so
    /// everything but a real connector is plain.
    pub(crate) fn stored(deliver: Option<Self>) -> mesh_egress::store::Surface {
        match deliver {
            Some(Self::Slack) => mesh_egress::store::Surface::Slack,
            Some(Self::Discord) => mesh_egress::store::Surface::Discord,
            Some(Self::Telegram) => mesh_egress::store::Surface::Telegram,
            Some(Self::Plain) | None => mesh_egress::store::Surface::Plain,
        }
    }
}

/// The model endpoint `MESH_MODEL_BASE_URL` / `MESH_MODEL` / `MESH_MODEL_API_KEY` name: the
/// connector and the primary model, or the usage error to print.
pub(crate) fn model_from_env() -> Result<(OpenAiCompatible, String), String> {
    let (base_url, model) = match (
        required_env("MESH_MODEL_BASE_URL"),
        required_env("MESH_MODEL"),
    ) {
        (Ok(base_url), Ok(model)) => (base_url, model),
        (Err(message), _) | (_, Err(message)) => return Err(message),
    };
    let connector = OpenAiCompatible::new(&base_url)
        .map_err(|_| format!("MESH_MODEL_BASE_URL {base_url:?} is not a valid URL"))?;
    Ok((
        connector.with_api_key(std::env::var("MESH_MODEL_API_KEY").unwrap_or_default()),
        model,
    ))
}

/// The gate `--gate on` runs: the system-prompt overlap check when there is a system prompt,
/// and the judge `judge_model` names (on the same endpoint) when there is one.
pub(crate) fn build_gate(
    connector: &OpenAiCompatible,
    system_prompt: Option<&str>,
    judge_model: Option<String>,
) -> Result<QualityGate, String> {
    let mut builder = QualityGate::builder();
    if let Some(prompt) = system_prompt {
        builder = builder.system_prompt(prompt.to_owned(), 0.5);
    }
    if let Some(judge_model) = judge_model {
        // The judge rides the same endpoint and plumbing as the turn, on one route of its own.
        let judge = Router::with_routes(
            connector.clone(),
            Route::new(judge_model),
            [],
            RetryConfig::from_env(),
        );
        builder = builder.judge(ModelJudge::new(judge));
    }
    builder
        .build()
        .map_err(|error| format!("--gate on: {error}"))
}

/// The name the examples' follow-up handler is registered under, stored with each promise.
pub(crate) const HANDLER: &str = "turn-example.answer";

/// The task input's field with the Markdown a streamed turn showed before its holding line:
/// the follow-up delivers only what follows it (`boundary::rest_after`).
pub(crate) const DELIVERED_INPUT: &str = "delivered";

/// What a promise of `turn` stores: the prompt as input, and the gate settings of the turn
/// (`None` with the gate off).
pub(crate) fn follow_up_task(
    mode: mesh_egress::degrade::Mode,
    prompt: &str,
    gate: bool,
    system_prompt: Option<&str>,
) -> mesh_egress::store::FollowUpTask {
    let mut task = mesh_egress::store::FollowUpTask::new(
        HANDLER,
        serde_json::json!({ "prompt": prompt }),
        mode,
    );
    if gate {
        let judge = std::env::var("MESH_GATE_JUDGE_MODEL")
            .ok()
            .filter(|v| !v.trim().is_empty());
        task = task.with_gate(serde_json::json!({ "judge_model": judge }));
    }
    if let Some(system) = system_prompt {
        task = task.with_system_prompt(system);
    }
    task
}

/// The gate a stored task asks for, built as `turn --gate on` builds it. A gate that cannot be
/// built fails closed on known leaks: the heuristics-only gate.
pub(crate) fn gate_for_task(
    connector: &OpenAiCompatible,
    task: &mesh_egress::store::FollowUpTask,
) -> QualityGate {
    let judge = task
        .gate
        .as_ref()
        .and_then(|gate| gate.get("judge_model"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    build_gate(connector, task.system_prompt.as_deref(), judge).unwrap_or_else(|error| {
        tracing::warn!(target: "mesh_egress::gate", error = %error, "stored gate settings rejected; heuristics only");
        QualityGate::builder()
            .build()
            .unwrap_or_else(|_| QualityGate::off())
    })
}

/// The chat request of one turn: the system prompt, if any, then the user's prompt.
pub(crate) fn chat_request(system_prompt: Option<&str>, prompt: &str) -> ChatRequest {
    let mut messages = Vec::new();
    if let Some(system) = system_prompt {
        messages.push(ChatMessage::system(system.to_owned()));
    }
    messages.push(ChatMessage::user(prompt.to_owned()));
    ChatRequest::new(messages)
}

/// The follow-up handler both examples register under [`HANDLER`]: re-asks the model the
/// stored prompt (with the stored system prompt) through the same `Router` settings as the
/// turn. The worker re-runs the gate around it from the stored settings.
pub(crate) fn answer_handler(
    router: Arc<Router<OpenAiCompatible>>,
) -> impl Fn(
    mesh_egress::store::FollowUpTask,
    Turn,
) -> std::pin::Pin<Box<dyn Future<Output = Result<AgentMessage, EgressError>> + Send>>
+ Send
+ Sync
+ 'static {
    move |task, turn| {
        let router = Arc::clone(&router);
        Box::pin(async move {
            let prompt = task
                .input
                .get("prompt")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let request = chat_request(task.system_prompt.as_deref(), prompt);
            let answer = router
                .complete(&turn, &request)
                .await
                .and_then(|completion| completion.into_message(&turn))?;
            // A streamed turn's promise: only what follows the blocks already shown.
            match task
                .input
                .get(DELIVERED_INPUT)
                .and_then(serde_json::Value::as_str)
            {
                Some(delivered) => mesh_egress::boundary::rest_after(delivered, answer),
                None => Ok(answer),
            }
        })
    }
}

/// The store `--store` (or `MESH_STORE_URL`) names: `Ok(None)` without one, the usage error
/// for a URL no backend takes, exit 1 with one `error:` line when it cannot be opened.
pub(crate) async fn open_store(
    url: Option<&str>,
) -> Result<Option<mesh_egress::store::Store>, ExitCode> {
    use mesh_egress::store::{Store, StoreError};
    let Some(url) = url else {
        return Ok(None);
    };
    match Store::open(url).await {
        Ok(store) => Ok(Some(store)),
        Err(
            error @ (StoreError::UnsupportedUrl { .. }
            | StoreError::BackendDisabled { .. }
            | StoreError::NotDurable),
        ) => Err(usage_error(&format!("--store: {error}"))),
        Err(error) => {
            tracing::error!(target: "mesh_egress::store", error = %error, "store could not be opened");
            eprintln!("error: the store could not be opened");
            Err(ExitCode::FAILURE)
        }
    }
}

/// `--store URL`, else `MESH_STORE_URL` when set and not empty.
pub(crate) fn store_url(flag: Option<String>) -> Option<String> {
    flag.or_else(|| {
        std::env::var("MESH_STORE_URL")
            .ok()
            .filter(|v| !v.trim().is_empty())
    })
}

/// A holder name unique to this process: claims and leases are taken under it.
pub(crate) fn holder_name(program: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{program}-{}-{nanos:x}", std::process::id())
}

/// `--channel NAME`: any surface.
pub(crate) fn channel_flag(name: &str) -> Result<Surface, String> {
    surface_named(name)
        .ok_or_else(|| format!("unknown --channel {name:?} (plain|slack|discord|telegram)"))
}

/// `--deliver NAME`: a surface with a real connector.
pub(crate) fn deliver_flag(name: &str) -> Result<Surface, String> {
    surface_named(name)
        .filter(|s| s.deliver_env().is_some())
        .ok_or_else(|| format!("unknown --deliver {name:?} (slack|discord|telegram)"))
}

/// The surface the parts are rendered for: `--deliver` implies its channel, a different
/// `--channel` is a usage error, neither means plain.
pub(crate) fn chosen_surface(
    channel: Option<Surface>,
    deliver: Option<Surface>,
) -> Result<Surface, String> {
    match (channel, deliver) {
        (Some(channel), Some(deliver)) if channel != deliver => Err(format!(
            "--channel {} does not match --deliver {} (--deliver implies its channel)",
            channel.name(),
            deliver.name()
        )),
        (_, Some(surface)) | (Some(surface), None) => Ok(surface),
        (None, None) => Ok(Surface::Plain),
    }
}
