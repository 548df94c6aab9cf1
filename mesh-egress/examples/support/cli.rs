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

use mesh_egress::address::{DiscordAddress, SlackAddress, TelegramAddress};
use mesh_egress::channel::stream::StreamMode;
use mesh_egress::channel::{
    BoxedChannel, Channel, DiscordChannel, DiscordClient, DiscordMarkdown, PartReceipt, PlainText,
    Render, SendError, SlackChannel, SlackClient, SlackMrkdwn, SurfaceClient, TelegramChannel,
    TelegramClient, TelegramHtml, UnservedAddress,
};
use mesh_egress::degrade::{Mode, Reply};
use mesh_egress::gate::{ModelJudge, QualityGate};
use mesh_egress::model::{ChatMessage, ChatRequest, Provider, Router};

// The model settings, shared with `ingress` (which reads only its judge's).
#[path = "providers.rs"]
mod providers;
use mesh_egress::{Address, CommittedPart};
use mesh_egress::{AgentMessage, EgressError, Turn, egress_boundary};
pub(crate) use providers::{Models, max_tokens, model_from_env, required_env};

/// The chat surface whose format the parts are rendered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Surface {
    Plain,
    Slack,
    Discord,
    Telegram,
}

impl Surface {
    /// The surface's format (shared: a stdout client hands one to every conversation).
    pub(crate) fn renderer(self) -> Arc<dyn Render> {
        match self {
            Self::Plain => Arc::new(PlainText::new()),
            Self::Slack => Arc::new(SlackMrkdwn::new()),
            Self::Discord => Arc::new(DiscordMarkdown::new()),
            Self::Telegram => Arc::new(TelegramHtml::new()),
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

    /// The variables `--deliver` reads for this surface: the bot token and the API base.
    pub(crate) fn deliver_env(self) -> Option<[&'static str; 2]> {
        match self {
            Self::Plain => None,
            Self::Slack => Some(["SLACK_BOT_TOKEN", "MESH_SLACK_API_URL"]),
            Self::Discord => Some(["DISCORD_BOT_TOKEN", "MESH_DISCORD_API_URL"]),
            Self::Telegram => Some(["TELEGRAM_BOT_TOKEN", "MESH_TELEGRAM_API_URL"]),
        }
    }
}

/// The destination `turn --deliver` sends to, from the surface's variables: Slack's
/// `MESH_SLACK_CHANNEL` (and `MESH_SLACK_THREAD_TS`, `MESH_SLACK_RECIPIENT_USER` +
/// `MESH_SLACK_RECIPIENT_TEAM`), Discord's `MESH_DISCORD_CHANNEL`, Telegram's
/// `MESH_TELEGRAM_CHAT` (and `MESH_TELEGRAM_TOPIC`); stdout's one destination for plain.
pub(crate) fn destination_from_env(surface: Surface) -> Result<Address, String> {
    let address: Address = match surface {
        Surface::Plain => return Ok(Address::Plain),
        Surface::Slack => {
            let mut slack = SlackAddress::new(required_env("MESH_SLACK_CHANNEL")?);
            if let Some(ts) = optional_env("MESH_SLACK_THREAD_TS") {
                slack = slack.in_thread(ts);
            }
            match (
                optional_env("MESH_SLACK_RECIPIENT_USER"),
                optional_env("MESH_SLACK_RECIPIENT_TEAM"),
            ) {
                (Some(user), Some(team)) => slack = slack.for_recipient(user, team),
                (None, None) => {}
                _ => {
                    return Err(
                        "MESH_SLACK_RECIPIENT_USER and MESH_SLACK_RECIPIENT_TEAM go \
                                together (Slack needs both to stream outside a DM)"
                            .into(),
                    );
                }
            }
            slack.into()
        }
        Surface::Discord => DiscordAddress::new(required_env("MESH_DISCORD_CHANNEL")?).into(),
        Surface::Telegram => {
            let mut telegram = TelegramAddress::new(required_env("MESH_TELEGRAM_CHAT")?);
            if let Some(topic) = optional_env("MESH_TELEGRAM_TOPIC") {
                let topic = topic
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("MESH_TELEGRAM_TOPIC {topic:?} is not a topic id"))?;
                telegram = telegram.in_topic(topic);
            }
            telegram.into()
        }
    };
    address
        .validate()
        .map_err(|error| format!("the {} destination is not valid: {error}", surface.name()))?;
    Ok(address)
}

/// What `--deliver` sends through: one surface's bot token and API base. (No `Debug`: it
/// holds the bot token.)
pub(crate) struct Delivery {
    surface: Surface,
    token: String,
    api_url: Option<String>,
    /// `--stream-mode`: how the connector streams (else its surface's default).
    stream_mode: Option<StreamMode>,
}

/// A surface's client, built from a [`Delivery`].
pub(crate) enum Client {
    Slack(SlackClient),
    Discord(DiscordClient),
    Telegram(TelegramClient),
}

/// A surface's connector to one conversation: a [`Client`] and an address.
pub(crate) enum Connector {
    Slack(SlackChannel),
    Discord(DiscordChannel),
    Telegram(TelegramChannel),
}

fn optional_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Delivery {
    /// The credentials and API base for `surface`, from the environment: all a client needs
    /// (each conversation's destination is its own).
    pub(crate) fn from_env(surface: Surface) -> Result<Self, String> {
        let [token, api_url] = surface
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
            api_url,
            stream_mode: None,
        })
    }

    /// Streams in `mode` when one is given (`--stream-mode`).
    pub(crate) fn with_stream_mode(mut self, mode: Option<StreamMode>) -> Self {
        self.stream_mode = mode;
        self
    }

    /// The surface's client.
    pub(crate) fn client(self) -> Client {
        let Self {
            surface,
            token,
            api_url,
            stream_mode,
        } = self;
        match surface {
            Surface::Slack => {
                let mut slack = SlackClient::new(token);
                if let Some(url) = api_url {
                    slack = slack.base_url(url);
                }
                if let Some(mode) = stream_mode {
                    slack = slack.with_stream_mode(mode);
                }
                Client::Slack(slack)
            }
            Surface::Discord => {
                let mut discord = DiscordClient::new(token);
                if let Some(url) = api_url {
                    discord = discord.base_url(url);
                }
                if let Some(mode) = stream_mode {
                    discord = discord.with_stream_mode(mode);
                }
                Client::Discord(discord)
            }
            // `from_env` refuses plain; it shares Telegram's arm only to keep the match total.
            Surface::Telegram | Surface::Plain => {
                let mut telegram = TelegramClient::new(token);
                if let Some(url) = api_url {
                    telegram = telegram.base_url(url);
                }
                if let Some(mode) = stream_mode {
                    telegram = telegram.with_stream_mode(mode);
                }
                Client::Telegram(telegram)
            }
        }
    }

    /// The surface's connector to `address` (from [`destination_from_env`], so of this
    /// surface).
    pub(crate) fn connector(self, address: &Address) -> Result<Connector, UnservedAddress> {
        let client = self.client();
        let refused = |surface| UnservedAddress::new(surface, address.clone());
        Ok(match (client, address) {
            (Client::Slack(slack), Address::Slack(to)) => {
                Connector::Slack(slack.channel(to.clone()))
            }
            (Client::Discord(discord), Address::Discord(to)) => {
                Connector::Discord(discord.channel(to.clone()))
            }
            (Client::Telegram(telegram), Address::Telegram(to)) => {
                Connector::Telegram(telegram.channel(to.clone()))
            }
            (Client::Slack(_), _) => return Err(refused(mesh_egress::Surface::Slack)),
            (Client::Discord(_), _) => return Err(refused(mesh_egress::Surface::Discord)),
            (Client::Telegram(_), _) => return Err(refused(mesh_egress::Surface::Telegram)),
        })
    }

    /// The connector to `address`, printing each part that went.
    pub(crate) fn channel(
        self,
        address: &Address,
        json: bool,
    ) -> Result<BoxedChannel, UnservedAddress> {
        Ok(printed(self.connector(address)?, json))
    }

    /// The surface's client, printing each part that went (what `worker --deliver` holds).
    pub(crate) fn printing_client(self, json: bool) -> PrintingClient {
        let client: Arc<dyn SurfaceClient> = match self.client() {
            Client::Slack(slack) => Arc::new(slack),
            Client::Discord(discord) => Arc::new(discord),
            Client::Telegram(telegram) => Arc::new(telegram),
        };
        PrintingClient { client, json }
    }
}

/// `connector` printing each part that went, as `turn` prints parts.
fn printed(connector: Connector, json: bool) -> BoxedChannel {
    let printing = Printing::parts(json).with_ids();
    match connector {
        Connector::Slack(slack) => BoxedChannel::new(Tee::new(slack, printing)),
        Connector::Discord(discord) => BoxedChannel::new(Tee::new(discord, printing)),
        Connector::Telegram(telegram) => BoxedChannel::new(Tee::new(telegram, printing)),
    }
}

/// A surface client whose channels print each part that went (see [`Tee`]).
pub(crate) struct PrintingClient {
    client: Arc<dyn SurfaceClient>,
    json: bool,
}

impl SurfaceClient for PrintingClient {
    fn surface(&self) -> mesh_egress::Surface {
        self.client.surface()
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        let channel = self.client.channel_for(address)?;
        Ok(BoxedChannel::new(Tee::new(
            channel,
            Printing::parts(self.json).with_ids(),
        )))
    }
}

/// The one conversation a process's own channel serves, as a client: how `turn --follow-up`
/// keeps its own promise with a worker, through the channel its holding line went through.
pub(crate) struct OwnConversation(pub(crate) BoxedChannel);

impl SurfaceClient for OwnConversation {
    fn surface(&self) -> mesh_egress::Surface {
        self.0.address().surface()
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        if *address == self.0.address() {
            Ok(self.0.clone())
        } else {
            Err(UnservedAddress::new(self.surface(), address.clone()))
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

    fn address(&self) -> Address {
        self.inner.address()
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

/// Exit 1 after a delivery that failed after its retries, or whose durable outbox failed: one
/// plain `error:` line naming where it went, never the cause (the log line carries only the
/// delivery error's own text, which names parts, not causes).
pub(crate) fn delivery_failed(
    target: Surface,
    error: &mesh_egress::channel::DeliveryError,
) -> ExitCode {
    let to = match target {
        Surface::Plain => "stdout",
        surface => surface.name(),
    };
    tracing::error!(target: "mesh_egress::egress", error = %error, to, store = error.is_store_failure(), "delivery failed");
    if error.is_store_failure() {
        // What the outbox holds is sent by `worker` once the store answers again.
        eprintln!("error: the store failed during delivery to {to}");
    } else {
        eprintln!("error: delivery to {to} failed");
    }
    ExitCode::FAILURE
}

/// The gate `--gate on` runs: the system-prompt overlap check when there is a system prompt,
/// and the judge `judge_model` names (on the same endpoint) when there is one.
pub(crate) fn build_gate(
    models: &Models,
    system_prompt: Option<&str>,
    judge_model: Option<String>,
) -> Result<QualityGate, String> {
    let mut builder = QualityGate::builder();
    if let Some(prompt) = system_prompt {
        builder = builder.system_prompt(prompt.to_owned(), 0.5);
    }
    if let Some(judge_model) = judge_model {
        // The judge rides the same plumbing as the turn, on one route of its own (its entry
        // may name another API).
        let judge = models
            .single(&judge_model)
            .map_err(|error| format!("MESH_GATE_JUDGE_MODEL: {error}"))?;
        builder = builder.judge(ModelJudge::new(judge));
    }
    builder
        .build()
        .map_err(|error| format!("--gate on: {error}"))
}

/// The handler name `turn --store` stored its promises under before it went through the front
/// door (`Bot`; it now stores them for the route `turn_bot::ROUTE`): `worker` still registers
/// it, so a promise stored by an older `turn` is kept.
pub(crate) const LEGACY_HANDLER: &str = "turn-example.answer";

/// The gate a stored promise's turn ran, built as `turn --gate on` builds it. A gate that
/// cannot be built fails closed on known leaks: the heuristics-only gate.
pub(crate) fn stored_gate(
    models: &Models,
    system_prompt: Option<&str>,
    judge: Option<String>,
) -> QualityGate {
    build_gate(models, system_prompt, judge).unwrap_or_else(|error| {
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
    // The bound was checked when the models were read; an unreadable one is the default.
    ChatRequest::new(messages).with_max_tokens(max_tokens().unwrap_or(4096))
}

/// The route `worker` registers under [`LEGACY_HANDLER`], for promises an older `turn --store`
/// stored (input `{"prompt": ..}`, and `"delivered"` after a stream; the worker reads the row's
/// system prompt and gate settings into the input): re-asks the model the stored prompt (with
/// the stored system prompt) through the same `Router` settings as the turn, in the stored
/// mode, delivers only what follows what was shown, and checks that with the gate built from
/// the stored settings (heuristics only when the row has none), as the worker did for these
/// rows before routes.
pub(crate) fn legacy_route(
    router: Arc<Router<Provider>>,
    models: Models,
) -> impl Fn(Turn, LegacyAsked) -> std::pin::Pin<Box<dyn Future<Output = Reply> + Send>>
+ Send
+ Sync
+ 'static {
    move |turn, asked| {
        let router = Arc::clone(&router);
        let judge = asked
            .gate
            .as_ref()
            .and_then(|gate| gate.get("judge_model"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let gate = stored_gate(&models, asked.system_prompt.as_deref(), judge);
        Box::pin(async move {
            match turn.mode() {
                Mode::Interactive => legacy_ask(&turn, &router, &asked, &gate).await,
                Mode::Proactive => legacy_digest(&turn, &router, &asked, &gate).await,
            }
        })
    }
}

#[egress_boundary(interactive)]
async fn legacy_ask(
    turn: &Turn,
    router: &Router<Provider>,
    asked: &LegacyAsked,
    gate: &QualityGate,
) -> Result<AgentMessage, EgressError> {
    legacy_answer(turn, router, asked, gate).await
}

#[egress_boundary(proactive)]
async fn legacy_digest(
    turn: &Turn,
    router: &Router<Provider>,
    asked: &LegacyAsked,
    gate: &QualityGate,
) -> Result<AgentMessage, EgressError> {
    legacy_answer(turn, router, asked, gate).await
}

/// The legacy promise's answer: asked again, cut after what was shown, then gated.
async fn legacy_answer(
    turn: &Turn,
    router: &Router<Provider>,
    asked: &LegacyAsked,
    gate: &QualityGate,
) -> Result<AgentMessage, EgressError> {
    let request = chat_request(asked.system_prompt.as_deref(), &asked.prompt);
    let answer = router
        .complete(turn, &request)
        .await
        .and_then(|completion| completion.into_message(turn))?;
    // A streamed turn's promise: only what follows the blocks already shown.
    let rest = match &asked.delivered {
        Some(delivered) => legacy_rest(delivered, answer),
        None => Ok(answer),
    };
    gate.check(turn, &asked.prompt, rest).await
}

/// How much of the end of what was shown identifies it in a fresh answer.
const LEGACY_ANCHOR: usize = 64;

/// The stored prefix does not end anywhere in the fresh answer (or nothing follows it).
#[derive(Debug)]
struct Unjoinable;

impl std::fmt::Display for Unjoinable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the follow-up answer does not continue the delivered text")
    }
}

impl std::error::Error for Unjoinable {}

/// What `answer` (a whole, fresh answer to the same prompt) adds after `delivered`, the
/// Markdown an older `turn --stream --store` had shown before its promise, cut the way that
/// `turn` cut it: the last [`LEGACY_ANCHOR`] bytes of what was shown (its trailing whitespace
/// aside) are looked for in the answer, and only what follows them goes. An answer that does
/// not contain them, or adds nothing visible after them, is a retryable failure: the worker
/// asks again on the promise's plan. (Promises the front door stores carry what was shown in
/// the store, and the bot's worker cuts their follow-ups itself.)
fn legacy_rest(delivered: &str, answer: AgentMessage) -> Result<AgentMessage, EgressError> {
    if delivered.is_empty() {
        return Ok(answer);
    }
    let held = delivered.trim_end();
    let mut from = held.len().saturating_sub(LEGACY_ANCHOR);
    while !held.is_char_boundary(from) {
        from -= 1;
    }
    let anchor = &held[from..];
    let ownership = answer.ownership().cloned();
    let (body, attribution) = answer.into_parts();
    let rest = match body.as_str().find(anchor) {
        Some(at) => body.as_str()[at + anchor.len()..].trim_start(),
        None => return Err(EgressError::semantic(Unjoinable, attribution)),
    };
    if rest.trim().is_empty() {
        return Err(EgressError::semantic(Unjoinable, attribution));
    }
    let message = AgentMessage::new(rest, attribution);
    Ok(match ownership {
        Some(ownership) => message.with_ownership(ownership),
        None => message,
    })
}

/// The input of a promise stored under [`LEGACY_HANDLER`]: the prompt, after a stream the
/// Markdown already shown, and the row's system prompt and gate settings.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct LegacyAsked {
    prompt: String,
    #[serde(default)]
    delivered: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    gate: Option<serde_json::Value>,
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
