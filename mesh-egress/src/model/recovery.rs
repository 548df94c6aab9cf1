//! [`Recovery`]: the state of one call's recovery in the `Router`, carried from route to
//! route instead of loose arguments, and the recovery decisions both engines (a completion in
//! `router.rs`, a stream in `stream_router.rs`) share: opening a route
//! (`Router::open_route`, in `router.rs`) and what follows a failed attempt
//! (`Router::after_failure`), both written against these types.

use std::time::Duration;

use tokio::time::Instant;

use super::classify::{Classification, classify};
use super::error::ModelError;
use super::route::{FallbackReason, RecoveryError, Route};
use super::wire::ChatRequest;
use crate::egress::EgressError;
use crate::failure::FailureReason;
use crate::ledger::{LedgerRecord, RecoveryReport};
use crate::turn::{StopReason, Turn};

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

/// How recovery on one route ended, when it did not answer: the same for a completion and a
/// stream.
pub(super) enum RouteEnd {
    /// Move to route `to`.
    Fallback { to: usize, reason: FallbackReason },
    /// End recovery: the ledger's `gave_up`, and whether the boundary may retry later.
    GiveUp {
        gave_up: &'static str,
        retryable: bool,
    },
}

impl RouteEnd {
    /// The end a stopped turn gives.
    pub(super) fn stopped(reason: StopReason) -> Self {
        Self::GiveUp {
            gave_up: reason.as_str(),
            // A deadline may pass before a retry next cycle; a cancelled or disowned turn is
            // over.
            retryable: reason == StopReason::DeadlineReached,
        }
    }
}

/// What follows a failed attempt.
pub(super) enum Next {
    /// Another attempt on the same route after this wait (already on the attempt's record).
    Retry(Duration),
    /// The route is over.
    End(RouteEnd),
}

/// A failed attempt, as both engines report it to `Router::after_failure`.
pub(super) struct Failed {
    /// The route's index and the attempt's number on it (from 1).
    pub(super) route: usize,
    pub(super) attempt: u32,
    /// When the attempt started.
    pub(super) started: Instant,
    pub(super) classification: Classification,
    pub(super) error: Option<ModelError>,
    /// Set when one of the attempt's bounds ended it: the reason to abandon the stalled route
    /// at once when a later route exists.
    pub(super) timed_out: Option<FallbackReason>,
}

impl Failed {
    /// An attempt a bound ended, classified as `reason` (always retryable).
    pub(super) fn timed_out(
        route: usize,
        attempt: u32,
        started: Instant,
        reason: FailureReason,
        fallback: FallbackReason,
    ) -> Self {
        Self {
            route,
            attempt,
            started,
            classification: Classification {
                retryable: true,
                reason,
                retry_after: None,
            },
            error: None,
            timed_out: Some(fallback),
        }
    }

    /// An attempt that failed with `error`.
    pub(super) fn error(route: usize, attempt: u32, started: Instant, error: ModelError) -> Self {
        Self {
            route,
            attempt,
            started,
            classification: classify(&error),
            error: Some(error),
            timed_out: None,
        }
    }
}
