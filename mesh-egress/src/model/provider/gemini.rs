//! Gemini's `generateContent` and `streamGenerateContent?alt=sse`
//! (ai.google.dev/api/generate-content).
//!
//! Shapes read, with where each is documented or was seen:
//! - errors before a stream: Google's `{"error":{"code","message","status","details"}}` (429
//!   `RESOURCE_EXHAUSTED` with `RetryInfo` and `QuotaFailure`, 503 `UNAVAILABLE`, 400
//!   `INVALID_ARGUMENT`, 403 `PERMISSION_DENIED`, 404 `NOT_FOUND`), read by the shared
//!   error-body reader;
//! - a prompt blocked before any answer: `promptFeedback.blockReason` and no candidates:
//!   `refused`;
//! - `finishReason` `SAFETY`, `RECITATION`, `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`,
//!   `IMAGE_SAFETY` (and `OTHER` with nothing usable): `refused`, where nearai/ironclaw PR 5578
//!   had mapped them to a normal stop; `MAX_TOKENS`: `truncated`;
//! - in a stream, an `{"error":{...}}` document: a failure by its code; the last chunk may
//!   carry text and the finish reason together (both are kept); a stream whose last chunk has
//!   no `finishReason` ended early (Gemini sends no other terminal event).
//! - parts marked `thought` are the model's reasoning, not its answer, and are skipped.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{arguments_value, joined, system_text};
use crate::model::error::{ModelError, ModelErrorKind};
use crate::model::finish;
use crate::model::http::{Decoded, Events, Http, KeyIn};
use crate::model::sse::{SseEvent, stream_error};
use crate::model::stream::{ModelStream, StreamChunk, ToolCallDelta};
use crate::model::wire::{ChatRequest, Completion, Role, ToolCall};

pub(super) async fn complete(
    http: &Http,
    model: &str,
    request: &ChatRequest,
) -> Result<Completion, ModelError> {
    let post = post(http, &url(http, model, "generateContent")?, &body(request));
    http.whole(post, |body| read_answer(body, model)).await
}

pub(super) async fn stream(
    http: &Http,
    model: &str,
    request: &ChatRequest,
) -> Result<ModelStream, ModelError> {
    let url = url(http, model, "streamGenerateContent?alt=sse")?;
    let post = post(http, &url, &body(request));
    http.streamed(post, AnswerEvents::default(), |body| {
        read_answer(body, model)
    })
    .await
}

/// `{base}/models/{model}:{method}`; a model named `models/x` is `x`. A name that would change
/// the path (`/`, `?`, `#`, `:`) is refused rather than sent.
fn url(http: &Http, model: &str, method: &str) -> Result<String, ModelError> {
    let name = model.strip_prefix("models/").unwrap_or(model);
    if name.is_empty() || name.contains(['/', '?', '#', ':', ' ']) {
        return Err(ModelError::invalid_request(
            "a Gemini model name holds a character that would change the URL",
        ));
    }
    Ok(format!("{}/models/{name}:{method}", http.base))
}

fn post(http: &Http, url: &str, body: &Value) -> reqwest::RequestBuilder {
    http.post(url, KeyIn::Header("x-goog-api-key"), body)
}

/// The request body: turns as `contents` (`user` and `model`), system messages as
/// `systemInstruction`, tool calls as `functionCall` parts and their results as
/// `functionResponse` parts named after the call they answer.
fn body(request: &ChatRequest) -> Value {
    fn name_of<'a>(request: &'a ChatRequest, id: &'a str) -> &'a str {
        request
            .messages
            .iter()
            .flat_map(|m| &m.tool_calls)
            .find(|call| call.id == id)
            .map_or(id, |call| call.function.name.as_str())
    }
    let contents: Vec<Value> = request
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(|m| {
            let text = m.content.as_deref().unwrap_or_default();
            match m.role {
                Role::Tool => {
                    let id = m.tool_call_id.as_deref().unwrap_or_default();
                    json!({"role": "user", "parts": [{"functionResponse": {
                        "name": name_of(request, id), "response": {"result": text}}}]})
                }
                Role::Assistant => {
                    let mut parts = Vec::with_capacity(m.tool_calls.len() + 1);
                    if !text.is_empty() || m.tool_calls.is_empty() {
                        parts.push(json!({"text": text}));
                    }
                    parts.extend(m.tool_calls.iter().map(|call| {
                        json!({"functionCall": {"name": call.function.name,
                                                "args": arguments_value(call)}})
                    }));
                    json!({"role": "model", "parts": parts})
                }
                _ => json!({"role": "user", "parts": [{"text": text}]}),
            }
        })
        .collect();
    let mut body = json!({ "contents": contents });
    if let Some(system) = system_text(&request.messages) {
        body["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let f = &tool.function;
                json!({"name": f.name, "description": f.description, "parameters": f.parameters})
            })
            .collect();
        body["tools"] = json!([{ "functionDeclarations": declarations }]);
    }
    let mut config = serde_json::Map::new();
    if let Some(max) = request.max_tokens {
        config.insert("maxOutputTokens".to_owned(), json!(max));
    }
    if let Some(temperature) = request.temperature {
        config.insert("temperature".to_owned(), json!(temperature));
    }
    if !config.is_empty() {
        body["generationConfig"] = Value::Object(config);
    }
    body
}

/// A `GenerateContentResponse` (one whole answer, or one chunk of a stream).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    prompt_feedback: Option<Feedback>,
    #[serde(default)]
    model_version: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Feedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<Call>,
}

#[derive(Deserialize)]
struct Call {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

impl Call {
    /// The call as the crate names it; Gemini's calls come whole, and without an id from
    /// older models (`call_{n}` then, `n` its place in the answer).
    fn into_tool_call(self, n: u32) -> ToolCall {
        let arguments = self.args.unwrap_or_else(|| json!({})).to_string();
        ToolCall::function(
            self.id.unwrap_or_else(|| format!("call_{n}")),
            self.name,
            arguments,
        )
    }
}

/// The parts of the first candidate: its text pieces and calls, and its finish reason.
struct Read {
    text: Vec<String>,
    calls: Vec<Call>,
    finish: Option<String>,
}

/// What an answer (or a chunk) says: a failure it carries (an error document, a blocked
/// prompt), else its first candidate's parts.
fn read(answer: Answer, data: &[u8]) -> Result<Read, ModelError> {
    if let Some(error) = answer.error.as_ref().filter(|e| !e.is_null()) {
        return Err(stream_error(&String::from_utf8_lossy(data), Some(error)));
    }
    let blocked = answer.prompt_feedback.and_then(|f| f.block_reason);
    let Some(candidate) = answer.candidates.into_iter().next() else {
        return match blocked {
            Some(reason) => Err(finish::error(ModelErrorKind::Refused, &reason)),
            None => Ok(Read {
                text: Vec::new(),
                calls: Vec::new(),
                finish: None,
            }),
        };
    };
    let mut text = Vec::new();
    let mut calls = Vec::new();
    for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
        if part.thought {
            continue;
        }
        text.extend(part.text);
        calls.extend(part.function_call);
    }
    Ok(Read {
        text,
        calls,
        finish: candidate.finish_reason,
    })
}

fn read_answer(data: &[u8], model: &str) -> Result<Completion, ModelError> {
    let answer: Answer = serde_json::from_slice(data).map_err(ModelError::invalid_response)?;
    let model = answer
        .model_version
        .clone()
        .unwrap_or_else(|| model.to_owned());
    let read = read(answer, data)?;
    let tool_calls = read
        .calls
        .into_iter()
        .zip(0u32..)
        .map(|(call, n)| call.into_tool_call(n))
        .collect();
    Ok(Completion {
        model,
        content: joined(read.text),
        tool_calls,
        finish_reason: read.finish,
    })
}

/// The Gemini stream: each event one `GenerateContentResponse`, read to the body's end. Some
/// models send `finishReason: "STOP"` on every chunk (the Gemini cookbook's streaming
/// notebook), and an error can follow a chunk that said `STOP` (vercel/ai#5217), so a finish
/// reason does not end the read; a body that ends before any finish reason was cut short.
#[derive(Default)]
struct AnswerEvents {
    calls: u32,
    finish_seen: bool,
}

impl Events for AnswerEvents {
    fn decode(&mut self, event: SseEvent) -> Decoded {
        let SseEvent::Data { data, error } = event else {
            return Decoded::Done;
        };
        let answer: Answer = match serde_json::from_str(&data) {
            Ok(answer) => answer,
            Err(_) if error => return Decoded::Failed(stream_error(&data, None)),
            Err(e) => return Decoded::Failed(ModelError::invalid_response(e)),
        };
        let read = match read(answer, data.as_bytes()) {
            Ok(read) => read,
            Err(error) => return Decoded::Failed(error),
        };
        let tool_calls = read
            .calls
            .into_iter()
            .map(|call| {
                let index = self.calls;
                self.calls = self.calls.saturating_add(1);
                let call = call.into_tool_call(index);
                ToolCallDelta {
                    index,
                    id: Some(call.id),
                    name: Some(call.function.name),
                    arguments: call.function.arguments,
                }
            })
            .collect();
        // A `STOP` repeated on every chunk is handed on once, at the end of the body: only
        // a finish that reports a failure (a cut, a filter) ends the stream at once.
        let finish = read.finish.filter(|reason| {
            let normal = finish::verdict(reason, false).is_none() && reason != "OTHER";
            self.finish_seen = true;
            !normal
        });
        let chunk = StreamChunk {
            text: read.text.concat(),
            tool_calls,
            finish_reason: finish,
        };
        if chunk.has_content() || chunk.finish_reason.is_some() {
            Decoded::Chunk(chunk)
        } else {
            Decoded::Skip
        }
    }

    fn ended(&mut self) -> Option<ModelError> {
        (!self.finish_seen)
            .then(|| ModelError::connection("model stream ended before a finishReason"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::{ChatMessage, usable};
    use crate::model::{FailureReason, classify};

    fn answer(body: &str) -> Result<Completion, ModelError> {
        usable(read_answer(body.as_bytes(), "gemini"))
    }

    #[test]
    fn the_body_names_turns_system_and_the_output_limit() {
        let request = ChatRequest::new(vec![
            ChatMessage::system("S"),
            ChatMessage::user("Q"),
            ChatMessage {
                tool_calls: vec![ToolCall::function("c1", "lookup", "{}")],
                ..ChatMessage::assistant("")
            },
            ChatMessage::tool_result("c1", "green"),
        ])
        .with_max_tokens(4096);
        let body = body(&request);
        assert_eq!(body["systemInstruction"]["parts"][0]["text"], "S");
        assert_eq!(body["contents"][1]["role"], "model");
        assert_eq!(
            body["contents"][2]["parts"][0]["functionResponse"]["name"],
            "lookup"
        );
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 4096);
    }

    #[test]
    fn blocked_prompts_and_safety_finishes_are_refusals_and_max_tokens_a_cut() {
        let blocked = r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#;
        assert_eq!(
            classify(&answer(blocked).expect_err("blocked")).reason,
            FailureReason::Refused
        );
        for word in ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "OTHER"] {
            let body = format!(
                r#"{{"candidates":[{{"content":{{"parts":[]}},"finishReason":"{word}"}}]}}"#
            );
            assert_eq!(
                classify(&answer(&body).expect_err(word)).reason,
                FailureReason::Refused
            );
        }
        let cut = r#"{"candidates":[{"content":{"parts":[{"text":"Half"}]},"finishReason":"MAX_TOKENS"}]}"#;
        assert_eq!(
            classify(&answer(cut).expect_err("cut")).reason,
            FailureReason::Truncated
        );
        let thought = r#"{"candidates":[{"content":{"parts":[{"text":"hm","thought":true},{"text":"Green."}]},"finishReason":"STOP"}]}"#;
        assert_eq!(
            answer(thought).expect("answer").content.as_deref(),
            Some("Green.")
        );
    }

    #[test]
    fn a_chunk_carries_text_and_finish_an_error_may_follow_and_a_stream_without_one_was_cut() {
        let mut reader = AnswerEvents::default();
        let last = reader.decode(SseEvent::Data {
            data:
                r#"{"candidates":[{"content":{"parts":[{"text":"done."}]},"finishReason":"STOP"}]}"#
                    .to_owned(),
            error: false,
        });
        assert!(matches!(last, Decoded::Chunk(c) if c.text == "done."));
        let error = reader.decode(SseEvent::Data {
            data: r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#
                .to_owned(),
            error: false,
        });
        assert!(
            matches!(error, Decoded::Failed(e) if classify(&e).reason == FailureReason::ServerError)
        );
        assert!(reader.ended().is_none(), "a finish reason was seen");
        assert!(
            AnswerEvents::default().ended().is_some(),
            "none was seen: cut short"
        );
    }

    #[test]
    fn a_model_name_cannot_change_the_path() {
        let http = Http::new("http://127.0.0.1:9/v1beta").expect("url");
        assert_eq!(
            url(&http, "models/gemini-2.5-flash", "generateContent").expect("ok"),
            "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert!(url(&http, "../admin", "generateContent").is_err());
    }
}
