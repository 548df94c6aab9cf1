//! [`OpenAiCompatible`]: the real connector, over reqwest (rustls), for any endpoint that speaks
//! the OpenAI chat-completions wire format.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use super::ModelConnector;
use super::error::ModelError;
use super::http::{Http, KeyIn};
use super::stream::ModelStream;
use super::tool_text::{Inspected, inspect, repair_request, unrepaired};
use super::wire::{ChatRequest, Completion, WireRequest, WireResponse, usable};

mod stream;

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
    http: Http,
    endpoint: String,
}

impl OpenAiCompatible {
    /// A connector for `base_url` (e.g. `https://openrouter.ai/api/v1`), with a 120 s HTTP
    /// timeout and a 10 s connect timeout.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` when `base_url` is not a URL or the HTTP client cannot be built.
    pub fn new(base_url: impl AsRef<str>) -> Result<Self, ModelError> {
        Http::new(base_url.as_ref()).map(Self::on)
    }

    /// A connector for `base_url` with explicit transport timeouts.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` when `base_url` is not a URL or the HTTP client cannot be built.
    pub fn with_timeouts(
        base_url: impl AsRef<str>,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self, ModelError> {
        Http::with_timeouts(base_url.as_ref(), timeout, connect_timeout).map(Self::on)
    }

    /// A connector for `base_url` using `client` as is.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` when `base_url` is not a URL.
    pub fn with_client(
        base_url: impl AsRef<str>,
        client: reqwest::Client,
    ) -> Result<Self, ModelError> {
        Http::with_client(base_url.as_ref(), client).map(Self::on)
    }

    /// The connector over `http`.
    pub(crate) fn on(http: Http) -> Self {
        let endpoint = format!("{}/chat/completions", http.base);
        Self { http, endpoint }
    }

    /// The transport, for [`Provider`](super::Provider)'s builders.
    pub(crate) fn http_mut(&mut self) -> &mut Http {
        &mut self.http
    }

    /// Sends `key` as a bearer token (an empty key sends none).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.http.set_api_key(key.into());
        self
    }

    /// Caps a completion body at `bytes` (default 8 MiB); a larger
    /// body fails the attempt with `ResponseTooLarge`.
    pub fn with_max_completion_body(mut self, bytes: usize) -> Self {
        self.http.max_completion_body = bytes;
        self
    }

    /// Caps an error body at `bytes` (default 64 KiB); the rest is dropped
    /// unread.
    pub fn with_max_error_body(mut self, bytes: usize) -> Self {
        self.http.max_error_body = bytes;
        self
    }

    /// The chat-completions URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A POST of `body` to the endpoint, with the bearer key.
    fn request(&self, body: &impl serde::Serialize) -> reqwest::RequestBuilder {
        self.http.post(&self.endpoint, KeyIn::Bearer, body)
    }

    async fn post(&self, model: &str, request: &ChatRequest) -> Result<Completion, ModelError> {
        let read = |body: &[u8]| {
            let wire: WireResponse =
                serde_json::from_slice(body).map_err(ModelError::invalid_response)?;
            Ok(wire.into_completion(model))
        };
        let post = self.request(&WireRequest { model, request });
        self.http.whole(post, read).await
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
            .field("api_key", &self.http.api_key.as_ref().map(|_| "<set>"))
            .field("max_completion_body", &self.http.max_completion_body)
            .field("max_error_body", &self.http.max_error_body)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_base_url_plus_chat_completions() {
        let c = OpenAiCompatible::new("http://127.0.0.1:9/v1/").expect("valid");
        assert_eq!(c.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(OpenAiCompatible::new("not a url").is_err());
    }
}
