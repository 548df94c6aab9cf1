//! [`BoxFuture`]: the one boxed-future type of the crate, for the dyn-compatible seams (a boxed
//! channel, a promise keeper, a judge, a stream observer) where a trait cannot return
//! `impl Future`. A leaf: every layer may use it.

use std::future::Future;
use std::pin::Pin;

/// A boxed, `Send` future borrowing for `'a`, as tower and futures spell it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
