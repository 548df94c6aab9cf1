//! The route vocabulary: [`Route`] (one model the Router may ask), [`FallbackReason`] (why it
//! moved to another) and [`RecoveryError`] (why recovery ended without an answer).

use std::fmt;
use std::sync::Arc;

use super::error::ModelError;
use crate::failure::FailureReason;

/// One model the Router may ask, in policy order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    // Shared so each ledger row names the model without copying the string.
    pub(super) model: Arc<str>,
    pub(super) context_window: Option<u32>,
    pub(super) prefill: bool,
}

impl Route {
    /// A route to `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: Arc::from(model.into()),
            context_window: None,
            prefill: false,
        }
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
pub enum FallbackReason {
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
}

impl FallbackReason {
    /// A stable snake_case label.
    pub fn as_str(self) -> &'static str {
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
