//! [`Recovery`]: the state of one call's recovery in the [`Router`](super::Router), carried
//! from route to route instead of loose arguments.

use tokio::time::Instant;

use super::error::ModelError;
use super::route::{RecoveryError, Route};
use super::wire::ChatRequest;
use crate::egress::EgressError;
use crate::failure::FailureReason;
use crate::ledger::{LedgerRecord, RecoveryReport};
use crate::turn::Turn;

/// One call's recovery: what the turn asked, the call's time bounds, and what happened so far.
pub(super) struct Recovery<'a> {
    pub(super) turn: &'a Turn,
    pub(super) request: &'a ChatRequest,
    /// When the call started.
    pub(super) start: Instant,
    /// When it must end: the total deadline after `start`, capped by the turn's deadline.
    pub(super) end: Instant,
    pub(super) report: RecoveryReport,
    pub(super) last: LastFailure,
    pub(super) routes_tried: usize,
    /// For a stream: bytes delivered when recovery ended.
    pub(super) delivered: usize,
}

impl<'a> Recovery<'a> {
    pub(super) fn new(
        turn: &'a Turn,
        request: &'a ChatRequest,
        start: Instant,
        end: Instant,
    ) -> Self {
        Self {
            turn,
            request,
            start,
            end,
            report: RecoveryReport::default(),
            last: LastFailure::default(),
            routes_tried: 0,
            delivered: 0,
        }
    }

    /// Records the report of a call `route` (at `index`) answered.
    pub(super) fn answered(mut self, route: &Route, index: usize) {
        self.report.answered_by = Some(index);
        self.report.answered_model = Some(route.model.clone());
        self.turn
            .ledger()
            .record(self.turn.attribution(), LedgerRecord::Recovery(self.report));
    }

    /// Records the report of a call that ended without an answer, and the error for the
    /// boundary.
    pub(super) fn give_up(mut self, gave_up: &'static str, retryable: bool) -> EgressError {
        let attempts = u32::try_from(self.report.attempts.len()).unwrap_or(u32::MAX);
        self.report.gave_up = Some(gave_up.to_owned());
        let turn = self.turn;
        turn.ledger()
            .record(turn.attribution(), LedgerRecord::Recovery(self.report));
        let cause = RecoveryError {
            gave_up,
            attempts,
            routes_tried: self.routes_tried,
            delivered: self.delivered,
            last_reason: self.last.reason,
            last_error: self.last.error,
        };
        EgressError::transport(cause, turn.attribution().clone())
            .with_retryable(retryable)
            .with_attempt(attempts)
    }
}

/// The last failure of a call, for its [`RecoveryError`].
#[derive(Default)]
pub(super) struct LastFailure {
    pub(super) reason: Option<FailureReason>,
    pub(super) error: Option<ModelError>,
}

impl LastFailure {
    pub(super) fn reason(reason: FailureReason) -> Self {
        Self {
            reason: Some(reason),
            error: None,
        }
    }
}
