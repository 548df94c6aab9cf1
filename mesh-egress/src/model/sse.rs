//! [`SseDecoder`]: the chat-completions stream (`stream: true`) read as server-sent events,
//! bounded, and each event decoded into a [`StreamChunk`] or a classified [`ModelError`].
//!
//! The wire format is the one the OpenAI API reference documents for streamed chat
//! completions (platform.openai.com/docs/api-reference/chat-streaming): each event is
//! `data: {chat.completion.chunk JSON}` followed by a blank line, the last one is
//! `data: [DONE]`. The bytes are read by the rules of the WHATWG HTML standard, "Parsing an
//! event stream" (html.spec.whatwg.org/multipage/server-sent-events.html), in full:
//!
//! - the stream is UTF-8; one leading byte order mark is dropped, even split across reads;
//!   invalid sequences decode to U+FFFD (the standard's "UTF-8 decode"), so a stray byte in
//!   a delta is one replacement character, not a failed answer;
//! - a line ends in CRLF, LF or CR, alone; a CR that ends one read and an LF that starts the
//!   next are one CRLF, not a line end and a blank line;
//! - a blank line dispatches the event; a line starting with `:` is a comment (keep-alives:
//!   `: ping`, `: OPENROUTER PROCESSING`, openrouter.ai/docs/api-reference/streaming);
//! - `field:value` with at most one space dropped after the colon, a line without a colon is
//!   a field with an empty value; `data` lines are joined with LF; `event` names the event;
//!   `id` and `retry` only matter to a client that reconnects and resumes, which a completion
//!   cannot do, so they are ignored like unknown fields;
//! - an event without a `data` line is not dispatched, and a partial event at the end of the
//!   stream is dropped.
//!
//! What the fields mean here: an error arriving inside a 200 stream, as
//! `data: {"error": {...}}` (OpenAI, OpenRouter: "errors mid-stream are sent as an SSE event
//! with an error field and `finish_reason: "error"`") or as `event: error` then `data: {...}`
//! (Anthropic-style gateways), is classified like the error body of a failed response.
//!
//! Hostile input is bounded: one line (and one event's data) is at most `max_line` bytes, the
//! whole stream at most `max_total`; past either the stream fails with a typed error. A chunk
//! that is not valid JSON is a retryable `invalid_response`, never a panic.
//!
//! Why not a crate: `eventsource-stream` and `sse-stream` both implement these rules over a
//! `Stream` of buffers, but neither bounds a line or an event (a provider that never sends a
//! line end grows their buffer until the whole-stream cap), and `eventsource-stream` holds a
//! CR that ends a read until the next byte arrives, so a CR-only stream's last event waits
//! for bytes that never come.

use std::time::SystemTime;

use serde::Deserialize;

use super::error::ModelError;
use super::stream::{StreamChunk, ToolCallDelta};

/// The longest SSE line (and one event's data) read by default: 1 MiB, far above any real
/// chunk (a whole tool call's arguments in one chunk included). Read by the HTTP connector.
pub(crate) const DEFAULT_MAX_SSE_LINE: usize = 1024 * 1024;

/// The UTF-8 byte order mark, dropped once at the start of a stream.
const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

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

/// Where the decoder is in the stream's first bytes: a byte order mark is dropped only there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// This many bytes of a byte order mark have been seen, and nothing else yet.
    Bom(usize),
    /// Past the start: every byte is the stream's.
    Body,
}

/// An incremental, bounded server-sent-events decoder: feed it bytes as they arrive, in any
/// split, and it hands back whole events.
#[derive(Debug)]
pub struct SseDecoder {
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    data: String,
    has_data: bool,
    error_event: bool,
    /// The last byte fed was a CR: an LF at the start of the next read completes its CRLF.
    after_cr: bool,
    start: Start,
    max_line: usize,
    max_total: usize,
    total: usize,
    /// A JSON document written into the stream outside any field (see [`line_done`]), while
    /// its lines arrive; `None` when none is open.
    stray: Option<String>,
}

impl SseDecoder {
    /// A decoder capping one line at `max_line` bytes and the whole stream at `max_total`.
    pub fn new(max_line: usize, max_total: usize) -> Self {
        Self {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            error_event: false,
            after_cr: false,
            start: Start::Bom(0),
            max_line,
            max_total,
            total: 0,
            stray: None,
        }
    }

    /// Bytes read so far.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Decodes `bytes`, appending every event they complete to `out`.
    ///
    /// # Errors
    ///
    /// `ResponseTooLarge` past the total cap, and `InvalidResponse` for a line (or an event's
    /// data) past its cap.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        self.total = self.total.saturating_add(bytes.len());
        if self.total > self.max_total {
            return Err(ModelError::response_too_large(self.max_total));
        }
        bytes = self.skip_bom(bytes);
        if bytes.is_empty() {
            // An empty read settles nothing: a CR before it still waits for its LF.
            return Ok(());
        }
        if std::mem::take(&mut self.after_cr)
            && let Some(rest) = bytes.strip_prefix(b"\n")
        {
            bytes = rest;
        }
        while let Some(at) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let head = &bytes[..at];
            let mut rest = &bytes[at + 1..];
            if bytes[at] == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            bytes = rest;
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

    /// Drops the byte order mark's bytes at the start of the stream, however the reads split
    /// it; bytes that turn out not to be one are handed back to the first line.
    fn skip_bom<'a>(&mut self, mut bytes: &'a [u8]) -> &'a [u8] {
        while let Start::Bom(seen) = self.start {
            let Some(&byte) = bytes.first() else {
                break;
            };
            if byte == BOM[seen] {
                bytes = &bytes[1..];
                self.start = if seen + 1 == BOM.len() {
                    Start::Body
                } else {
                    Start::Bom(seen + 1)
                };
            } else {
                // At most two bytes, so no line cap can be passed by them.
                self.line.extend_from_slice(&BOM[..seen]);
                self.start = Start::Body;
            }
        }
        bytes
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

    /// One whole line. Beyond the standard: a line opening with `{` outside any event starts a
    /// stray document, collected up to the next blank line; one that parses as an object with
    /// an `error` is an error event. Gemini writes its overload error so, pretty-printed, into
    /// a 200 stream after some chunks (vercel/ai#5217, diegosouzapw/OmniRoute#4177); read as
    /// the standard says (unknown fields), it would vanish and the stream would end as if cut.
    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        if line.is_empty() {
            self.stray_done(out);
            self.dispatch(out);
            return Ok(());
        }
        if let Some(stray) = self.stray.as_mut() {
            stray.push_str(&String::from_utf8_lossy(line));
            stray.push('\n');
            let len = stray.len();
            return self.check_line(len);
        }
        if line[0] == b'{' && !self.has_data {
            self.stray = Some(format!("{}\n", String::from_utf8_lossy(line)));
            return self.check_line(line.len());
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
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                match std::str::from_utf8(value) {
                    Ok(value) => self.data.push_str(value),
                    Err(_) => self.data.push_str(&String::from_utf8_lossy(value)),
                }
                self.check_line(self.data.len())?;
            }
            b"event" => self.error_event = value == b"error",
            // `id` and `retry` serve a client that reconnects and resumes; a completion
            // cannot be resumed, so they mean nothing here, like unknown fields.
            _ => {}
        }
        Ok(())
    }

    /// The body ended: a stray document still open is read as at a blank line (a partial
    /// event is dropped, as the standard says).
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        self.stray_done(out);
    }

    /// Ends a stray document: an error event when it is one.
    fn stray_done(&mut self, out: &mut Vec<SseEvent>) {
        let Some(stray) = self.stray.take() else {
            return;
        };
        let is_error = serde_json::from_str::<serde_json::Value>(&stray)
            .is_ok_and(|doc| doc.get("error").is_some_and(|e| !e.is_null()));
        if is_error {
            out.push(SseEvent::Data {
                data: stray,
                error: true,
            });
        }
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
///
/// # Errors
///
/// A [`ModelError`] classified as above for a chunk that reports a failure, and
/// `invalid_response` for data that is not a chunk.
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
pub(crate) fn stream_error(data: &str, error: Option<&serde_json::Value>) -> ModelError {
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
        "too_many_requests",
        "insufficient_quota",
        "tokens",
    ]) {
        429
    } else if says(&["overloaded_error"]) {
        529
    } else if says(&[
        "context_length_exceeded",
        "invalid_request_error",
        "invalid_prompt",
    ]) {
        400
    } else if says(&["authentication_error", "invalid_api_key"]) {
        401
    } else if says(&["permission_error"]) {
        403
    } else if says(&["not_found_error"]) {
        404
    } else if says(&["request_too_large"]) {
        413
    } else if says(&["billing_error"]) {
        402
    } else {
        500
    }
}

// The standard's rules, one case each, also fed in arbitrary splits.
#[cfg(test)]
mod standard;

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
