//! The AI SDK's UI message stream, protocol v1: the chunks we send and how they go on the wire.
//!
//! The ground truth is the pinned `ai` package itself: its chunk schema
//! (`uiMessageChunkSchema`, `src/ui-message-stream/ui-message-chunks.ts`), the reader
//! (`processUIMessageStream`: a `text-delta` or `text-end` whose `text-start` it has not seen
//! throws; an `error` chunk ends `useChat`'s request in its error state, showing `errorText`),
//! the headers (`UI_MESSAGE_STREAM_HEADERS`) and the framing (`JsonToSseTransformStream`: one
//! `data: {json}` event per chunk, then `data: [DONE]`). The prose is vercel/ai's
//! `content/docs/04-ai-sdk-ui/50-stream-protocol.mdx` (shipped in the package as
//! `docs/04-ai-sdk-ui/50-stream-protocol.mdx`).
//!
//! Only the chunks a reply needs exist here, and none of them can carry a cause: text comes
//! from delivered parts, and the one `error` chunk holds a fixed sentence ([`Interruption`]).

use serde::Serialize;

/// The headers of a UI message stream response, as the AI SDK's own server sends them
/// (`UI_MESSAGE_STREAM_HEADERS`). `x-accel-buffering: no` keeps nginx from holding chunks back.
pub(super) const STREAM_HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The event that ends every stream.
pub const DONE: &str = "data: [DONE]\n\n";

/// An SSE comment: readers ignore it, proxies see the connection is alive (the AI SDK's own
/// keep-alive is the same line).
pub(super) const KEEP_ALIVE: &str = ": keep-alive\n\n";

/// One chunk of a UI message stream, serialised exactly as the AI SDK's schema names it:
/// `type` in kebab case, fields in camel case.
///
/// ```
/// use mesh_egress::web::UiChunk;
/// let chunk = UiChunk::TextDelta { id: "t0", delta: "Hello" };
/// assert_eq!(chunk.to_sse(), "data: {\"type\":\"text-delta\",\"id\":\"t0\",\"delta\":\"Hello\"}\n\n");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum UiChunk<'a> {
    /// A new assistant message: `{"type":"start","messageId":…}`.
    Start {
        /// The message's id (the same id `GET /api/chat/{id}/messages` lists it under).
        message_id: &'a str,
    },
    /// A text part opens: `{"type":"text-start","id":…}`.
    TextStart {
        /// The part's id within the message.
        id: &'a str,
    },
    /// Text appended to an open part: `{"type":"text-delta","id":…,"delta":…}`.
    TextDelta {
        /// The open part's id.
        id: &'a str,
        /// The text.
        delta: &'a str,
    },
    /// A text part closes: `{"type":"text-end","id":…}`.
    TextEnd {
        /// The part's id.
        id: &'a str,
    },
    /// The message is complete: `{"type":"finish"}`, with `messageMetadata` when a promise
    /// to follow up is open (`{"followUp":true}`), so a page knows to look for it.
    Finish {
        /// The message's metadata, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_metadata: Option<MessageMetadata>,
    },
    /// The reply could not be finished: `{"type":"error","errorText":…}`, a fixed sentence.
    Error {
        /// What the person reads.
        error_text: Interruption,
    },
}

/// What an assistant message says about itself to the page (`metadata` of a `UIMessage`,
/// `messageMetadata` of a chunk): only whether a follow-up is still owed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageMetadata {
    /// A holding line promised a follow-up that has not arrived yet.
    pub follow_up: bool,
}

/// Why a reply stopped before its end, as the one fixed sentence the person reads. Never a
/// cause: what went wrong is on the ledger and in the error-tracking event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Interruption {
    /// The reply could not be finished (its outbox or its turn failed after it started).
    Interrupted,
}

impl Interruption {
    /// The sentence.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interrupted => "The reply was interrupted. Please send your message again.",
        }
    }
}

impl Serialize for Interruption {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl UiChunk<'_> {
    /// Appends the chunk's SSE event (`data: {json}` and a blank line) to `out`. The JSON is
    /// one line: serde_json escapes every control character inside strings.
    pub fn write_sse(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"data: ");
        // Writing into a Vec cannot fail, and every field serialises.
        if serde_json::to_writer(&mut *out, self).is_err() {
            unreachable_serialization();
        }
        out.extend_from_slice(b"\n\n");
    }

    /// The chunk's SSE event as a string.
    pub fn to_sse(&self) -> String {
        let mut out = Vec::with_capacity(64);
        self.write_sse(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Serialising a chunk into memory has no failure mode (strings and a bool only); should one
/// appear, the event is dropped rather than the process.
#[cold]
fn unreachable_serialization() {
    tracing::error!(target: "mesh_egress::web", "a stream chunk did not serialise");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_has_the_sdks_type_and_camel_case_fields() {
        let cases = [
            (
                UiChunk::Start { message_id: "m1" },
                r#"{"type":"start","messageId":"m1"}"#,
            ),
            (
                UiChunk::TextStart { id: "t0" },
                r#"{"type":"text-start","id":"t0"}"#,
            ),
            (
                UiChunk::TextDelta {
                    id: "t0",
                    delta: "a\n\"b\"\u{7}",
                },
                r#"{"type":"text-delta","id":"t0","delta":"a\n\"b\"\u0007"}"#,
            ),
            (
                UiChunk::TextEnd { id: "t0" },
                r#"{"type":"text-end","id":"t0"}"#,
            ),
            (
                UiChunk::Finish {
                    message_metadata: None,
                },
                r#"{"type":"finish"}"#,
            ),
            (
                UiChunk::Finish {
                    message_metadata: Some(MessageMetadata { follow_up: true }),
                },
                r#"{"type":"finish","messageMetadata":{"followUp":true}}"#,
            ),
            (
                UiChunk::Error {
                    error_text: Interruption::Interrupted,
                },
                r#"{"type":"error","errorText":"The reply was interrupted. Please send your message again."}"#,
            ),
        ];
        for (chunk, json) in cases {
            assert_eq!(chunk.to_sse(), format!("data: {json}\n\n"));
            assert_eq!(
                chunk.to_sse().lines().count(),
                2,
                "one event line, then a blank"
            );
        }
    }
}
