//! `stream: true` for [`OpenAiCompatible`]: the request, and the response body read as
//! server-sent events under the connector's caps.

use std::collections::VecDeque;

use serde::Serialize;

use super::{Capped, OpenAiCompatible, read_capped, status_error, transport_error};
use crate::future::BoxFuture;
use crate::model::error::ModelError;
use crate::model::sse::{DEFAULT_MAX_SSE_LINE, SseDecoder, SseEvent, decode_chunk};
use crate::model::stream::{ChunkTransport, ModelStream, StreamChunk};
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
        let mut builder = self.client.post(&self.endpoint).json(&WireStreamRequest {
            model,
            request,
            stream: true,
        });
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let mut response = builder.send().await.map_err(transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = match read_capped(&mut response, self.max_error_body).await? {
                Capped::Whole(body) | Capped::Cut(body) => body,
            };
            return Err(status_error(status.as_u16(), &headers, &body));
        }
        let is_json = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        if is_json {
            let body = match read_capped(&mut response, self.max_completion_body).await? {
                Capped::Whole(body) => body,
                Capped::Cut(_) => {
                    return Err(ModelError::response_too_large(self.max_completion_body));
                }
            };
            let wire: WireResponse =
                serde_json::from_slice(&body).map_err(ModelError::invalid_response)?;
            return Ok(ModelStream::from_completion(wire.into_completion(model)));
        }
        Ok(ModelStream::new(SseBody {
            response,
            decoder: SseDecoder::new(
                DEFAULT_MAX_SSE_LINE.min(self.max_completion_body),
                self.max_completion_body,
            ),
            events: VecDeque::new(),
            scratch: Vec::new(),
            finished: false,
            finish_seen: false,
        }))
    }
}

/// A streamed response body, decoded event by event.
struct SseBody {
    response: reqwest::Response,
    decoder: SseDecoder,
    events: VecDeque<SseEvent>,
    scratch: Vec<SseEvent>,
    finished: bool,
    finish_seen: bool,
}

impl SseBody {
    async fn next(&mut self) -> Option<Result<StreamChunk, ModelError>> {
        loop {
            if self.finished {
                return None;
            }
            if let Some(event) = self.events.pop_front() {
                match event {
                    SseEvent::Done => {
                        self.finished = true;
                        return None;
                    }
                    SseEvent::Data { data, error } => {
                        let chunk = decode_chunk(&data, error);
                        match &chunk {
                            Ok(c) if c.finish_reason.is_some() => self.finish_seen = true,
                            Ok(_) => {}
                            Err(_) => self.finished = true,
                        }
                        return Some(chunk);
                    }
                }
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => {
                    if let Err(error) = self.decoder.feed(&bytes, &mut self.scratch) {
                        self.finished = true;
                        return Some(Err(error));
                    }
                    self.events.extend(self.scratch.drain(..));
                }
                Ok(None) => {
                    self.finished = true;
                    // Some servers close after the last chunk without `[DONE]`; a stream cut
                    // before any finish reason was cut, not finished.
                    return (!self.finish_seen).then(|| {
                        Err(ModelError::connection(
                            "model stream ended before its finish reason or [DONE]",
                        ))
                    });
                }
                Err(error) => {
                    self.finished = true;
                    return Some(Err(transport_error(error)));
                }
            }
        }
    }
}

impl ChunkTransport for SseBody {
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<StreamChunk, ModelError>>> {
        Box::pin(self.next())
    }
}
