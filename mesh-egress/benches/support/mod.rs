//! What the PostgreSQL benchmarks share: their runtime, their database and their knobs.

// Each benchmark uses its share of these.
#![allow(dead_code)]

#[path = "../../../tests/tests/support/postgres.rs"]
#[allow(dead_code, unreachable_pub)]
mod postgres;

/// A multi-threaded runtime with `threads` workers and every driver on.
pub(crate) fn runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The database to measure: `MESH_BENCH_PG_URL` when it names one, else a fresh database in a
/// throwaway cluster started like the tests' harness.
pub(crate) fn pg_url() -> String {
    std::env::var("MESH_BENCH_PG_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(postgres::fresh_database_url)
}

/// The count the variable `name` gives, or `default` when it is unset or not a number.
pub(crate) fn count<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}
