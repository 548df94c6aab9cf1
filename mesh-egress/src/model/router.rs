//! [`Router`]: retries and route fallback around a [`ModelConnector`], under the spec's
//! "Shipped model deadline policy". The route vocabulary is in [`super::route`]; one call's
//! recovery state is a [`Recovery`].

use std::borrow::Borrow;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, sleep, sleep_until};

use super::ModelConnector;
use super::backoff::Jitter;

use super::config::RetryConfig;
use super::error::ModelError;
use super::recovery::{Failed, LastFailure, Next, Recovery, RouteEnd};
use super::route::{FallbackReason, Route};
use super::tool_text::{plainly_usable, settle, settle_inspected};
use super::wire::{ChatRequest, Completion};
use crate::egress::EgressError;
use crate::failure::FailureReason;
use crate::ledger::{AttemptOutcome, AttemptRecord, Attempts, LedgerRecord, RecoveryReport};
use crate::retry::Backoff;
use crate::turn::{StopReason, Turn};

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
/// - other retryable failures (429, 5xx, resets, empty completions, a tool call written as text
///   when the request offered no tools, see [`text_tool_format`](super::text_tool_format))
///   retry the same route after a
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
    pub(super) connector: C,
    pub(super) routes: Vec<Route>,
    pub(super) config: RetryConfig,
    pub(super) backoff: Backoff,
    pub(super) jitter: Jitter,
    fallback_on_terminal: bool,
    fallback_on_quota: bool,
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
            backoff: config.backoff(),
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
    ///
    /// # Errors
    ///
    /// A transport [`EgressError`] attributed to the turn, with the attempt count, when no route
    /// gave a usable completion: retries and fallbacks ran out, a failure was terminal, the total
    /// or the turn's deadline passed, or the turn was cancelled or lost its ownership. Its cause
    /// is a [`RecoveryError`](super::RecoveryError) saying why; whether it is retryable depends
    /// on why.
    pub async fn complete(
        &self,
        turn: &Turn,
        request: impl Borrow<ChatRequest>,
    ) -> Result<Completion, EgressError> {
        let request = request.borrow();
        let start = Instant::now();
        // The healthy path: the primary is asked at once and polled once, before any timer,
        // signal subscription or recovery state exists (the call's end instant included, which
        // only recovery reads). The call has time left when the total deadline is not zero and
        // the turn's deadline has not passed, which also means the turn is not stopped by its
        // deadline, so only cancellation and ownership are left to check, in
        // `Turn::stop_reason`'s order (each asked once). No time left goes to `recover`
        // untouched, which gives up before asking the turn anything; a stopped turn goes there
        // with its reason.
        let has_time = !self.config.total_deadline().is_zero()
            && turn.deadline().is_none_or(|deadline| deadline > start);
        let stopped = if !has_time {
            None
        } else if turn.cancellation().is_cancelled() {
            Some(StopReason::Cancelled)
        } else if !turn.ownership().is_held() {
            Some(StopReason::OwnershipLost)
        } else {
            None
        };
        if !has_time || stopped.is_some() || self.routes[0].via.is_some() {
            // A stop before the first attempt; or a primary on its own connector, which the
            // attempt loop calls.
            let first = stopped.map(First::Stopped);
            let recovery = self.recovery(turn, request, start);
            return Box::pin(self.recover::<std::future::Pending<_>>(recovery, first)).await;
        }
        // In an `Option` so recovery can drop it in place (cancelling it) when its attempt ends.
        let mut call = pin!(Some(
            self.connector.complete(&self.routes[0].model, request)
        ));
        // The first poll's result ends with this block, before the recovery's await, so the
        // future does not keep it in its state: a healthy completion goes from the call to the
        // caller with fewer moves.
        let recovering = {
            let first = match poll_fn(|cx| Poll::Ready(poll_in_flight(call.as_mut(), cx))).await {
                // The healthy case, asked of the completion where it is (`settle` would pass it
                // unchanged).
                Poll::Ready(Ok(completion)) if plainly_usable(&completion) => {
                    self.record_first_answer(turn, start);
                    return Ok(completion);
                }
                // Anything else, without asking the healthy case again.
                Poll::Ready(result) => match settle_inspected(result, request) {
                    Ok(completion) => {
                        self.record_first_answer(turn, start);
                        return Ok(completion);
                    }
                    Err(error) => First::Failed(error),
                },
                Poll::Pending => First::Pending(call.as_mut()),
            };
            // Boxed so the healthy path's future stays small: the recovery machinery (timers,
            // the turn's signals, backoff) is only built for a call that did not answer at once.
            Box::pin(self.recover(self.recovery(turn, request, start), Some(first)))
        };
        recovering.await
    }

    /// The recovery state of a call that started at `start`: it must end after the total
    /// deadline, or at the turn's deadline if that comes first.
    pub(super) fn recovery<'a>(
        &self,
        turn: &'a Turn,
        request: &'a ChatRequest,
        start: Instant,
    ) -> Recovery<'a> {
        let mut end = saturating_after(start, self.config.total_deadline());
        if let Some(deadline) = turn.deadline() {
            end = end.min(deadline);
        }
        Recovery::new(turn, request, start, end)
    }

    /// The ledger row of a call the primary answered on its first poll.
    // Built in the healthy path's own frame rather than behind a call (measured: 6-7 ns
    // less per routed call, see BENCHMARKS.md's fifth round).
    #[inline(always)]
    fn record_first_answer(&self, turn: &Turn, start: Instant) {
        let duration = start.elapsed();
        let route = &self.routes[0];
        let report = RecoveryReport {
            attempts: Attempts::one(AttemptRecord {
                route_index: 0,
                model: route.model.clone(),
                attempt: 1,
                outcome: AttemptOutcome::Answered,
                retryable: true,
                duration,
                wait: None,
            }),
            answered_by: Some(0),
            answered_model: Some(route.model.clone()),
            gave_up: None,
            stream: None,
        };
        turn.ledger()
            .record(turn.attribution(), LedgerRecord::Recovery(report));
    }

    /// Everything after the first poll of the primary: the attempt bound on the in-flight call,
    /// retries, fallback, and the report.
    async fn recover<F>(
        &self,
        mut recovery: Recovery<'_>,
        mut first: Option<First<'_, F>>,
    ) -> Result<Completion, EgressError>
    where
        F: Future<Output = Result<Completion, ModelError>>,
    {
        let mut route_index = 0;
        loop {
            match self
                .run_route(&mut recovery, route_index, first.take())
                .await
            {
                Ok(completion) => {
                    recovery.answered(&self.routes[route_index], route_index);
                    return Ok(completion);
                }
                Err(RouteEnd::Fallback { to, reason }) => {
                    self.log_fallback(recovery.turn, route_index, to, reason);
                    route_index = to;
                }
                Err(RouteEnd::GiveUp { gave_up, retryable }) => {
                    return Err(recovery.give_up(gave_up, retryable));
                }
            }
        }
    }

    /// Opens route `index` and runs attempts on it until it answers or recovery must move on
    /// ([`after_failure`](Self::after_failure) decides, as it does for a stream).
    async fn run_route<F>(
        &self,
        recovery: &mut Recovery<'_>,
        index: usize,
        mut first: Option<First<'_, F>>,
    ) -> Result<Completion, RouteEnd>
    where
        F: Future<Output = Result<Completion, ModelError>>,
    {
        let (turn, request) = (recovery.turn, recovery.request);
        let route = &self.routes[index];
        let (now, share_end) = self.open_route(recovery, index)?;
        let mut attempt = 0u32;
        loop {
            attempt = attempt.saturating_add(1);
            // The first attempt of the call may already be under way (`complete` ran the stop
            // check and polled it once, or found the turn stopped); otherwise check the turn and
            // start it here.
            let started = match first.take() {
                Some(First::Stopped(reason)) => return Err(RouteEnd::stopped(reason)),
                None => {
                    if let Some(reason) = turn.stop_reason() {
                        return Err(RouteEnd::stopped(reason));
                    }
                    None
                }
                started => started,
            };
            let attempt_start = if attempt == 1 { now } else { Instant::now() };
            let (bound, by_share) = self.attempt_bound(attempt_start, share_end);
            let result = match started {
                Some(First::Failed(error)) => Ok(Err(error)),
                Some(First::Pending(call)) => Self::finish(turn, call, bound, by_share).await,
                Some(First::Stopped(reason)) => return Err(RouteEnd::stopped(reason)),
                None => match &route.via {
                    None => {
                        let call = self.connector.complete(&route.model, request);
                        Self::attempt(turn, call, bound, by_share).await
                    }
                    Some(via) => {
                        let call = via.complete(&route.model, request);
                        Self::attempt(turn, call, bound, by_share).await
                    }
                },
            };
            let outcome = match result {
                // Empty, or a tool decision that cannot be used (a text-protocol call with no
                // tools offered): a failed attempt like any other.
                Ok(result) => match settle(result, request) {
                    Ok(completion) => Attempted::Answered(completion),
                    Err(error) => Attempted::Failed(error),
                },
                Err(outcome) => outcome,
            };
            let failed = match outcome {
                Attempted::Answered(completion) => {
                    let record = self.attempt_record(
                        index,
                        attempt,
                        attempt_start,
                        AttemptOutcome::Answered,
                        true,
                    );
                    recovery.report.attempts.push(record);
                    return Ok(completion);
                }
                Attempted::Stopped(reason) => {
                    let record = self.attempt_record(
                        index,
                        attempt,
                        attempt_start,
                        AttemptOutcome::Stopped(reason),
                        false,
                    );
                    recovery.report.attempts.push(record);
                    return Err(RouteEnd::stopped(reason));
                }
                Attempted::TimedOut { by_share } => Failed::timed_out(
                    index,
                    attempt,
                    attempt_start,
                    FailureReason::AttemptTimeout,
                    if by_share {
                        FallbackReason::RouteBudgetSpent
                    } else {
                        FallbackReason::AttemptTimeout
                    },
                ),
                Attempted::Failed(error) => Failed::error(index, attempt, attempt_start, error),
            };
            match self.after_failure(recovery, failed, share_end) {
                Next::End(end) => return Err(end),
                Next::Retry(wait) => tokio::select! {
                    biased;
                    reason = turn.stopped() => return Err(RouteEnd::stopped(reason)),
                    () = sleep(wait) => {}
                },
            }
        }
    }

    /// The end of an attempt that starts at `attempt_start`: the attempt timeout, unless the
    /// route's share ends first (then `by_share` is true).
    fn attempt_bound(&self, attempt_start: Instant, share_end: Instant) -> (Instant, bool) {
        match self
            .config
            .attempt_timeout()
            .and_then(|timeout| attempt_start.checked_add(timeout))
        {
            Some(bound) if bound <= share_end => (bound, false),
            _ => (share_end, true),
        }
    }

    /// One attempt's call, polled once before anything else: a call that answers at once never
    /// builds the timer or subscribes to the turn's signals (the stop check already ran).
    async fn attempt<F>(
        turn: &Turn,
        call: F,
        bound: Instant,
        by_share: bool,
    ) -> Result<Result<Completion, ModelError>, Attempted>
    where
        F: Future<Output = Result<Completion, ModelError>>,
    {
        let mut call = pin!(Some(call));
        match poll_fn(|cx| Poll::Ready(poll_in_flight(call.as_mut(), cx))).await {
            Poll::Ready(result) => Ok(result),
            Poll::Pending => Self::finish(turn, call, bound, by_share).await,
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
    ) -> Result<Result<Completion, ModelError>, Attempted>
    where
        F: Future<Output = Result<Completion, ModelError>>,
    {
        let result = tokio::select! {
            biased;
            result = poll_fn(|cx| poll_in_flight(call.as_mut(), cx)) => Ok(result),
            reason = turn.stopped() => Err(Attempted::Stopped(reason)),
            () = sleep_until(bound) => Err(Attempted::TimedOut { by_share }),
        };
        call.set(None);
        result
    }

    /// Where a terminal failure on route `index` may fall back to, by policy.
    pub(super) fn terminal_fallback(
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
            // The provider's verdict on this model's answer (its filter, its output limit), not
            // on the request: Anthropic's docs advise another model for a refusal.
            FailureReason::Refused => return next.map(|to| (to, FallbackReason::Refused)),
            FailureReason::Truncated => return next.map(|to| (to, FallbackReason::Truncated)),
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

    /// The `model fallback started` event.
    pub(super) fn log_fallback(&self, turn: &Turn, from: usize, to: usize, reason: FallbackReason) {
        let attr = turn.attribution();
        tracing::warn!(
            target: "mesh_egress::model",
            agent = attr.agent(),
            conversation = attr.conversation(),
            run = attr.run(),
            route_index = to,
            previous_route_index = from,
            reason = reason.as_str(),
            model = &*self.routes[to].model,
            "model fallback started"
        );
    }

    /// The failed-attempt event: route, attempt, classification and wait; never a body or
    /// provider text.
    pub(super) fn log_failure(
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

/// How one attempt ended.
enum Attempted {
    Answered(Completion),
    Failed(ModelError),
    TimedOut { by_share: bool },
    Stopped(StopReason),
}

/// The primary's first attempt, once `complete` has polled it once without a usable answer.
enum First<'a, F> {
    /// It finished on the first poll with a failure (an empty completion included).
    Failed(ModelError),
    /// It is in flight (always `Some`; recovery sets it to `None` when the attempt ends).
    Pending(Pin<&'a mut Option<F>>),
    /// It was never made: the turn had already stopped.
    Stopped(StopReason),
}

/// Polls an in-flight call. A dropped call (`None`, which `finish` leaves behind and nothing
/// polls again) never answers.
fn poll_in_flight<F: Future>(call: Pin<&mut Option<F>>, cx: &mut Context<'_>) -> Poll<F::Output> {
    match call.as_pin_mut() {
        Some(call) => call.poll(cx),
        None => Poll::Pending,
    }
}

/// `at + d`, or a far future (about 30 years on, as tokio does for an unrepresentable sleep)
/// when that does not fit an `Instant`: durations from the public API (`Duration::MAX` as a
/// total deadline) never panic.
pub(super) fn saturating_after(at: Instant, d: Duration) -> Instant {
    at.checked_add(d).unwrap_or_else(|| {
        at.checked_add(Duration::from_secs(86_400 * 365 * 30))
            .unwrap_or(at)
    })
}

/// The duration `d` in whole milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The recovery decisions both engines share (the complete call here, the stream in
/// `stream_router.rs`): opening a route and what follows a failed attempt.
impl<C: ModelConnector> Router<C> {
    /// Opens route `index`: counts it, and gives when it started (the call's start for the
    /// first route) and when its share of the time left ends (`left / routes_left`, so what a
    /// route does not use stays for later ones). `Err` when no time is left.
    pub(super) fn open_route(
        &self,
        recovery: &mut Recovery<'_>,
        index: usize,
    ) -> Result<(Instant, Instant), RouteEnd> {
        let now = if recovery.routes_tried == 0 {
            recovery.start
        } else {
            Instant::now()
        };
        recovery.routes_tried += 1;
        let left = recovery.end.saturating_duration_since(now);
        if left.is_zero() {
            return Err(RouteEnd::GiveUp {
                gave_up: "total_deadline",
                retryable: true,
            });
        }
        let routes_left = u32::try_from(self.routes.len() - index).unwrap_or(u32::MAX);
        let share_end = saturating_after(now, left / routes_left).min(recovery.end);
        Ok((now, share_end))
    }

    /// The ledger record of attempt `attempt` on route `index`, which started at `started`.
    pub(super) fn attempt_record(
        &self,
        index: usize,
        attempt: u32,
        started: Instant,
        outcome: AttemptOutcome,
        retryable: bool,
    ) -> AttemptRecord {
        AttemptRecord {
            route_index: index,
            model: self.routes[index].model.clone(),
            attempt,
            outcome,
            retryable,
            duration: started.elapsed(),
            wait: None,
        }
    }

    /// The one decision after a failed attempt, for a completion and for a stream (before
    /// anything was delivered): abandon a stalled route when a later one exists; a terminal
    /// failure falls back only by policy ([`terminal_fallback`](Self::terminal_fallback));
    /// spent attempts move on (`retries_exhausted`); a backoff that would outlast the route's
    /// share (ending at `share_end`) moves on at once (`route_budget_spent`); otherwise retry
    /// after the backoff. Records the attempt and logs it.
    pub(super) fn after_failure(
        &self,
        recovery: &mut Recovery<'_>,
        failed: Failed,
        share_end: Instant,
    ) -> Next {
        let Failed {
            route: index,
            attempt,
            started,
            classification,
            error,
            timed_out,
        } = failed;
        let reason = classification.reason;
        let mut record = self.attempt_record(
            index,
            attempt,
            started,
            AttemptOutcome::Failed(reason),
            classification.retryable,
        );
        recovery.last = LastFailure {
            reason: Some(reason),
            error,
        };
        let later = index + 1 < self.routes.len();
        let move_on = |reason: FallbackReason, gave_up: &'static str| {
            Next::End(if later {
                RouteEnd::Fallback {
                    to: index + 1,
                    reason,
                }
            } else {
                RouteEnd::GiveUp {
                    gave_up,
                    retryable: true,
                }
            })
        };
        let next = match timed_out {
            Some(fallback) if later => Next::End(RouteEnd::Fallback {
                to: index + 1,
                reason: fallback,
            }),
            _ if !classification.retryable => {
                Next::End(match self.terminal_fallback(index, reason) {
                    Some((to, reason)) => RouteEnd::Fallback { to, reason },
                    None => RouteEnd::GiveUp {
                        gave_up: "terminal",
                        retryable: false,
                    },
                })
            }
            _ if attempt >= self.config.attempts() => {
                move_on(FallbackReason::RetriesExhausted, "retries_exhausted")
            }
            _ => {
                let wait =
                    self.backoff
                        .delay(attempt, classification.retry_after, self.jitter.sample());
                if Instant::now()
                    .checked_add(wait)
                    .is_none_or(|resume| resume >= share_end)
                {
                    move_on(FallbackReason::RouteBudgetSpent, "route_budget_spent")
                } else {
                    record.wait = Some(wait);
                    Next::Retry(wait)
                }
            }
        };
        self.log_failure(recovery.turn, &record, reason, classification.retryable);
        recovery.report.attempts.push(record);
        next
    }
}
