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
//!
//! # Renderers
//!
//! [`PlainText`], [`SlackMrkdwn`], [`DiscordMarkdown`] and [`TelegramHtml`] (the last three
//! with the `markdown` feature, on by default) parse the canonical Markdown once and write a
//! stream of unsplittable atoms: grapheme runs, escapes, line prefixes, breaks, and paired
//! style and fence markers. One chunker, shared by every channel, packs the atoms into parts
//! measured in the channel's own unit (code points; Telegram: UTF-16 units after entity
//! parsing, and at most 100 entities). It ends a part at the strongest break that leaves it at
//! least half full (paragraph, line, sentence, word), hard-cuts at a grapheme boundary only when
//! nothing else fits, and closes the fences and styles a cut goes through at the end of the part
//! and reopens them at the start of the next, counting those markers against the limit. A limit
//! too small for one piece is [`RenderError::LimitTooSmall`]; a blank body is
//! [`RenderError::Empty`]. A renderer can be chosen at run time as a `Box<dyn Render>`:
//!
//! ```
//! # #[cfg(feature = "markdown")] {
//! use mesh_egress::Markdown;
//! use mesh_egress::channel::{DiscordMarkdown, Render, TelegramHtml};
//! let renderer: Box<dyn Render> = if true { Box::new(DiscordMarkdown::new().with_limit(40)) }
//!     else { Box::new(TelegramHtml::new()) };
//! let parts = renderer.render(&Markdown::new("**A bold claim that runs on past forty code points.**")).unwrap();
//! assert_eq!(parts, ["**A bold claim that runs on past forty**", "**code points.**"]);
//! # }
//! ```

#[cfg(feature = "markdown")]
mod atom;
mod boxed;
#[cfg(feature = "markdown")]
mod chunk;
mod deliver;
#[cfg(feature = "markdown")]
mod format;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
mod plain;
mod recorder;
mod stdout;
#[cfg(all(test, feature = "markdown"))]
mod tests;

use std::future::Future;

pub use crate::render::{DEFAULT_MAX_PARTS, PartBudgetCut, Render, RenderError, RenderedParts};
pub use boxed::{BoxFuture, BoxedChannel, BoxedRenderer, DynChannel};
pub use deliver::{
    Deliver, Deliverable, Delivering, DeliveryError, PartReceipt, Receipt, SendError, Undelivered,
};
#[cfg(feature = "markdown")]
pub use format::{DEFAULT_LINK_SCHEMES, DiscordMarkdown, SlackMrkdwn, TelegramHtml};
pub use plain::PlainText;
pub use recorder::{InjectedFailure, Recorder};
pub use stdout::Stdout;

#[cfg(feature = "http")]
pub use http::{DiscordChannel, SlackChannel, TelegramChannel};

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
