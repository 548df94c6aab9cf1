//! [`FakeApi`]: a loopback fake of Slack's, Discord's or Telegram's send endpoint, scripted with
//! [`ChatStep`]s, for tests and demos.
//!
//! It speaks the model fake's vocabulary: every HTTP-level answer (a status, headers, a body, a
//! delay, a connection closed mid-answer) is a [`FakeResponse`], with constructors for each
//! surface's own answers (`FakeResponse::chat_rate_limited` and the like). What only a chat API
//! does — post the message, or post it and then lose the answer — is a [`ChatStep`].
//!
//! ```
//! use mesh_egress::Surface;
//! use mesh_egress::channel::{Deliver, PlainText, SlackChannel};
//! use mesh_egress::testing::{FakeApi, FakeResponse};
//! use mesh_egress::{AgentMessage, Attribution};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let api = FakeApi::start(Surface::Slack, "xoxb-test").await?;
//! api.script([FakeResponse::chat_server_error(Surface::Slack, 503)]);
//! let slack = SlackChannel::new("xoxb-test", "C1")
//!     .with_renderer(PlainText::new())
//!     .base_url(api.base_url());
//! slack.deliver(AgentMessage::new("hi", Attribution::new("a", "c", "r"))).await?;
//! assert_eq!(api.texts(), ["hi"]);
//! assert_eq!(api.attempts(), 2);
//! # Ok(()) }
//! ```

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, RETRY_AFTER};
use hyper::service::service_fn;
use hyper::{Request, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::FakeResponse;
use super::chat_state::{
    Api, ChatStep, FakeStream, ReceivedCall, ReceivedDraft, ReceivedMessage, Shared, State,
    expired, refuse_auth,
};
use super::fake_provider::{FakeBody, play};
use crate::address::{Address, DiscordAddress, SlackAddress, Surface, TelegramAddress};

/// Each surface's own answers, in the model fake's vocabulary. A surface without a chat API
/// (the web chat, plain) gets a bare HTTP answer of the same kind.
impl FakeResponse {
    /// A `429` asking for `wait`, in `surface`'s own form: Slack's `Retry-After` header (whole
    /// seconds, rounded up), Discord's `retry_after` body field (fractional seconds,
    /// `global: false`), Telegram's `parameters.retry_after` (whole seconds, rounded up).
    pub fn chat_rate_limited(surface: Surface, wait: Duration) -> Self {
        rate_limited(surface, wait, false)
    }

    /// Discord's bot-wide `429` (`global: true`, and the `x-ratelimit-global` header); the other
    /// surfaces have no such thing and answer as [`chat_rate_limited`](Self::chat_rate_limited).
    pub fn chat_global_rate_limited(surface: Surface, wait: Duration) -> Self {
        rate_limited(surface, wait, true)
    }

    /// An HTTP error `status` (a 5xx) with `surface`'s JSON error body.
    pub fn chat_server_error(surface: Surface, status: u16) -> Self {
        let body = match Api::of(surface) {
            Some(Api::Telegram) => {
                json!({ "ok": false, "error_code": status, "description": "Internal Server Error" })
            }
            Some(Api::Discord) => json!({ "message": "Internal Server Error", "code": 0 }),
            Some(Api::Slack) => json!({ "ok": false, "error": "internal_error" }),
            None => json!({ "error": "Internal Server Error" }),
        };
        Self::raw(status, body.to_string())
    }

    /// `surface`'s refusal: Slack `200` with `ok: false` and this error code; Discord `400` with
    /// this message; Telegram `400` with this description.
    pub fn chat_refusal(surface: Surface, detail: &str) -> Self {
        match Api::of(surface) {
            Some(Api::Discord) => {
                Self::raw(400, json!({ "message": detail, "code": 50035 }).to_string())
            }
            Some(Api::Telegram) => Self::raw(
                400,
                json!({ "ok": false, "error_code": 400, "description": detail }).to_string(),
            ),
            Some(Api::Slack) => Self::raw(200, json!({ "ok": false, "error": detail }).to_string()),
            None => Self::raw(400, json!({ "error": detail }).to_string()),
        }
    }

    /// `surface`'s success for a message posted to `target` with platform id `id` (what
    /// [`ChatStep::Accept`] answers).
    pub fn chat_success(surface: Surface, target: &str, id: &str) -> Self {
        let body = match Api::of(surface) {
            Some(Api::Discord) => json!({ "id": id, "channel_id": target }),
            Some(Api::Telegram) => json!({
                "ok": true,
                "result": { "message_id": id.parse::<i64>().unwrap_or_default(), "chat": { "id": target } },
            }),
            Some(Api::Slack) => json!({ "ok": true, "channel": target, "ts": id }),
            None => json!({ "id": id }),
        };
        Self::raw(200, body.to_string())
    }

    /// Slack's answer to a method the token lacks the scope for (`ok: false`,
    /// `missing_scope`, with `needed` and `provided`), as `conversations.history` answers a
    /// bot without `channels:history`.
    pub fn slack_missing_scope(needed: &str) -> Self {
        Self::raw(
            200,
            json!({ "ok": false, "error": "missing_scope", "needed": needed, "provided": "chat:write" })
                .to_string(),
        )
    }

    /// `status` with an HTML body that is not JSON (a proxy's error page, say).
    pub fn not_json(status: u16) -> Self {
        Self::raw(status, "<html><body><h1>Bad Gateway</h1></body></html>")
            .with_header("content-type", "text/html")
    }
}

fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0))
}

fn rate_limited(surface: Surface, wait: Duration, global: bool) -> FakeResponse {
    let header = whole_seconds(wait).to_string();
    match Api::of(surface) {
        Some(Api::Discord) => {
            let body = json!({
                "message": "You are being rate limited.",
                "retry_after": wait.as_secs_f64(),
                "global": global,
            });
            let response =
                FakeResponse::raw(429, body.to_string()).with_header(RETRY_AFTER.as_str(), &header);
            if global {
                response.with_header("x-ratelimit-global", "true")
            } else {
                response
            }
        }
        Some(Api::Telegram) => FakeResponse::raw(
            429,
            json!({
                "ok": false,
                "error_code": 429,
                "description": format!("Too Many Requests: retry after {header}"),
                "parameters": { "retry_after": whole_seconds(wait) },
            })
            .to_string(),
        ),
        Some(Api::Slack) => FakeResponse::raw(
            429,
            json!({ "ok": false, "error": "ratelimited" }).to_string(),
        )
        .with_header(RETRY_AFTER.as_str(), &header),
        None => FakeResponse::raw(429, json!({ "error": "rate limited" }).to_string())
            .with_header(RETRY_AFTER.as_str(), &header),
    }
}

/// A loopback fake of one surface's send endpoint (`chat.postMessage`, create message or
/// `sendMessage`), bound to 127.0.0.1 on a free port. It checks the bot token as the surface
/// does, posts what it is sent unless a scripted [`ChatStep`] says otherwise, dedupes Discord
/// nonces under `enforce_nonce`, and stops when dropped.
///
/// A Slack fake also answers `conversations.history` and `conversations.replies` (`GET`, the
/// query parameters Slack documents: `channel`, `ts`, `oldest`, `latest`, `inclusive`, `limit`,
/// `include_all_metadata`) from the messages it posted (a thread's replies also hold the
/// streams grown in it, with their text so far), newest first, in Slack's shape
/// (`messages[].ts`, `.text`, `.thread_ts`, `.metadata.event_type/event_payload` only when
/// `include_all_metadata` is true, `has_more`); its `ts` values are real clock times. Reads
/// are counted apart ([`lookups`](Self::lookups)) and take their own script
/// ([`script_lookups`](Self::script_lookups)); [`deny_history`](Self::deny_history) makes them
/// answer `missing_scope`. Every `thread_ts` counts as an existing thread.
pub struct FakeApi {
    addr: SocketAddr,
    pub(super) shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl FakeApi {
    /// Starts a fake of `surface` (Slack, Discord or Telegram; another surface is an
    /// [`InvalidInput`](std::io::ErrorKind::InvalidInput) error) that accepts bot `token`.
    ///
    /// # Errors
    ///
    /// An [`InvalidInput`](std::io::ErrorKind::InvalidInput) error for a surface with no fake,
    /// and the I/O error when no loopback port can be bound.
    pub async fn start(surface: Surface, token: impl Into<String>) -> std::io::Result<Self> {
        let Some(surface) = Api::of(surface) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("no chat API fake for {surface}"),
            ));
        };
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(surface, token.into()));
        let server = tokio::spawn(serve(listener, Arc::clone(&shared)));
        Ok(Self {
            addr,
            shared,
            server,
        })
    }

    /// The surface this fake speaks for.
    pub fn surface(&self) -> Surface {
        self.shared.surface.surface()
    }

    /// The address the fake listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure the connector with.
    pub fn base_url(&self) -> String {
        match self.shared.surface {
            Api::Discord => format!("http://{}/api/v10", self.addr),
            Api::Telegram => format!("http://{}", self.addr),
            Api::Slack => format!("http://{}/api", self.addr),
        }
    }

    /// Queues `steps`: each request takes the next one; once the queue is empty, requests are
    /// accepted.
    pub fn script<S: Into<ChatStep>>(&self, steps: impl IntoIterator<Item = S>) {
        self.shared
            .lock()
            .script
            .extend(steps.into_iter().map(Into::into));
    }

    /// Every message posted, in order.
    pub fn received(&self) -> Vec<ReceivedMessage> {
        self.shared.lock().received.clone()
    }

    /// The text of every message posted, in order.
    pub fn texts(&self) -> Vec<String> {
        self.shared
            .lock()
            .received
            .iter()
            .map(|r| r.text.clone())
            .collect()
    }

    /// How many send requests arrived, refused and failed ones included (Slack history reads
    /// are counted by [`lookups`](Self::lookups)).
    pub fn attempts(&self) -> usize {
        self.shared.lock().attempts
    }

    /// Queues answers for Slack's history reads (`conversations.history`/`.replies`): each
    /// read takes the next one; once the queue is empty, reads answer from the posted messages.
    pub fn script_lookups(&self, answers: impl IntoIterator<Item = FakeResponse>) {
        self.shared.lock().lookup_script.extend(answers);
    }

    /// Makes every Slack history read answer `missing_scope`, as for a token without the
    /// history scopes.
    pub fn deny_history(&self) {
        self.shared.lock().history_denied = true;
    }

    /// How many Slack history reads arrived.
    pub fn lookups(&self) -> usize {
        self.shared.lock().lookups
    }
}

/// The streaming side of the fake (the calls themselves are answered in `chat_stream.rs`).
impl FakeApi {
    /// Queues `steps` for requests to `method` only (`chat.appendStream`, `sendMessageDraft`,
    /// `sendMessage`, `editMessage`, `createMessage`, …); they are taken before the general
    /// [`script`](Self::script).
    ///
    /// A streaming call takes the steps as a send does: [`ChatStep::lost_response`] applies it
    /// (the append grows the stream's text) and then cuts the connection before the answer, the
    /// way a lost answer looks to the caller; `ChatStep::Answer(FakeResponse::close_mid_response())`
    /// cuts it without applying anything.
    ///
    /// ```
    /// use mesh_egress::Surface;
    /// use mesh_egress::testing::{ChatStep, FakeApi};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
    /// let api = FakeApi::start(Surface::Slack, "xoxb-test").await?;
    /// // The first append is applied, but its answer never arrives.
    /// api.script_method("chat.appendStream", [ChatStep::lost_response()]);
    /// # Ok(()) }
    /// ```
    pub fn script_method<S: Into<ChatStep>>(
        &self,
        method: &str,
        steps: impl IntoIterator<Item = S>,
    ) {
        self.shared
            .lock()
            .stream
            .scripts
            .entry(method.to_owned())
            .or_default()
            .extend(steps.into_iter().map(Into::into));
    }

    /// Every request received, in order, with its method and arrival instant.
    pub fn calls(&self) -> Vec<ReceivedCall> {
        self.shared.lock().stream.calls.clone()
    }

    /// Where every request that named a destination was for, in order (see
    /// [`ReceivedCall::address`]): what a test reads to assert that a conversation's calls
    /// went to its own chat and nowhere else.
    pub fn destinations(&self) -> Vec<Address> {
        self.shared
            .lock()
            .stream
            .calls
            .iter()
            .filter_map(|c| c.address.clone())
            .collect()
    }

    /// How many requests to `method` arrived.
    pub fn calls_to(&self, method: &str) -> usize {
        self.shared
            .lock()
            .stream
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    /// Slack: every stream started, in order.
    pub fn streams(&self) -> Vec<FakeStream> {
        let state = self.shared.lock();
        let lifetime = state.stream.lifetime;
        state
            .stream
            .streams
            .iter()
            .map(|(s, started)| {
                let mut s = s.clone();
                s.open &= !expired(*started, lifetime);
                s
            })
            .collect()
    }

    /// Slack: streams close `lifetime` after they started, as Slack's do after a few minutes
    /// (slackapi/python-slack-sdk#1859, vercel/chat#637); an append after that is answered
    /// `message_not_in_streaming_state`.
    pub fn expire_streams_after(&self, lifetime: Duration) {
        self.shared.lock().stream.lifetime = Some(lifetime);
    }

    /// Slack: closes every open stream now.
    pub fn expire_streams(&self) {
        for (stream, _) in &mut self.shared.lock().stream.streams {
            stream.open = false;
        }
    }

    /// Telegram: every draft shown, in order.
    pub fn drafts(&self) -> Vec<ReceivedDraft> {
        self.shared.lock().stream.drafts.clone()
    }

    /// Telegram: a flood wait of `wait` from now. Every request before it ends is answered
    /// `429` with `parameters.retry_after` set to the seconds left (rounded up), as the Bot API
    /// does.
    pub fn flood_wait(&self, wait: Duration) {
        self.shared.lock().stream.flood_until = Some(Instant::now() + wait);
    }

    /// Discord: the `X-RateLimit-Remaining` and `X-RateLimit-Reset-After` (seconds) of the
    /// next answers, one pair per answer, in order; answers after the list carry none.
    pub fn rate_limit_headers(&self, headers: impl IntoIterator<Item = (u32, f64)>) {
        let mut state = self.shared.lock();
        for (remaining, reset_after) in headers {
            state.stream.headers.push_back(vec![
                ("x-ratelimit-limit".to_owned(), "5".to_owned()),
                ("x-ratelimit-remaining".to_owned(), remaining.to_string()),
                (
                    "x-ratelimit-reset-after".to_owned(),
                    format!("{reset_after:.3}"),
                ),
                ("x-ratelimit-bucket".to_owned(), "fake-bucket".to_owned()),
            ]);
        }
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every connection task.
        self.server.abort();
    }
}

impl fmt::Debug for FakeApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeApi")
            .field("surface", &self.shared.surface)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    super::serve_http1(listener, move || {
        let shared = Arc::clone(&shared);
        service_fn(move |request| handle(Arc::clone(&shared), request))
    })
    .await;
}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<FakeBody>, Infallible> {
    let path = request.uri().path().to_owned();
    let http_method = request.method().clone();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let authorization = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match request.into_body().collect().await {
        Ok(collected) => serde_json::from_slice(&collected.to_bytes()).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    if shared.surface == Api::Slack && super::slack_history::is_read(&path) {
        let answer = super::slack_history::read(&shared, &path, &query, authorization.as_deref());
        return Ok(play(answer).await);
    }
    let method = super::chat_stream::method_name(shared.surface, &http_method, &path);
    let step = {
        let mut state = shared.lock();
        state.attempts += 1;
        let address = destination(shared.surface, &path, &body);
        super::chat_stream::record(&mut state, &method, &body, address);
        let scripted = state.stream.next_step(&method);
        scripted
            .or_else(|| state.script.pop_front())
            .unwrap_or(ChatStep::Accept)
    };
    if let Some(answer) = super::chat_stream::handle(
        &shared,
        &method,
        &path,
        authorization.as_deref(),
        &body,
        &step,
    ) {
        return Ok(play(answer).await);
    }
    let answer = match route(&shared, &path, authorization.as_deref(), &body) {
        None => refuse_auth(shared.surface),
        Some(target) => match step {
            ChatStep::Accept => accept(&shared, &path, target, body),
            ChatStep::AcceptThen(answer) => {
                accept(&shared, &path, target, body);
                answer
            }
            ChatStep::Answer(answer) => answer,
        },
    };
    let answer = super::chat_stream::decorate(&shared, answer);
    Ok(play(answer).await)
}

/// The message's target, if the path and token are right.
fn route(shared: &Shared, path: &str, authorization: Option<&str>, body: &Value) -> Option<String> {
    let field = |name: &str| match body.get(name) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    match shared.surface {
        Api::Discord => {
            let authorized = authorization == Some(&format!("Bot {}", shared.token));
            let id = path
                .strip_prefix("/api/v10/channels/")?
                .strip_suffix("/messages")?;
            authorized.then(|| id.to_owned())
        }
        Api::Telegram => {
            let token = path.strip_prefix("/bot")?.strip_suffix("/sendMessage")?;
            (token == shared.token).then(|| field("chat_id")).flatten()
        }
        Api::Slack => {
            let authorized = authorization == Some(&format!("Bearer {}", shared.token));
            (path == "/api/chat.postMessage" && authorized)
                .then(|| field("channel"))
                .flatten()
        }
    }
}

/// A Slack `ts` from the real clock, later than every earlier one (Slack's are unique per
/// channel), so a lookup's `oldest` window means what it means on Slack.
fn next_slack_ts(state: &mut State) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let micros = now.max(state.last_ts_micros.saturating_add(1));
    state.last_ts_micros = micros;
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// Posts the message (once per Discord nonce under `enforce_nonce`) and returns the surface's
/// success answer.
fn accept(shared: &Shared, path: &str, target: String, body: Value) -> FakeResponse {
    let surface = shared.surface;
    let mut state = shared.lock();
    let nonce = (surface == Api::Discord
        && body.get("enforce_nonce").and_then(Value::as_bool) == Some(true))
    .then(|| body.get("nonce").and_then(Value::as_str).map(str::to_owned))
    .flatten();
    let existing = nonce.as_ref().and_then(|n| state.nonces.get(n).cloned());
    let id = match existing {
        Some(id) => id,
        None => {
            state.next_id += 1;
            let id = match surface {
                Api::Discord => (1_100_000_000_000_000_000 + state.next_id).to_string(),
                Api::Telegram => state.next_id.to_string(),
                Api::Slack => next_slack_ts(&mut state),
            };
            if let Some(nonce) = nonce {
                state.nonces.insert(nonce, id.clone());
            }
            let text_field = if surface == Api::Discord {
                "content"
            } else {
                "text"
            };
            // Slack takes standard Markdown in `markdown_text` instead of `text`.
            let text = body
                .get(text_field)
                .or_else(|| body.get("markdown_text"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let address = destination(surface, path, &body)
                .unwrap_or_else(|| fallback_address(surface, &target));
            state.received.push(ReceivedMessage {
                target: target.clone(),
                address,
                text,
                body,
                id: id.clone(),
            });
            id
        }
    };
    drop(state);
    FakeResponse::chat_success(surface.surface(), &target, &id)
}

/// Where a request says it goes, as the surface reads it: Slack's `channel` and `thread_ts`,
/// Discord's channel in the path, Telegram's `chat_id` and `message_thread_id`. `None` when the
/// request names no destination.
fn destination(surface: Api, path: &str, body: &Value) -> Option<Address> {
    let field = |name: &str| match body.get(name) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Some(match surface {
        Api::Slack => {
            let address = SlackAddress::new(field("channel")?);
            match field("thread_ts") {
                Some(ts) => address.in_thread(ts),
                None => address,
            }
            .into()
        }
        Api::Discord => {
            let rest = path.strip_prefix("/api/v10/channels/")?;
            let id = rest.split('/').next().filter(|id| !id.is_empty())?;
            DiscordAddress::new(id).into()
        }
        Api::Telegram => {
            let address = TelegramAddress::new(field("chat_id")?);
            match body.get("message_thread_id").and_then(Value::as_i64) {
                Some(topic) => address.in_topic(topic),
                None => address,
            }
            .into()
        }
    })
}

/// The address of a target the route found but the body did not name (never for the
/// surfaces' send endpoints, which name it in the body or the path).
fn fallback_address(surface: Api, target: &str) -> Address {
    match surface {
        Api::Slack => SlackAddress::new(target).into(),
        Api::Discord => DiscordAddress::new(target).into(),
        Api::Telegram => TelegramAddress::new(target).into(),
    }
}
