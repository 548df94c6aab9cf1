//! [`OpenAiCompatible`]: the real connector, over reqwest (rustls), for any endpoint that speaks
//! the OpenAI chat-completions wire format.

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::ModelConnector;
use super::classify::parse_retry_after;
use super::error::ModelError;
use super::wire::{ChatMessage, ChatRequest, Completion, WireErrorBody, WireRequest, WireResponse};

/// The transport's own ceiling on one HTTP exchange, beyond the Router's deadlines.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long connecting may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Provider error text kept for the internal cause, at most (bytes).
const MAX_PROVIDER_TEXT: usize = 2048;

/// The OpenAI-compatible connector: `POST {base_url}/chat/completions` with a bearer key.
///
/// It maps status codes, error bodies, `Retry-After`/`x-should-retry` headers and transport
/// errors to [`ModelError`], keeping the provider's text only inside the error (the internal
/// cause). A tool call whose arguments are not valid JSON gets exactly one in-attempt repair:
/// the request is re-sent with the model's reply and a correction; if that also fails to parse
/// the call fails with a retryable `malformed_tool_call`. Dropping the future cancels the
/// request.
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
        })
    }

    /// Sends `key` as a bearer token (an empty key sends none).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.api_key = (!key.trim().is_empty()).then_some(key);
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
        let response = builder.send().await.map_err(transport_error)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(transport_error)?;
        if !status.is_success() {
            return Err(status_error(status.as_u16(), &headers, &body));
        }
        let wire: WireResponse =
            serde_json::from_slice(&body).map_err(ModelError::invalid_response)?;
        Ok(wire.into_completion(model))
    }

    async fn complete_with_repair(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> Result<Completion, ModelError> {
        let first = self.post(model, request).await?;
        if !has_malformed_tool_call(&first) {
            return non_empty(first);
        }
        let second = self.post(model, &repair_request(request, &first)).await?;
        // Never a second repair.
        if has_malformed_tool_call(&second) {
            return Err(ModelError::malformed_tool_call());
        }
        non_empty(second)
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
}

impl fmt::Debug for OpenAiCompatible {
    // The key stays out of `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

fn non_empty(completion: Completion) -> Result<Completion, ModelError> {
    if completion.is_empty() {
        Err(ModelError::empty_completion())
    } else {
        Ok(completion)
    }
}

fn has_malformed_tool_call(completion: &Completion) -> bool {
    completion
        .tool_calls
        .iter()
        .any(|call| call.parsed_arguments().is_err())
}

/// The original request plus the model's broken reply and a correction.
fn repair_request(request: &ChatRequest, broken: &Completion) -> ChatRequest {
    let calls: Vec<String> = broken
        .tool_calls
        .iter()
        .map(|c| format!("{}({})", c.function.name, c.function.arguments))
        .collect();
    let mut repaired = request.clone();
    repaired.messages.push(ChatMessage::assistant(format!(
        "{}Tool call: {}",
        broken
            .content
            .as_deref()
            .map(|c| format!("{c}\n"))
            .unwrap_or_default(),
        calls.join(", ")
    )));
    repaired.messages.push(ChatMessage::user(
        "Your tool call arguments were not valid JSON. Make the same tool call again, with \
         arguments that are one valid JSON object and nothing else.",
    ));
    repaired
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

fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ModelError {
    let mut error = ModelError::status(status);
    if let Some(wait) = parse_retry_after(
        |name| headers.get(name).and_then(|v| v.to_str().ok()),
        SystemTime::now(),
    ) {
        error = error.with_retry_after(wait);
    }
    match headers
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
    {
        Some("true") => error = error.with_should_retry(true),
        Some("false") => error = error.with_should_retry(false),
        _ => {}
    }
    match serde_json::from_slice::<WireErrorBody>(body) {
        Ok(parsed) => {
            if let Some(code) = parsed.error.code() {
                error = error.with_code(code);
            }
            if let Some(message) = parsed.error.message {
                error = error.with_provider_message(truncate(message));
            }
        }
        Err(_) if !body.is_empty() => {
            error =
                error.with_provider_message(truncate(String::from_utf8_lossy(body).into_owned()));
        }
        Err(_) => {}
    }
    error
}

fn truncate(mut text: String) -> String {
    if text.len() > MAX_PROVIDER_TEXT {
        let mut cut = MAX_PROVIDER_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
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
        assert_eq!(error.code(), Some("insufficient_quota"));
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
            Some(MAX_PROVIDER_TEXT)
        );
    }

    #[test]
    fn the_endpoint_is_base_url_plus_chat_completions() {
        let c = OpenAiCompatible::new("http://127.0.0.1:9/v1/").expect("valid");
        assert_eq!(c.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(OpenAiCompatible::new("not a url").is_err());
    }
}
