//! [`Router`]: retries and route fallback around a [`ModelConnector`], under the spec's
//! "Shipped model deadline policy".

use std::borrow::Borrow;
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, sleep, sleep_until};

use super::ModelConnector;
use super::backoff::{Jitter, backoff_delay};
use super::classify::{Classification, FailureReason, classify};
use super::config::RetryConfig;
use super::error::ModelError;
use super::wire::{ChatRequest, Completion};
use crate::egress::EgressError;
use std::borrow::Cow;
use std::sync::Arc;

use crate::ledger::{AttemptRecord, Attempts, LedgerRecord, RecoveryReport};
use crate::turn::{StopReason, Turn};

/// One model the Router may ask, in policy order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    // Shared so each ledger row names the model without copying the string.
    model: Arc<str>,
    context_window: Option<u32>,
}

impl Route {
    /// A route to `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: Arc::from(model.into()),
            context_window: None,
        }
    }

    /// Declares the model's context window (tokens). A context overflow on one route may fall
    /// back to a later route declared with a larger window.
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
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
        }
    }
}

/// The internal cause of the [`EgressError`] a Router returns when recovery ends without an
/// answer: why it gave up, how much it tried, and the last failure.
#[derive(Debug)]
pub struct RecoveryError {
    gave_up: &'static str,
    attempts: u32,
    routes_tried: usize,
    last_reason: Option<FailureReason>,
    last_error: Option<ModelError>,
}

impl RecoveryError {
    /// Why recovery ended (`retries_exhausted`, `route_budget_spent`, `terminal`,
    /// `total_deadline`, `cancelled`, `ownership_lost`, `deadline_reached`).
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

/// Retries and route fallback around a [`ModelConnector`]: Layer A.
///
/// Routes are the primary plus the fallbacks, in policy order. For each call, with
/// `T` = the total deadline (capped by the turn's deadline):
///
/// - the time left is divided among the routes left: a route's share is `left / routes_left`,
///   and what a route does not use stays available to later ones;
/// - each attempt is capped by the attempt timeout, the route's share and the caller's deadline,
///   enforced on the in-flight call (it is dropped, which cancels it);
/// - a timed-out attempt abandons the route at once when a later route exists (reason
///   `attempt_timeout`, or `route_budget_spent` when the share ran out first), and is retried
///   like any retryable failure on the last route;
/// - other retryable failures (429, 5xx, resets, empty completions) retry the same route after a
///   backoff (see [`RetryConfig`]); if the wait would outlast the route's share the next route
///   starts at once (`route_budget_spent`), or recovery ends when there is none;
/// - when the attempts on a route are spent the next route starts (`retries_exhausted`);
/// - terminal failures end recovery (unless [`fallback_on_terminal`](Self::fallback_on_terminal);
///   a context overflow may move to a later route declared with a larger window);
/// - the turn's cancellation, deadline and ownership stop everything at once.
///
/// Each route change logs `model fallback started` (target `mesh_egress::model`) with
/// `route_index`, `previous_route_index` and `reason`. Nothing is spawned: dropping the future
/// cancels everything.
#[derive(Debug)]
pub struct Router<C> {
    connector: C,
    routes: Vec<Route>,
    config: RetryConfig,
    jitter: Jitter,
    fallback_on_terminal: bool,
    fallback_on_quota: bool,
}

/// How one attempt ended.
enum Outcome {
    Answered(Completion),
    Failed(ModelError),
    TimedOut { by_share: bool },
    Stopped(StopReason),
}

/// The primary's first attempt, once `complete` has polled it once without an answer.
enum First<'a, F> {
    /// It finished on the first poll, with a failure or an empty completion.
    Ready(Result<Completion, ModelError>),
    /// It is in flight (always `Some`; recovery sets it to `None` when the attempt ends).
    Pending(Pin<&'a mut Option<F>>),
    /// It was never made: the turn had already stopped.
    Stopped(StopReason),
}

/// How recovery on one route ended, when it did not answer.
enum RouteEnd {
    Fallback {
        to: usize,
        reason: FallbackReason,
    },
    GiveUp {
        gave_up: &'static str,
        retryable: bool,
    },
}

impl<C: ModelConnector> Router<C> {
    /// Routes = `primary` then `config`'s fallback models.
    pub fn new(connector: C, primary: impl Into<String>, config: RetryConfig) -> Self {
        let fallbacks: Vec<Route> = config
            .fallback_models()
            .iter()
            .map(|m| Route::new(m.as_str()))
            .collect();
        Self::with_routes(connector, Route::new(primary), fallbacks, config)
    }

    /// Routes = `primary` then `fallbacks` (`config`'s fallback models are not used).
    pub fn with_routes(
        connector: C,
        primary: Route,
        fallbacks: impl IntoIterator<Item = Route>,
        config: RetryConfig,
    ) -> Self {
        let mut routes = vec![primary];
        routes.extend(fallbacks);
        Self {
            connector,
            routes,
            config,
            jitter: Jitter::random(),
            fallback_on_terminal: false,
            fallback_on_quota: true,
        }
    }

    /// Uses `jitter` for backoff (tests pass [`Jitter::fixed`]).
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Whether a terminal failure (a 400, a 401) moves to the next route instead of ending
    /// recovery. Off by default: a terminal failure on one route usually fails on all.
    pub fn fallback_on_terminal(mut self, yes: bool) -> Self {
        self.fallback_on_terminal = yes;
        self
    }

    /// Whether an exhausted quota, credit balance or per-day cap on one route
    /// ([`FailureReason::QuotaExhausted`]) moves to the next route. On by default: the next
    /// route is often another provider or account, with its own quota.
    pub fn fallback_on_quota(mut self, yes: bool) -> Self {
        self.fallback_on_quota = yes;
        self
    }

    /// The routes, primary first.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The policy.
    pub fn config(&self) -> &RetryConfig {
        &self.config
    }

    /// The connector.
    pub fn connector(&self) -> &C {
        &self.connector
    }

    /// Completes `request`, recovering from transient failures, and records a
    /// [`RecoveryReport`] on the turn's ledger. Returns the completion, or an [`EgressError`]
    /// (class Transport, attributed to the turn, with the attempt count) for the boundary.
    pub async fn complete(
        &self,
        turn: &Turn,
        request: impl Borrow<ChatRequest>,
    ) -> Result<Completion, EgressError> {
        let request = request.borrow();
        let start = Instant::now();
        let mut end = start + self.config.total_deadline();
        if let Some(deadline) = turn.deadline() {
            end = end.min(deadline);
        }
        // The healthy path: the primary is asked at once and polled once, before any timer,
        // signal subscription or recovery state exists. `end > start` already means the turn's
        // deadline has not passed (`end` is capped by it), so only cancellation and ownership
        // are left to check, in `Turn::stop_reason`'s order (each asked once, as before). No
        // time left goes to `recover` untouched, which gives up before asking the turn anything;
        // a stopped turn goes there with its reason.
        let stopped = if end <= start {
            None
        } else if turn.cancellation().is_cancelled() {
            Some(StopReason::Cancelled)
        } else if !turn.ownership().is_held() {
            Some(StopReason::OwnershipLost)
        } else {
            None
        };
        if end <= start || stopped.is_some() {
            let first = stopped.map(First::Stopped);
            return Box::pin(
                self.recover::<std::future::Pending<_>>(turn, request, start, end, first),
            )
            .await;
        }
        // In an `Option` so recovery can drop it in place (cancelling it) when its attempt ends.
        let mut call = pin!(Some(
            self.connector.complete(&self.routes[0].model, request)
        ));
        let first = poll_fn(|cx| Poll::Ready(poll_in_flight(call.as_mut(), cx))).await;
        let first = match first {
            Poll::Ready(Ok(completion)) if !completion.is_empty() => {
                let route = &self.routes[0];
                let report = RecoveryReport {
                    attempts: Attempts::one(AttemptRecord {
                        route_index: 0,
                        model: route.model.clone(),
                        attempt: 1,
                        outcome: Cow::Borrowed("ok"),
                        retryable: true,
                        duration: start.elapsed(),
                        wait: None,
                    }),
                    answered_by: Some(0),
                    answered_model: Some(route.model.clone()),
                    gave_up: None,
                };
                turn.ledger()
                    .record(turn.attribution(), LedgerRecord::Recovery(report));
                return Ok(completion);
            }
            Poll::Ready(result) => First::Ready(result),
            Poll::Pending => First::Pending(call.as_mut()),
        };
        // Boxed so the healthy path's future stays small: the recovery machinery (timers, the
        // turn's signals, backoff) is only built for a call that did not answer at once.
        Box::pin(self.recover(turn, request, start, end, Some(first))).await
    }

    /// Everything after the first poll of the primary: the attempt bound on the in-flight call,
    /// retries, fallback, and the report.
    async fn recover<F>(
        &self,
        turn: &Turn,
        request: &ChatRequest,
        start: Instant,
        end: Instant,
        mut first: Option<First<'_, F>>,
    ) -> Result<Completion, EgressError>
    where
        F: Future<Output = Result<Completion, ModelError>>,
    {
        let mut report = RecoveryReport::default();
        let mut last: (Option<FailureReason>, Option<ModelError>) = (None, None);
        let mut route_index = 0;
        let mut routes_tried = 0;
        loop {
            // The first route starts when the call did.
            let route_start = if routes_tried == 0 {
                start
            } else {
                Instant::now()
            };
            routes_tried += 1;
            let route_end = match self
                .run_route(
                    turn,
                    request,
                    route_index,
                    (route_start, end),
                    first.take(),
                    &mut report,
                    &mut last,
                )
                .await
            {
                Ok(completion) => {
                    report.answered_by = Some(route_index);
                    report.answered_model = Some(self.routes[route_index].model.clone());
                    turn.ledger()
                        .record(turn.attribution(), LedgerRecord::Recovery(report));
                    return Ok(completion);
                }
                Err(route_end) => route_end,
            };
            match route_end {
                RouteEnd::Fallback { to, reason } => {
                    let attr = turn.attribution();
                    tracing::warn!(
                        target: "mesh_egress::model",
                        agent = attr.agent(),
                        conversation = attr.conversation(),
                        run = attr.run(),
                        route_index = to,
                        previous_route_index = route_index,
                        reason = reason.as_str(),
                        model = &*self.routes[to].model,
                        "model fallback started"
                    );
                    route_index = to;
                }
                RouteEnd::GiveUp { gave_up, retryable } => {
                    let attempts = u32::try_from(report.attempts.len()).unwrap_or(u32::MAX);
                    report.gave_up = Some(gave_up.to_owned());
                    turn.ledger()
                        .record(turn.attribution(), LedgerRecord::Recovery(report));
                    let cause = RecoveryError {
                        gave_up,
                        attempts,
                        routes_tried,
                        last_reason: last.0,
                        last_error: last.1,
                    };
                    return Err(EgressError::transport(cause, turn.attribution().clone())
                        .with_retryable(retryable)
                        .with_attempt(attempts));
                }
            }
        }
    }

    /// Runs attempts on one route until it answers or recovery must move on.
    #[allow(clippy::too_many_arguments)]
    async fn run_route<F>(
        &self,
        turn: &Turn,
        request: &ChatRequest,
        index: usize,
        (now, end): (Instant, Instant),
        mut first: Option<First<'_, F>>,
        report: &mut RecoveryReport,
        last: &mut (Option<FailureReason>, Option<ModelError>),
    ) -> Result<Completion, RouteEnd>
    where
        F: Future<Output = Result<Completion, ModelError>>,
    {
        let route = &self.routes[index];
        let later_route = index + 1 < self.routes.len();
        let left = end.saturating_duration_since(now);
        if left.is_zero() {
            return Err(RouteEnd::GiveUp {
                gave_up: "total_deadline",
                retryable: true,
            });
        }
        let routes_left = u32::try_from(self.routes.len() - index).unwrap_or(u32::MAX);
        let share_end = now + left / routes_left;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            // The first attempt of the call may already be under way (`complete` ran the stop
            // check and polled it once, or found the turn stopped); otherwise check the turn and
            // start it here.
            let started = match first.take() {
                Some(First::Stopped(reason)) => return Err(stop(reason)),
                None => {
                    if let Some(reason) = turn.stop_reason() {
                        return Err(stop(reason));
                    }
                    None
                }
                started => started,
            };
            let attempt_start = if attempt == 1 { now } else { Instant::now() };
            let (bound, by_share) = match self.config.attempt_timeout() {
                Some(timeout) if attempt_start + timeout <= share_end => {
                    (attempt_start + timeout, false)
                }
                _ => (share_end, true),
            };
            let result = match started {
                Some(First::Ready(result)) => Ok(result),
                Some(First::Pending(call)) => Self::finish(turn, call, bound, by_share).await,
                Some(First::Stopped(reason)) => return Err(stop(reason)),
                None => {
                    // The connector is polled once before anything else: a call that answers at
                    // once never builds the timer or subscribes to the turn's signals (the stop
                    // check above already ran).
                    let mut call = pin!(Some(self.connector.complete(&route.model, request)));
                    let first_poll =
                        poll_fn(|cx| Poll::Ready(poll_in_flight(call.as_mut(), cx))).await;
                    match first_poll {
                        Poll::Ready(result) => Ok(result),
                        Poll::Pending => Self::finish(turn, call, bound, by_share).await,
                    }
                }
            };
            let outcome = match result {
                Ok(Ok(completion)) if completion.is_empty() => {
                    Outcome::Failed(ModelError::empty_completion())
                }
                Ok(Ok(completion)) => Outcome::Answered(completion),
                Ok(Err(error)) => Outcome::Failed(error),
                Err(outcome) => outcome,
            };
            let duration = attempt_start.elapsed();
            let mut record = AttemptRecord {
                route_index: index,
                model: route.model.clone(),
                attempt,
                outcome: Cow::Borrowed(""),
                retryable: true,
                duration,
                wait: None,
            };
            let (classification, error) = match outcome {
                Outcome::Answered(completion) => {
                    record.outcome = Cow::Borrowed("ok");
                    report.attempts.push(record);
                    return Ok(completion);
                }
                Outcome::Stopped(reason) => {
                    record.outcome = Cow::Borrowed(reason.as_str());
                    record.retryable = false;
                    report.attempts.push(record);
                    return Err(stop(reason));
                }
                Outcome::TimedOut { by_share } => {
                    let classification = Classification {
                        retryable: true,
                        reason: FailureReason::AttemptTimeout,
                        retry_after: None,
                    };
                    if later_route {
                        self.log_failure(turn, &record, FailureReason::AttemptTimeout, true);
                        record.outcome = Cow::Borrowed(FailureReason::AttemptTimeout.as_str());
                        report.attempts.push(record);
                        *last = (Some(FailureReason::AttemptTimeout), None);
                        let reason = if by_share {
                            FallbackReason::RouteBudgetSpent
                        } else {
                            FallbackReason::AttemptTimeout
                        };
                        return Err(RouteEnd::Fallback {
                            to: index + 1,
                            reason,
                        });
                    }
                    (classification, None)
                }
                Outcome::Failed(error) => (classify(&error), Some(error)),
            };
            record.outcome = Cow::Borrowed(classification.reason.as_str());
            record.retryable = classification.retryable;
            *last = (Some(classification.reason), error);

            if !classification.retryable {
                self.log_failure(turn, &record, classification.reason, false);
                report.attempts.push(record);
                return Err(match self.terminal_fallback(index, classification.reason) {
                    Some((to, reason)) => RouteEnd::Fallback { to, reason },
                    None => RouteEnd::GiveUp {
                        gave_up: "terminal",
                        retryable: false,
                    },
                });
            }
            let move_on = |reason: FallbackReason, gave_up: &'static str| {
                if later_route {
                    RouteEnd::Fallback {
                        to: index + 1,
                        reason,
                    }
                } else {
                    RouteEnd::GiveUp {
                        gave_up,
                        retryable: true,
                    }
                }
            };
            if attempt >= self.config.attempts() {
                self.log_failure(turn, &record, classification.reason, true);
                report.attempts.push(record);
                return Err(move_on(
                    FallbackReason::RetriesExhausted,
                    "retries_exhausted",
                ));
            }
            let wait = backoff_delay(
                &self.config,
                attempt,
                classification.retry_after,
                self.jitter.sample(),
            );
            if Instant::now() + wait >= share_end {
                self.log_failure(turn, &record, classification.reason, true);
                report.attempts.push(record);
                return Err(move_on(
                    FallbackReason::RouteBudgetSpent,
                    "route_budget_spent",
                ));
            }
            record.wait = Some(wait);
            self.log_failure(turn, &record, classification.reason, true);
            report.attempts.push(record);
            tokio::select! {
                biased;
                reason = turn.stopped() => return Err(stop(reason)),
                () = sleep(wait) => {}
            }
        }
    }

    /// Drives an attempt that did not answer on its first poll to its end, under `bound`, then
    /// drops the call (cancelling it if it is still in flight). The turn's stop beats the bound
    /// when both fire at the same instant.
    async fn finish<F>(
        turn: &Turn,
        mut call: Pin<&mut Option<F>>,
        bound: Instant,
        by_share: bool,
    ) -> Result<Result<Completion, ModelError>, Outcome>
    where
        F: Future<Output = Result<Completion, ModelError>>,
    {
        let result = tokio::select! {
            biased;
            result = poll_fn(|cx| poll_in_flight(call.as_mut(), cx)) => Ok(result),
            reason = turn.stopped() => Err(Outcome::Stopped(reason)),
            () = sleep_until(bound) => Err(Outcome::TimedOut { by_share }),
        };
        call.set(None);
        result
    }

    /// Where a terminal failure on route `index` may fall back to, by policy.
    fn terminal_fallback(
        &self,
        index: usize,
        reason: FailureReason,
    ) -> Option<(usize, FallbackReason)> {
        let next = (index + 1 < self.routes.len()).then_some(index + 1);
        match reason {
            FailureReason::QuotaExhausted if self.fallback_on_quota => {
                return next.map(|to| (to, FallbackReason::QuotaExhausted));
            }
            // A limit of this route (its per-minute token budget, the connector's body cap),
            // not of the request's meaning: the next route has its own.
            FailureReason::RequestTooLarge | FailureReason::ResponseTooLarge => {
                return next.map(|to| (to, FallbackReason::TooLarge));
            }
            _ => {}
        }
        if self.fallback_on_terminal {
            return next.map(|to| (to, FallbackReason::TerminalError));
        }
        if reason != FailureReason::ContextOverflow {
            return None;
        }
        let current = self.routes[index].context_window.unwrap_or(0);
        self.routes
            .iter()
            .enumerate()
            .skip(index + 1)
            .find(|(_, r)| r.context_window.is_some_and(|w| w > current))
            .map(|(to, _)| (to, FallbackReason::ContextOverflow))
    }

    /// The failed-attempt event: route, attempt, classification and wait; never a body or
    /// provider text.
    fn log_failure(
        &self,
        turn: &Turn,
        record: &AttemptRecord,
        reason: FailureReason,
        retryable: bool,
    ) {
        let attr = turn.attribution();
        let wait_ms = record.wait.map(millis);
        tracing::warn!(
            target: "mesh_egress::model",
            agent = attr.agent(),
            conversation = attr.conversation(),
            run = attr.run(),
            route_index = record.route_index,
            model = &*record.model,
            attempt = record.attempt,
            classification = reason.as_str(),
            retryable,
            duration_ms = millis(record.duration),
            wait_ms,
            "model attempt failed"
        );
    }
}

/// Polls an in-flight call. A dropped call (`None`, which `finish` leaves behind and nothing
/// polls again) never answers.
fn poll_in_flight<F: Future>(call: Pin<&mut Option<F>>, cx: &mut Context<'_>) -> Poll<F::Output> {
    match call.as_pin_mut() {
        Some(call) => call.poll(cx),
        None => Poll::Pending,
    }
}

fn stop(reason: StopReason) -> RouteEnd {
    RouteEnd::GiveUp {
        gave_up: reason.as_str(),
        // A deadline may pass before a retry next cycle; a cancelled or disowned turn is over.
        retryable: reason == StopReason::DeadlineReached,
    }
}

/// The duration `d` in whole milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
