//! What every HTTP connector shares: one reqwest client with a key and two body caps, a request
//! sent and a failure status read under the error cap, a completion body read under its cap,
//! and a stream body decoded as server-sent events, event by event, by the API's own decoder.
//!
//! Bodies are hostile input: each is read incrementally under a cap, never buffered whole.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::error::ModelError;
use super::sse::{DEFAULT_MAX_SSE_LINE, SseDecoder, SseEvent};
use super::stream::{ChunkTransport, ModelStream, StreamChunk};
use super::wire::Completion;
use crate::future::BoxFuture;

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

/// One connector's transport: the client, the base URL (no trailing `/`), the key and the caps.
#[derive(Clone)]
pub(crate) struct Http {
    pub(crate) client: reqwest::Client,
    pub(crate) base: String,
    pub(crate) api_key: Option<String>,
    pub(crate) max_completion_body: usize,
    pub(crate) max_error_body: usize,
}

impl Http {
    /// A transport for `base_url` with the default timeouts and caps.
    pub(crate) fn new(base_url: &str) -> Result<Self, ModelError> {
        Self::with_timeouts(base_url, DEFAULT_HTTP_TIMEOUT, DEFAULT_CONNECT_TIMEOUT)
    }

    /// A transport for `base_url` whose exchanges are bounded by `timeout` and whose connects
    /// by `connect_timeout`.
    pub(crate) fn with_timeouts(
        base_url: &str,
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

    /// A transport for `base_url` using `client` as is; the URL must parse.
    pub(crate) fn with_client(base_url: &str, client: reqwest::Client) -> Result<Self, ModelError> {
        let base = base_url.trim().trim_end_matches('/').to_owned();
        reqwest::Url::parse(&base).map_err(ModelError::invalid_request)?;
        Ok(Self {
            client,
            base,
            api_key: None,
            max_completion_body: DEFAULT_MAX_COMPLETION_BODY,
            max_error_body: DEFAULT_MAX_ERROR_BODY,
        })
    }

    /// Keeps `key` (an empty key is none).
    pub(crate) fn set_api_key(&mut self, key: String) {
        self.api_key = (!key.trim().is_empty()).then_some(key);
    }

    /// A JSON POST of `body` to `url`, with the key where the API takes it.
    pub(crate) fn post(
        &self,
        url: &str,
        key: KeyIn,
        body: &impl serde::Serialize,
    ) -> reqwest::RequestBuilder {
        let builder = self.client.post(url).json(body);
        match (&self.api_key, key) {
            (Some(api_key), KeyIn::Bearer) => builder.bearer_auth(api_key),
            (Some(api_key), KeyIn::Header(name)) => builder.header(name, api_key),
            (None, _) => builder,
        }
    }

    /// Sends `request`; a non-success status is read under the error cap and becomes its
    /// [`ModelError`].
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ModelError> {
        let mut response = request.send().await.map_err(transport_error)?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let body = match read_capped(&mut response, self.max_error_body).await? {
            Capped::Whole(body) | Capped::Cut(body) => body,
        };
        Err(status_error(status.as_u16(), &headers, &body))
    }

    /// A success's whole body, under the completion cap.
    pub(crate) async fn body(
        &self,
        response: &mut reqwest::Response,
    ) -> Result<Vec<u8>, ModelError> {
        match read_capped(response, self.max_completion_body).await? {
            Capped::Whole(body) => Ok(body),
            Capped::Cut(_) => Err(ModelError::response_too_large(self.max_completion_body)),
        }
    }

    /// A whole answer: `request` sent, its body read under the completion cap and by `read`.
    pub(crate) async fn whole(
        &self,
        request: reqwest::RequestBuilder,
        read: impl FnOnce(&[u8]) -> Result<Completion, ModelError>,
    ) -> Result<Completion, ModelError> {
        let mut response = self.send(request).await?;
        read(&self.body(&mut response).await?)
    }

    /// A streamed answer: `request` sent, its body's events read by `events`; a body that is
    /// one JSON document (a gateway that ignored `stream`) is read whole by `read`, as one
    /// chunk.
    pub(crate) async fn streamed<D: Events>(
        &self,
        request: reqwest::RequestBuilder,
        events: D,
        read: impl FnOnce(&[u8]) -> Result<Completion, ModelError>,
    ) -> Result<ModelStream, ModelError> {
        let mut response = self.send(request).await?;
        if is_json(&response) {
            let body = self.body(&mut response).await?;
            return read(&body).map(ModelStream::from_completion);
        }
        Ok(self.events(response, events))
    }

    /// A success's body decoded as server-sent events by `decoder`, under the completion cap
    /// (for the whole stream) and a 1 MiB cap on one line.
    fn events<D: Events>(&self, response: reqwest::Response, decoder: D) -> ModelStream {
        ModelStream::new(SseBody {
            response,
            sse: SseDecoder::new(
                DEFAULT_MAX_SSE_LINE.min(self.max_completion_body),
                self.max_completion_body,
            ),
            events: VecDeque::new(),
            scratch: Vec::new(),
            body_done: false,
            finished: false,
            decoder,
        })
    }
}

/// Where an API takes its key.
#[derive(Clone, Copy)]
pub(crate) enum KeyIn {
    /// `Authorization: Bearer <key>` (chat completions, Responses).
    Bearer,
    /// A header of its own (`x-api-key`, `x-goog-api-key`).
    Header(&'static str),
}

/// Whether a response says its body is one JSON document (a gateway that ignored `stream`).
fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// What one server-sent event means to an API's stream.
pub(crate) enum Decoded {
    /// Content (or a finish reason) to hand on.
    Chunk(StreamChunk),
    /// Nothing to hand on (a keep-alive, a start event, an event this reader does not use).
    Skip,
    /// The API's terminal event, carrying the last content or the finish reason: handed on,
    /// and the stream is complete.
    Last(StreamChunk),
    /// The API's terminal event: the stream is complete.
    Done,
    /// The stream reports a failure (or cannot be read): it is over.
    Failed(ModelError),
}

/// An API's stream vocabulary, read one event at a time.
pub(crate) trait Events: Send + 'static {
    /// What `event` means.
    fn decode(&mut self, event: SseEvent) -> Decoded;

    /// The body ended without [`Decoded::Done`]: `None` when that is a clean end (a stream
    /// whose finish reason arrived), else the failure (a stream cut before its end).
    fn ended(&mut self) -> Option<ModelError>;
}

/// A streamed response body, decoded event by event.
struct SseBody<D> {
    response: reqwest::Response,
    sse: SseDecoder,
    events: VecDeque<SseEvent>,
    scratch: Vec<SseEvent>,
    /// The body has ended; what its last bytes completed is still being read.
    body_done: bool,
    finished: bool,
    decoder: D,
}

impl<D: Events> SseBody<D> {
    async fn next(&mut self) -> Option<Result<StreamChunk, ModelError>> {
        loop {
            if self.finished {
                return None;
            }
            while let Some(event) = self.events.pop_front() {
                match self.decoder.decode(event) {
                    Decoded::Chunk(chunk) => return Some(Ok(chunk)),
                    Decoded::Last(chunk) => {
                        self.finished = true;
                        return Some(Ok(chunk));
                    }
                    Decoded::Skip => {}
                    Decoded::Done => {
                        self.finished = true;
                        return None;
                    }
                    Decoded::Failed(error) => {
                        self.finished = true;
                        return Some(Err(error));
                    }
                }
            }
            if self.body_done {
                self.finished = true;
                return self.decoder.ended().map(Err);
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => {
                    if let Err(error) = self.sse.feed(&bytes, &mut self.scratch) {
                        self.finished = true;
                        return Some(Err(error));
                    }
                    self.events.extend(self.scratch.drain(..));
                }
                Ok(None) => {
                    self.body_done = true;
                    self.sse.finish(&mut self.scratch);
                    self.events.extend(self.scratch.drain(..));
                }
                Err(error) => {
                    self.finished = true;
                    return Some(Err(transport_error(error)));
                }
            }
        }
    }
}

impl<D: Events> ChunkTransport for SseBody<D> {
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<StreamChunk, ModelError>>> {
        Box::pin(self.next())
    }
}

pub(crate) fn transport_error(error: reqwest::Error) -> ModelError {
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
pub(crate) enum Capped {
    Whole(Vec<u8>),
    Cut(Vec<u8>),
}

/// Reads `response`'s body chunk by chunk, stopping at `cap` bytes: a longer body is never
/// held whole (a declared `Content-Length` over the cap stops before the first chunk).
pub(crate) async fn read_capped(
    response: &mut reqwest::Response,
    cap: usize,
) -> Result<Capped, ModelError> {
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

pub(crate) fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ModelError {
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
    fn a_base_url_must_parse_and_loses_its_trailing_slash() {
        let http = Http::new("http://127.0.0.1:9/v1/").expect("valid");
        assert_eq!(http.base, "http://127.0.0.1:9/v1");
        assert!(Http::new("not a url").is_err());
    }
}
