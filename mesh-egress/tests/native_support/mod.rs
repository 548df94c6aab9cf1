//! Bodies in the native wire formats of the three provider APIs `turn` speaks besides chat
//! completions (DESIGN.md, fourth round, "Providers"), written from each API's public
//! reference, and the one [`Api`] vocabulary the black-box tests drive them with.
//!
//! - Anthropic Messages: `POST {base}/messages`, a `message` object, or with `"stream": true`
//!   named server-sent events (`event: <type>\ndata: <json>\n\n`): `message_start`,
//!   `content_block_start`, `ping`, `content_block_delta` (`text_delta`), `content_block_stop`,
//!   `message_delta` (the `stop_reason`), `message_stop`; or `event: error` inside a 200
//!   (docs.anthropic.com/en/docs/build-with-claude/streaming, "Error events").
//! - OpenAI Responses: `POST {base}/responses`, a `response` object, or named events
//!   `response.created` ... `response.output_text.delta` ... one of `response.completed`,
//!   `response.failed`, `response.incomplete` (platform.openai.com/docs/api-reference/
//!   responses-streaming), or `error`.
//! - Gemini: `POST {base}/models/{model}:generateContent`, a `GenerateContentResponse`, or
//!   `:streamGenerateContent?alt=sse`, unnamed `data:` events each a whole
//!   `GenerateContentResponse` (ai.google.dev/api/generate-content); no `[DONE]` sentinel, the
//!   last chunk carries the `finishReason`.
use mesh_egress::testing::{FakeResponse, Step};
use serde_json::{Value, json};

/// A provider API, as `MESH_MODEL_API` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Api {
    Chat,
    Responses,
    Anthropic,
    Gemini,
}

impl Api {
    /// The `MESH_MODEL_API` value (and the lower-case prefix of a fallback entry).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Responses => "responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
        }
    }

    /// `MESH_MODEL_<API>_BASE_URL`, the base a fallback entry `api=model` goes to.
    pub(crate) fn base_url_var(self) -> String {
        format!("MESH_MODEL_{}_BASE_URL", self.name().to_ascii_uppercase())
    }

    /// `MESH_MODEL_<API>_API_KEY`, the key a fallback entry `api=model` sends.
    pub(crate) fn api_key_var(self) -> String {
        format!("MESH_MODEL_{}_API_KEY", self.name().to_ascii_uppercase())
    }

    /// The base URL an operator would give for the fake at `addr`: `/v1` like
    /// `https://api.openai.com/v1` and `https://api.anthropic.com/v1`, `/v1beta` like
    /// `https://generativelanguage.googleapis.com/v1beta`.
    pub(crate) fn base_url(self, addr: std::net::SocketAddr) -> String {
        match self {
            Self::Gemini => format!("http://{addr}/v1beta"),
            _ => format!("http://{addr}/v1"),
        }
    }

    /// The path a request for `model` must go to under `base_path` (`/v1`, `/v1beta`).
    pub(crate) fn path(self, base_path: &str, model: &str, stream: bool) -> String {
        match (self, stream) {
            (Self::Chat, _) => format!("{base_path}/chat/completions"),
            (Self::Responses, _) => format!("{base_path}/responses"),
            (Self::Anthropic, _) => format!("{base_path}/messages"),
            (Self::Gemini, false) => format!("{base_path}/models/{model}:generateContent"),
            (Self::Gemini, true) => format!("{base_path}/models/{model}:streamGenerateContent"),
        }
    }

    /// Where the request carries its token bound: the field under the body's root (or under
    /// `generationConfig` for Gemini).
    pub(crate) fn max_tokens_of(self, body: &Value) -> &Value {
        match self {
            Self::Chat | Self::Anthropic => &body["max_tokens"],
            Self::Responses => &body["max_output_tokens"],
            Self::Gemini => &body["generationConfig"]["maxOutputTokens"],
        }
    }

    /// The name of that field, for messages.
    pub(crate) fn max_tokens_field(self) -> &'static str {
        match self {
            Self::Chat | Self::Anthropic => "max_tokens",
            Self::Responses => "max_output_tokens",
            Self::Gemini => "generationConfig.maxOutputTokens",
        }
    }

    /// A healthy answer of `text` from `model` in this API's format: whole, or streamed in a
    /// few deltas.
    pub(crate) fn answer(self, model: &str, text: &str, stream: bool) -> FakeResponse {
        let pieces = split3(text);
        match (self, stream) {
            (Self::Chat, false) => FakeResponse::completion(text),
            (Self::Chat, true) => FakeResponse::from(Step::chunks(pieces)),
            (Self::Responses, false) => json_response(200, &responses::text_response(model, text)),
            (Self::Responses, true) => responses::sse(&responses::text_stream(model, &pieces)),
            (Self::Anthropic, false) => json_response(200, &anthropic::text_message(model, text)),
            (Self::Anthropic, true) => anthropic::sse(&anthropic::text_stream(model, &pieces)),
            (Self::Gemini, false) => json_response(200, &gemini::text_response(model, text)),
            (Self::Gemini, true) => gemini::sse(&gemini::text_stream(model, &pieces)),
        }
    }
}

/// `text` cut in three pieces at char boundaries (some may be empty for short text).
fn split3(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len() / 3;
    vec![
        chars[..third].iter().collect(),
        chars[third..2 * third].iter().collect(),
        chars[2 * third..].iter().collect(),
    ]
}

/// A JSON response with `status`.
pub(crate) fn json_response(status: u16, body: &Value) -> FakeResponse {
    FakeResponse::raw(status, body.to_string())
}

/// One server-sent event: its `event:` name (when the API names its events) and its data.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    name: Option<String>,
    data: Value,
}

impl Event {
    /// A named event whose data is `data` (Anthropic, Responses).
    pub(crate) fn named(name: &str, data: Value) -> Self {
        Self {
            name: Some(name.to_owned()),
            data,
        }
    }

    /// An unnamed `data:` event (Gemini).
    pub(crate) fn data(data: Value) -> Self {
        Self { name: None, data }
    }
}

/// `events` as a `text/event-stream` body, each line ended by `eol`.
fn event_stream(events: &[Event], eol: &str) -> String {
    let mut body = String::new();
    for event in events {
        if let Some(name) = &event.name {
            body.push_str(&format!("event: {name}{eol}"));
        }
        body.push_str(&format!("data: {}{eol}{eol}", event.data));
    }
    body
}

/// A 200 `text/event-stream` response carrying `body` whole.
fn sse_response(body: String) -> FakeResponse {
    // `with_header` replaces the JSON content type `raw` starts with (since the FakeProvider
    // change that lets a fake of another API send `text/event-stream`).
    FakeResponse::raw(200, body)
        .with_header("content-type", "text/event-stream")
        .with_header("cache-control", "no-cache")
}

/// Anthropic Messages (docs.anthropic.com/en/api/messages, .../build-with-claude/streaming).
pub(crate) mod anthropic {
    use super::{Event, FakeResponse, Value, event_stream, json, sse_response};

    /// A `message` object with `content` blocks and `stop_reason`.
    pub(crate) fn message(model: &str, content: Value, stop_reason: &str) -> Value {
        json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 9},
        })
    }

    /// A whole answer of `text` that ended normally (`end_turn`).
    pub(crate) fn text_message(model: &str, text: &str) -> Value {
        message(model, json!([{"type": "text", "text": text}]), "end_turn")
    }

    /// The error document of a non-2xx response, and the data of `event: error`.
    pub(crate) fn error(kind: &str, message: &str) -> Value {
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    /// `message_start`: the empty message envelope.
    pub(crate) fn message_start(model: &str) -> Event {
        let mut envelope = message(model, json!([]), "end_turn");
        envelope["stop_reason"] = Value::Null;
        envelope["usage"] = json!({"input_tokens": 12, "output_tokens": 1});
        Event::named(
            "message_start",
            json!({"type": "message_start", "message": envelope}),
        )
    }

    /// `content_block_start` of text block `index`.
    pub(crate) fn text_block_start(index: u32) -> Event {
        Event::named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}),
        )
    }

    /// A keep-alive `ping`.
    pub(crate) fn ping() -> Event {
        Event::named("ping", json!({"type": "ping"}))
    }

    /// `content_block_delta` adding `text` to block `index`.
    pub(crate) fn text_delta(index: u32, text: &str) -> Event {
        Event::named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": text}}),
        )
    }

    /// `content_block_stop` of block `index`.
    pub(crate) fn block_stop(index: u32) -> Event {
        Event::named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        )
    }

    /// `message_delta` with the `stop_reason` (and any extra fields of the delta).
    pub(crate) fn message_delta(stop_reason: &str, extra: Value) -> Event {
        let mut delta = json!({"stop_reason": stop_reason, "stop_sequence": null});
        if let (Some(delta), Value::Object(extra)) = (delta.as_object_mut(), extra) {
            delta.extend(extra);
        }
        Event::named(
            "message_delta",
            json!({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 15}}),
        )
    }

    /// `message_stop`: the stream's terminal event.
    pub(crate) fn message_stop() -> Event {
        Event::named("message_stop", json!({"type": "message_stop"}))
    }

    /// `event: error` inside a 200 stream.
    pub(crate) fn error_event(kind: &str, message: &str) -> Event {
        Event::named("error", error(kind, message))
    }

    /// The whole healthy stream of `pieces`, in the order the streaming guide shows.
    pub(crate) fn text_stream(model: &str, pieces: &[String]) -> Vec<Event> {
        let mut events = vec![message_start(model), text_block_start(0), ping()];
        events.extend(pieces.iter().map(|piece| text_delta(0, piece)));
        events.extend([
            block_stop(0),
            message_delta("end_turn", json!({})),
            message_stop(),
        ]);
        events
    }

    /// `events` as a 200 event stream (LF line ends, as the API sends).
    pub(crate) fn sse(events: &[Event]) -> FakeResponse {
        sse_response(event_stream(events, "\n"))
    }
}

/// OpenAI Responses (platform.openai.com/docs/api-reference/responses,
/// .../responses-streaming).
pub(crate) mod responses {
    use super::{Event, FakeResponse, Value, event_stream, json, sse_response};

    const RESPONSE_ID: &str = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b";
    const MESSAGE_ID: &str = "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b";

    /// A `response` object with `status`, `output` items, `error` and `incomplete_details`.
    pub(crate) fn response(
        model: &str,
        status: &str,
        output: Value,
        error: Value,
        incomplete_details: Value,
    ) -> Value {
        json!({
            "id": RESPONSE_ID,
            "object": "response",
            "created_at": 1_741_476_542,
            "status": status,
            "error": error,
            "incomplete_details": incomplete_details,
            "model": model,
            "output": output,
            "usage": {"input_tokens": 36, "output_tokens": 87, "total_tokens": 123},
        })
    }

    /// An assistant `message` output item holding one `output_text` part.
    pub(crate) fn message_item(text: &str, status: &str) -> Value {
        json!({
            "type": "message",
            "id": MESSAGE_ID,
            "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    }

    /// A `reasoning` output item with no visible summary: what a reasoning model's output holds
    /// when `max_output_tokens` ran out while it reasoned (the reasoning guide, "Allocating
    /// space for reasoning": status `incomplete` and possibly no visible output).
    pub(crate) fn reasoning_item() -> Value {
        json!({"type": "reasoning", "id": "rs_6876cf02e0bc8192b74af0fb64b715ff", "summary": []})
    }

    /// A completed answer of `text`.
    pub(crate) fn text_response(model: &str, text: &str) -> Value {
        response(
            model,
            "completed",
            json!([message_item(text, "completed")]),
            Value::Null,
            Value::Null,
        )
    }

    /// A response that failed, with the documented `error` object.
    pub(crate) fn failed(model: &str, code: &str, message: &str) -> Value {
        response(
            model,
            "failed",
            json!([]),
            json!({"code": code, "message": message}),
            Value::Null,
        )
    }

    /// A response cut short for `reason` (`max_output_tokens` or `content_filter`) with
    /// nothing visible in its output.
    pub(crate) fn incomplete(model: &str, reason: &str) -> Value {
        response(
            model,
            "incomplete",
            json!([reasoning_item()]),
            Value::Null,
            json!({"reason": reason}),
        )
    }

    /// A named event of `kind`; the sequence number is filled in by [`sse`].
    pub(crate) fn event(kind: &str, mut data: Value) -> Event {
        data["type"] = Value::from(kind);
        Event::named(kind, data)
    }

    /// `response.created` and `response.in_progress` of an empty response.
    pub(crate) fn opening(model: &str) -> Vec<Event> {
        let started = response(model, "in_progress", json!([]), Value::Null, Value::Null);
        vec![
            event("response.created", json!({"response": started.clone()})),
            event("response.in_progress", json!({"response": started})),
        ]
    }

    /// The events that open the message item and its text part.
    pub(crate) fn message_opening() -> Vec<Event> {
        let mut item = message_item("", "in_progress");
        item["content"] = json!([]);
        vec![
            event(
                "response.output_item.added",
                json!({"output_index": 0, "item": item}),
            ),
            event(
                "response.content_part.added",
                json!({"item_id": MESSAGE_ID, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
        ]
    }

    /// `response.output_text.delta` adding `delta`.
    pub(crate) fn text_delta(delta: &str) -> Event {
        event(
            "response.output_text.delta",
            json!({"item_id": MESSAGE_ID, "output_index": 0, "content_index": 0,
                   "delta": delta, "logprobs": []}),
        )
    }

    /// The whole healthy stream of `pieces`.
    pub(crate) fn text_stream(model: &str, pieces: &[String]) -> Vec<Event> {
        let text: String = pieces.concat();
        let mut events = opening(model);
        events.extend(message_opening());
        events.extend(pieces.iter().map(|piece| text_delta(piece)));
        events.extend([
            event(
                "response.output_text.done",
                json!({"item_id": MESSAGE_ID, "output_index": 0, "content_index": 0,
                       "text": text, "logprobs": []}),
            ),
            event(
                "response.content_part.done",
                json!({"item_id": MESSAGE_ID, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": text, "annotations": []}}),
            ),
            event(
                "response.output_item.done",
                json!({"output_index": 0, "item": message_item(&text, "completed")}),
            ),
            event(
                "response.completed",
                json!({"response": text_response(model, &text)}),
            ),
        ]);
        events
    }

    /// `events` as a 200 event stream, each given its `sequence_number` in order.
    pub(crate) fn sse(events: &[Event]) -> FakeResponse {
        let numbered: Vec<Event> = events
            .iter()
            .enumerate()
            .map(|(n, event)| {
                let mut event = event.clone();
                event.data["sequence_number"] = Value::from(n);
                event
            })
            .collect();
        sse_response(event_stream(&numbered, "\n"))
    }
}

/// Gemini generateContent (ai.google.dev/api/generate-content).
pub(crate) mod gemini {
    use super::{Event, FakeResponse, Value, event_stream, json, sse_response};

    /// A `GenerateContentResponse` with `candidates` (and the usage and model version every
    /// response carries).
    pub(crate) fn response(model: &str, candidates: Value) -> Value {
        json!({
            "candidates": candidates,
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 7, "totalTokenCount": 16},
            "modelVersion": model,
            "responseId": "mvFbaOi1K7uP1dkPvuKQ4A4",
        })
    }

    /// One candidate holding `text` (no `finishReason` when `finish` is `None`: a chunk that is
    /// not the last).
    pub(crate) fn candidate(text: &str, finish: Option<&str>) -> Value {
        let mut candidate = json!({
            "content": {"parts": [{"text": text}], "role": "model"},
            "index": 0,
        });
        if let Some(reason) = finish {
            candidate["finishReason"] = Value::from(reason);
        }
        candidate
    }

    /// A whole answer of `text` (`finishReason: STOP`).
    pub(crate) fn text_response(model: &str, text: &str) -> Value {
        response(model, json!([candidate(text, Some("STOP"))]))
    }

    /// The prompt itself was blocked: `promptFeedback.blockReason` and no candidates at all.
    pub(crate) fn prompt_blocked(model: &str, reason: &str) -> Value {
        json!({
            "promptFeedback": {
                "blockReason": reason,
                "safetyRatings": [
                    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"},
                    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
                ],
            },
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
            "modelVersion": model,
        })
    }

    /// The Google API error document (also sent as one `data:` chunk inside a 200 stream).
    pub(crate) fn error(code: u16, status: &str, message: &str) -> Value {
        json!({"error": {"code": code, "message": message, "status": status}})
    }

    /// The healthy stream of `pieces`: each a chunk, the last with `finishReason: STOP`.
    pub(crate) fn text_stream(model: &str, pieces: &[String]) -> Vec<Event> {
        let last = pieces.len().saturating_sub(1);
        pieces
            .iter()
            .enumerate()
            .map(|(i, piece)| {
                let finish = (i == last).then_some("STOP");
                Event::data(response(model, json!([candidate(piece, finish)])))
            })
            .collect()
    }

    /// `events` as a 200 `alt=sse` stream. Gemini ends its SSE lines with CRLF, so each event
    /// ends in `\r\n\r\n`, which an LF-only splitter never finds (nyroway/nyro#265: "Vertex AI
    /// emits SSE frames with CRLF terminators"; mokksy/ai-mocks#703 adds the trailing `\r\n` to
    /// its Gemini mock for the same reason).
    pub(crate) fn sse(events: &[Event]) -> FakeResponse {
        sse_response(event_stream(events, "\r\n"))
    }
}
