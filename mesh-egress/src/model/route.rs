//! The route vocabulary: [`Route`] (one model the Router may ask), [`FallbackReason`] (why it
//! moved to another) and [`RecoveryError`] (why recovery ended without an answer).

use std::fmt;
use std::sync::Arc;

use super::ModelConnector;
use super::error::ModelError;
use super::stream::ModelStream;
use super::wire::{ChatRequest, Completion};
use crate::failure::FailureReason;
use crate::future::BoxFuture;

/// One model the Router may ask, in policy order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    // Shared so each ledger row names the model without copying the string.
    pub(super) model: Arc<str>,
    pub(super) context_window: Option<u32>,
    pub(super) prefill: bool,
    /// The route's own connector, when it is not the Router's (another API, base URL or key).
    pub(super) via: Option<Via>,
}

/// A route's own connector, behind the dyn-compatible seam (a route list holds routes of
/// different connector types). Two routes are equal only through the same connector value.
#[derive(Clone)]
pub(super) struct Via(Arc<dyn DynConnector>);

impl Via {
    pub(super) fn complete<'a>(
        &'a self,
        model: &'a str,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        self.0.complete_boxed(model, request)
    }

    pub(super) fn stream<'a>(
        &'a self,
        model: &'a str,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ModelStream, ModelError>> {
        self.0.stream_boxed(model, request)
    }
}

impl PartialEq for Via {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Via {}

impl fmt::Debug for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Via(..)")
    }
}

/// [`ModelConnector`] with boxed futures: what a route's own connector is called through.
trait DynConnector: Send + Sync {
    fn complete_boxed<'a>(
        &'a self,
        model: &'a str,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>>;

    fn stream_boxed<'a>(
        &'a self,
        model: &'a str,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ModelStream, ModelError>>;
}

impl<C: ModelConnector> DynConnector for C {
    fn complete_boxed<'a>(
        &'a self,
        model: &'a str,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(self.complete(model, request))
    }

    fn stream_boxed<'a>(
        &'a self,
        model: &'a str,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ModelStream, ModelError>> {
        Box::pin(self.stream(model, request))
    }
}

impl Route {
    /// A route to `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: Arc::from(model.into()),
            context_window: None,
            prefill: false,
            via: None,
        }
    }

    /// Asks this route's model through `connector` instead of the Router's: a fallback on
    /// another API, base URL or key (an Anthropic primary with a chat-completions backup, say).
    /// A route without one uses the connector the Router was built with.
    ///
    /// ```
    /// # #[cfg(feature = "testing")] {
    /// use mesh_egress::model::{RetryConfig, Route, Router};
    /// use mesh_egress::testing::{ScriptedConnector, Step};
    /// let primary = ScriptedConnector::new().on("claude", [Step::status(529)]);
    /// let backup = ScriptedConnector::new().on("gpt", [Step::answer("All green.")]);
    /// let router = Router::with_routes(
    ///     primary,
    ///     Route::new("claude"),
    ///     [Route::new("gpt").via(backup)],
    ///     RetryConfig::default(),
    /// );
    /// # let _ = router; }
    /// ```
    pub fn via(mut self, connector: impl ModelConnector + 'static) -> Self {
        self.via = Some(Via(Arc::new(connector)));
        self
    }

    /// Declares the model's context window (tokens). A context overflow on one route may fall
    /// back to a later route declared with a larger window.
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Declares whether the route supports assistant prefill: a request whose last message is
    /// the assistant's own partial answer, which the model continues (Anthropic's prefill,
    /// DeepSeek's and Mistral's `prefix` continuation, most gateways in front of them). When a
    /// stream fails after part of it was delivered, a prefill route continues from the
    /// delivered text; any other route is asked afresh and its answer joined to it.
    pub fn with_prefill(mut self, yes: bool) -> Self {
        self.prefill = yes;
        self
    }

    /// Whether the route is declared to support assistant prefill.
    pub fn supports_prefill(&self) -> bool {
        self.prefill
    }

    /// The model's name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The declared context window, if any.
    pub fn context_window(&self) -> Option<u32> {
        self.context_window
    }
}

/// Why the Router moved to another route (the `reason` of `model fallback started`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum FallbackReason {
    /// An attempt hit the attempt timeout: the route is stalled.
    AttemptTimeout,
    /// The route's share of the remaining time is spent (or a wait would outlast it).
    RouteBudgetSpent,
    /// Every attempt on the route failed.
    RetriesExhausted,
    /// A context overflow, toward a route declared with a larger window.
    ContextOverflow,
    /// A terminal failure, with terminal fallback turned on.
    TerminalError,
    /// The route's quota, credit or per-day cap is exhausted (another provider may have quota).
    QuotaExhausted,
    /// The request is larger than the route's limit, or the route answered with a body larger
    /// than the connector's cap.
    TooLarge,
    /// A stream sent no content within the first-token bound: the route is stalled.
    FirstTokenTimeout,
    /// A stream fell silent past the idle timeout: the route is stalled.
    StreamIdleTimeout,
    /// A stream failed after part of it reached the person: the route is abandoned and the
    /// next one continues from the delivered text.
    StreamFailedAfterDelivery,
    /// The route refused or filtered the answer; another model may answer.
    Refused,
    /// The route's answer was cut by the output limit.
    Truncated,
}

impl FallbackReason {
    /// A stable snake_case label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::AttemptTimeout => "attempt_timeout",
            Self::RouteBudgetSpent => "route_budget_spent",
            Self::RetriesExhausted => "retries_exhausted",
            Self::ContextOverflow => "context_overflow",
            Self::TerminalError => "terminal_error",
            Self::QuotaExhausted => "quota_exhausted",
            Self::TooLarge => "too_large",
            Self::FirstTokenTimeout => "first_token_timeout",
            Self::StreamIdleTimeout => "stream_idle_timeout",
            Self::StreamFailedAfterDelivery => "stream_failed_after_delivery",
            Self::Refused => "refused",
            Self::Truncated => "truncated",
        }
    }
}

/// The internal cause of the [`EgressError`](crate::EgressError) a Router returns when recovery ends without an
/// answer: why it gave up, how much it tried, and the last failure.
#[derive(Debug)]
pub struct RecoveryError {
    pub(super) gave_up: &'static str,
    pub(super) attempts: u32,
    pub(super) routes_tried: usize,
    pub(super) delivered: usize,
    pub(super) last_reason: Option<FailureReason>,
    pub(super) last_error: Option<ModelError>,
}

impl RecoveryError {
    /// Why recovery ended (`retries_exhausted`, `route_budget_spent`, `terminal`,
    /// `total_deadline`, `cancelled`, `ownership_lost`, `deadline_reached`; for a stream also
    /// `stream_failed_after_delivery`, when no later route could continue, and
    /// `stream_unjoinable`, when the route that continued gave an answer that could not be
    /// joined to the delivered text).
    pub fn gave_up(&self) -> &'static str {
        self.gave_up
    }

    /// Attempts made across every route.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How many routes were tried.
    pub fn routes_tried(&self) -> usize {
        self.routes_tried
    }

    /// For a streamed call: bytes that had reached the person when recovery ended. Non-zero
    /// means the caller must not start the answer again: whatever handles the rest (Layer C's
    /// follow-up) delivers only what follows this prefix ([`RoutedStream::delivered`](super::RoutedStream::delivered)).
    pub fn delivered_bytes(&self) -> usize {
        self.delivered
    }

    /// Whether a stream failed after part of it reached the person (`gave_up` is
    /// `stream_failed_after_delivery` or `stream_unjoinable`).
    pub fn failed_after_delivery(&self) -> bool {
        self.delivered > 0
    }

    /// The classification of the last failure, if an attempt failed.
    pub fn last_reason(&self) -> Option<FailureReason> {
        self.last_reason
    }

    /// The last connector error, if the last failure was one.
    pub fn last_error(&self) -> Option<&ModelError> {
        self.last_error.as_ref()
    }
}

impl fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "model recovery gave up ({}) after {} attempt(s) on {} route(s)",
            self.gave_up, self.attempts, self.routes_tried
        )?;
        match (&self.last_error, self.last_reason) {
            (Some(error), _) => write!(f, "; last failure: {error}"),
            (None, Some(reason)) => write!(f, "; last failure: {}", reason.as_str()),
            (None, None) => Ok(()),
        }
    }
}

impl std::error::Error for RecoveryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.last_error
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
