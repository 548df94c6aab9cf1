//! [`FakeProvider`]: a loopback OpenAI-compatible server that plays a script of responses,
//! faults included.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

#[derive(Clone, Debug)]
enum Behaviour {
    Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: FakeBodyKind,
    },
    NeverAnswer,
    CloseMidResponse,
    /// A 200 `text/event-stream` body sent frame by frame, each after its delay.
    Drip(Vec<Drip>),
}

/// One timed piece of a drip-fed body.
#[derive(Clone, Debug)]
pub(super) enum Drip {
    /// Bytes sent after `delay`.
    Bytes { delay: Duration, bytes: Bytes },
    /// After `delay`, nothing more is ever sent (the connection stays open).
    Stall { delay: Duration },
    /// After `delay`, the connection is reset.
    Reset { delay: Duration },
}

impl Drip {
    fn delay(&self) -> Duration {
        match self {
            Self::Bytes { delay, .. } | Self::Stall { delay } | Self::Reset { delay } => *delay,
        }
    }
}

/// What a scripted reply's body is: given text, or `len` filler bytes made as they are sent.
#[derive(Clone, Debug)]
enum FakeBodyKind {
    Text(String),
    Filler { len: usize },
}

/// One scripted HTTP response (or fault) of a [`FakeProvider`].
///
/// The model-provider fakes share one scripting vocabulary: every [`Step`](super::Step) of the
/// in-memory [`ScriptedConnector`](super::ScriptedConnector) converts into a `FakeResponse`
/// (`FakeProvider::start_steps([Step::status(503), Step::answer("hi")])`), so a failure is described
/// once and played either in memory or over loopback HTTP
/// ([`FakeProvider::start_steps`], or `FakeResponse::from(step)`). `FakeResponse` adds what only HTTP
/// has: raw bodies, headers, oversized bodies, connections closed mid-response.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::testing::FakeResponse;
/// let script = [
///     FakeResponse::status(503),
///     FakeResponse::error(429, "rate_limit_exceeded", "slow down").with_header("retry-after", "1"),
///     FakeResponse::close_mid_response(),
///     FakeResponse::completion("hello").after(Duration::from_millis(50)),
/// ];
/// # let _ = script;
/// ```
#[derive(Clone, Debug)]
pub struct FakeResponse {
    delay: Option<Duration>,
    behaviour: Behaviour,
}

impl FakeResponse {
    /// A response with `status`, a JSON content type and `body`.
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Self {
            delay: None,
            behaviour: Behaviour::Reply {
                status,
                headers: vec![("content-type".to_owned(), "application/json".to_owned())],
                body: FakeBodyKind::Text(body.into()),
            },
        }
    }

    /// A response with `status` whose body is `len` filler bytes, streamed in chunks as they
    /// are sent (never held whole by the fake), without a `Content-Length`: for testing body
    /// caps.
    pub fn large_body(status: u16, len: usize) -> Self {
        Self {
            delay: None,
            behaviour: Behaviour::Reply {
                status,
                headers: vec![("content-type".to_owned(), "application/json".to_owned())],
                body: FakeBodyKind::Filler { len },
            },
        }
    }

    /// A chat completion whose message is `message` (a JSON object).
    fn choice(message: serde_json::Value, finish_reason: &str) -> Self {
        let body = serde_json::json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        });
        Self::raw(200, body.to_string())
    }

    /// A 200 completion answering `text`.
    pub fn completion(text: &str) -> Self {
        Self::choice(
            serde_json::json!({"role": "assistant", "content": text}),
            "stop",
        )
    }

    /// A 200 completion with no content and no tool call.
    pub fn empty_completion() -> Self {
        Self::choice(
            serde_json::json!({"role": "assistant", "content": ""}),
            "stop",
        )
    }

    /// A 200 completion calling tool `name` with `arguments` exactly as given (which need not be
    /// valid JSON: that is how a malformed tool call is scripted).
    pub fn tool_call(name: &str, arguments: &str) -> Self {
        Self::choice(
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_fake", "type": "function",
                "function": {"name": name, "arguments": arguments},
            }]}),
            "tool_calls",
        )
    }

    /// An error response in the OpenAI shape: `{"error": {"message", "type", "code"}}`.
    pub fn error(status: u16, code: &str, message: &str) -> Self {
        let body = serde_json::json!({
            "error": {"message": message, "type": "fake_error", "code": code},
        });
        Self::raw(status, body.to_string())
    }

    /// An error response with `status` and a generic body.
    pub fn status(status: u16) -> Self {
        Self::error(status, "fake_status", "scripted failure")
    }

    /// A 200 server-sent-events body played piece by piece (see
    /// [`Step::chunks`](super::Step::chunks), whose conversion builds it).
    pub(super) fn drip(pieces: Vec<Drip>) -> Self {
        Self {
            delay: None,
            behaviour: Behaviour::Drip(pieces),
        }
    }

    /// Accepts the request and never answers.
    pub fn never_answer() -> Self {
        Self {
            delay: None,
            behaviour: Behaviour::NeverAnswer,
        }
    }

    /// Sends a 200 with the start of a body, then closes the connection.
    pub fn close_mid_response() -> Self {
        Self {
            delay: None,
            behaviour: Behaviour::CloseMidResponse,
        }
    }

    /// Sets a response header, replacing one of the same name (so a `content-type` of
    /// `text/event-stream` replaces the JSON default).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Behaviour::Reply { headers, .. } = &mut self.behaviour {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// Waits `delay` before responding.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
}

/// A request the fake provider received.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedRequest {
    /// The request path (e.g. `/v1/chat/completions`).
    pub path: String,
    /// The query string after `?`, if any (e.g. `alt=sse`).
    pub query: Option<String>,
    /// The `authorization` header, if sent.
    pub authorization: Option<String>,
    /// Every header, names lower-case, in the order received (`x-api-key`,
    /// `anthropic-version`, `x-goog-api-key`, ...).
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` if it was not JSON).
    pub body: serde_json::Value,
}

#[derive(Default)]
struct State {
    script: VecDeque<FakeResponse>,
    otherwise: Option<FakeResponse>,
    received: Vec<ReceivedRequest>,
}

/// A loopback OpenAI-compatible chat-completions server on `127.0.0.1` that answers every
/// request with the next scripted [`FakeResponse`] (any path). When the script runs out it
/// plays the `otherwise` response, or a 500. Dropping it stops the server and every
/// connection.
///
/// ```
/// use mesh_egress::testing::{FakeProvider, FakeResponse};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
/// let provider = FakeProvider::start([FakeResponse::status(503), FakeResponse::completion("hi")]).await?;
/// assert!(provider.base_url().starts_with("http://127.0.0.1:"));
/// # Ok(()) }
/// ```
pub struct FakeProvider {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    server: JoinHandle<()>,
}

impl FakeProvider {
    /// Starts a server on an ephemeral `127.0.0.1` port playing `script`.
    ///
    /// # Errors
    ///
    /// The I/O error when no loopback port can be bound.
    pub async fn start(script: impl IntoIterator<Item = FakeResponse>) -> io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), script).await
    }

    /// Starts a server on an ephemeral `127.0.0.1` port playing `steps`, the in-memory
    /// [`ScriptedConnector`](super::ScriptedConnector)'s vocabulary, each as the HTTP response
    /// that makes the connector see the same outcome.
    ///
    /// # Errors
    ///
    /// The I/O error when no loopback port can be bound.
    ///
    /// ```
    /// use mesh_egress::testing::{FakeProvider, Step};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
    /// let provider = FakeProvider::start_steps([Step::status(503), Step::answer("hi")]).await?;
    /// # let _ = provider; Ok(()) }
    /// ```
    pub async fn start_steps(steps: impl IntoIterator<Item = super::Step>) -> io::Result<Self> {
        Self::start(steps.into_iter().map(FakeResponse::from)).await
    }

    /// Starts a server on `addr` (use a loopback address) playing `script`.
    ///
    /// # Errors
    ///
    /// The I/O error when `addr` cannot be bound.
    pub async fn start_on(
        addr: SocketAddr,
        script: impl IntoIterator<Item = FakeResponse>,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            script: script.into_iter().collect(),
            ..State::default()
        }));
        let server = tokio::spawn(serve(listener, Arc::clone(&state)));
        Ok(Self {
            addr,
            state,
            server,
        })
    }

    /// Plays `response` whenever the script is exhausted (instead of a 500).
    pub fn otherwise(self, response: impl Into<FakeResponse>) -> Self {
        self.lock().otherwise = Some(response.into());
        self
    }

    /// Appends `responses` to the script.
    pub fn push<R: Into<FakeResponse>>(&self, responses: impl IntoIterator<Item = R>) {
        self.lock()
            .script
            .extend(responses.into_iter().map(Into::into));
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to give a connector: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.lock().received.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every connection task.
        self.server.abort();
    }
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProvider")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

async fn serve(listener: TcpListener, state: Arc<Mutex<State>>) {
    super::serve_http1(listener, move || {
        let state = Arc::clone(&state);
        service_fn(move |request| respond(Arc::clone(&state), request))
    })
    .await;
}

async fn respond(
    state: Arc<Mutex<State>>,
    request: Request<Incoming>,
) -> Result<Response<FakeBody>, Infallible> {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().map(str::to_owned);
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match request.into_body().collect().await {
        Ok(collected) => serde_json::from_slice(&collected.to_bytes()).unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    };
    let next = {
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        state.received.push(ReceivedRequest {
            path,
            query,
            authorization,
            headers,
            body,
        });
        state.script.pop_front().or_else(|| state.otherwise.clone())
    };
    let next = next.unwrap_or_else(|| {
        FakeResponse::error(500, "script_exhausted", "fake provider script exhausted")
    });
    Ok(play(next).await)
}

/// Plays `next`: waits its delay, then answers, never answers, or breaks off mid-body. Shared
/// with the chat-API fake, so both fakes speak one vocabulary.
pub(super) async fn play(next: FakeResponse) -> Response<FakeBody> {
    if let Some(delay) = next.delay {
        tokio::time::sleep(delay).await;
    }
    let response = match next.behaviour {
        Behaviour::NeverAnswer => std::future::pending().await,
        Behaviour::CloseMidResponse => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .header("content-length", "4096")
            .body(FakeBody::broken(r#"{"id":"chatcmpl-fake","choices":[{"#)),
        Behaviour::Drip(pieces) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(FakeBody::dripping(pieces)),
        Behaviour::Reply {
            status,
            headers,
            body,
        } => {
            let mut builder = Response::builder()
                .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            builder.body(match body {
                FakeBodyKind::Text(text) => FakeBody::full(text),
                FakeBodyKind::Filler { len } => FakeBody::filler(len),
            })
        }
    };
    response.unwrap_or_else(|_| {
        let mut fallback = Response::new(FakeBody::full("invalid scripted response"));
        *fallback.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        fallback
    })
}

/// A response body that is either whole, or a first chunk followed by an I/O error (which makes
/// hyper close the connection mid-response).
pub(super) struct FakeBody {
    chunk: Option<Bytes>,
    then_fail: bool,
    filler_left: usize,
    drip: VecDeque<Drip>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// The filler a large body is made of, one chunk at a time.
static FILLER: [u8; 16 * 1024] = [b' '; 16 * 1024];

impl FakeBody {
    fn full(body: impl Into<String>) -> Self {
        Self {
            chunk: Some(Bytes::from(body.into())),
            then_fail: false,
            filler_left: 0,
            drip: VecDeque::new(),
            wait: None,
        }
    }

    fn dripping(pieces: Vec<Drip>) -> Self {
        Self {
            drip: pieces.into(),
            ..Self::full(String::new())
        }
    }

    fn filler(len: usize) -> Self {
        Self {
            chunk: None,
            then_fail: false,
            filler_left: len,
            drip: VecDeque::new(),
            wait: None,
        }
    }

    fn broken(start: &'static str) -> Self {
        Self {
            chunk: Some(Bytes::from_static(start.as_bytes())),
            then_fail: true,
            filler_left: 0,
            drip: VecDeque::new(),
            wait: None,
        }
    }
}

impl Body for FakeBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(chunk) = self.chunk.take().filter(|c| !c.is_empty()) {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if let Some(delay) = self.drip.front().map(Drip::delay) {
            if !delay.is_zero() {
                let wait = self
                    .wait
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            return match self.drip.pop_front() {
                Some(Drip::Bytes { bytes, .. }) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Some(Drip::Stall { .. }) => {
                    // Never woken: the stream is silent until the client gives up.
                    self.drip.clear();
                    self.drip.push_front(Drip::Stall {
                        delay: Duration::from_secs(86_400),
                    });
                    Poll::Pending
                }
                Some(Drip::Reset { .. }) | None => {
                    self.drip.clear();
                    Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        "fake provider reset the connection mid-stream",
                    ))))
                }
            };
        }
        if self.filler_left > 0 {
            let n = self.filler_left.min(FILLER.len());
            self.filler_left -= n;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&FILLER[..n])))));
        }
        if self.then_fail {
            self.then_fail = false;
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "fake provider closed the connection mid-response",
            ))));
        }
        Poll::Ready(None)
    }
}
