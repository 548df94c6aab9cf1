//! `POST /api/chat`'s body, the AI SDK's chat request, read as hostile input: bounded before it
//! is parsed, checked field by field, and refused with a status and a fixed sentence
//! ([`Refusal`]) that says nothing of what went wrong inside.
//!
//! The request (`HttpChatTransport.sendMessages` in the pinned `ai` package): `{ id,
//! messages, trigger, messageId, ...body }`, where `messages` is the page's whole copy of the
//! chat (`UIMessage`s: `{ id, role, parts: [{ type: "text", text }, …] }`). Only the last
//! message is read, and only its text parts; the history the agent sees comes from the store.

use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::address::WebAddress;

/// How big a request may be: the body, the person's message, how many messages the page may
/// send along (the AI SDK sends the whole chat every time), and how long its body may take to
/// arrive (a body that trickles in holds a connection and its buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestLimits {
    /// The longest body read, in bytes (default 1 MiB).
    pub body_bytes: usize,
    /// The longest message the person may send, in bytes (default 32 KiB).
    pub message_bytes: usize,
    /// The most messages a request may carry (default 1,000).
    pub messages: usize,
    /// How long the body may take to arrive, from the request's head (default 10 s).
    pub body_time: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            body_bytes: 1 << 20,
            message_bytes: 32 << 10,
            messages: 1_000,
            body_time: Duration::from_secs(10),
        }
    }
}

/// Why a request was refused, as the status and the one sentence the person may read (the AI
/// SDK shows a non-2xx body as the error's message). Never a cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// 400: not a chat request we can read (malformed JSON, invalid UTF-8, a bad id, no text).
    Unreadable,
    /// 401: the application's identity extractor refused the request.
    Unidentified,
    /// 404: no such chat for this identity (it does not exist, or it is someone else's).
    NotFound,
    /// 408: the body did not arrive within its time.
    TooSlow,
    /// 409: a reply is still being written in this chat.
    Busy,
    /// 413: the body, the message or the history is past its bound.
    TooLarge,
    /// 415: the body is not JSON.
    NotJson,
    /// 503: the store (or the conversation's lease) is unavailable.
    Unavailable,
}

impl Refusal {
    /// The response status.
    pub fn status(self) -> StatusCode {
        match self {
            Self::Unreadable => StatusCode::BAD_REQUEST,
            Self::Unidentified => StatusCode::UNAUTHORIZED,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::TooSlow => StatusCode::REQUEST_TIMEOUT,
            Self::Busy => StatusCode::CONFLICT,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The sentence the page shows.
    pub fn sentence(self) -> &'static str {
        match self {
            Self::Unreadable | Self::NotJson => "That message could not be read. Please try again.",
            Self::Unidentified => "Please reload the page to start a new session.",
            Self::NotFound => "This chat was not found.",
            Self::TooSlow => "That message took too long to arrive. Please try again.",
            Self::Busy => "A reply is still being written in this chat. Please wait a moment.",
            Self::TooLarge => "That message is too long to send.",
            Self::Unavailable => "The chat is unavailable right now. Please try again in a moment.",
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (
            self.status(),
            [("content-type", "text/plain; charset=utf-8")],
            self.sentence(),
        )
            .into_response()
    }
}

/// What the request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Trigger {
    /// A new message from the person.
    SubmitMessage,
    /// Answer the last message again.
    RegenerateMessage,
}

/// The request as sent.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire<O> {
    id: String,
    #[serde(default)]
    messages: Vec<WireMessage>,
    trigger: Trigger,
    // `messageId` (the message a regenerate replaces) is not read: every answer is a new
    // message, and the page's copy of the chat is the page's.
    #[serde(flatten)]
    options: O,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    id: Option<String>,
    role: WireRole,
    #[serde(default)]
    parts: Vec<WirePart>,
}

#[derive(Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WireRole {
    User,
    Assistant,
    System,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum WirePart {
    Text {
        text: String,
    },
    /// Files, tool parts, data parts, step markers: not read.
    #[serde(other)]
    Other,
}

/// A request read and checked.
#[derive(Debug)]
pub(super) struct ChatPost<O> {
    pub(super) chat: WebAddress,
    pub(super) trigger: Trigger,
    /// The person's new message (its id and text) on `submit-message`.
    pub(super) message: Option<(String, String)>,
    pub(super) options: O,
}

/// Reads `body` as a chat request within `limits`.
pub(super) fn read<O: DeserializeOwned>(
    body: &[u8],
    limits: RequestLimits,
) -> Result<ChatPost<O>, Refusal> {
    if body.len() > limits.body_bytes {
        return Err(Refusal::TooLarge);
    }
    // serde_json checks UTF-8 too; checking first keeps the two refusals apart in the logs.
    if std::str::from_utf8(body).is_err() {
        tracing::debug!(target: "mesh_egress::web", "chat request refused: not UTF-8");
        return Err(Refusal::Unreadable);
    }
    let wire: Wire<O> = serde_json::from_slice(body).map_err(|error| {
        // The parser's message quotes the input's position, never its text.
        tracing::debug!(target: "mesh_egress::web", line = error.line(), column = error.column(), "chat request refused: not a chat request");
        Refusal::Unreadable
    })?;
    if wire.messages.len() > limits.messages {
        return Err(Refusal::TooLarge);
    }
    let chat = WebAddress::parse(wire.id).map_err(|_| Refusal::Unreadable)?;
    let message = match wire.trigger {
        Trigger::SubmitMessage => {
            let last = wire.messages.last().ok_or(Refusal::Unreadable)?;
            if last.role != WireRole::User {
                return Err(Refusal::Unreadable);
            }
            let id = match &last.id {
                Some(id) => WebAddress::parse(id.clone())
                    .map_err(|_| Refusal::Unreadable)?
                    .chat()
                    .to_owned(),
                None => return Err(Refusal::Unreadable),
            };
            let text = last
                .parts
                .iter()
                .filter_map(|part| match part {
                    WirePart::Text { text } => Some(text.as_str()),
                    WirePart::Other => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            if text.len() > limits.message_bytes {
                return Err(Refusal::TooLarge);
            }
            if text.trim().is_empty() {
                return Err(Refusal::Unreadable);
            }
            Some((id, text))
        }
        Trigger::RegenerateMessage => None,
    };
    Ok(ChatPost {
        chat,
        trigger: wire.trigger,
        message,
        options: wire.options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::NoOptions;

    fn read_default(body: &str) -> Result<ChatPost<NoOptions>, Refusal> {
        read(body.as_bytes(), RequestLimits::default())
    }

    #[test]
    fn the_sdks_request_is_read_for_its_last_user_message() {
        let body = r#"{"id":"chat-1","trigger":"submit-message","messageId":null,
            "messages":[{"id":"u0","role":"user","parts":[{"type":"text","text":"earlier"}]},
                        {"id":"a0","role":"assistant","parts":[{"type":"text","text":"forged"}]},
                        {"id":"u1","role":"user","parts":[{"type":"step-start"},{"type":"text","text":"Is it green?"},
                          {"type":"file","url":"data:x","mediaType":"text/plain"}]}]}"#;
        let request = read_default(body).unwrap();
        assert_eq!(request.chat.chat(), "chat-1");
        assert_eq!(
            request.message,
            Some(("u1".to_owned(), "Is it green?".to_owned()))
        );
    }

    #[test]
    fn hostile_requests_are_refused_with_their_status() {
        let cases: [(&[u8], Refusal); 8] = [
            (b"{not json", Refusal::Unreadable),
            (b"\xff\xfe{}", Refusal::Unreadable),
            (
                br#"{"id":"../etc","trigger":"submit-message","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"x"}]}]}"#,
                Refusal::Unreadable,
            ),
            (
                br#"{"id":"c","trigger":"drop-tables","messages":[]}"#,
                Refusal::Unreadable,
            ),
            (
                br#"{"id":"c","trigger":"submit-message","messages":[]}"#,
                Refusal::Unreadable,
            ),
            (
                br#"{"id":"c","trigger":"submit-message","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"  "}]}]}"#,
                Refusal::Unreadable,
            ),
            (
                br#"{"id":"c","trigger":"submit-message","messages":[{"id":"a","role":"assistant","parts":[{"type":"text","text":"x"}]}]}"#,
                Refusal::Unreadable,
            ),
            (
                br#"{"id":"c","trigger":"submit-message","messages":[{"id":"u 1","role":"user","parts":[{"type":"text","text":"x"}]}]}"#,
                Refusal::Unreadable,
            ),
        ];
        for (body, refusal) in cases {
            assert_eq!(
                read::<NoOptions>(body, RequestLimits::default()).unwrap_err(),
                refusal,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let big = format!(
            r#"{{"id":"c","trigger":"submit-message","messages":[{{"id":"u","role":"user","parts":[{{"type":"text","text":"{}"}}]}}]}}"#,
            "x".repeat(40 << 10)
        );
        assert_eq!(read_default(&big).unwrap_err(), Refusal::TooLarge);
    }

    #[test]
    fn refusals_say_a_fixed_sentence() {
        for refusal in [
            Refusal::Unreadable,
            Refusal::Unidentified,
            Refusal::NotFound,
            Refusal::TooSlow,
            Refusal::Busy,
            Refusal::TooLarge,
            Refusal::NotJson,
            Refusal::Unavailable,
        ] {
            assert!(refusal.status().is_client_error() || refusal.status().is_server_error());
            assert!(refusal.sentence().ends_with('.'));
        }
    }
}
