//! Anthropic's Messages API (docs.anthropic.com/en/api/messages, /en/docs/build-with-claude/streaming).
//!
//! Shapes read, with where each is documented or was seen:
//! - errors before a stream: `{"type":"error","error":{"type","message"}}` with 400
//!   `invalid_request_error`, 401 `authentication_error`, 402 `billing_error`, 403
//!   `permission_error`, 404 `not_found_error`, 413 `request_too_large`, 429
//!   `rate_limit_error`, 500 `api_error`, 529 `overloaded_error` (docs.anthropic.com/en/api/errors;
//!   a 529 carries no reliable `retry-after`, and overload can last minutes);
//! - inside a 200 stream, `event: error` with the same document (`overloaded_error`, and
//!   "Overloaded" sent as `api_error`), after which the stream closes with no `message_stop`
//!   (vercel/ai#2463, UKGovernmentBEIS/inspect_ai#2272; jeremychone/rust-genai#157 and
//!   BerriAI/litellm#4562 ended such streams as successes): a failed attempt, by its type;
//! - a stream closed without `message_stop`: cut short (`connection`, retryable);
//! - `stop_reason: "refusal"`, possibly after partial text (docs: "retry on another model"):
//!   `refused`; `stop_reason: "max_tokens"`: `truncated` (see [`finish`](crate::model::finish));
//! - `ping` events, and event types added later, are skipped ("handle unknown event types
//!   gracefully", the streaming docs).

use serde::Deserialize;
use serde_json::{Value, json};

use super::{DEFAULT_MAX_TOKENS, arguments_value, joined, sampled, system_text};
use crate::model::error::ModelError;
use crate::model::http::{Decoded, Events, Http, KeyIn};
use crate::model::sse::{SseEvent, stream_error};
use crate::model::stream::{ModelStream, StreamChunk, ToolCallDelta};
use crate::model::wire::{ChatRequest, Completion, Role, ToolCall};

/// The API version every request names.
const VERSION: &str = "2023-06-01";

pub(super) async fn complete(
    http: &Http,
    model: &str,
    request: &ChatRequest,
) -> Result<Completion, ModelError> {
    let post = post(http, &body(model, request, false));
    http.whole(post, |body| read_message(body, model)).await
}

pub(super) async fn stream(
    http: &Http,
    model: &str,
    request: &ChatRequest,
) -> Result<ModelStream, ModelError> {
    let post = post(http, &body(model, request, true));
    http.streamed(post, MessageEvents, |body| read_message(body, model))
        .await
}

fn post(http: &Http, body: &Value) -> reqwest::RequestBuilder {
    let url = format!("{}/messages", http.base);
    http.post(&url, KeyIn::Header("x-api-key"), body)
        .header("anthropic-version", VERSION)
}

/// The request body: system messages as `system`, tool calls as `tool_use` blocks and their
/// results as `tool_result` blocks in a user turn, tools with their `input_schema`.
fn body(model: &str, request: &ChatRequest, stream: bool) -> Value {
    let last = request.messages.len().saturating_sub(1);
    let messages: Vec<Value> = request
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role != Role::System)
        .map(|(at, m)| {
            let text = m.content.as_deref().unwrap_or_default();
            match m.role {
                Role::Tool => json!({"role": "user", "content": [{
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                    "content": text,
                }]}),
                Role::Assistant if !m.tool_calls.is_empty() => {
                    let mut blocks = Vec::with_capacity(m.tool_calls.len() + 1);
                    if !text.is_empty() {
                        blocks.push(json!({"type": "text", "text": text}));
                    }
                    blocks.extend(m.tool_calls.iter().map(|call| {
                        json!({"type": "tool_use", "id": call.id, "name": call.function.name,
                               "input": arguments_value(call)})
                    }));
                    json!({"role": "assistant", "content": blocks})
                }
                // A prefill (the last message the assistant's own) may not end in whitespace:
                // the API refuses it with a 400 (docs: "final assistant content cannot end
                // with trailing whitespace").
                Role::Assistant if at == last => {
                    json!({"role": "assistant", "content": text.trim_end()})
                }
                Role::Assistant => json!({"role": "assistant", "content": text}),
                _ => json!({"role": "user", "content": text}),
            }
        })
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
    });
    if let Some(system) = system_text(&request.messages) {
        body["system"] = Value::String(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                let f = &tool.function;
                json!({"name": f.name, "description": f.description.as_deref().unwrap_or_default(),
                       "input_schema": f.parameters})
            })
            .collect();
    }
    sampled(&mut body, request, stream);
    body
}

/// A whole `message` response.
#[derive(Deserialize)]
struct Message {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

/// One content block; kinds this reader does not use (`thinking`, server tools) are skipped.
#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

fn read_message(body: &[u8], model: &str) -> Result<Completion, ModelError> {
    let message: Message = serde_json::from_slice(body).map_err(ModelError::invalid_response)?;
    if message.kind.as_deref() == Some("error") || message.error.is_some() {
        // An error document with a 200 (seen from proxies): a failure, by its type.
        let text = String::from_utf8_lossy(body);
        return Err(stream_error(&text, message.error.as_ref()));
    }
    let mut text = Vec::new();
    let mut tool_calls = Vec::new();
    for block in message.content {
        match block.kind.as_str() {
            "text" => text.extend(block.text),
            "tool_use" => tool_calls.push(ToolCall::function(
                block.id.unwrap_or_default(),
                block.name.unwrap_or_default(),
                block.input.unwrap_or_else(|| json!({})).to_string(),
            )),
            _ => {}
        }
    }
    Ok(Completion {
        model: message.model.unwrap_or_else(|| model.to_owned()),
        content: joined(text),
        tool_calls,
        finish_reason: message.stop_reason,
    })
}

/// One streamed event's data (every event names its `type` in its data too).
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: u32,
    #[serde(default)]
    content_block: Option<Block>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// The Messages stream, ended by `message_stop`.
struct MessageEvents;

impl Events for MessageEvents {
    fn decode(&mut self, event: SseEvent) -> Decoded {
        let SseEvent::Data { data, error } = event else {
            // `[DONE]` is not this API's; an OpenAI-style gateway in front of it ends so.
            return Decoded::Done;
        };
        let event: Event = match serde_json::from_str(&data) {
            Ok(event) => event,
            Err(_) if error => return Decoded::Failed(stream_error(&data, None)),
            Err(e) => return Decoded::Failed(ModelError::invalid_response(e)),
        };
        if error || event.kind == "error" {
            return Decoded::Failed(stream_error(&data, event.error.as_ref()));
        }
        match event.kind.as_str() {
            "content_block_start" => match event.content_block {
                Some(block) if block.kind == "tool_use" => Decoded::Chunk(StreamChunk {
                    tool_calls: vec![ToolCallDelta {
                        index: event.index,
                        id: block.id,
                        name: block.name,
                        arguments: String::new(),
                    }],
                    ..StreamChunk::default()
                }),
                Some(block) if block.kind == "text" => match block.text {
                    Some(text) if !text.is_empty() => Decoded::Chunk(StreamChunk::text(text)),
                    _ => Decoded::Skip,
                },
                _ => Decoded::Skip,
            },
            "content_block_delta" => match event.delta {
                Some(delta) => match delta.kind.as_deref() {
                    Some("text_delta") => {
                        Decoded::Chunk(StreamChunk::text(delta.text.unwrap_or_default()))
                    }
                    Some("input_json_delta") => Decoded::Chunk(StreamChunk {
                        tool_calls: vec![ToolCallDelta {
                            index: event.index,
                            arguments: delta.partial_json.unwrap_or_default(),
                            ..ToolCallDelta::default()
                        }],
                        ..StreamChunk::default()
                    }),
                    // Thinking, signatures, citations: not the answer's text.
                    _ => Decoded::Skip,
                },
                None => Decoded::Skip,
            },
            "message_delta" => match event.delta.and_then(|d| d.stop_reason) {
                Some(reason) => Decoded::Chunk(StreamChunk {
                    finish_reason: Some(reason),
                    ..StreamChunk::default()
                }),
                None => Decoded::Skip,
            },
            "message_stop" => Decoded::Done,
            // message_start, content_block_stop, ping, and types added later.
            _ => Decoded::Skip,
        }
    }

    fn ended(&mut self) -> Option<ModelError> {
        Some(ModelError::connection(
            "model stream ended before message_stop",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::{ChatMessage, ToolDefinition};
    use crate::model::{FailureReason, classify};

    fn events(stream: &str) -> Vec<Decoded> {
        let mut decoder = crate::model::sse::SseDecoder::new(1 << 20, 1 << 24);
        let mut out = Vec::new();
        decoder.feed(stream.as_bytes(), &mut out).expect("decodes");
        let mut reader = MessageEvents;
        out.into_iter().map(|e| reader.decode(e)).collect()
    }

    #[test]
    fn the_body_has_max_tokens_system_tools_and_tool_turns() {
        let request = ChatRequest::new(vec![
            ChatMessage::system("Be brief."),
            ChatMessage::user("Status?"),
            ChatMessage {
                tool_calls: vec![ToolCall::function("t1", "lookup", r#"{"id":7}"#)],
                ..ChatMessage::assistant("")
            },
            ChatMessage::tool_result("t1", "green"),
            ChatMessage::assistant("It is "),
        ])
        .with_tools(vec![ToolDefinition::function(
            "lookup",
            "find",
            json!({"type": "object"}),
        )]);
        let body = body("claude", &request, true);
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["stream"], true);
        assert_eq!(body["messages"][1]["content"][0]["input"], json!({"id": 7}));
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "t1");
        assert_eq!(
            body["messages"][3]["content"], "It is",
            "a prefill ends in no space"
        );
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
    }

    #[test]
    fn an_error_event_is_a_failure_by_its_type_never_text() {
        let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n\
            event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"The dep\"}}\n\n\
            event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let decoded = events(stream);
        assert!(matches!(&decoded[1], Decoded::Chunk(c) if c.text == "The dep"));
        let Decoded::Failed(error) = &decoded[2] else {
            panic!("the error event is a failure")
        };
        let verdict = classify(error);
        assert_eq!(verdict.reason, FailureReason::ServerError);
        assert!(verdict.retryable);
        assert!(
            MessageEvents.ended().is_some(),
            "no message_stop is cut short"
        );
    }

    #[test]
    fn a_whole_message_reads_text_tool_use_and_its_stop_reason() {
        let body = br#"{"type":"message","model":"claude-x","stop_reason":"tool_use","content":[
            {"type":"thinking","thinking":"..."},{"type":"text","text":"Looking."},
            {"type":"tool_use","id":"t","name":"lookup","input":{"id":7}}]}"#;
        let completion = read_message(body, "claude").expect("reads");
        assert_eq!(completion.content.as_deref(), Some("Looking."));
        assert_eq!(completion.tool_calls[0].function.arguments, r#"{"id":7}"#);
        let refused = br#"{"type":"message","stop_reason":"refusal","content":[]}"#;
        let refused = crate::model::wire::usable(read_message(refused, "c"));
        assert_eq!(
            classify(&refused.expect_err("refused")).reason,
            FailureReason::Refused
        );
    }
}
