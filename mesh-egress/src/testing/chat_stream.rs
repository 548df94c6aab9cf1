//! The streaming APIs of [`FakeApi`](super::FakeApi): Slack's `chat.startStream` / `chat.appendStream` /
//! `chat.stopStream`, Telegram's `sendMessageDraft`, Discord's message edit (`PATCH`), with
//! their failure modes scriptable: a stream that expires, a flood wait, rate-limit headers that
//! change from answer to answer, a refused draft.
//!
//! Kept apart from the send endpoints in `chat_api.rs`; that file calls in at three points
//! (record every call, answer a streaming call, decorate an answer with scripted headers) and
//! holds the accessors a test scripts and reads the streams with; the state both read is in
//! `chat_state.rs`.

use hyper::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::FakeResponse;
use super::chat_state::{
    Api, ChatStep, FakeStream, ReceivedCall, ReceivedDraft, ReceivedMessage, Shared, State, expired,
};
use crate::address::Address;

/// The API method a request is for.
pub(super) fn method_name(surface: Api, method: &Method, path: &str) -> String {
    match surface {
        Api::Slack => path.strip_prefix("/api/").unwrap_or(path).to_owned(),
        Api::Telegram => path
            .rsplit_once('/')
            .map_or(path, |(_, name)| name)
            .to_owned(),
        Api::Discord if method == Method::PATCH => "editMessage".to_owned(),
        Api::Discord => "createMessage".to_owned(),
    }
}

pub(super) fn record(state: &mut State, method: &str, body: &Value, address: Option<Address>) {
    let started = *state.stream.started.get_or_insert_with(Instant::now);
    state.stream.calls.push(ReceivedCall {
        method: method.to_owned(),
        body: body.clone(),
        at: started.elapsed(),
        address,
    });
}

/// Adds the next scripted rate-limit headers to a Discord answer.
pub(super) fn decorate(shared: &Shared, answer: FakeResponse) -> FakeResponse {
    if shared.surface != Api::Discord {
        return answer;
    }
    let Some(headers) = shared.lock().stream.headers.pop_front() else {
        return answer;
    };
    headers.iter().fold(answer, |answer, (name, value)| {
        answer.with_header(name, value)
    })
}

fn slack_error(code: &str) -> FakeResponse {
    FakeResponse::raw(200, json!({ "ok": false, "error": code }).to_string())
}

/// Answers a streaming call (and, for Telegram, any call inside a flood wait); `None` for the
/// send endpoints, which `chat_api.rs` answers.
pub(super) fn handle(
    shared: &Shared,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: &Value,
    step: &ChatStep,
) -> Option<FakeResponse> {
    if shared.surface == Api::Telegram {
        let flood = shared.lock().stream.flood_until;
        if let Some(until) = flood.filter(|u| *u > Instant::now()) {
            let left = until.saturating_duration_since(Instant::now());
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            return Some(FakeResponse::raw(
                429,
                json!({
                    "ok": false,
                    "error_code": 429,
                    "description": format!("Too Many Requests: retry after {secs}"),
                    "parameters": { "retry_after": secs },
                })
                .to_string(),
            ));
        }
    }
    let streaming = matches!(
        method,
        "chat.startStream"
            | "chat.appendStream"
            | "chat.stopStream"
            | "sendMessageDraft"
            | "editMessage"
    );
    if !streaming {
        return None;
    }
    let authorized = match shared.surface {
        Api::Slack => authorization == Some(&format!("Bearer {}", shared.token)),
        Api::Discord => authorization == Some(&format!("Bot {}", shared.token)),
        Api::Telegram => path
            .strip_prefix("/bot")
            .and_then(|p| p.split_once('/'))
            .is_some_and(|(t, _)| t == shared.token),
    };
    if !authorized {
        return Some(match shared.surface {
            Api::Slack => slack_error("invalid_auth"),
            Api::Discord => FakeResponse::raw(
                401,
                json!({ "message": "401: Unauthorized", "code": 0 }).to_string(),
            ),
            Api::Telegram => FakeResponse::raw(
                404,
                json!({ "ok": false, "error_code": 404, "description": "Not Found" }).to_string(),
            ),
        });
    }
    let (apply, then) = match step {
        ChatStep::Accept => (true, None),
        ChatStep::AcceptThen(answer) => (true, Some(answer.clone())),
        ChatStep::Answer(answer) => (false, Some(answer.clone())),
    };
    let applied = apply.then(|| apply_call(shared, method, path, body));
    let answer = match (then, applied) {
        (Some(answer), _) => answer,
        (None, Some(answer)) => answer,
        (None, None) => slack_error("internal_error"),
    };
    Some(decorate(shared, answer))
}

fn text_field(body: &Value, name: &str) -> String {
    body.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Does what the call asks and returns the surface's answer.
fn apply_call(shared: &Shared, method: &str, path: &str, body: &Value) -> FakeResponse {
    let mut state = shared.lock();
    let lifetime = state.stream.lifetime;
    let channel = text_field(body, "channel");
    match method {
        "chat.startStream" => {
            if body.get("thread_ts").and_then(Value::as_str).is_none() {
                return slack_error("invalid_arguments");
            }
            state.next_id += 1;
            let ts = format!("1700000000.{:06}", state.next_id);
            let stream = FakeStream {
                ts: ts.clone(),
                thread_ts: body
                    .get("thread_ts")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                text: text_field(body, "markdown_text"),
                open: true,
                appends: 0,
            };
            state.stream.streams.push((stream, Instant::now()));
            FakeResponse::raw(
                200,
                json!({ "ok": true, "channel": channel, "ts": ts }).to_string(),
            )
        }
        "chat.appendStream" | "chat.stopStream" => {
            let ts = text_field(body, "ts");
            let Some((stream, started)) = state.stream.streams.iter_mut().find(|(s, _)| s.ts == ts)
            else {
                return slack_error("message_not_found");
            };
            if !stream.open || expired(*started, lifetime) {
                stream.open = false;
                return slack_error("message_not_in_streaming_state");
            }
            stream.text.push_str(&text_field(body, "markdown_text"));
            if method == "chat.stopStream" {
                stream.open = false;
            } else {
                stream.appends += 1;
            }
            let text = stream.text.clone();
            let thread_ts = stream.thread_ts.clone();
            let mut answer = json!({ "ok": true, "channel": channel, "ts": ts });
            if method == "chat.stopStream" {
                // As Slack answers (`ChatStopStreamResponse` in slackapi/node-slack-sdk): the
                // stopped message, with the whole text it holds.
                answer["message"] = json!({
                    "type": "message",
                    "ts": ts,
                    "thread_ts": thread_ts,
                    "text": text,
                });
            }
            FakeResponse::raw(200, answer.to_string())
        }
        "sendMessageDraft" => {
            let private = body
                .get("chat_id")
                .and_then(Value::as_i64)
                .is_some_and(|id| id > 0);
            let draft_id = body.get("draft_id").and_then(Value::as_i64).unwrap_or(0);
            if !private || draft_id == 0 {
                return FakeResponse::raw(
                    400,
                    json!({ "ok": false, "error_code": 400, "description": "Bad Request: TEXTDRAFT_PEER_INVALID" }).to_string(),
                );
            }
            let text = text_field(body, "text");
            state.stream.drafts.push(ReceivedDraft { draft_id, text });
            FakeResponse::raw(200, json!({ "ok": true, "result": true }).to_string())
        }
        // Discord's edit: PATCH /api/v10/channels/{channel}/messages/{message}.
        _ => {
            let id = path.rsplit('/').next().unwrap_or_default().to_owned();
            let content = text_field(body, "content");
            let Some(message): Option<&mut ReceivedMessage> =
                state.received.iter_mut().find(|m| m.id == id)
            else {
                return FakeResponse::raw(
                    404,
                    json!({ "message": "Unknown Message", "code": 10008 }).to_string(),
                );
            };
            message.text = content.clone();
            message.body = body.clone();
            let target = message.target.clone();
            FakeResponse::raw(
                200,
                json!({ "id": id, "channel_id": target, "content": content, "edited_timestamp": "2026-01-01T00:00:00Z" }).to_string(),
            )
        }
    }
}
