//! (feature `testing`) [`FakeApi`]: a loopback fake of Slack's, Discord's or Telegram's send
//! endpoint, scripted with [`Fault`]s, for tests and demos.
//!
//! ```
//! use mesh_egress::channel::http::fake::{FakeApi, Fault};
//! use mesh_egress::channel::http::Surface;
//! use mesh_egress::channel::{Deliver, PlainText, SlackChannel};
//! use mesh_egress::{AgentMessage, Attribution};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let api = FakeApi::start(Surface::Slack, "xoxb-test").await?;
//! api.script([Fault::ServerError(503)]);
//! let slack = SlackChannel::new("xoxb-test", "C1", PlainText::new()).base_url(api.base_url());
//! slack.deliver(AgentMessage::new("hi", Attribution::new("a", "c", "r"))).await?;
//! assert_eq!(api.texts(), ["hi"]);
//! assert_eq!(api.attempts(), 2);
//! # Ok(()) }
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::Surface;

/// What the fake does with one request instead of accepting it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Fault {
    /// No fault: the request is accepted as usual (to script a success between failures).
    Pass,
    /// A `429` asking for this wait, in the surface's own form: Slack's `Retry-After` header
    /// (whole seconds, rounded up), Discord's `retry_after` body field (fractional seconds,
    /// `global: false`), Telegram's `parameters.retry_after` (whole seconds, rounded up).
    RateLimited(Duration),
    /// Discord's global `429` (`global: true`); the other surfaces answer as for
    /// [`RateLimited`](Self::RateLimited).
    GlobalRateLimited(Duration),
    /// An HTTP error status (5xx) with the surface's JSON error body.
    ServerError(u16),
    /// This status with an HTML body that is not JSON (a proxy's error page, say).
    NotJson(u16),
    /// The connection is closed before any answer; nothing is posted.
    Reset,
    /// The message is posted, then the connection is closed before the answer: the sender
    /// cannot know it went.
    LoseResponse,
    /// The surface's refusal (Slack `ok: false` with this error code; Discord `400` with this
    /// message; Telegram `400` with this description).
    Refuse(String),
}

/// One message the fake accepted (posted).
#[derive(Clone, Debug, PartialEq)]
pub struct Received {
    /// The channel, or chat, it was posted to.
    pub target: String,
    /// The message text, exactly as sent.
    pub text: String,
    /// The whole JSON request body.
    pub body: Value,
    /// The id the fake answered with.
    pub id: String,
}

#[derive(Default)]
struct State {
    script: VecDeque<Fault>,
    received: Vec<Received>,
    attempts: usize,
    nonces: HashMap<String, String>,
    next_id: u64,
}

struct Shared {
    surface: Surface,
    token: String,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A loopback fake of one surface's send endpoint (`chat.postMessage`, create message or
/// `sendMessage`), bound to 127.0.0.1 on a free port. It checks the bot token as the surface
/// does, posts what it is sent unless a scripted [`Fault`] says otherwise, dedupes Discord
/// nonces under `enforce_nonce`, and stops when dropped.
pub struct FakeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl FakeApi {
    /// Starts a fake of `surface` that accepts bot `token`.
    pub async fn start(surface: Surface, token: impl Into<String>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            surface,
            token: token.into(),
            state: Mutex::new(State::default()),
        });
        let server = tokio::spawn(serve(listener, Arc::clone(&shared)));
        Ok(Self {
            addr,
            shared,
            server,
        })
    }

    /// The surface this fake speaks for.
    pub fn surface(&self) -> Surface {
        self.shared.surface
    }

    /// The base URL to configure the connector with.
    pub fn base_url(&self) -> String {
        match self.shared.surface {
            Surface::Slack => format!("http://{}/api", self.addr),
            Surface::Discord => format!("http://{}/api/v10", self.addr),
            Surface::Telegram => format!("http://{}", self.addr),
        }
    }

    /// Queues `faults`: each request takes the next one; once the queue is empty, requests are
    /// accepted.
    pub fn script(&self, faults: impl IntoIterator<Item = Fault>) {
        self.shared.lock().script.extend(faults);
    }

    /// Every message posted, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().received.clone()
    }

    /// The text of every message posted, in order.
    pub fn texts(&self) -> Vec<String> {
        self.received().into_iter().map(|r| r.text).collect()
    }

    /// How many requests arrived, refused and failed ones included.
    pub fn attempts(&self) -> usize {
        self.shared.lock().attempts
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
    crate::testing::serve_http1(listener, move || {
        let shared = Arc::clone(&shared);
        service_fn(move |request| handle(Arc::clone(&shared), request))
    })
    .await;
}

/// Returned by the service to make hyper close the connection without answering.
#[derive(Debug)]
struct Hangup;

impl fmt::Display for Hangup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connection closed by the fake")
    }
}

impl std::error::Error for Hangup {}

type Answer = Result<Response<Full<Bytes>>, Hangup>;

fn respond(status: u16, headers: &[(&str, String)], body: impl Into<Bytes>) -> Answer {
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    for (name, value) in headers {
        response = response.header(*name, value);
    }
    response.body(Full::new(body.into())).map_err(|_| Hangup)
}

fn respond_json(status: u16, headers: &[(&str, String)], body: &Value) -> Answer {
    let mut headers = headers.to_vec();
    headers.push((CONTENT_TYPE.as_str(), "application/json".to_owned()));
    respond(status, &headers, body.to_string())
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Answer {
    let path = request.uri().path().to_owned();
    let authorization = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Ok(body) = request.into_body().collect().await else {
        return Err(Hangup);
    };
    let body: Value = serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null);
    let fault = {
        let mut state = shared.lock();
        state.attempts += 1;
        state.script.pop_front()
    };
    let surface = shared.surface;
    let Some(target) = route(&shared, &path, authorization.as_deref(), &body) else {
        return refuse_auth(surface);
    };
    match fault {
        None | Some(Fault::Pass) => Ok(accept(&shared, target, body)?),
        Some(Fault::LoseResponse) => {
            accept(&shared, target, body)?;
            Err(Hangup)
        }
        Some(Fault::Reset) => Err(Hangup),
        Some(Fault::NotJson(status)) => respond(
            status,
            &[(CONTENT_TYPE.as_str(), "text/html".to_owned())],
            "<html><body><h1>Bad Gateway</h1></body></html>",
        ),
        Some(Fault::ServerError(status)) => {
            respond_json(status, &[], &server_error(surface, status))
        }
        Some(Fault::RateLimited(wait)) => rate_limited(surface, wait, false),
        Some(Fault::GlobalRateLimited(wait)) => rate_limited(surface, wait, true),
        Some(Fault::Refuse(detail)) => match surface {
            Surface::Slack => respond_json(200, &[], &json!({ "ok": false, "error": detail })),
            Surface::Discord => {
                respond_json(400, &[], &json!({ "message": detail, "code": 50035 }))
            }
            Surface::Telegram => respond_json(
                400,
                &[],
                &json!({ "ok": false, "error_code": 400, "description": detail }),
            ),
        },
    }
}

/// The message's target, if the path and token are right.
fn route(shared: &Shared, path: &str, authorization: Option<&str>, body: &Value) -> Option<String> {
    let field = |name: &str| match body.get(name) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    match shared.surface {
        Surface::Slack => {
            let authorized = authorization == Some(&format!("Bearer {}", shared.token));
            (path == "/api/chat.postMessage" && authorized)
                .then(|| field("channel"))
                .flatten()
        }
        Surface::Discord => {
            let authorized = authorization == Some(&format!("Bot {}", shared.token));
            let id = path
                .strip_prefix("/api/v10/channels/")?
                .strip_suffix("/messages")?;
            authorized.then(|| id.to_owned())
        }
        Surface::Telegram => {
            let token = path.strip_prefix("/bot")?.strip_suffix("/sendMessage")?;
            (token == shared.token).then(|| field("chat_id")).flatten()
        }
    }
}

fn refuse_auth(surface: Surface) -> Answer {
    match surface {
        Surface::Slack => respond_json(200, &[], &json!({ "ok": false, "error": "invalid_auth" })),
        Surface::Discord => respond_json(
            401,
            &[],
            &json!({ "message": "401: Unauthorized", "code": 0 }),
        ),
        Surface::Telegram => respond_json(
            404,
            &[],
            &json!({ "ok": false, "error_code": 404, "description": "Not Found" }),
        ),
    }
}

fn accept(shared: &Shared, target: String, body: Value) -> Answer {
    let surface = shared.surface;
    let mut state = shared.lock();
    let nonce = (surface == Surface::Discord
        && body.get("enforce_nonce").and_then(Value::as_bool) == Some(true))
    .then(|| body.get("nonce").and_then(Value::as_str).map(str::to_owned))
    .flatten();
    let existing = nonce.as_ref().and_then(|n| state.nonces.get(n).cloned());
    let id = match existing {
        Some(id) => id,
        None => {
            state.next_id += 1;
            let id = match surface {
                Surface::Slack => format!("1700000000.{:06}", state.next_id),
                Surface::Discord => format!("{}", 1_100_000_000_000_000_000 + state.next_id),
                Surface::Telegram => state.next_id.to_string(),
            };
            if let Some(nonce) = nonce {
                state.nonces.insert(nonce, id.clone());
            }
            let text_field = if surface == Surface::Discord {
                "content"
            } else {
                "text"
            };
            let text = body
                .get(text_field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            state.received.push(Received {
                target: target.clone(),
                text,
                body: body.clone(),
                id: id.clone(),
            });
            id
        }
    };
    drop(state);
    match surface {
        Surface::Slack => respond_json(
            200,
            &[],
            &json!({ "ok": true, "channel": target, "ts": id, "message": { "text": body.get("text") } }),
        ),
        Surface::Discord => respond_json(
            200,
            &[],
            &json!({ "id": id, "channel_id": target, "content": body.get("content"), "nonce": body.get("nonce") }),
        ),
        Surface::Telegram => {
            let message_id: i64 = id.parse().unwrap_or_default();
            respond_json(
                200,
                &[],
                &json!({ "ok": true, "result": { "message_id": message_id, "chat": { "id": body.get("chat_id") }, "text": body.get("text") } }),
            )
        }
    }
}

fn server_error(surface: Surface, status: u16) -> Value {
    match surface {
        Surface::Slack => json!({ "ok": false, "error": "internal_error" }),
        Surface::Discord => json!({ "message": "Internal Server Error", "code": 0 }),
        Surface::Telegram => {
            json!({ "ok": false, "error_code": status, "description": "Internal Server Error" })
        }
    }
}

fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

fn rate_limited(surface: Surface, wait: Duration, global: bool) -> Answer {
    match surface {
        Surface::Slack => respond_json(
            429,
            &[(RETRY_AFTER.as_str(), whole_seconds(wait).to_string())],
            &json!({ "ok": false, "error": "ratelimited" }),
        ),
        Surface::Discord => {
            let mut headers = vec![(RETRY_AFTER.as_str(), whole_seconds(wait).to_string())];
            if global {
                headers.push(("x-ratelimit-global", "true".to_owned()));
            }
            respond_json(
                429,
                &headers,
                &json!({ "message": "You are being rate limited.", "retry_after": wait.as_secs_f64(), "global": global }),
            )
        }
        Surface::Telegram => {
            let secs = whole_seconds(wait);
            respond_json(
                429,
                &[],
                &json!({
                    "ok": false,
                    "error_code": 429,
                    "description": format!("Too Many Requests: retry after {secs}"),
                    "parameters": { "retry_after": secs },
                }),
            )
        }
    }
}
