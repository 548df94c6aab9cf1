//! A [`Step`] played over HTTP: the conversion that makes `Step` the one scripting vocabulary
//! for both model-provider fakes.

use std::time::Duration;

use hyper::body::Bytes;

use super::fake_provider::{Drip, FakeResponse};
use super::scripted::{Action, Fault, SseLineEnding, Step, StreamScript};
use crate::model::{Completion, ModelError, ModelErrorKind};

impl From<Step> for FakeResponse {
    /// The HTTP response that makes [`OpenAiCompatible`](crate::model::OpenAiCompatible) see
    /// what the step scripts.
    ///
    /// | step | response |
    /// |---|---|
    /// | an answer | a 200 chat completion with the same content and tool calls |
    /// | a failure with HTTP status `s` | status `s`, an OpenAI-shaped error body with its code, type and message, `retry-after-ms` and `x-should-retry` when set |
    /// | a connection failure | a 200 whose body is cut off by a closed connection |
    /// | a transport timeout, a stall | a request never answered |
    /// | an empty completion, an undecodable body, a malformed tool call | that body (the connector makes its one repair request for the tool call, which plays the next response) |
    /// | a response too large | a 200 body of 16 MiB filler, above the default cap |
    /// | a stream ([`Step::chunks`]) | a 200 `text/event-stream` body, one `data:` event per chunk after each delay, then the fault or the finish chunk and `data: [DONE]`, lines ended as [`Step::line_ending`] says |
    ///
    /// ```
    /// use mesh_egress::testing::{FakeProvider, Step};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
    /// let provider = FakeProvider::start([Step::status(503).into(), Step::answer("hi").into()]).await?;
    /// # let _ = provider; Ok(()) }
    /// ```
    fn from(step: Step) -> Self {
        let response = match step.action {
            Action::Answer(completion) => completion_response(&completion),
            Action::Fail(make) => failure_response(&make()),
            Action::Stall => Self::never_answer(),
            Action::Stream(script) => sse_response(&script),
        };
        match step.delay {
            Some(delay) => response.after(delay),
            None => response,
        }
    }
}

fn completion_response(completion: &Completion) -> FakeResponse {
    let message = serde_json::json!({
        "role": "assistant",
        "content": completion.content,
        "tool_calls": completion.tool_calls,
    });
    let body = serde_json::json!({
        "id": "chatcmpl-step",
        "object": "chat.completion",
        "model": completion.model,
        "choices": [{"index": 0, "message": message, "finish_reason": completion.finish_reason}],
    });
    FakeResponse::raw(200, body.to_string())
}

fn failure_response(error: &ModelError) -> FakeResponse {
    match error.kind() {
        ModelErrorKind::Status(status) => {
            let body = serde_json::json!({"error": {
                "message": error.provider_message().unwrap_or("scripted failure"),
                "type": error.error_type(),
                "code": error.code(),
            }});
            let mut response = FakeResponse::raw(status, body.to_string());
            if let Some(wait) = error.retry_after() {
                response = response.with_header("retry-after-ms", &wait.as_millis().to_string());
            }
            if let Some(should_retry) = error.should_retry() {
                response = response.with_header("x-should-retry", &should_retry.to_string());
            }
            response
        }
        ModelErrorKind::Connection => FakeResponse::close_mid_response(),
        ModelErrorKind::Timeout => FakeResponse::never_answer(),
        ModelErrorKind::EmptyCompletion => FakeResponse::empty_completion(),
        ModelErrorKind::MalformedToolCall => FakeResponse::tool_call("scripted", "{not json"),
        ModelErrorKind::InvalidResponse => FakeResponse::raw(200, "not a chat completion"),
        ModelErrorKind::ResponseTooLarge => FakeResponse::large_body(200, 16 * 1024 * 1024),
        // A request that could not be built, and whatever kinds come later, as a plain 400.
        _ => FakeResponse::error(400, "invalid_request_error", "scripted failure"),
    }
}

/// A scripted stream as server-sent events exactly as the OpenAI API sends them
/// (platform.openai.com/docs/api-reference/chat-streaming): `data: {chat.completion.chunk}`
/// and a blank line per event, the first delta carrying the role, a last chunk with an empty
/// delta and the finish reason, then `data: [DONE]`. Each event is sent in two frames split
/// mid-line, so the client's decoder always meets a line cut across reads; lines end in `\n`
/// unless the script names another [`SseLineEnding`].
fn sse_response(script: &StreamScript) -> FakeResponse {
    let mut pieces = Vec::new();
    let ending = script.line_ending;
    let mut event = |delay: Duration, text: String, keep_alive: bool| {
        // The events below are written with `\n`; the script's line ending replaces it.
        let text = match ending {
            SseLineEnding::Lf => text,
            _ => text.replace('\n', ending.as_str()),
        };
        if keep_alive {
            pieces.push(Drip::Bytes {
                delay,
                bytes: Bytes::from(format!(": ping{0}{0}", ending.as_str())),
            });
        }
        let delay = if keep_alive { Duration::ZERO } else { delay };
        let cut = text.len() / 2;
        let cut = (0..=cut)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        let (head, tail) = text.split_at(cut);
        pieces.push(Drip::Bytes {
            delay,
            bytes: Bytes::from(head.to_owned()),
        });
        pieces.push(Drip::Bytes {
            delay: Duration::ZERO,
            bytes: Bytes::from(tail.to_owned()),
        });
    };
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        let body = serde_json::json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {body}\n\n")
    };
    let fault_at = |sent: usize| {
        script
            .fault
            .as_ref()
            .filter(|(n, _)| *n == sent)
            .map(|(_, f)| f)
    };
    let mut fault = None;
    for (i, text) in script.chunks.iter().enumerate() {
        if let Some(f) = fault_at(i) {
            fault = Some(f);
            break;
        }
        let delta = if i == 0 {
            serde_json::json!({"role": "assistant", "content": text})
        } else {
            serde_json::json!({"content": text})
        };
        event(script.delay, chunk(delta, None), script.keep_alive);
    }
    if fault.is_none() {
        fault = fault_at(script.chunks.len());
    }
    match fault {
        Some(Fault::Stall) => pieces.push(Drip::Stall {
            delay: script.delay,
        }),
        Some(Fault::Reset) => pieces.push(Drip::Reset {
            delay: script.delay,
        }),
        Some(Fault::Malformed) => event(
            script.delay,
            "data: {\"choices\":[{\"delta\":{\"content\":\"oops\n\n".to_owned(),
            false,
        ),
        Some(Fault::Error(make)) => {
            let error = make();
            let code = match (error.code(), error.http_status()) {
                (Some(code), _) => serde_json::json!(code),
                (None, Some(status)) => serde_json::json!(status),
                (None, None) => serde_json::Value::Null,
            };
            let body = serde_json::json!({"error": {
                "message": error.provider_message().unwrap_or("scripted failure"),
                "type": error.error_type(),
                "code": code,
            }});
            event(script.delay, format!("data: {body}\n\n"), false);
        }
        None => {
            event(
                script.delay,
                chunk(serde_json::json!({}), Some("stop")),
                script.keep_alive,
            );
            event(Duration::ZERO, "data: [DONE]\n\n".to_owned(), false);
        }
    }
    FakeResponse::drip(pieces)
}
