//! [`PromiseKeeper`]: where a streamed turn's holding-line promise is kept **before** the
//! holding line goes out, so no crash can leave a person promised a follow-up that nothing
//! will deliver.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;

use crate::reply::Commitment;

/// What [`PromiseKeeper::keep`] returns: `Err` when the promise could not be kept, and then
/// the holding line is not sent.
pub type KeepFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), Box<dyn StdError + Send + Sync>>> + Send + 'a>>;

/// Keeps a streamed turn's promise somewhere durable (a store, a queue) before its holding line
/// is delivered; attached with [`StreamPlan::with_promise_keeper`](super::StreamPlan::with_promise_keeper).
///
/// When Layer C answers a streamed turn with a holding line, [`stream`](super::stream) and
/// [`stream_live`](super::stream_live) make the promise and deliver its line in one step. With a
/// keeper, `keep` runs in between, with the commitment and the Markdown the person has already
/// seen (the follow-up delivers only what follows it, see [`rest_after`](super::rest_after)).
/// If it fails, the line is not sent: the turn ends in a
/// [`DeliveryError::Commit`](crate::channel::DeliveryError::Commit), as a holding line whose
/// commit failed would, never in a promise nobody holds.
pub trait PromiseKeeper: Send + Sync {
    /// Keeps `commitment`, made after `delivered` was shown.
    fn keep<'a>(&'a self, commitment: &'a Commitment, delivered: &'a str) -> KeepFuture<'a>;
}
