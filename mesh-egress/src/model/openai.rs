//! [`OpenAiCompatible`]: the real connector, over reqwest (rustls), for any endpoint that speaks
//! the OpenAI chat-completions wire format.

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::ModelConnector;
use super::error::ModelError;
use super::stream::ModelStream;
use super::tool_text::{Inspected, inspect, repair_request, unrepaired};
use super::wire::{ChatRequest, Completion, WireRequest, WireResponse, usable};

mod stream;

/// The transport's own ceiling on one HTTP exchange, beyond the Router's deadlines.
pub(crate) const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long connecting may take.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest completion body read, by default (8 MiB): far above any real chat completion,
/// far below what would hurt a bot's memory.
pub(crate) const DEFAULT_MAX_COMPLETION_BODY: usize = 8 * 1024 * 1024;
/// The largest error body read, by default (64 KiB): error bodies are small; past this the rest
/// is dropped unread and the status still decides.
pub(crate) const DEFAULT_MAX_ERROR_BODY: usize = 64 * 1024;

/// The OpenAI-compatible connector: `POST {base_url}/chat/completions` with a bearer key.
///
/// It maps status codes, error bodies, `Retry-After`/`x-should-retry` headers and transport
/// errors to [`ModelError`], keeping the provider's text only inside the error (the internal
/// cause). A tool decision that cannot be read gets exactly one in-attempt repair: a
/// structured call whose arguments are not valid JSON, or a text-protocol call (a model served
/// without its tool parser writing `<tool_call>…` into its text, see
/// [`text_tool_format`](super::text_tool_format)) when the request offered tools. The request
/// is re-sent with the model's reply and a correction; if that also fails to parse the call
/// fails with a retryable `malformed_tool_call`. A text-protocol call when the request offered
/// no tools fails the attempt at once (retryable). Dropping the future cancels the request.
///
/// Bodies are hostile input and are read incrementally under a cap, never buffered whole: a
/// completion body over 8 MiB (see
/// [`with_max_completion_body`](Self::with_max_completion_body)) fails the attempt with
/// [`ModelErrorKind::ResponseTooLarge`](super::ModelErrorKind::ResponseTooLarge), which the
/// Router treats as terminal for the route and falls back from; an error body is read up to
/// 64 KiB ([`with_max_error_body`](Self::with_max_error_body)) and
/// the rest dropped. Only the first of a completion's `choices` is decoded; the others are
/// skipped without being built.
///
/// ```no_run
/// use mesh_egress::model::{OpenAiCompatible, RetryConfig, Router};
/// # fn main() -> Result<(), mesh_egress::model::ModelError> {
/// let connector = OpenAiCompatible::new("http://127.0.0.1:8080/v1")?.with_api_key("sk-...");
/// let router = Router::new(connector, "gpt-4o-mini", RetryConfig::from_env());
/// # let _ = router; Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenAiCompatible {
    client: reqwest::Client,
    endpoint: String,
    api_key: Option<String>,
    max_completion_body: usize,
    max_error_body: usize,
}

impl OpenAiCompatible {
    /// A connector for `base_url` (e.g. `https://openrouter.ai/api/v1`), with a 120 s HTTP
    /// timeout and a 10 s connect timeout.
    pub fn new(base_url: impl AsRef<str>) -> Result<Self, ModelError> {
        Self::with_timeouts(base_url, DEFAULT_HTTP_TIMEOUT, DEFAULT_CONNECT_TIMEOUT)
    }

    /// A connector for `base_url` with explicit transport timeouts.
    pub fn with_timeouts(
        base_url: impl AsRef<str>,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self, ModelError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(connect_timeout)
            .build()
            .map_err(ModelError::invalid_request)?;
        Self::with_client(base_url, client)
    }

    /// A connector for `base_url` using `client` as is.
    pub fn with_client(
        base_url: impl AsRef<str>,
        client: reqwest::Client,
    ) -> Result<Self, ModelError> {
        let base = base_url.as_ref().trim().trim_end_matches('/');
        let endpoint = format!("{base}/chat/completions");
        reqwest::Url::parse(&endpoint).map_err(ModelError::invalid_request)?;
        Ok(Self {
            client,
            endpoint,
            api_key: None,
            max_completion_body: DEFAULT_MAX_COMPLETION_BODY,
            max_error_body: DEFAULT_MAX_ERROR_BODY,
        })
    }

    /// Sends `key` as a bearer token (an empty key sends none).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.api_key = (!key.trim().is_empty()).then_some(key);
        self
    }

    /// Caps a completion body at `bytes` (default 8 MiB); a larger
    /// body fails the attempt with `ResponseTooLarge`.
    pub fn with_max_completion_body(mut self, bytes: usize) -> Self {
        self.max_completion_body = bytes;
        self
    }

    /// Caps an error body at `bytes` (default 64 KiB); the rest is dropped
    /// unread.
    pub fn with_max_error_body(mut self, bytes: usize) -> Self {
        self.max_error_body = bytes;
        self
    }

    /// The chat-completions URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn post(&self, model: &str, request: &ChatRequest) -> Result<Completion, ModelError> {
        let mut builder = self
            .client
            .post(&self.endpoint)
            .json(&WireRequest { model, request });
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let mut response = builder.send().await.map_err(transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = match read_capped(&mut response, self.max_error_body).await? {
                Capped::Whole(body) | Capped::Cut(body) => body,
            };
            return Err(status_error(status.as_u16(), &headers, &body));
        }
        let body = match read_capped(&mut response, self.max_completion_body).await? {
            Capped::Whole(body) => body,
            Capped::Cut(_) => return Err(ModelError::response_too_large(self.max_completion_body)),
        };
        let wire: WireResponse =
            serde_json::from_slice(&body).map_err(ModelError::invalid_response)?;
        Ok(wire.into_completion(model))
    }

    /// One attempt: the request, and the one in-attempt repair a tool decision that cannot be
    /// read gets (a structured call whose arguments are not JSON, a text-protocol call; see
    /// [`tool_text`](super::tool_text)).
    async fn complete_with_repair(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> Result<Completion, ModelError> {
        let first = self.post(model, request).await?;
        let (broken, correction) = match inspect(first, request) {
            Inspected::Usable(completion) => return usable(Ok(completion)),
            Inspected::Failed(error) => return Err(error),
            Inspected::Repair {
                completion,
                correction,
            } => (completion, correction),
        };
        let second = self
            .post(model, &repair_request(request, &broken, &correction))
            .await?;
        match inspect(second, request) {
            Inspected::Usable(completion) => usable(Ok(completion)),
            Inspected::Failed(error) => Err(error),
            // Never a second repair.
            Inspected::Repair { correction, .. } => Err(unrepaired(&correction)),
        }
    }
}

impl ModelConnector for OpenAiCompatible {
    fn complete(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<Completion, ModelError>> + Send {
        self.complete_with_repair(model, request)
    }

    /// `stream: true`: server-sent events under the completion body cap (applied to the whole
    /// stream) and a 1 MiB cap on one line. No tool-call repair: a streamed tool call is
    /// checked by whoever assembles it.
    fn stream(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ModelStream, ModelError>> + Send {
        self.post_stream(model, request)
    }
}

impl fmt::Debug for OpenAiCompatible {
    // The key stays out of `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("max_completion_body", &self.max_completion_body)
            .field("max_error_body", &self.max_error_body)
            .finish_non_exhaustive()
    }
}

fn transport_error(error: reqwest::Error) -> ModelError {
    if error.is_timeout() {
        ModelError::timeout().with_source(error)
    } else if error.is_builder() {
        ModelError::invalid_request(error)
    } else if error.is_decode() {
        ModelError::invalid_response(error)
    } else {
        // Refused, reset, closed mid-response: the connection failed.
        ModelError::connection(error)
    }
}

/// A body read under a cap: all of it, or the first `cap` bytes of a longer one.
enum Capped {
    Whole(Vec<u8>),
    Cut(Vec<u8>),
}

/// Reads `response`'s body chunk by chunk, stopping at `cap` bytes: a longer body is never
/// held whole (a declared `Content-Length` over the cap stops before the first chunk).
async fn read_capped(response: &mut reqwest::Response, cap: usize) -> Result<Capped, ModelError> {
    if response
        .content_length()
        .is_some_and(|len| len > u64::try_from(cap).unwrap_or(u64::MAX))
    {
        return Ok(Capped::Cut(Vec::new()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        let room = cap.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok(Capped::Cut(body));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Capped::Whole(body))
}

fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ModelError {
    ModelError::from_http_response(
        status,
        |name| headers.get(name).and_then(|v| v.to_str().ok()),
        body,
        SystemTime::now(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn an_error_body_yields_code_message_and_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
        let body = br#"{"error":{"message":"quota gone","type":"insufficient_quota","code":null}}"#;
        let error = status_error(429, &headers, body);
        assert_eq!(error.error_type(), Some("insufficient_quota"));
        assert_eq!(error.provider_message(), Some("quota gone"));
        assert_eq!(error.retry_after(), Some(Duration::from_millis(1500)));
        assert_eq!(error.should_retry(), Some(false));
    }

    #[test]
    fn a_non_json_error_body_is_kept_truncated_for_the_cause() {
        let body = "x".repeat(5000);
        let error = status_error(502, &HeaderMap::new(), body.as_bytes());
        assert_eq!(
            error.provider_message().map(str::len),
            Some(super::super::response::MAX_PROVIDER_TEXT)
        );
    }

    #[test]
    fn the_endpoint_is_base_url_plus_chat_completions() {
        let c = OpenAiCompatible::new("http://127.0.0.1:9/v1/").expect("valid");
        assert_eq!(c.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(OpenAiCompatible::new("not a url").is_err());
    }
}
