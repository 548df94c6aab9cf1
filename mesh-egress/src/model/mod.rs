//! Layer A: classify, retry, deadlines and route fallback around every model call.
//!
//! A [`ModelConnector`] makes one request to one named model. A [`Router`] wraps it with the
//! spec's "Shipped model deadline policy" ([`RetryConfig`]): retryable failures
//! ([`classify`]) retry the same route with backoff, a stalled route is abandoned for the next
//! one, remaining time is split across remaining routes, and only when everything is spent does
//! the call become an [`EgressError`](crate::EgressError) for the boundary. A healthy call
//! returns on its first attempt and never touches the retry machinery. Every call records a
//! [`RecoveryReport`] on the turn's ledger.
//!
//! ```
//! # #[cfg(feature = "testing")] {
//! use std::time::Duration;
//! use mesh_egress::model::{ChatMessage, ChatRequest, RetryConfig, Router};
//! use mesh_egress::testing::{ScriptedConnector, Step};
//! use mesh_egress::{Attribution, Turn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! // The primary answers 503 once, then succeeds: the caller only sees the answer.
//! let connector = ScriptedConnector::new()
//!     .on("primary", [Step::status(503), Step::answer("All green.")]);
//! let router = Router::new(connector, "primary", RetryConfig::default());
//! let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
//! let request = ChatRequest::new(vec![ChatMessage::user("Is the build green?")]);
//!
//! let completion = router.complete(&turn, &request).await.expect("recovered");
//! assert_eq!(completion.content.as_deref(), Some("All green."));
//! # }
//! # }
//! ```

mod answer_stream;
mod backoff;
mod classify;
mod config;
mod error;
pub(crate) mod fast;
mod finish;
#[cfg(feature = "http")]
mod http;
mod limits;
mod message;
#[cfg(feature = "http")]
mod openai;
#[cfg(feature = "http")]
mod provider;
mod recovery;
mod response;
mod route;
mod router;
// The stream decoder is read by the HTTP connector only.
#[cfg(feature = "http")]
pub(crate) mod sse;
mod stream;
mod stream_join;
mod stream_router;
pub(crate) mod tool_text;
mod wire;

use std::future::Future;
use std::sync::Arc;

pub use crate::failure::FailureReason;
pub use crate::ledger::RecoveryReport;
pub use backoff::Jitter;
pub use classify::{Classification, classify};
pub use config::RetryConfig;
pub use error::{ModelError, ModelErrorKind, QuotaFailure, QuotaWindow};
pub use fast::{JudgeBudget, SharedBudget};
pub use message::UnusableCompletion;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use openai::OpenAiCompatible;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use provider::{Api, Provider};
pub use route::{RecoveryError, Route};
pub use router::Router;
pub use stream::{ChunkTransport, ModelStream, StreamChunk, ToolCallDelta};
// The streaming boundary joins a follow-up's answer to the delivered prefix the same way.
#[cfg(feature = "markdown")]
pub(crate) use stream_join::{JoinMode, Joined, Joiner};
pub use stream_router::RoutedStream;
pub use tool_text::{TextToolCallError, TextToolFormat, TextToolProblem, text_tool_format};
pub use wire::{
    ChatMessage, ChatRequest, Completion, FunctionCall, FunctionDefinition, Role, ToolCall,
    ToolDefinition,
};

/// One request to one named model. Implemented by `OpenAiCompatible` (feature `http`), by the
/// scripted connectors of the `testing` feature, and by anything else that can answer a chat
/// request.
///
/// Dropping the returned future must cancel the request: the [`Router`] enforces its deadlines
/// by dropping in-flight calls, never by spawning tasks.
pub trait ModelConnector: Send + Sync {
    /// Asks `model` to complete `request`.
    fn complete(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<Completion, ModelError>> + Send;

    /// Asks `model` to complete `request`, streamed. The default calls
    /// [`complete`](Self::complete) and yields the whole completion as one chunk, so a
    /// connector that cannot stream still works with [`Router::stream`] (its first token is its
    /// whole answer). Dropping the future, or the stream, must cancel the request.
    fn stream(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ModelStream, ModelError>> + Send {
        let call = self.complete(model, request);
        async move { call.await.map(ModelStream::from_completion) }
    }
}

impl<C: ModelConnector> ModelConnector for Arc<C> {
    fn complete(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<Completion, ModelError>> + Send {
        (**self).complete(model, request)
    }

    fn stream(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ModelStream, ModelError>> + Send {
        (**self).stream(model, request)
    }
}

impl<C: ModelConnector> ModelConnector for &C {
    fn complete(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<Completion, ModelError>> + Send {
        (**self).complete(model, request)
    }

    fn stream(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ModelStream, ModelError>> + Send {
        (**self).stream(model, request)
    }
}
