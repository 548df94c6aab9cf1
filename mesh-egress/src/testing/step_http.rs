//! A [`Step`] played over HTTP: the conversion that makes `Step` the one scripting vocabulary
//! for both model-provider fakes.

use super::fake_provider::FakeResponse;
use super::scripted::{Action, Step};
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
