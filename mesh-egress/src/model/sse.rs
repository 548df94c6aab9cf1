//! [`SseDecoder`]: the chat-completions stream (`stream: true`) read as server-sent events,
//! bounded, and each event decoded into a [`StreamChunk`] or a classified [`ModelError`].
//!
//! The wire format is the one the OpenAI API reference documents for streamed chat
//! completions (platform.openai.com/docs/api-reference/chat-streaming): each event is
//! `data: {chat.completion.chunk JSON}` followed by a blank line, the last one is
//! `data: [DONE]`. Surprises seen in the field, each handled here:
//!
//! - keep-alive comments (`: ping`, `: OPENROUTER PROCESSING`) between events
//!   (openrouter.ai/docs/api-reference/streaming), which are not chunks and reset nothing;
//! - an error arriving inside a 200 stream, as `data: {"error": {...}}` (OpenAI, OpenRouter:
//!   "errors mid-stream are sent as an SSE event with an error field and
//!   `finish_reason: "error"`") or as `event: error` then `data: {...}` (Anthropic-style
//!   gateways): classified like the error body of a failed response;
//! - `\r\n` line endings, and lines split anywhere across TCP reads.
//!
//! Hostile input is bounded: one line (and one event's data) is at most `max_line` bytes, the
//! whole stream at most `max_total`; past either the stream fails with a typed error. A chunk
//! that is not valid JSON is a retryable `invalid_response`, never a panic.

use std::time::SystemTime;

use serde::Deserialize;

use super::error::ModelError;
use super::stream::{StreamChunk, ToolCallDelta};

/// The longest SSE line (and one event's data) read by default: 1 MiB, far above any real
/// chunk (a whole tool call's arguments in one chunk included).
pub const DEFAULT_MAX_SSE_LINE: usize = 1024 * 1024;

/// One event of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseEvent {
    /// An event's data (its `data:` lines joined by `\n`), and whether it was named
    /// `event: error`.
    Data {
        /// The data.
        data: String,
        /// Whether the event was named `error`.
        error: bool,
    },
    /// `data: [DONE]`: the stream is complete.
    Done,
}

/// An incremental, bounded server-sent-events decoder: feed it bytes as they arrive, in any
/// split, and it hands back whole events.
///
/// ```
/// use mesh_egress::model::{SseDecoder, SseEvent};
/// let mut decoder = SseDecoder::new(1024, 1 << 20);
/// let mut events = Vec::new();
/// decoder.feed(b": ping\n\ndata: {\"a\"", &mut events).unwrap();
/// decoder.feed(b":1}\r\n\r\ndata: [DONE]\n\n", &mut events).unwrap();
/// assert_eq!(events[0], SseEvent::Data { data: "{\"a\":1}".into(), error: false });
/// assert_eq!(events[1], SseEvent::Done);
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    error_event: bool,
    max_line: usize,
    max_total: usize,
    total: usize,
}

impl SseDecoder {
    /// A decoder capping one line at `max_line` bytes and the whole stream at `max_total`.
    pub fn new(max_line: usize, max_total: usize) -> Self {
        Self {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            error_event: false,
            max_line,
            max_total,
            total: 0,
        }
    }

    /// Bytes read so far.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Decodes `bytes`, appending every event they complete to `out`. Fails with
    /// `ResponseTooLarge` past the total cap and `InvalidResponse` for a line past its cap or
    /// a line that is not UTF-8.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        self.total = self.total.saturating_add(bytes.len());
        if self.total > self.max_total {
            return Err(ModelError::response_too_large(self.max_total));
        }
        while let Some(at) = bytes.iter().position(|&b| b == b'\n') {
            let (head, rest) = bytes.split_at(at);
            bytes = &rest[1..];
            if self.line.is_empty() {
                self.check_line(head.len())?;
                self.line_done(head, out)?;
            } else {
                self.check_line(self.line.len().saturating_add(head.len()))?;
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                let result = self.line_done(&line, out);
                line.clear();
                self.line = line;
                result?;
            }
        }
        self.check_line(self.line.len().saturating_add(bytes.len()))?;
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn check_line(&self, len: usize) -> Result<(), ModelError> {
        if len > self.max_line {
            return Err(ModelError::invalid_response(format!(
                "server-sent event line longer than its cap of {} bytes",
                self.max_line
            )));
        }
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            // A comment: a keep-alive.
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                let value = std::str::from_utf8(value).map_err(ModelError::invalid_response)?;
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(value);
                self.check_line(self.data.len())?;
            }
            b"event" => self.error_event = value == b"error",
            // `id`, `retry` and unknown fields mean nothing for a completion.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let error = std::mem::take(&mut self.error_event);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        if self.data == "[DONE]" {
            self.data.clear();
            out.push(SseEvent::Done);
            return;
        }
        out.push(SseEvent::Data {
            data: std::mem::take(&mut self.data),
            error,
        });
    }
}

/// A `chat.completion.chunk` (the fields we read).
#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Vec<WireDeltaChoice>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WireDeltaChoice {
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolDelta>>,
}

#[derive(Deserialize)]
struct WireToolDelta {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Deserialize)]
struct WireFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// One event's data as a chunk, or the failure it reports: an `error` object (or an
/// `event: error`, or `finish_reason: "error"`) is classified like the error body of a failed
/// response, with the HTTP status its code names (a numeric `code`, or a known type such as
/// `rate_limit_exceeded`), else 500: an error after a 200 is the provider failing mid-answer.
/// Data that is not a chunk is a retryable `invalid_response`.
pub fn decode_chunk(data: &str, error_event: bool) -> Result<StreamChunk, ModelError> {
    let wire: WireChunk = match serde_json::from_str(data) {
        Ok(wire) => wire,
        Err(_) if error_event => return Err(stream_error(data, None)),
        Err(error) => return Err(ModelError::invalid_response(error)),
    };
    if let Some(error) = wire.error.as_ref().filter(|e| !e.is_null()) {
        return Err(stream_error(data, Some(error)));
    }
    if error_event {
        return Err(stream_error(data, None));
    }
    let Some(choice) = wire.choices.into_iter().next() else {
        // Usage-only and empty keep-alive chunks carry no choice.
        return Ok(StreamChunk::default());
    };
    if choice.finish_reason.as_deref() == Some("error") {
        return Err(stream_error(data, None));
    }
    let mut chunk = StreamChunk {
        finish_reason: choice.finish_reason,
        ..StreamChunk::default()
    };
    if let Some(delta) = choice.delta {
        chunk.text = delta.content.unwrap_or_default();
        chunk.tool_calls = delta
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| {
                let function = call.function.unwrap_or(WireFunctionDelta {
                    name: None,
                    arguments: None,
                });
                ToolCallDelta {
                    index: call.index,
                    id: call.id,
                    name: function.name,
                    arguments: function.arguments.unwrap_or_default(),
                }
            })
            .collect();
    }
    Ok(chunk)
}

/// The error an in-stream error event describes.
fn stream_error(data: &str, error: Option<&serde_json::Value>) -> ModelError {
    let status = error.map_or(500, status_of_stream_error);
    ModelError::from_http_response(status, |_| None, data.as_bytes(), SystemTime::now())
}

/// The HTTP status an in-stream error object stands for.
fn status_of_stream_error(error: &serde_json::Value) -> u16 {
    let field = |name: &str| error.get(name);
    if let Some(code) = field("code").and_then(serde_json::Value::as_u64)
        && (400..=599).contains(&code)
    {
        return u16::try_from(code).unwrap_or(500);
    }
    let words = [field("code"), field("type")];
    let says = |wanted: &[&str]| {
        words
            .iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .any(|w| wanted.contains(&w))
    };
    if says(&[
        "rate_limit_exceeded",
        "rate_limit_error",
        "insufficient_quota",
        "tokens",
    ]) {
        429
    } else if says(&["overloaded_error"]) {
        529
    } else if says(&["context_length_exceeded", "invalid_request_error"]) {
        400
    } else if says(&["authentication_error", "invalid_api_key"]) {
        401
    } else {
        500
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FailureReason, ModelErrorKind, classify};

    fn events(input: &[&[u8]]) -> Result<Vec<SseEvent>, ModelError> {
        let mut decoder = SseDecoder::new(64, 1024);
        let mut out = Vec::new();
        for part in input {
            decoder.feed(part, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn events_survive_any_split_of_the_bytes() {
        let wire = b"data: {\"x\":1}\n\n: ping\n\ndata: a\ndata: b\n\ndata: [DONE]\n\n";
        let whole = events(&[wire]).expect("decodes");
        for cut in 0..wire.len() {
            let (a, b) = wire.split_at(cut);
            assert_eq!(events(&[a, b]).expect("decodes"), whole, "cut at {cut}");
        }
        assert_eq!(
            whole,
            [
                SseEvent::Data {
                    data: "{\"x\":1}".into(),
                    error: false
                },
                SseEvent::Data {
                    data: "a\nb".into(),
                    error: false
                },
                SseEvent::Done
            ]
        );
    }

    #[test]
    fn a_line_or_a_stream_past_its_cap_is_a_typed_failure() {
        let long = [b'x'; 100];
        let error = events(&[b"data: ", &long]).expect_err("line cap");
        assert_eq!(error.kind(), ModelErrorKind::InvalidResponse);
        let many = b"data: x\n\n".repeat(200);
        let error = events(&[&many]).expect_err("total cap");
        assert_eq!(error.kind(), ModelErrorKind::ResponseTooLarge);
    }

    #[test]
    fn deltas_tool_calls_and_finish_reason_decode() {
        let chunk = decode_chunk(
            r#"{"choices":[{"index":0,"delta":{"content":"Hi","tool_calls":[{"index":1,"id":"c","function":{"name":"f","arguments":"{"}}]},"finish_reason":null}]}"#,
            false,
        )
        .expect("chunk");
        assert_eq!(chunk.text, "Hi");
        assert_eq!(chunk.tool_calls[0].index, 1);
        assert_eq!(chunk.tool_calls[0].name.as_deref(), Some("f"));
        let last = decode_chunk(
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            false,
        )
        .expect("chunk");
        assert_eq!(last.finish_reason.as_deref(), Some("stop"));
        assert!(!last.has_content());
    }

    #[test]
    fn errors_inside_the_stream_are_classified_like_error_bodies() {
        let rate = decode_chunk(
            r#"{"error":{"message":"slow down","type":"rate_limit_exceeded","code":null}}"#,
            false,
        )
        .expect_err("error");
        assert_eq!(classify(&rate).reason, FailureReason::RateLimited);
        let quota =
            decode_chunk(r#"{"error":{"code":"insufficient_quota"}}"#, false).expect_err("error");
        assert_eq!(classify(&quota).reason, FailureReason::QuotaExhausted);
        let mid = decode_chunk(
            r#"{"error":{"code":"server_error","message":"x"},"choices":[{"delta":{"content":""},"finish_reason":"error"}]}"#,
            false,
        )
        .expect_err("error");
        assert_eq!(classify(&mid).reason, FailureReason::ServerError);
        let named = decode_chunk(
            r#"{"type":"error","error":{"type":"overloaded_error"}}"#,
            true,
        )
        .expect_err("error");
        assert!(classify(&named).retryable);
    }

    #[test]
    fn a_malformed_chunk_is_a_retryable_invalid_response() {
        for data in [
            "{not json",
            "42",
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#,
        ] {
            let error = decode_chunk(data, false).expect_err(data);
            assert_eq!(classify(&error).reason, FailureReason::InvalidResponse);
            assert!(classify(&error).retryable);
        }
    }
}
