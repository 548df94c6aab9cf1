//! [`Handler`]: the un-annotated turn a worker re-runs to keep a promise, registered by name.

use std::future::Future;

use crate::egress::{AgentMessage, EgressError};
use crate::future::BoxFuture;
use crate::store::FollowUpTask;
use crate::turn::Turn;

/// A promised turn a [`Worker`](super::Worker) can re-run: it gets the stored task (its
/// serialisable input, the original system prompt and gate settings) and a [`Turn`] that
/// carries the conversation's lease as its ownership, and returns what the original handler
/// returned, `Result<AgentMessage, EgressError>`. The worker puts the result through the
/// boundary, the gate and the outbox.
///
/// Any `Fn(FollowUpTask, Turn) -> impl Future<Output = Result<AgentMessage, EgressError>>`
/// (`Send + Sync + 'static`, its future `Send + 'static`) is a handler:
///
/// ```
/// use mesh_egress::store::FollowUpTask;
/// use mesh_egress::worker::Handler;
/// use mesh_egress::{AgentMessage, EgressError, Turn};
/// fn is_handler(_: impl Handler) {}
/// is_handler(|task: FollowUpTask, turn: Turn| async move {
///     let prompt = task.input.as_str().unwrap_or_default().to_owned();
///     Ok::<_, EgressError>(turn.message(format!("You asked: {prompt}")))
/// });
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Re-runs the promised turn for `task` within `turn`.
    fn call<'a>(
        &'a self,
        task: &'a FollowUpTask,
        turn: &'a Turn,
    ) -> BoxFuture<'a, Result<AgentMessage, EgressError>>;
}

impl<F, Fut> Handler for F
where
    F: Fn(FollowUpTask, Turn) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<AgentMessage, EgressError>> + Send + 'static,
{
    fn call<'a>(
        &'a self,
        task: &'a FollowUpTask,
        turn: &'a Turn,
    ) -> BoxFuture<'a, Result<AgentMessage, EgressError>> {
        Box::pin(self(task.clone(), turn.clone()))
    }
}
