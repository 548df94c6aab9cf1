//! [`Provider`]: one connector for the four wire APIs teams call, chosen by [`Api`]: OpenAI-
//! compatible chat completions, OpenAI's Responses API, Anthropic's Messages API and Gemini's
//! `generateContent`.
//!
//! Each native API fails in ways of its own, often inside a 200 stream where no status code
//! says so; each module reads its API's shapes into the one vocabulary the Router decides on:
//! an error inside a stream is a failed attempt (retryable or terminal by its type), never
//! text and never a success; a stream that ends without its API's terminal event is a failed
//! attempt (`connection`); a refusal, a content filter or a blocked prompt is `refused`, an
//! answer cut by the output limit `truncated` (both terminal for the route, so the next route
//! answers: see [`finish`](super::finish)).

use std::fmt;

use super::ModelConnector;
use super::error::ModelError;
use super::http::Http;
use super::openai::OpenAiCompatible;
use super::stream::ModelStream;
use super::wire::{ChatMessage, ChatRequest, Completion, Role, ToolCall};

mod anthropic;
mod gemini;
mod responses;

/// The most tokens an answer may use when the request sets none: Anthropic's Messages API
/// requires `max_tokens`, and the others are sent the same bound only when the request sets
/// one (`ChatRequest::with_max_tokens`).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The wire API a [`Provider`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Api {
    /// OpenAI-compatible chat completions: `POST {base}/chat/completions`, bearer key (what
    /// [`OpenAiCompatible`] speaks).
    Chat,
    /// OpenAI's Responses API: `POST {base}/responses`, bearer key.
    Responses,
    /// Anthropic's Messages API: `POST {base}/messages`, `x-api-key` and
    /// `anthropic-version: 2023-06-01`; base like `https://api.anthropic.com/v1`.
    Anthropic,
    /// Gemini's `generateContent`: `POST {base}/models/{model}:generateContent` (and
    /// `:streamGenerateContent?alt=sse`), `x-goog-api-key`; base like
    /// `https://generativelanguage.googleapis.com/v1beta`.
    Gemini,
}

impl Api {
    /// Every API, in the order of their names.
    const ALL: [Self; 4] = [Self::Chat, Self::Responses, Self::Anthropic, Self::Gemini];

    /// The API named `name` (`chat`, `responses`, `anthropic`, `gemini`), if any.
    ///
    /// ```
    /// use mesh_egress::model::Api;
    /// assert_eq!(Api::from_name("anthropic"), Some(Api::Anthropic));
    /// assert_eq!(Api::from_name("llama3"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|api| api.name() == name)
    }

    /// The API's name, as [`from_name`](Self::from_name) reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Responses => "responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
        }
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A connector for any of the four [`Api`]s, over reqwest (rustls), with the same caps and
/// failure reading as [`OpenAiCompatible`] (a completion body, a whole stream included, read
/// under 8 MiB and one stream line under 1 MiB, an error body under 64 KiB; an error body's
/// status, type, code and wait kept for classification and its text only in the internal
/// cause).
///
/// With [`Api::Chat`] it is an [`OpenAiCompatible`]. A route of a [`Router`](super::Router) may
/// use another provider than the primary's ([`Route::via`](super::Route::via)), so a fallback
/// can be another API, base URL and key.
///
/// ```no_run
/// use mesh_egress::model::{Api, Provider, RetryConfig, Route, Router};
/// # fn main() -> Result<(), mesh_egress::model::ModelError> {
/// let claude = Provider::new(Api::Anthropic, "https://api.anthropic.com/v1")?.with_api_key("sk-ant-...");
/// let gemini = Provider::new(Api::Gemini, "https://generativelanguage.googleapis.com/v1beta")?
///     .with_api_key("AIza...");
/// let router = Router::with_routes(
///     claude,
///     Route::new("claude-sonnet-4-5"),
///     [Route::new("gemini-2.5-flash").via(gemini)],
///     RetryConfig::from_env(),
/// );
/// # let _ = router; Ok(()) }
/// ```
#[derive(Clone)]
pub struct Provider {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Chat(OpenAiCompatible),
    Responses(Http),
    Anthropic(Http),
    Gemini(Http),
}

impl Provider {
    /// A connector speaking `api` at `base_url`, with a 120 s HTTP timeout and a 10 s connect
    /// timeout.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` when `base_url` is not a URL or the HTTP client cannot be built.
    pub fn new(api: Api, base_url: impl AsRef<str>) -> Result<Self, ModelError> {
        Http::new(base_url.as_ref()).map(|http| Self::on(api, http))
    }

    /// A connector speaking `api` at `base_url` through `client` as is (its timeouts, proxy
    /// and TLS settings).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` when `base_url` is not a URL.
    pub fn with_client(
        api: Api,
        base_url: impl AsRef<str>,
        client: reqwest::Client,
    ) -> Result<Self, ModelError> {
        Http::with_client(base_url.as_ref(), client).map(|http| Self::on(api, http))
    }

    fn on(api: Api, http: Http) -> Self {
        let inner = match api {
            Api::Chat => Inner::Chat(OpenAiCompatible::on(http)),
            Api::Responses => Inner::Responses(http),
            Api::Anthropic => Inner::Anthropic(http),
            Api::Gemini => Inner::Gemini(http),
        };
        Self { inner }
    }

    /// Sends `key` the API's way (bearer, `x-api-key` or `x-goog-api-key`; an empty key sends
    /// none).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.http_mut().set_api_key(key.into());
        self
    }

    /// The API this connector speaks.
    fn api(&self) -> Api {
        match &self.inner {
            Inner::Chat(_) => Api::Chat,
            Inner::Responses(_) => Api::Responses,
            Inner::Anthropic(_) => Api::Anthropic,
            Inner::Gemini(_) => Api::Gemini,
        }
    }

    fn http_mut(&mut self) -> &mut Http {
        match &mut self.inner {
            Inner::Chat(chat) => chat.http_mut(),
            Inner::Responses(http) | Inner::Anthropic(http) | Inner::Gemini(http) => http,
        }
    }
}

impl ModelConnector for Provider {
    async fn complete(&self, model: &str, request: &ChatRequest) -> Result<Completion, ModelError> {
        match &self.inner {
            Inner::Chat(chat) => chat.complete(model, request).await,
            Inner::Responses(http) => responses::complete(http, model, request).await,
            Inner::Anthropic(http) => anthropic::complete(http, model, request).await,
            Inner::Gemini(http) => gemini::complete(http, model, request).await,
        }
    }

    async fn stream(&self, model: &str, request: &ChatRequest) -> Result<ModelStream, ModelError> {
        match &self.inner {
            Inner::Chat(chat) => chat.stream(model, request).await,
            Inner::Responses(http) => responses::stream(http, model, request).await,
            Inner::Anthropic(http) => anthropic::stream(http, model, request).await,
            Inner::Gemini(http) => gemini::stream(http, model, request).await,
        }
    }
}

impl fmt::Debug for Provider {
    // The key stays out of `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let http = match &self.inner {
            Inner::Chat(chat) => return f.debug_tuple("Provider").field(chat).finish(),
            Inner::Responses(http) | Inner::Anthropic(http) | Inner::Gemini(http) => http,
        };
        f.debug_struct("Provider")
            .field("api", &self.api())
            .field("base_url", &http.base)
            .field("api_key", &http.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// The text of the system messages, joined by blank lines (Anthropic's `system`, Gemini's
/// `systemInstruction`), if there are any.
fn system_text(messages: &[ChatMessage]) -> Option<String> {
    let parts: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.as_deref())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// A tool call's arguments as a JSON value (the native APIs send objects, not strings); text
/// that is not JSON is sent as a string inside an object, never dropped.
fn arguments_value(call: &ToolCall) -> serde_json::Value {
    call.parsed_arguments()
        .unwrap_or_else(|_| serde_json::json!({ "arguments": call.function.arguments }))
}

/// The sampling settings and the stream flag, where Anthropic and Responses take them (the top
/// level of the body).
fn sampled(body: &mut serde_json::Value, request: &ChatRequest, stream: bool) {
    if let Some(temperature) = request.temperature {
        body["temperature"] = serde_json::json!(temperature);
    }
    if stream {
        body["stream"] = serde_json::Value::Bool(true);
    }
}

/// The text of an answer: its parts joined, `None` when there are none.
fn joined(parts: Vec<String>) -> Option<String> {
    (!parts.is_empty()).then(|| parts.concat())
}
