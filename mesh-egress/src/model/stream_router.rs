//! [`Router::stream`] and [`RoutedStream`]: Layer A for a streamed answer.
//!
//! Before anything reached the person, a failure is handled exactly as
//! [`Router::complete`] handles it (classify, retry with backoff, fall back, invisibly). After
//! something was delivered, a failure abandons the route: a later route continues from the
//! delivered text (with it as the assistant's prefix on a route declared
//! [`with_prefill`](super::Route::with_prefill), asked afresh otherwise) and only what follows
//! it is yielded; with no later route the stream ends with an [`EgressError`] for Layer C.
//!
//! An attempt whose text is the whole answer holds its head back until it shows whether the
//! reply opens with a text-protocol tool call ([`text_tool_format`](super::text_tool_format)):
//! such an attempt fails (`malformed_tool_call`) before a word is yielded, or, when the request
//! offered tools, yields no text and its call is read into [`RoutedStream::tool_calls`].

use std::collections::VecDeque;

use tokio::time::{Instant, sleep_until};

use super::ModelConnector;

use super::error::ModelError;
use super::recovery::{Failed, LastFailure, Next, Recovery, RouteEnd};
use super::route::{FallbackReason, RecoveryError};
use super::router::Router;
use super::stream::{ModelStream, ToolCallAssembler, ToolCallDelta};
use super::stream_join::{JoinMode, Joined, Joiner};
use super::tool_text::{HeadCheck, HeadStep, quoted_by_user, read_streamed};
use super::wire::{ChatMessage, ChatRequest, ToolCall};
use crate::egress::EgressError;
use crate::failure::FailureReason;
use crate::future::BoxFuture;
use crate::ledger::{AttemptOutcome, AttemptRecord, StreamReport};
use crate::turn::{StopReason, Turn};

/// A request in flight to open a stream, kept across calls so a cancelled
/// [`RoutedStream::next`] resumes it instead of starting (and counting) a new attempt.
type OpenFuture<'a> = BoxFuture<'a, Result<ModelStream, ModelError>>;

/// A routed, streamed answer: text deltas to show, already joined to what the consumer holds.
///
/// Pull deltas with [`next`](Self::next); report what reached the person with
/// [`mark_delivered`](Self::mark_delivered). Whether a failure may still be retried invisibly
/// depends on what was delivered: nothing delivered, the Router's usual recovery runs; something
/// delivered, the route is abandoned and a later route continues (see the module docs).
///
/// Text yielded but not yet marked delivered (a block still being cut) counts as held: a
/// continuation is joined to everything yielded, so the consumer never receives a word twice.
///
/// The ledger row ([`RecoveryReport`](super::RecoveryReport) with its
/// [`StreamReport`](crate::ledger::StreamReport)) is written when the stream fails, or when it is
/// dropped after a clean end, so it counts what was delivered after the last delta.
pub struct RoutedStream<'a> {
    source: Source<'a>,
    held: String,
    delivered: String,
    /// The last item began the answer again (see [`restarted`](Self::restarted)).
    restarted: bool,
}

enum Source<'a> {
    Chunks {
        turn: &'a Turn,
        chunks: VecDeque<Result<String, EgressError>>,
    },
    Routed(Box<dyn Drive + 'a>),
}

impl<'a> RoutedStream<'a> {
    /// A stream that yields `chunks` in order and nothing after the first `Err`, with no model
    /// and no HTTP: a test and adapter helper (for code that consumes a `RoutedStream`, or that
    /// bridges another streaming source into one). It does no recovery and no joining, writes
    /// no ledger row, and ends with a non-retryable transport [`EgressError`] (cause: a
    /// [`RecoveryError`] naming the stop reason) once `turn` is stopped.
    pub fn from_chunks(turn: &'a Turn, chunks: Vec<Result<String, EgressError>>) -> Self {
        Self {
            source: Source::Chunks {
                turn,
                chunks: chunks.into(),
            },
            held: String::new(),
            delivered: String::new(),
            restarted: false,
        }
    }

    /// The next text delta to show (never a repeat of what was yielded before), an
    /// [`EgressError`] (the stream is then over), or `None` at a clean end.
    ///
    /// Cancel-safe: dropping the future before it completes loses no text and changes no
    /// bound (an attempt being opened, a chunk being read and a backoff wait all resume where
    /// they were on the next call), so it can be raced against a timer, as the block reader's
    /// idle flush does. This holds for every connector whose [`ChunkTransport`](super::ChunkTransport)
    /// is cancel-safe, as the built-in ones are.
    pub async fn next(&mut self) -> Option<Result<String, EgressError>> {
        let item = match &mut self.source {
            Source::Chunks { turn, chunks } => {
                if let Some(reason) = turn.stop_reason()
                    && !chunks.is_empty()
                {
                    chunks.clear();
                    Some(Err(stopped_error(turn, reason, self.delivered.len())))
                } else {
                    let item = chunks.pop_front();
                    if matches!(item, Some(Err(_))) {
                        chunks.clear();
                    }
                    item
                }
            }
            Source::Routed(driver) => {
                let item = driver.next(&self.held, self.delivered.len()).await;
                if driver.take_restart() {
                    self.held.clear();
                    self.restarted = true;
                }
                item
            }
        };
        if let Some(Ok(text)) = &item {
            self.held.push_str(text);
        }
        item
    }

    /// Whether the answer began again before the last item [`next`](Self::next) yielded:
    /// an attempt failed after yielding text that was not yet reported delivered, and the
    /// next attempt (or route) answers afresh, so what was yielded since the last
    /// [`mark_delivered`](Self::mark_delivered) is void and the item starts the whole answer.
    /// Asking clears it. Nothing that was reported delivered is ever restarted: after that, a
    /// later route continues the delivered text.
    pub fn restarted(&mut self) -> bool {
        std::mem::take(&mut self.restarted)
    }

    /// Reports that `text` reached the person (appended to the delivered prefix).
    pub fn mark_delivered(&mut self, text: &str) {
        self.delivered.push_str(text);
    }

    /// Everything reported delivered so far.
    pub fn delivered(&self) -> &str {
        &self.delivered
    }

    /// Everything yielded so far (delivered or not).
    pub fn yielded(&self) -> &str {
        &self.held
    }

    /// The tool calls streamed so far, joined from their fragments.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        match &self.source {
            Source::Routed(driver) => driver.tool_calls(),
            Source::Chunks { .. } => Vec::new(),
        }
    }

    /// The finish reason the model reported, once it has.
    pub fn finish_reason(&self) -> Option<&str> {
        match &self.source {
            Source::Routed(driver) => driver.finish_reason(),
            Source::Chunks { .. } => None,
        }
    }
}

impl Drop for RoutedStream<'_> {
    fn drop(&mut self) {
        if let Source::Routed(driver) = &mut self.source {
            driver.close(self.delivered.len());
        }
    }
}

impl std::fmt::Debug for RoutedStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedStream")
            .field("yielded_bytes", &self.held.len())
            .field("delivered_bytes", &self.delivered.len())
            .finish_non_exhaustive()
    }
}

fn stopped_error(turn: &Turn, reason: StopReason, delivered: usize) -> EgressError {
    let cause = RecoveryError {
        gave_up: reason.as_str(),
        attempts: 0,
        routes_tried: 0,
        delivered,
        last_reason: None,
        last_error: None,
    };
    EgressError::transport(cause, turn.attribution().clone())
        .with_retryable(reason == StopReason::DeadlineReached)
}

/// The type-erased driver behind a routed stream.
trait Drive: Send {
    fn next<'s>(
        &'s mut self,
        held: &'s str,
        delivered: usize,
    ) -> BoxFuture<'s, Option<Result<String, EgressError>>>;
    fn close(&mut self, delivered: usize);
    /// Whether the last item began the answer again (asking clears it).
    fn take_restart(&mut self) -> bool;
    fn tool_calls(&self) -> Vec<ToolCall>;
    fn finish_reason(&self) -> Option<&str>;
}

impl<C: ModelConnector> Router<C> {
    /// Streams the answer to `request`: see [`RoutedStream`]. Nothing is sent until the first
    /// [`next`](RoutedStream::next); the total deadline runs from this call. Dropping the
    /// stream cancels the request in flight.
    ///
    /// ```
    /// # #[cfg(feature = "testing")] {
    /// use mesh_egress::model::{ChatMessage, ChatRequest, RetryConfig, Router};
    /// use mesh_egress::testing::{ScriptedConnector, Step};
    /// use mesh_egress::{Attribution, Turn};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let connector = ScriptedConnector::new()
    ///     .on("primary", [Step::status(503), Step::chunks(["All ", "green."])]);
    /// let router = Router::new(connector, "primary", RetryConfig::default());
    /// let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
    /// let request = ChatRequest::new(vec![ChatMessage::user("Is the build green?")]);
    /// let mut stream = router.stream(&turn, &request);
    /// let mut shown = String::new();
    /// while let Some(delta) = stream.next().await {
    ///     let delta = delta.expect("recovered");
    ///     shown.push_str(&delta);
    ///     stream.mark_delivered(&delta);
    /// }
    /// assert_eq!(shown, "All green.");
    /// # }
    /// # }
    /// ```
    pub fn stream<'a>(&'a self, turn: &'a Turn, request: &'a ChatRequest) -> RoutedStream<'a> {
        let start = Instant::now();
        let recovery = self.recovery(turn, request, start);
        let end = recovery.end;
        let driver = Driver {
            router: self,
            turn,
            recovery: Some(recovery),
            route: 0,
            route_open: false,
            route_attempt: 0,
            share_end: end,
            attempt_started: start,
            attempt: None,
            opening: None,
            resume_at: None,
            ended_clean: false,
            stream_report: StreamReport::default(),
            tool_calls: ToolCallAssembler::default(),
            finish_reason: None,
            restart: false,
        };
        RoutedStream {
            source: Source::Routed(Box::new(driver)),
            held: String::new(),
            delivered: String::new(),
            restarted: false,
        }
    }
}

/// One streamed call's recovery.
struct Driver<'a, C> {
    router: &'a Router<C>,
    turn: &'a Turn,
    /// `None` once the ledger row is written (the stream is over).
    recovery: Option<Recovery<'a>>,
    route: usize,
    route_open: bool,
    route_attempt: u32,
    share_end: Instant,
    attempt_started: Instant,
    attempt: Option<Attempt>,
    /// The attempt being opened (see [`OpenFuture`]).
    opening: Option<Opening<'a>>,
    /// When the backoff wait before the next attempt ends: stored, not slept in place, so a
    /// cancelled call neither skips nor restarts the wait.
    resume_at: Option<Instant>,
    ended_clean: bool,
    stream_report: StreamReport,
    tool_calls: ToolCallAssembler,
    finish_reason: Option<String>,
    /// An attempt was started afresh over text yielded but never shown.
    restart: bool,
}

/// The attempt in flight.
struct Attempt {
    stream: ModelStream,
    first_bound: Instant,
    first_by: Bound,
    last_content: Option<Instant>,
    joiner: Option<Joiner>,
    /// The head check of an attempt whose text is the whole answer (nothing was held before
    /// it): a reply that opens with a text tool call fails before anything is shown.
    head: Option<HeadCheck>,
}

/// An attempt whose stream is being opened.
struct Opening<'a> {
    future: OpenFuture<'a>,
    first_bound: Instant,
    first_by: Bound,
    joiner: Option<Joiner>,
}

/// Which bound ends an attempt that times out.
#[derive(Clone, Copy)]
enum Bound {
    FirstToken,
    AttemptTimeout,
    Idle,
    Share,
}

/// How an attempt ended, when it did not end cleanly.
enum End {
    Failed(ModelError),
    TimedOut(Bound),
    Stopped(StopReason),
    OutOfTime,
    Unjoinable,
}

/// What one read of the attempt gave.
enum Read {
    Text(String),
    Nothing,
    Clean(String),
    Ended(End),
}

impl<'a, C: ModelConnector> Drive for Driver<'a, C> {
    fn next<'s>(
        &'s mut self,
        held: &'s str,
        delivered: usize,
    ) -> BoxFuture<'s, Option<Result<String, EgressError>>> {
        Box::pin(self.next_delta(held, delivered))
    }

    fn close(&mut self, delivered: usize) {
        let Some(mut recovery) = self.recovery.take() else {
            return;
        };
        self.stream_report.delivered_bytes = delivered;
        recovery.report.stream = Some(std::mem::take(&mut self.stream_report));
        if self.ended_clean {
            recovery.answered(&self.router.routes[self.route], self.route);
        } else {
            // Dropped mid-stream: the consumer stopped reading.
            recovery.delivered = delivered;
            let _dropped = recovery.give_up("stream_dropped", true);
        }
    }

    fn take_restart(&mut self) -> bool {
        std::mem::take(&mut self.restart)
    }

    fn tool_calls(&self) -> Vec<ToolCall> {
        self.tool_calls.calls()
    }

    fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }
}

impl<'a, C: ModelConnector> Driver<'a, C> {
    async fn next_delta(
        &mut self,
        held: &str,
        delivered: usize,
    ) -> Option<Result<String, EgressError>> {
        loop {
            if self.recovery.is_none() || self.ended_clean {
                return None;
            }
            if let Some(at) = self.resume_at {
                let turn = self.turn;
                tokio::select! {
                    biased;
                    reason = turn.stopped() => {
                        self.resume_at = None;
                        let retryable = reason == StopReason::DeadlineReached;
                        return Some(Err(self.give_up(reason.as_str(), retryable, delivered)));
                    }
                    () = sleep_until(at) => self.resume_at = None,
                }
            }
            let read = if self.attempt.is_none() {
                // Nothing was shown yet: the next attempt's whole answer is used, and what was
                // yielded but not shown is dropped by the consumer (a backup model never
                // continues another model's first words).
                // (An attempt still being opened, its call cancelled, was started with the
                // held text it needed: `open` reads `held` only to start one.)
                let held = if delivered == 0 && !held.is_empty() && self.opening.is_none() {
                    self.restart = true;
                    self.tool_calls = ToolCallAssembler::default();
                    ""
                } else {
                    held
                };
                match self.open(held).await {
                    Ok(()) => Read::Nothing,
                    Err(end) => Read::Ended(end),
                }
            } else {
                self.read().await
            };
            match read {
                Read::Nothing => {}
                Read::Text(text) => return Some(Ok(text)),
                Read::Clean(rest) => {
                    self.attempt = None;
                    self.ended_clean = true;
                    self.record_ok();
                    if self.stream_report.failed_route.is_some() {
                        self.stream_report.rest_answered_by = Some(self.route);
                    }
                    return (!rest.is_empty()).then_some(Ok(rest));
                }
                Read::Ended(end) => {
                    if let Err(error) = self.after_failure(end, delivered).await {
                        return Some(Err(error));
                    }
                }
            }
        }
    }

    /// Starts an attempt on the current route (opening the route first if it is new), or
    /// resumes the one being opened when a cancelled call left it in flight.
    async fn open(&mut self, held: &str) -> Result<(), End> {
        if self.opening.is_none() {
            self.opening = Some(self.start_attempt(held)?);
        }
        let Some(opening) = self.opening.as_mut() else {
            return Err(End::OutOfTime);
        };
        let turn = self.turn;
        let opened = tokio::select! {
            biased;
            reason = turn.stopped() => Err(End::Stopped(reason)),
            opened = opening.future.as_mut() => opened.map_err(End::Failed),
            () = sleep_until(opening.first_bound) => Err(End::TimedOut(opening.first_by)),
        };
        let Some(opening) = self.opening.take() else {
            return Err(End::OutOfTime);
        };
        self.attempt = Some(Attempt {
            stream: opened?,
            first_bound: opening.first_bound,
            first_by: opening.first_by,
            last_content: None,
            head: opening.joiner.is_none().then(HeadCheck::new),
            joiner: opening.joiner,
        });
        Ok(())
    }

    /// Counts a new attempt, works out its bounds and builds its request.
    fn start_attempt(&mut self, held: &str) -> Result<Opening<'a>, End> {
        let router: &'a Router<C> = self.router;
        let Some(recovery) = self.recovery.as_mut() else {
            return Err(End::OutOfTime);
        };
        let turn = recovery.turn;
        if !self.route_open {
            let (_, share_end) = router
                .open_route(recovery, self.route)
                .map_err(|_| End::OutOfTime)?;
            self.share_end = share_end;
            self.route_open = true;
            self.route_attempt = 0;
        }
        self.route_attempt = self.route_attempt.saturating_add(1);
        self.attempt_started = Instant::now();
        if let Some(reason) = turn.stop_reason() {
            return Err(End::Stopped(reason));
        }
        let start = self.attempt_started;
        let mut first_bound = (self.share_end, Bound::Share);
        for (timeout, by) in [
            (router.config.attempt_timeout(), Bound::AttemptTimeout),
            (
                router.config.stream_first_token_timeout(),
                Bound::FirstToken,
            ),
        ] {
            if let Some(at) = timeout.and_then(|t| start.checked_add(t))
                && at <= first_bound.0
            {
                first_bound = (at, by);
            }
        }
        let route = &router.routes[self.route];
        let request: &'a ChatRequest = recovery.request;
        let open = |request: &'a ChatRequest| -> OpenFuture<'a> {
            match &route.via {
                None => Box::pin(router.connector.stream(&route.model, request)),
                Some(via) => via.stream(&route.model, request),
            }
        };
        let (future, joiner): (OpenFuture<'a>, _) = if held.is_empty() {
            (open(request), None)
        } else if route.prefill {
            let prefilled = with_prefix(request, held);
            let connector = &router.connector;
            let via = route.via.as_ref();
            let model = &route.model;
            (
                Box::pin(async move {
                    match via {
                        None => connector.stream(model, &prefilled).await,
                        Some(via) => via.stream(model, &prefilled).await,
                    }
                }),
                Some(Joiner::new(held, JoinMode::Prefill)),
            )
        } else {
            (open(request), Some(Joiner::new(held, JoinMode::Afresh)))
        };
        if let Some(joiner) = &joiner {
            self.stream_report.joined_by = Some(joiner.mode());
        }
        Ok(Opening {
            future,
            first_bound: first_bound.0,
            first_by: first_bound.1,
            joiner,
        })
    }

    /// Reads the next chunk of the attempt in flight, under its bound.
    async fn read(&mut self) -> Read {
        let (Some(attempt), Some(recovery)) = (self.attempt.as_mut(), self.recovery.as_ref())
        else {
            return Read::Ended(End::OutOfTime);
        };
        let (bound, by) = match attempt.last_content {
            None => (attempt.first_bound, attempt.first_by),
            Some(last) => match self
                .router
                .config
                .stream_idle_timeout()
                .and_then(|t| last.checked_add(t))
            {
                Some(at) if at <= self.share_end => (at, Bound::Idle),
                _ => (self.share_end, Bound::Share),
            },
        };
        let turn = recovery.turn;
        let chunk = tokio::select! {
            biased;
            reason = turn.stopped() => return Read::Ended(End::Stopped(reason)),
            chunk = attempt.stream.next() => chunk,
            () = sleep_until(bound) => return Read::Ended(End::TimedOut(by)),
        };
        match chunk {
            Some(Ok(chunk)) => {
                if let Some(reason) = chunk.finish_reason {
                    self.finish_reason = Some(reason);
                }
                for delta in &chunk.tool_calls {
                    self.tool_calls.push(delta);
                }
                if !(chunk.text.is_empty() && chunk.tool_calls.is_empty()) {
                    attempt.last_content = Some(Instant::now());
                }
                if chunk.text.is_empty() {
                    return Read::Nothing;
                }
                if let Some(head) = attempt.head.as_mut() {
                    return match head.push(&chunk.text) {
                        HeadStep::Hold => Read::Nothing,
                        HeadStep::Show(text) => {
                            attempt.head = None;
                            if text.is_empty() {
                                Read::Nothing
                            } else {
                                Read::Text(text)
                            }
                        }
                        // Markup the person's own message holds is quoted back: an answer.
                        HeadStep::Call(_) if quoted_by_user(head.held(), recovery.request) => {
                            let text = head.release();
                            attempt.head = None;
                            Read::Text(text)
                        }
                        // With tools offered the call is read at the end; without, the attempt
                        // fails now, before anything was shown.
                        HeadStep::Call(format) if recovery.request.tools.is_empty() => {
                            match read_streamed(head.held(), format, recovery.request) {
                                Err(error) => Read::Ended(End::Failed(error)),
                                Ok(_) => Read::Nothing,
                            }
                        }
                        HeadStep::Call(_) => Read::Nothing,
                    };
                }
                match attempt.joiner.as_mut().map(|j| j.push(&chunk.text)) {
                    None => Read::Text(chunk.text),
                    Some(Joined::Text(text)) if text.is_empty() => Read::Nothing,
                    Some(Joined::Text(text)) => Read::Text(text),
                    Some(Joined::Unjoinable) => Read::Ended(End::Unjoinable),
                }
            }
            Some(Err(error)) => Read::Ended(End::Failed(error)),
            None if attempt.last_content.is_none() => {
                Read::Ended(End::Failed(ModelError::empty_completion()))
            }
            None => {
                if let Some(mut head) = attempt.head.take() {
                    return match head.finish() {
                        HeadStep::Show(rest) => Read::Clean(rest),
                        HeadStep::Call(_) if quoted_by_user(head.held(), recovery.request) => {
                            Read::Clean(head.release())
                        }
                        HeadStep::Call(format) => {
                            match read_streamed(head.held(), format, recovery.request) {
                                Ok((preface, calls)) => {
                                    self.push_text_calls(calls);
                                    Read::Clean(preface.unwrap_or_default())
                                }
                                Err(error) => Read::Ended(End::Failed(error)),
                            }
                        }
                        HeadStep::Hold => Read::Clean(String::new()),
                    };
                }
                match attempt.joiner.as_mut().map(Joiner::finish) {
                    None => Read::Clean(String::new()),
                    Some(Joined::Text(rest)) => Read::Clean(rest),
                    Some(Joined::Unjoinable) => Read::Ended(End::Unjoinable),
                }
            }
        }
    }

    /// Adds the calls read from a text tool call to the stream's tool calls, after any it
    /// streamed as structured fragments.
    fn push_text_calls(&mut self, calls: Vec<ToolCall>) {
        let first = u32::try_from(self.tool_calls.calls().len()).unwrap_or(u32::MAX);
        for (call, index) in calls.into_iter().zip(first..) {
            self.tool_calls.push(&ToolCallDelta {
                index,
                id: Some(call.id),
                name: Some(call.function.name),
                arguments: call.function.arguments,
            });
        }
    }

    fn record(&self, outcome: AttemptOutcome, retryable: bool) -> AttemptRecord {
        self.router.attempt_record(
            self.route,
            self.route_attempt,
            self.attempt_started,
            outcome,
            retryable,
        )
    }

    fn record_ok(&mut self) {
        let record = self.record(AttemptOutcome::Answered, true);
        if let Some(recovery) = self.recovery.as_mut() {
            recovery.report.attempts.push(record);
        }
    }

    /// Ends recovery: writes the ledger row and builds the error for the boundary.
    fn give_up(&mut self, gave_up: &'static str, retryable: bool, delivered: usize) -> EgressError {
        self.attempt = None;
        self.opening = None;
        self.resume_at = None;
        let Some(mut recovery) = self.recovery.take() else {
            // Already over (a second failure report cannot happen, but needs no panic).
            return stopped_error(self.turn, StopReason::Cancelled, delivered);
        };
        self.stream_report.delivered_bytes = delivered;
        recovery.report.stream = Some(std::mem::take(&mut self.stream_report));
        recovery.delivered = delivered;
        recovery.give_up(gave_up, retryable)
    }

    fn fall_back(&mut self, to: usize, reason: FallbackReason) {
        if let Some(recovery) = self.recovery.as_ref() {
            self.router
                .log_fallback(recovery.turn, self.route, to, reason);
        }
        self.route = to;
        self.route_open = false;
    }

    /// Ends recovery as `end` says: `Ok` to go on (the next route), `Err` when the stream is
    /// over.
    fn end_route(&mut self, end: RouteEnd, delivered: usize) -> Result<(), EgressError> {
        match end {
            RouteEnd::Fallback { to, reason } => {
                self.fall_back(to, reason);
                Ok(())
            }
            RouteEnd::GiveUp { gave_up, retryable } => {
                Err(self.give_up(gave_up, retryable, delivered))
            }
        }
    }

    /// Decides what a failed attempt leads to: `Ok` to go on (a retry after its wait, or the
    /// next route), `Err` when the stream is over. Before anything was delivered the decision
    /// is the Router's own ([`Router::after_failure`], as for a completion); after, the route
    /// is abandoned for a continuation.
    async fn after_failure(&mut self, end: End, delivered: usize) -> Result<(), EgressError> {
        self.attempt = None;
        self.opening = None;
        let (route, attempt, started) = (self.route, self.route_attempt, self.attempt_started);
        let failed = match end {
            End::Stopped(reason) => {
                self.push(self.record(AttemptOutcome::Stopped(reason), false));
                return self.end_route(RouteEnd::stopped(reason), delivered);
            }
            End::OutOfTime => return Err(self.give_up("total_deadline", true, delivered)),
            End::Unjoinable => {
                self.push(self.record(AttemptOutcome::Unjoinable, false));
                return Err(self.give_up("stream_unjoinable", true, delivered));
            }
            End::TimedOut(by) => {
                let (reason, fallback) = match by {
                    Bound::FirstToken => (
                        FailureReason::FirstTokenTimeout,
                        FallbackReason::FirstTokenTimeout,
                    ),
                    Bound::Idle => (
                        FailureReason::StreamIdleTimeout,
                        FallbackReason::StreamIdleTimeout,
                    ),
                    Bound::AttemptTimeout => (
                        FailureReason::AttemptTimeout,
                        FallbackReason::AttemptTimeout,
                    ),
                    Bound::Share => (
                        FailureReason::AttemptTimeout,
                        FallbackReason::RouteBudgetSpent,
                    ),
                };
                Failed::timed_out(route, attempt, started, reason, fallback)
            }
            End::Failed(error) => Failed::error(route, attempt, started, error),
        };
        if delivered > 0 {
            return self.failed_after_delivery(failed, delivered);
        }
        let Some(recovery) = self.recovery.as_mut() else {
            return Err(self.give_up("total_deadline", true, delivered));
        };
        match self.router.after_failure(recovery, failed, self.share_end) {
            // Waited at the top of the next read (see `resume_at`).
            Next::Retry(wait) => {
                self.resume_at = Instant::now().checked_add(wait);
                Ok(())
            }
            Next::End(end) => self.end_route(end, delivered),
        }
    }

    /// A failure after something was delivered: no invisible retry is possible, so the route is
    /// abandoned and a later one continues from the delivered text, or the stream ends.
    fn failed_after_delivery(
        &mut self,
        failed: Failed,
        delivered: usize,
    ) -> Result<(), EgressError> {
        let reason = failed.classification.reason;
        let record = self.record(
            AttemptOutcome::Failed(reason),
            failed.classification.retryable,
        );
        if let Some(recovery) = self.recovery.as_mut() {
            recovery.last = LastFailure {
                reason: Some(reason),
                error: failed.error,
            };
        }
        self.log(&record, reason);
        self.push(record);
        self.stream_report.failed_route = Some(self.route);
        self.stream_report.failure = Some(reason);
        self.stream_report.failed_after_bytes = Some(delivered);
        if self.route + 1 < self.router.routes.len() {
            self.fall_back(self.route + 1, FallbackReason::StreamFailedAfterDelivery);
            return Ok(());
        }
        Err(self.give_up("stream_failed_after_delivery", true, delivered))
    }

    fn push(&mut self, record: AttemptRecord) {
        if let Some(recovery) = self.recovery.as_mut() {
            recovery.report.attempts.push(record);
        }
    }

    fn log(&self, record: &AttemptRecord, reason: FailureReason) {
        if let Some(recovery) = self.recovery.as_ref() {
            self.router
                .log_failure(recovery.turn, record, reason, record.retryable);
        }
    }
}

/// `request` with `held` as the assistant's partial answer, for a prefill route to continue.
fn with_prefix(request: &ChatRequest, held: &str) -> ChatRequest {
    let mut prefilled = request.clone();
    prefilled.messages.push(ChatMessage::assistant(held));
    prefilled
}
