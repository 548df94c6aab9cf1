//! [`ModelStream`]: one streamed model call, chunk by chunk, behind a small hand-rolled
//! `async fn next` API.
//!
//! Why not `futures_core::Stream`: the crate's core builds with tokio, serde, thiserror and
//! tracing only, and a stream here is only ever consumed by one `while let Some(..) =
//! stream.next().await` loop (the Router's). A boxed source with one async method is all that
//! loop needs, and a connector implements it without pinning or `poll_next` by hand.

use std::collections::VecDeque;
use std::fmt;

use super::error::ModelError;
use super::wire::{Completion, ToolCall};
use crate::future::BoxFuture;

/// What a [`ModelStream`] reads from: a connector's transport, yielding a streamed
/// completion's chunks one at a time (named apart from [`stream::ChunkSource`](crate::stream::ChunkSource),
/// the text deltas a block reader cuts).
///
/// Implement it for a connector's own transport; [`ModelStream::new`] boxes it. Dropping the
/// source must cancel the underlying request. `next_chunk` should be cancel-safe (dropping its
/// future loses no chunk and restarts no delay, as a socket read is): the Router races it
/// against its bounds and a streaming boundary races it against an idle flush.
pub trait ChunkTransport: Send {
    /// The next chunk, a failure (after which the stream is over), or `None` at a clean end.
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<StreamChunk, ModelError>>>;
}

/// One piece of a streamed completion: a text delta, tool-call deltas, and the finish reason
/// on the last piece.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamChunk {
    /// The text this chunk adds (empty when it carries none).
    pub text: String,
    /// The tool-call fragments this chunk adds.
    pub tool_calls: Vec<ToolCallDelta>,
    /// Why generation stopped (`stop`, `length`, `tool_calls`, ...), on the chunk that says so.
    pub finish_reason: Option<String>,
}

impl StreamChunk {
    /// A chunk carrying `text` only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// Whether the chunk carries content (text or a tool-call fragment): only content counts as
    /// the first token and resets the idle timer, so a provider sending role-only or empty
    /// chunks forever still trips both bounds.
    pub fn has_content(&self) -> bool {
        !self.text.is_empty() || !self.tool_calls.is_empty()
    }
}

/// A fragment of one tool call, as the chat-completions stream sends it: the first fragment of
/// a call names its `id` and function `name`, later ones add to its `arguments`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// Which call of the completion this fragment belongs to.
    pub index: u32,
    /// The call's id, on its first fragment.
    pub id: Option<String>,
    /// The function's name, on its first fragment.
    pub name: Option<String>,
    /// More of the arguments' JSON text.
    pub arguments: String,
}

/// Joins [`ToolCallDelta`]s into whole [`ToolCall`]s, bounded: at most `MAX_TOOL_CALLS` calls
/// (a hostile stream naming index 4 000 000 000 allocates nothing for the gap).
#[derive(Clone, Debug, Default)]
pub(crate) struct ToolCallAssembler {
    calls: Vec<(u32, ToolCall)>,
}

/// The most distinct tool calls one streamed completion may make; fragments of more are dropped.
const MAX_TOOL_CALLS: usize = 128;

impl ToolCallAssembler {
    /// Adds `delta` to its call.
    pub(crate) fn push(&mut self, delta: &ToolCallDelta) {
        let at = match self.calls.iter().position(|(i, _)| *i == delta.index) {
            Some(at) => at,
            None if self.calls.len() < MAX_TOOL_CALLS => {
                self.calls
                    .push((delta.index, ToolCall::function("", "", "")));
                self.calls.len() - 1
            }
            None => return,
        };
        let call = &mut self.calls[at].1;
        if let Some(id) = &delta.id {
            id.clone_into(&mut call.id);
        }
        if let Some(name) = &delta.name {
            call.function.name.push_str(name);
        }
        call.function.arguments.push_str(&delta.arguments);
    }

    /// The calls so far, in the order they were first named.
    pub(crate) fn calls(&self) -> Vec<ToolCall> {
        self.calls.iter().map(|(_, c)| c.clone()).collect()
    }
}

/// One streamed model call: a boxed, `Send` [`ChunkTransport`].
///
/// ```
/// use mesh_egress::model::{ModelStream, StreamChunk};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut stream = ModelStream::from_chunks(vec![
///     Ok(StreamChunk::text("All ")),
///     Ok(StreamChunk::text("green.")),
/// ]);
/// let mut text = String::new();
/// while let Some(chunk) = stream.next().await {
///     text.push_str(&chunk.expect("no failure scripted").text);
/// }
/// assert_eq!(text, "All green.");
/// # }
/// ```
pub struct ModelStream {
    source: Box<dyn ChunkTransport>,
    // The failure a finish reason reported, held while the content that came with it is
    // handed out; then the stream is over.
    failed: Option<Box<ModelError>>,
    content_seen: bool,
}

impl ModelStream {
    /// A stream reading from `source`.
    pub fn new(source: impl ChunkTransport + 'static) -> Self {
        Self {
            source: Box::new(source),
            failed: None,
            content_seen: false,
        }
    }

    /// A stream that plays `chunks` at once, in order, and stops after the first failure.
    pub fn from_chunks(chunks: Vec<Result<StreamChunk, ModelError>>) -> Self {
        Self::new(Ready(chunks.into()))
    }

    /// A whole completion as a stream of one chunk: how a connector without streaming (the
    /// default [`ModelConnector::stream`](super::ModelConnector::stream)) answers.
    pub fn from_completion(completion: Completion) -> Self {
        let chunk = StreamChunk {
            text: completion.content.unwrap_or_default(),
            tool_calls: completion
                .tool_calls
                .into_iter()
                .zip(0u32..)
                .map(|(call, index)| ToolCallDelta {
                    index,
                    id: Some(call.id),
                    name: Some(call.function.name),
                    arguments: call.function.arguments,
                })
                .collect(),
            finish_reason: completion.finish_reason,
        };
        Self::from_chunks(vec![Ok(chunk)])
    }

    /// The next chunk, a failure (the stream is then over), or `None` at a clean end.
    ///
    /// A finish reason that reports a failure (a refusal or filter, a cut by the output limit,
    /// in any API's words) ends the stream with that failure: the content that came with it is
    /// handed out first, then the failure, then `None`.
    pub async fn next(&mut self) -> Option<Result<StreamChunk, ModelError>> {
        if let Some(failed) = self.failed.take() {
            // Dropping the source here ends the request once its last word is read.
            self.source = Box::new(Ready(VecDeque::new()));
            return Some(Err(*failed));
        }
        let mut chunk = match self.source.next_chunk().await? {
            Ok(chunk) => chunk,
            Err(error) => return Some(Err(error)),
        };
        self.content_seen |= chunk.has_content();
        if let Some(reason) = chunk.finish_reason.as_deref()
            && let Some(error) = super::finish::failure(Some(reason), !self.content_seen)
        {
            if !chunk.has_content() {
                self.source = Box::new(Ready(VecDeque::new()));
                return Some(Err(error));
            }
            chunk.finish_reason = None;
            self.failed = Some(Box::new(error));
        }
        Some(Ok(chunk))
    }
}

impl fmt::Debug for ModelStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelStream").finish_non_exhaustive()
    }
}

/// Chunks known up front.
struct Ready(VecDeque<Result<StreamChunk, ModelError>>);

impl ChunkTransport for Ready {
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<StreamChunk, ModelError>>> {
        let next = self.0.pop_front();
        if matches!(next, Some(Err(_))) {
            self.0.clear();
        }
        Box::pin(std::future::ready(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_fragments_join_by_index_and_huge_indices_cost_nothing() {
        let mut calls = ToolCallAssembler::default();
        for delta in [
            ToolCallDelta {
                index: 0,
                id: Some("c1".into()),
                name: Some("lookup".into()),
                arguments: "{\"id\"".into(),
            },
            ToolCallDelta {
                index: 0,
                arguments: ":7}".into(),
                ..ToolCallDelta::default()
            },
            ToolCallDelta {
                index: u32::MAX,
                id: Some("c2".into()),
                name: Some("other".into()),
                arguments: "{}".into(),
            },
        ] {
            calls.push(&delta);
        }
        let calls = calls.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].function.arguments, "{\"id\":7}");
        assert_eq!(calls[1].id, "c2");
    }

    #[tokio::test]
    async fn a_stream_stops_after_its_first_failure() {
        let mut stream = ModelStream::from_chunks(vec![
            Ok(StreamChunk::text("a")),
            Err(ModelError::status(500)),
            Ok(StreamChunk::text("never")),
        ]);
        assert!(stream.next().await.is_some_and(|c| c.is_ok()));
        assert!(stream.next().await.is_some_and(|c| c.is_err()));
        assert!(stream.next().await.is_none());
    }
}
