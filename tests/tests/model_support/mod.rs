//! Shared set-up for the model layer's tests (the router in paused time, the streaming router,
//! the streaming boundary): the turn and request every call is made on, a router with no jitter
//! (so every wait is exact), the one recovery report a call files, an error's recovery cause,
//! and reading a routed stream to its end.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use mesh_egress::ledger::LedgerRecord;
use mesh_egress::model::{
    ChatMessage, ChatRequest, Jitter, ModelConnector, RecoveryError, RecoveryReport, RetryConfig,
    Route, RoutedStream, Router,
};
use mesh_egress::testing::ScriptedConnector;
use mesh_egress::{Attribution, EgressError, Turn};
use tokio::time::Instant;

pub const S: fn(u64) -> Duration = Duration::from_secs;
pub const MS: fn(u64) -> Duration = Duration::from_millis;

pub fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "conv", "run"))
}

pub fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("status?")])
}

/// A plain route per name.
pub fn routes(names: &[&str]) -> Vec<Route> {
    names.iter().map(|n| Route::new(*n)).collect()
}

/// A router over `connector` with no jitter; the first route is the primary.
pub fn router_over<C: ModelConnector>(
    connector: C,
    config: RetryConfig,
    routes: Vec<Route>,
) -> Router<C> {
    let mut routes = routes.into_iter();
    let primary = routes.next().expect("a primary");
    Router::with_routes(connector, primary, routes, config).with_jitter(Jitter::fixed(0.0))
}

/// [`router_over`] a scripted connector, a plain route per name.
pub fn router(
    connector: &ScriptedConnector,
    config: RetryConfig,
    names: &[&str],
) -> Router<ScriptedConnector> {
    router_over(connector.clone(), config, routes(names))
}

/// The turn's one recovery report (a call files exactly one).
pub fn recovery(turn: &Turn) -> RecoveryReport {
    let reports: Vec<RecoveryReport> = turn
        .ledger()
        .entries()
        .into_iter()
        .filter_map(|e| match e.into_record() {
            LedgerRecord::Recovery(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(reports.len(), 1, "one recovery report per call");
    reports.into_iter().next().expect("one report")
}

/// The recovery error behind a failed call.
pub fn cause(error: &EgressError) -> &RecoveryError {
    error
        .internal_cause()
        .downcast_ref::<RecoveryError>()
        .expect("a recovery error")
}

/// What one consumer pass saw: each delta with its instant since `start`, how it ended, when,
/// and what the stream said of itself at that point.
pub struct Seen {
    pub deltas: Vec<(Duration, String)>,
    pub error: Option<EgressError>,
    /// Time since `start` when the stream ended (or failed).
    pub ended: Duration,
    pub finish_reason: Option<String>,
    pub delivered: String,
    /// How many times the stream began its answer again over deltas not marked delivered
    /// (those deltas are dropped from `deltas`, as a reader drops what it never showed).
    pub restarts: usize,
}

impl Seen {
    pub fn text(&self) -> String {
        self.deltas.iter().map(|(_, d)| d.as_str()).collect()
    }
}

/// Reads `stream` to its end (at most 1000 items); marks every delta delivered when `deliver`
/// is set.
pub async fn consume(stream: &mut RoutedStream<'_>, start: Instant, deliver: bool) -> Seen {
    let mut deltas = Vec::new();
    let mut error = None;
    let mut restarts = 0;
    for _ in 0..1000 {
        match stream.next().await {
            Some(Ok(delta)) => {
                if stream.restarted() {
                    // Nothing is marked delivered when a stream restarts: all of it goes.
                    deltas.clear();
                    restarts += 1;
                }
                if deliver {
                    stream.mark_delivered(&delta);
                }
                deltas.push((Instant::now() - start, delta));
            }
            Some(Err(failure)) => {
                error = Some(failure);
                break;
            }
            None => break,
        }
    }
    Seen {
        deltas,
        error,
        ended: Instant::now() - start,
        finish_reason: stream.finish_reason().map(str::to_owned),
        delivered: stream.delivered().to_owned(),
        restarts,
    }
}

/// One streamed call read to its end: the turn it ran on (its ledger holds the recovery report,
/// filed when the stream was dropped), the instant it started, and what was seen.
pub struct Streamed {
    pub turn: Turn,
    pub start: Instant,
    pub seen: Seen,
}

/// Streams the router's answer to [`request`] on a fresh [`turn`], reads it to its end with
/// [`consume`] and drops the stream.
pub async fn stream_to_end<C: ModelConnector>(router: &Router<C>, deliver: bool) -> Streamed {
    let turn = turn();
    let start = Instant::now();
    let seen = {
        let request = request();
        let mut stream = router.stream(&turn, &request);
        consume(&mut stream, start, deliver).await
    };
    Streamed { turn, start, seen }
}
