//! OpenAI's Responses API (platform.openai.com/docs/api-reference/responses and
//! /responses-streaming).
//!
//! Shapes read, with where each is documented or was seen:
//! - a whole response's `status`: `completed` is an answer; `failed` carries `error` (`code`:
//!   `server_error`, `rate_limit_exceeded`, `invalid_prompt`, ...), a failure by its code;
//!   `incomplete` carries `incomplete_details.reason`, `max_output_tokens` (`truncated`) or
//!   `content_filter` (`refused`); langchain-ai/langchain#39039 read both as success;
//! - a `refusal` content part with no text is `refused` (its text is the model's, but a refusal
//!   is not the answer asked for, and another route may give it);
//! - in a stream: `response.output_text.delta`, `response.output_item.added` and
//!   `response.function_call_arguments.delta` carry content; `response.completed`,
//!   `response.failed` and `response.incomplete` end it; an `error` event is documented flat
//!   (`{"type":"error","code","message"}`) but delivered nested under `error`
//!   (openai/openai-dotnet#849, #881; openai/openai-node PR 2021): both are read; a stream
//!   closed before a terminal event was cut short.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{arguments_value, joined, sampled};
use crate::model::error::ModelError;
use crate::model::http::{Decoded, Events, Http, KeyIn};
use crate::model::sse::{SseEvent, stream_error};
use crate::model::stream::{ModelStream, StreamChunk, ToolCallDelta};
use crate::model::wire::{ChatRequest, Completion, Role, ToolCall};

pub(super) async fn complete(
    http: &Http,
    model: &str,
    request: &ChatRequest,
) -> Result<Completion, ModelError> {
    let post = post(http, &body(model, request, false));
    http.whole(post, |body| read_response(body, model)).await
}

pub(super) async fn stream(
    http: &Http,
    model: &str,
    request: &ChatRequest,
) -> Result<ModelStream, ModelError> {
    let post = post(http, &body(model, request, true));
    http.streamed(post, ResponseEvents::default(), |body| {
        read_response(body, model)
    })
    .await
}

fn post(http: &Http, body: &Value) -> reqwest::RequestBuilder {
    http.post(&format!("{}/responses", http.base), KeyIn::Bearer, body)
}

/// The request body: messages as input items, tool calls as `function_call` items and their
/// results as `function_call_output`, nothing stored on the provider's side.
fn body(model: &str, request: &ChatRequest, stream: bool) -> Value {
    let mut input = Vec::with_capacity(request.messages.len());
    for m in &request.messages {
        let text = m.content.as_deref().unwrap_or_default();
        match m.role {
            Role::Tool => input.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "output": text,
            })),
            Role::Assistant => {
                if !text.is_empty() || m.tool_calls.is_empty() {
                    input.push(json!({"role": "assistant", "content": text}));
                }
                input.extend(m.tool_calls.iter().map(|call| {
                    json!({"type": "function_call", "call_id": call.id,
                           "name": call.function.name,
                           "arguments": arguments_value(call).to_string()})
                }));
            }
            Role::System => input.push(json!({"role": "system", "content": text})),
            _ => input.push(json!({"role": "user", "content": text})),
        }
    }
    let mut body = json!({"model": model, "input": input, "store": false});
    if let Some(max) = request.max_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                let f = &tool.function;
                json!({"type": "function", "name": f.name, "description": f.description,
                       "parameters": f.parameters})
            })
            .collect();
    }
    sampled(&mut body, request, stream);
    body
}

/// A whole response object (also the `response` of the terminal stream events).
#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    output: Vec<Item>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
}

#[derive(Deserialize)]
struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

/// One output item; kinds this reader does not use (`reasoning`, built-in tools) are skipped.
#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    content: Vec<Part>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

fn read_response(body: &[u8], model: &str) -> Result<Completion, ModelError> {
    let response: Response = serde_json::from_slice(body).map_err(ModelError::invalid_response)?;
    let text = String::from_utf8_lossy(body);
    finished(response, model, &text)
}

/// What a response object says: an answer, or the failure its status reports. `data` is the
/// document it came in, read again for the error's fields.
fn finished(response: Response, model: &str, data: &str) -> Result<Completion, ModelError> {
    let incomplete_reason = response.incomplete_details.and_then(|d| d.reason);
    match response.status.as_deref() {
        Some("failed") => return Err(failure(data, response.error.as_ref())),
        Some("incomplete") => {
            // `max_output_tokens` or `content_filter` decide through the finish reason.
            let reason = incomplete_reason.unwrap_or_else(|| "max_output_tokens".to_owned());
            return Ok(Completion {
                model: response.model.unwrap_or_else(|| model.to_owned()),
                content: None,
                tool_calls: Vec::new(),
                finish_reason: Some(reason),
            });
        }
        Some("completed") | None => {}
        // `queued`, `in_progress`, `cancelled`: not an answer (a background response is not
        // asked for here).
        Some(_) => return Err(ModelError::invalid_response("response did not complete")),
    }
    if response.error.as_ref().is_some_and(|e| !e.is_null()) {
        return Err(failure(data, response.error.as_ref()));
    }
    let mut text = Vec::new();
    let mut refused = false;
    let mut tool_calls = Vec::new();
    for item in response.output {
        match item.kind.as_str() {
            "message" => {
                for part in item.content {
                    match part.kind.as_str() {
                        "output_text" => text.extend(part.text),
                        "refusal" => refused = true,
                        _ => {}
                    }
                }
            }
            "function_call" => tool_calls.push(ToolCall::function(
                item.call_id.unwrap_or_default(),
                item.name.unwrap_or_default(),
                item.arguments.unwrap_or_default(),
            )),
            _ => {}
        }
    }
    let content = joined(text);
    let finish = if refused && content.is_none() && tool_calls.is_empty() {
        "refusal"
    } else if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    Ok(Completion {
        model: response.model.unwrap_or_else(|| model.to_owned()),
        content,
        tool_calls,
        finish_reason: Some(finish.to_owned()),
    })
}

/// A failed response's error (`{"code","message"}`), classified like an error body.
fn failure(data: &str, error: Option<&Value>) -> ModelError {
    // The error object is read where the error-body reader looks for it: under `error`.
    let document = match error {
        Some(error) => json!({ "error": error }).to_string(),
        None => data.to_owned(),
    };
    stream_error(&document, error)
}

/// One streamed event's data.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    output_index: u32,
    #[serde(default)]
    item: Option<Item>,
    #[serde(default)]
    response: Option<Response>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
}

/// The Responses stream, ended by `response.completed`, `response.failed` or
/// `response.incomplete`.
#[derive(Default)]
struct ResponseEvents {
    text_seen: bool,
    refused: bool,
    calls_seen: bool,
}

impl Events for ResponseEvents {
    fn decode(&mut self, event: SseEvent) -> Decoded {
        let SseEvent::Data { data, error } = event else {
            return Decoded::Done;
        };
        let event: Event = match serde_json::from_str(&data) {
            Ok(event) => event,
            Err(_) if error => return Decoded::Failed(stream_error(&data, None)),
            Err(e) => return Decoded::Failed(ModelError::invalid_response(e)),
        };
        match event.kind.as_str() {
            "response.output_text.delta" => match event.delta {
                Some(delta) if !delta.is_empty() => {
                    self.text_seen = true;
                    Decoded::Chunk(StreamChunk::text(delta))
                }
                _ => Decoded::Skip,
            },
            // The refusal's words are not streamed to anyone: a refusal fails the attempt.
            "response.refusal.delta" => {
                self.refused = true;
                Decoded::Skip
            }
            "response.output_item.added" => match event.item {
                Some(item) if item.kind == "function_call" => {
                    self.calls_seen = true;
                    Decoded::Chunk(StreamChunk {
                        tool_calls: vec![ToolCallDelta {
                            index: event.output_index,
                            id: item.call_id,
                            name: item.name,
                            arguments: item.arguments.unwrap_or_default(),
                        }],
                        ..StreamChunk::default()
                    })
                }
                _ => Decoded::Skip,
            },
            "response.function_call_arguments.delta" => Decoded::Chunk(StreamChunk {
                tool_calls: vec![ToolCallDelta {
                    index: event.output_index,
                    arguments: event.delta.unwrap_or_default(),
                    ..ToolCallDelta::default()
                }],
                ..StreamChunk::default()
            }),
            "response.completed" => {
                let finish = if self.refused && !self.text_seen && !self.calls_seen {
                    "refusal"
                } else if self.calls_seen {
                    "tool_calls"
                } else {
                    "stop"
                };
                Decoded::Last(StreamChunk {
                    finish_reason: Some(finish.to_owned()),
                    ..StreamChunk::default()
                })
            }
            "response.incomplete" => {
                let reason = event
                    .response
                    .and_then(|r| r.incomplete_details)
                    .and_then(|d| d.reason)
                    .unwrap_or_else(|| "max_output_tokens".to_owned());
                Decoded::Last(StreamChunk {
                    finish_reason: Some(reason),
                    ..StreamChunk::default()
                })
            }
            "response.failed" => {
                let error = event.response.and_then(|r| r.error);
                Decoded::Failed(failure(&data, error.as_ref()))
            }
            "error" => {
                // Nested under `error` as delivered, or flat as documented.
                let flat = event.code.is_some();
                let error = match (event.error, flat) {
                    (Some(error), _) => error,
                    (None, true) => serde_json::from_str(&data).unwrap_or(Value::Null),
                    (None, false) => Value::Null,
                };
                Decoded::Failed(failure(&data, (!error.is_null()).then_some(&error)))
            }
            _ if error => Decoded::Failed(stream_error(&data, event.error.as_ref())),
            // created, in_progress, content_part.*, output_text.done, output_item.done,
            // reasoning, and types added later.
            _ => Decoded::Skip,
        }
    }

    fn ended(&mut self) -> Option<ModelError> {
        Some(ModelError::connection(
            "model stream ended before response.completed",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::{ChatMessage, usable};
    use crate::model::{FailureReason, classify};

    fn decode(lines: &[&str]) -> Vec<Decoded> {
        let mut reader = ResponseEvents::default();
        lines
            .iter()
            .map(|data| {
                reader.decode(SseEvent::Data {
                    data: (*data).to_owned(),
                    error: false,
                })
            })
            .collect()
    }

    fn reason(decoded: &Decoded) -> FailureReason {
        match decoded {
            Decoded::Failed(error) => classify(error).reason,
            _ => panic!("a failure"),
        }
    }

    #[test]
    fn the_body_is_input_items_with_the_output_limit() {
        let request = ChatRequest::new(vec![ChatMessage::system("S"), ChatMessage::user("Q")])
            .with_max_tokens(64);
        let body = body("gpt", &request, true);
        assert_eq!(body["input"][1], json!({"role": "user", "content": "Q"}));
        assert_eq!(body["max_output_tokens"], 64);
        assert_eq!(body["store"], false);
    }

    #[test]
    fn failed_and_incomplete_responses_are_failures_of_their_kind() {
        let failed =
            br#"{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}"#;
        assert_eq!(
            classify(&read_response(failed, "m").expect_err("failed")).reason,
            FailureReason::ServerError
        );
        for (reason, want) in [
            ("max_output_tokens", FailureReason::Truncated),
            ("content_filter", FailureReason::Refused),
        ] {
            let body = format!(
                r#"{{"status":"incomplete","incomplete_details":{{"reason":"{reason}"}},"output":[]}}"#
            );
            let error = usable(read_response(body.as_bytes(), "m")).expect_err("incomplete");
            assert_eq!(classify(&error).reason, want);
        }
    }

    #[test]
    fn the_error_event_is_read_flat_and_nested() {
        let decoded = decode(&[
            r#"{"type":"response.output_text.delta","delta":"The dep","output_index":0}"#,
            r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}"#,
        ]);
        assert!(matches!(&decoded[0], Decoded::Chunk(c) if c.text == "The dep"));
        assert_eq!(reason(&decoded[1]), FailureReason::RateLimited);
        let nested = decode(&[
            r#"{"type":"error","error":{"type":"server_error","code":"server_error","message":"x"}}"#,
        ]);
        assert_eq!(reason(&nested[0]), FailureReason::ServerError);
        let failed = decode(&[
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"x"}}}"#,
        ]);
        assert_eq!(reason(&failed[0]), FailureReason::ServerError);
        assert!(ResponseEvents::default().ended().is_some());
    }
}
