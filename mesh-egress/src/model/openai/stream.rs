//! `stream: true` for [`OpenAiCompatible`]: the request, and the response body read as
//! server-sent events under the connector's caps.

use serde::Serialize;

use super::OpenAiCompatible;
use crate::model::error::ModelError;
use crate::model::http::{Decoded, Events};
use crate::model::sse::{SseEvent, decode_chunk};
use crate::model::stream::ModelStream;
use crate::model::wire::{ChatRequest, WireResponse};

/// The body of a streamed chat-completions request.
#[derive(Serialize)]
struct WireStreamRequest<'a> {
    model: &'a str,
    #[serde(flatten)]
    request: &'a ChatRequest,
    stream: bool,
}

impl OpenAiCompatible {
    /// Sends `request` with `stream: true` and hands back the body as a [`ModelStream`]. A
    /// non-success status is read (capped) and classified as for `complete`; a 200 that is a
    /// whole JSON completion (a gateway that ignored `stream`) is one chunk.
    pub(super) async fn post_stream(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> Result<ModelStream, ModelError> {
        let body = WireStreamRequest {
            model,
            request,
            stream: true,
        };
        let read = |body: &[u8]| {
            let wire: WireResponse =
                serde_json::from_slice(body).map_err(ModelError::invalid_response)?;
            Ok(wire.into_completion(model))
        };
        self.http
            .streamed(self.request(&body), ChatEvents::default(), read)
            .await
    }
}

/// The chat-completions stream: `data: {chunk}` events, ended by `data: [DONE]` (or, from
/// servers that close after the last chunk, by a finish reason and the body's end).
#[derive(Default)]
struct ChatEvents {
    finish_seen: bool,
}

impl Events for ChatEvents {
    fn decode(&mut self, event: SseEvent) -> Decoded {
        match event {
            SseEvent::Done => Decoded::Done,
            SseEvent::Data { data, error } => match decode_chunk(&data, error) {
                Ok(chunk) => {
                    self.finish_seen |= chunk.finish_reason.is_some();
                    Decoded::Chunk(chunk)
                }
                Err(error) => Decoded::Failed(error),
            },
        }
    }

    fn ended(&mut self) -> Option<ModelError> {
        // Some servers close after the last chunk without `[DONE]`; a stream cut before any
        // finish reason was cut, not finished.
        (!self.finish_seen).then(|| {
            ModelError::connection("model stream ended before its finish reason or [DONE]")
        })
    }
}
