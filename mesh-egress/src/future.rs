//! [`BoxFuture`]: the one boxed-future type of the crate, for the dyn-compatible seams (a boxed
//! channel, a promise keeper, a worker's handler, a judge, a stream observer, a model stream's
//! transport) where a trait cannot return `impl Future`. A leaf: every layer may use it. Its
//! public path is `mesh_egress::BoxFuture`.

use std::future::Future;
use std::pin::Pin;

/// A boxed, `Send` future borrowing for `'a`, as tower and futures spell it: what every
/// dyn-compatible trait of the crate returns (e.g.
/// [`DynChannel::send_dyn`](crate::channel::DynChannel::send_dyn)).
///
/// ```
/// use mesh_egress::BoxFuture;
/// fn answer<'a>(name: &'a str) -> BoxFuture<'a, String> {
///     Box::pin(async move { format!("hello, {name}") })
/// }
/// # let _ = answer("ada");
/// ```
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
