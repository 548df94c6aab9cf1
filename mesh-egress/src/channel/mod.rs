//! Delivery to user channels: [`Channel`] (one per chat surface), [`Deliver`] (the typed
//! pre-render boundary every channel gets), renderers, and the in-memory and stdout channels.
//!
//! ```
//! use mesh_egress::{AgentMessage, Attribution};
//! use mesh_egress::channel::{Deliver, Recorder};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = Recorder::new();
//! let receipt = channel
//!     .deliver(AgentMessage::new("Deployed **v2**.", Attribution::new("ops", "c1", "r1")))
//!     .await?;
//! assert_eq!(receipt.len(), 1);
//! assert_eq!(channel.sent(), ["Deployed v2."]);
//! # Ok(()) }
//! ```

#[cfg(feature = "markdown")]
mod atom;
#[cfg(feature = "markdown")]
mod chunk;
mod deliver;
#[cfg(feature = "markdown")]
mod format;
mod plain;
mod recorder;
mod render;
mod stdout;
#[cfg(all(test, feature = "markdown"))]
mod tests;

use std::future::Future;

pub use deliver::{
    Deliver, Deliverable, DeliveryError, PartReceipt, Receipt, SendError, Undelivered,
};
#[cfg(feature = "markdown")]
pub use format::{DiscordMarkdown, SlackMrkdwn, TelegramHtml};
pub use plain::PlainText;
pub use recorder::{InjectedFailure, Recorder};
pub use render::{Render, RenderError};
pub use stdout::Stdout;

use crate::outbound::{CommitBoundary, CommitError, CommitRecord, CommittedPart};

/// A chat surface a person reads: Slack, Discord, Telegram, a web chat, a test recorder.
///
/// Implement it once per surface: name the renderer (its format and limits) and how one part is
/// sent. Every `Channel` gets [`Deliver`], which renders, commits and sends each part in order;
/// `send` itself only ever receives a [`CommittedPart`], so an `EgressError` or unrendered
/// Markdown has no way in.
///
/// ```
/// use std::future::Future;
/// use mesh_egress::CommittedPart;
/// use mesh_egress::channel::{Channel, PartReceipt, PlainText, SendError};
///
/// struct Log { renderer: PlainText }
///
/// impl Channel for Log {
///     type Renderer = PlainText;
///     fn renderer(&self) -> &PlainText { &self.renderer }
///     fn send(&self, part: CommittedPart) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
///         async move {
///             println!("{}", part.text());
///             Ok(PartReceipt::new(part.idempotency_key()))
///         }
///     }
/// }
/// ```
pub trait Channel: Send + Sync {
    /// The renderer for this surface's format and limits.
    type Renderer: Render;

    /// The renderer [`Deliver`] uses.
    fn renderer(&self) -> &Self::Renderer;

    /// Crosses the commit boundary for one message (ownership check, durable record). The
    /// default accepts in memory.
    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        let _ = record;
        std::future::ready(Ok(()))
    }

    /// Sends one committed part. On failure, hand the part back inside the [`SendError`] so the
    /// delivery can be resumed.
    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send;
}

impl<C: Channel + ?Sized> CommitBoundary for C {
    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        Channel::commit(self, record)
    }
}
