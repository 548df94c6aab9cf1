//! The Router's healthy path vs calling the connector directly vs the same call wrapped by
//! `backon` and by `tower::retry`, each peer given the same per-attempt timeout (60 s) and the
//! same attempt budget (3), so all do the same work. The connector answers at once.
//!
//! Beside them, the parts of what the Router adds: its ledger row (`ledger_row`, as the Router
//! builds it; `ledger_row_only`, with freshly allocated model names, as earlier rounds measured
//! it) and its two clock reads (`clock_pair`).
//!
//! `cargo bench -p mesh-egress --features testing --bench router`

#![allow(missing_docs)]

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable as _};
use criterion::{Criterion, criterion_group, criterion_main};
use mesh_egress::ledger::{
    AttemptOutcome, AttemptRecord, Ledger, LedgerEntry, LedgerRecord, LedgerStore, RecoveryReport,
};
use mesh_egress::model::{
    ChatMessage, ChatRequest, Completion, ModelConnector, ModelError, RetryConfig, Router, classify,
};
use mesh_egress::{Attribution, Turn};
use tower::{BoxError, Service as _, ServiceBuilder, ServiceExt as _};

const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);

/// A connector that answers at once with a prepared completion.
#[derive(Clone)]
struct Healthy(Completion);

impl ModelConnector for Healthy {
    fn complete(
        &self,
        _model: &str,
        _request: &ChatRequest,
    ) -> impl Future<Output = Result<Completion, ModelError>> + Send {
        std::future::ready(Ok(self.0.clone()))
    }
}

/// A ledger store that keeps nothing, so the bench measures the Router, not a growing Vec.
struct Discard;

impl LedgerStore for Discard {
    fn record(&self, entry: LedgerEntry) {
        black_box(entry);
    }

    fn entries(&self) -> Vec<LedgerEntry> {
        Vec::new()
    }
}

/// tower's retry policy with the same budget: 3 attempts, retryable failures only.
#[derive(Clone)]
struct Attempts(u32);

impl tower::retry::Policy<Arc<ChatRequest>, Completion, BoxError> for Attempts {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _req: &mut Arc<ChatRequest>,
        result: &mut Result<Completion, BoxError>,
    ) -> Option<Self::Future> {
        let retryable = match result {
            Ok(_) => false,
            Err(e) => e
                .downcast_ref::<ModelError>()
                .is_none_or(|e| classify(e).retryable),
        };
        (retryable && self.0 > 1).then(|| {
            self.0 -= 1;
            tokio::time::sleep(Duration::from_millis(500))
        })
    }

    fn clone_request(&mut self, req: &Arc<ChatRequest>) -> Option<Arc<ChatRequest>> {
        Some(Arc::clone(req))
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let connector = Arc::new(Healthy(Completion::text("m", "All green.")));
    let request = Arc::new(ChatRequest::new(vec![ChatMessage::user(
        "Is the build green?",
    )]));
    let turn =
        Turn::new(Attribution::new("bench", "conv", "run")).with_ledger(Ledger::new(Discard));
    let config = RetryConfig::default().with_attempt_timeout(Some(ATTEMPT_TIMEOUT));
    let router = Router::new(Arc::clone(&connector), "m", config);

    let mut group = c.benchmark_group("router_healthy_path");
    group.bench_function("direct", |b| {
        b.iter(|| runtime.block_on(async { black_box(connector.complete("m", &request).await) }));
    });
    group.bench_function("router", |b| {
        b.iter(|| runtime.block_on(async { black_box(router.complete(&turn, &*request).await) }));
    });
    group.bench_function("backon", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let call = || async {
                    tokio::time::timeout(ATTEMPT_TIMEOUT, connector.complete("m", &request))
                        .await
                        .unwrap_or_else(|_| Err(ModelError::timeout()))
                };
                black_box(
                    call.retry(ExponentialBuilder::default().with_max_times(2))
                        .when(|e| classify(e).retryable)
                        .await,
                )
            })
        });
    });
    let tower_service = {
        let connector = Arc::clone(&connector);
        ServiceBuilder::new()
            .retry(Attempts(3))
            .timeout(ATTEMPT_TIMEOUT)
            .service_fn(move |req: Arc<ChatRequest>| {
                let connector = Arc::clone(&connector);
                async move { connector.complete("m", &req).await }
            })
    };
    group.bench_function("tower_retry", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut service = tower_service.clone();
                let ready = service.ready().await.map(|s| s.call(Arc::clone(&request)));
                match ready {
                    Ok(call) => black_box(call.await.is_ok()),
                    Err(_) => black_box(false),
                }
            })
        });
    });
    // What the Router does on success that the peers do not: build and record the
    // RecoveryReport (one attempt) on the turn's ledger. Router ≈ a peer + this row.
    group.bench_function("ledger_row_only", |b| {
        b.iter(|| {
            let mut report = RecoveryReport::default().with_attempt(AttemptRecord {
                route_index: 0,
                model: black_box(std::sync::Arc::from("m")),
                attempt: 1,
                outcome: AttemptOutcome::Answered,
                retryable: true,
                duration: Duration::ZERO,
                wait: None,
            });
            report.answered_by = Some(0);
            report.answered_model = Some(black_box(std::sync::Arc::from("m")));
            turn.ledger()
                .record(turn.attribution(), LedgerRecord::Recovery(report));
        });
    });
    // The same row as the Router builds it for a call answered on its first poll: the route's
    // model name shared (two `Arc` clones), not allocated as `ledger_row_only` does above (kept
    // as it was, so old and new builds compare).
    let model: Arc<str> = Arc::from("m");
    group.bench_function("ledger_row", |b| {
        b.iter(|| {
            let model = black_box(&model);
            let mut report = RecoveryReport::default().with_attempt(AttemptRecord {
                route_index: 0,
                model: Arc::clone(model),
                attempt: 1,
                outcome: AttemptOutcome::Answered,
                retryable: true,
                duration: Duration::ZERO,
                wait: None,
            });
            report.answered_by = Some(0);
            report.answered_model = Some(Arc::clone(model));
            turn.ledger()
                .record(turn.attribution(), LedgerRecord::Recovery(report));
        });
    });
    // The two clock reads the Router makes on the healthy path (the call's start, and the
    // attempt's duration for its row), which a direct call does not make.
    group.bench_function("clock_pair", |b| {
        b.iter(|| {
            let start = tokio::time::Instant::now();
            black_box(black_box(start).elapsed())
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
