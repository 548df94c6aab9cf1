//! [`Handler`]: the turn a worker re-runs to keep a promise, registered by name, and the input
//! type it declares, read back from the stored follow-up as that type, so a follow-up is the
//! same handler run again with the same typed input.

use std::future::Future;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use crate::egress::{AgentMessage, EgressError};
use crate::future::BoxFuture;
use crate::store::FollowUpTask;
use crate::turn::Turn;

/// A promised turn a [`Worker`](super::Worker) can re-run: it gets its input `I` read back from
/// the stored task and a [`Turn`] that carries the conversation's address and lease, and
/// returns what the original handler returned, `Result<AgentMessage, EgressError>`. The worker
/// puts the result through the boundary, the gate and the outbox.
///
/// Any `Fn(I, Turn) -> impl Future<Output = Result<AgentMessage, EgressError>>` (`Send + Sync +
/// 'static`, its future `Send + 'static`) is a handler, for any input type `I` that
/// deserializes (`serde::de::DeserializeOwned`): the promise was stored with
/// [`FollowUpTask::typed`] (its input of that type), or before typed input, when the whole
/// stored value is read as `I`. A handler that needs the whole task (its system prompt, its
/// gate settings) takes the [`FollowUpTask`] itself.
///
/// ```
/// use mesh_egress::store::FollowUpTask;
/// use mesh_egress::worker::Handler;
/// use mesh_egress::{AgentMessage, EgressError, Turn};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Question { prompt: String }
///
/// fn is_handler<I>(_: impl Handler<I>) {}
/// is_handler(|question: Question, turn: Turn| async move {
///     Ok::<_, EgressError>(turn.message(format!("You asked: {}", question.prompt)))
/// });
/// is_handler(|task: FollowUpTask, turn: Turn| async move {
///     let system = task.system_prompt.clone().unwrap_or_default();
///     Ok::<_, EgressError>(turn.message(format!("Under {system:?}: {:?}", task.said())))
/// });
/// ```
pub trait Handler<I = FollowUpTask>: Send + Sync + 'static {
    /// Re-runs the promised turn for `task` within `turn`.
    fn call<'a>(
        &'a self,
        task: &'a FollowUpTask,
        turn: &'a Turn,
    ) -> BoxFuture<'a, Result<AgentMessage, EgressError>>;
}

/// The input a [`Handler`] may declare. Sealed, and never named outside: a handler's input
/// is any type that deserializes, or the whole [`FollowUpTask`], and nothing else can be.
mod sealed {
    use super::{DeserializeOwned, FollowUpTask};

    /// An input read back from the stored task: from its typed input
    /// ([`FollowUpTask::input_as`]), or the whole task.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait FollowUpInput: Sized + Send + 'static {
        /// The input `task` stored for its handler; an error when it no longer fits this
        /// type (the handler's input type changed since the promise was stored).
        fn from_task(task: &FollowUpTask) -> Result<Self, serde_json::Error>;
    }

    impl FollowUpInput for FollowUpTask {
        fn from_task(task: &FollowUpTask) -> Result<Self, serde_json::Error> {
            Ok(task.clone())
        }
    }

    impl<T: DeserializeOwned + Send + 'static> FollowUpInput for T {
        fn from_task(task: &FollowUpTask) -> Result<Self, serde_json::Error> {
            task.input_as()
        }
    }
}

use sealed::FollowUpInput;

/// Why a stored input no longer fits its handler's input type.
#[derive(Debug, thiserror::Error)]
#[error("the stored input does not fit the handler's input type: {0}")]
struct InputMismatch(serde_json::Error);

impl<I, F, Fut> Handler<I> for F
where
    I: FollowUpInput,
    F: Fn(I, Turn) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<AgentMessage, EgressError>> + Send + 'static,
{
    fn call<'a>(
        &'a self,
        task: &'a FollowUpTask,
        turn: &'a Turn,
    ) -> BoxFuture<'a, Result<AgentMessage, EgressError>> {
        match I::from_task(task) {
            Ok(input) => Box::pin(self(input, turn.clone())),
            // Asking again would fail the same way: the mode's last word at once.
            Err(error) => {
                let error = EgressError::semantic(InputMismatch(error), turn.attribution().clone())
                    .with_retryable(false);
                Box::pin(std::future::ready(Err(error)))
            }
        }
    }
}

/// A registered handler with its input type erased, as the worker holds it.
pub(super) trait Registered: Send + Sync {
    fn call<'a>(
        &'a self,
        task: &'a FollowUpTask,
        turn: &'a Turn,
    ) -> BoxFuture<'a, Result<AgentMessage, EgressError>>;
}

/// `H`, a handler of input `I`, as a [`Registered`] one.
pub(super) struct Erased<H, I> {
    handler: H,
    // `fn(I)`: the input is only passed in, and `Erased` stays `Send + Sync` whatever `I` is.
    _input: PhantomData<fn(I)>,
}

impl<H, I> Erased<H, I> {
    pub(super) fn new(handler: H) -> Self {
        Self {
            handler,
            _input: PhantomData,
        }
    }
}

impl<H: Handler<I>, I: 'static> Registered for Erased<H, I> {
    fn call<'a>(
        &'a self,
        task: &'a FollowUpTask,
        turn: &'a Turn,
    ) -> BoxFuture<'a, Result<AgentMessage, EgressError>> {
        self.handler.call(task, turn)
    }
}
