//! [`Endpoint`]: a handler registered on the [`Bot`] under a name, with typed input, so a promise
//! its turn makes is kept by re-running the same handler (in memory or by a worker).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Bot, Outgoing, Sendable};
use crate::boundary::Rerun;
use crate::egress::EgressError;
use crate::future::BoxFuture;
use crate::turn::Turn;

/// A handler registered with [`Bot::route`]: its name and the type of its input, so
/// [`Bot::run`] is type-checked. Cheap to clone.
pub struct Endpoint<I> {
    name: Arc<str>,
    handler: Arc<dyn Fn(Turn, I) -> BoxFuture<'static, Outgoing> + Send + Sync>,
}

impl<I> Clone for Endpoint<I> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            handler: Arc::clone(&self.handler),
        }
    }
}

impl<I> fmt::Debug for Endpoint<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Endpoint").field(&self.name).finish()
    }
}

impl<I> Endpoint<I> {
    /// The name the route is registered under (stored with a durable promise).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The handler's future for `turn` and `input`.
    pub(super) fn call(&self, turn: &Turn, input: I) -> BoxFuture<'static, Outgoing> {
        (self.handler)(turn.clone(), input)
    }
}

impl<I: Serialize> Endpoint<I> {
    /// What re-runs this route with `input` for a follow-up, or `None` (with a warning) when
    /// the input cannot be serialized: the turn still runs, its promise then comes back in the
    /// [`Delivery`].
    pub(super) fn rerun(&self, input: &I) -> Option<Rerun> {
        match serde_json::to_value(input) {
            Ok(value) => Some(Rerun {
                route: self.name().to_owned(),
                input: value,
            }),
            Err(error) => {
                tracing::warn!(target: "mesh_egress::bot", route = self.name(), error = %error, "the route's input cannot be serialized; a promise this turn makes is not kept");
                None
            }
        }
    }
}

/// A route as the keepers call it: input as it was serialized.
pub(super) trait Erased: Send + Sync {
    /// Runs the handler with `input`, or says why the input no longer fits (a stored promise
    /// older than the handler's input type).
    fn call(
        &self,
        turn: Turn,
        input: serde_json::Value,
    ) -> Result<BoxFuture<'static, Outgoing>, EgressError>;
}

struct Typed<I> {
    handler: Arc<dyn Fn(Turn, I) -> BoxFuture<'static, Outgoing> + Send + Sync>,
    _input: PhantomData<fn(I)>,
}

/// Why a stored input no longer fits its route.
#[derive(Debug, thiserror::Error)]
#[error("the stored input does not fit the route's input type: {0}")]
struct InputMismatch(serde_json::Error);

impl<I: DeserializeOwned + 'static> Erased for Typed<I> {
    fn call(
        &self,
        turn: Turn,
        input: serde_json::Value,
    ) -> Result<BoxFuture<'static, Outgoing>, EgressError> {
        match serde_json::from_value::<I>(input) {
            Ok(input) => Ok((self.handler)(turn, input)),
            // Asking again would fail the same way.
            Err(error) => Err(EgressError::semantic(
                InputMismatch(error),
                turn.attribution().clone(),
            )
            .with_retryable(false)),
        }
    }
}

impl Bot {
    /// Registers `handler` under `name` and returns its typed handle. The handler takes an owned
    /// [`Turn`] and its input and returns what an `#[egress_boundary]` handler returns (a
    /// [`Reply`](crate::Reply) or a [`StreamedReply`](crate::StreamedReply)):
    ///
    /// ```
    /// use mesh_egress::{egress_boundary, AgentMessage, Bot, EgressError, Turn};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Question { text: String }
    ///
    /// #[egress_boundary(interactive)]
    /// async fn answer(turn: &Turn, q: Question) -> Result<AgentMessage, EgressError> {
    ///     Ok(turn.message(format!("You asked: {}", q.text)))
    /// }
    ///
    /// let bot = Bot::new();
    /// let route = bot.route("answer", |turn: Turn, q: Question| async move { answer(&turn, q).await });
    /// assert_eq!(route.name(), "answer");
    /// ```
    ///
    /// A second route under the same name replaces the first (for follow-ups; handles of the
    /// first keep running their own handler). Stored promises name the route, so keep names
    /// stable across releases; input that no longer deserializes ends its promise with a
    /// handoff.
    pub fn route<I, F, Fut, O>(&self, name: impl Into<String>, handler: F) -> Endpoint<I>
    where
        I: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(Turn, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
        O: Sendable,
    {
        let name: String = name.into();
        let handler: Arc<dyn Fn(Turn, I) -> BoxFuture<'static, Outgoing> + Send + Sync> =
            Arc::new(move |turn, input| {
                let future = handler(turn, input);
                Box::pin(async move { future.await.into_outgoing() })
            });
        let erased = Typed {
            handler: Arc::clone(&handler),
            _input: PhantomData,
        };
        self.shared
            .routes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone(), Arc::new(erased));
        Endpoint {
            name: Arc::from(name),
            handler,
        }
    }

    pub(super) fn erased_route(&self, name: &str) -> Option<Arc<dyn Erased>> {
        self.shared
            .routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }
}
