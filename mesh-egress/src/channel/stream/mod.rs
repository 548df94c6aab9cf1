//! Streaming one reply onto a surface as its blocks are committed: [`StreamingChannel`],
//! [`ReplyStream`], [`StreamMode`], the per-conversation rate budget ([`BudgetConfig`]), and the
//! [`SurfaceStreamReceipt`] of what each surface confirmed.
//!
//! A streamed turn commits its reply block by block, each block on the typed path
//! (`Outbound<Unrendered → Rendered → Committed>`), rendered by the channel's own renderer. A
//! [`ReplyStream`] takes those [`CommittedPart`](crate::CommittedPart)s of **one** reply, in order, and shows them
//! the way the surface does best:
//!
//! - [`StreamMode::Stream`]: one growing message (Slack's native streams, Telegram drafts then a
//!   permanent message, Discord post-then-edit);
//! - [`StreamMode::Blocks`]: every part a message of its own;
//! - [`StreamMode::Final`]: nothing until the reply is complete, then as few messages as fit.
//!
//! [`append`](ReplyStream::append) never waits on the surface: the parts go into an inbox a
//! worker task drains. When the surface cannot keep up (its rate budget says wait), whatever
//! arrived meanwhile is sent in the next call, coalesced, rather than queued call by call.
//! [`finish`](ReplyStream::finish) sends the rest and returns the [`SurfaceStreamReceipt`]: the text
//! each surface message holds, *as the surface confirmed it*. On failure the [`SurfaceStreamError`]
//! carries that receipt and hands back every part not confirmed, so the reply resumes from the
//! confirmed offset, never from what was merely sent. Parts whose call may have been applied
//! (no answer, a 5xx, `internal_error`, an unreadable answer) where nothing can dedupe a repeat
//! or read back what the surface holds (Telegram's `sendMessage`, a Slack post, a Discord edit)
//! come back apart, as [`uncertain`](SurfaceStreamError::uncertain): they may be shown, and are not
//! sent again. Every call re-checks the ownership of the parts it carries first.
//!
//! ```
//! use mesh_egress::channel::stream::StreamingChannel;
//! use mesh_egress::channel::{Recorder, PlainText};
//! use mesh_egress::{AgentMessage, Attribution, Outbound, Ownership};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let attribution = Attribution::new("a", "c", "r");
//! let recorder = Recorder::new();
//! let mut stream = recorder.open_stream(&attribution)?;
//! for block in ["First block.", "Second block."] {
//!     let message = AgentMessage::new(block, attribution.clone());
//!     let committed = Outbound::new(message).render(&PlainText::new())?.commit(&Ownership::held()).await?;
//!     for part in committed.into_parts() {
//!         stream.append(part);
//!     }
//! }
//! let receipt = stream.finish().await?;
//! assert_eq!(receipt.confirmed_text(), "First block.\n\nSecond block.");
//! assert_eq!(recorder.sent(), ["First block.", "Second block."]);
//! # Ok(()) }
//! ```

// The surfaces' drivers (feature `http`) are what use the crate-private half of this module.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

mod budget;
mod observe;
mod receipt;
mod session;

pub use budget::BudgetConfig;
#[cfg(any(test, feature = "http"))]
pub(crate) use budget::{CallKind, RateBudget};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use observe::{CallRefused, StreamObserver};
pub use observe::{MessageUpdate, PartRef, StreamProgress};
pub use receipt::{StreamOpenError, StreamedMessage, SurfaceStreamError, SurfaceStreamReceipt};
pub use session::ReplyStream;
pub(crate) use session::{Driver, DriverError, Parts};
#[cfg(feature = "http")]
pub(crate) use session::{MaybeShown, flush, opening_mode, pack};

use crate::channel::Channel;
use crate::egress::Attribution;

/// What separates two blocks inside one streamed message: blocks are cut at paragraph
/// boundaries, so a blank line.
pub const BLOCK_SEPARATOR: &str = "\n\n";

/// How a channel shows a reply that arrives block by block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamMode {
    /// One message that grows as blocks arrive, with the surface's own mechanism.
    #[default]
    Stream,
    /// Each block a message of its own, sent as it arrives; blocks that arrive while the
    /// rate budget holds the next call back go together in one message (as many as fit), so a
    /// reply that outpaces the surface never queues message by message.
    Blocks,
    /// Nothing until the reply is complete; then as few messages as the surface's limit allows.
    Final,
}

impl StreamMode {
    /// The mode's name, as `turn` and logs spell it (`stream`, `blocks`, `final`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stream => "stream",
            Self::Blocks => "blocks",
            Self::Final => "final",
        }
    }

    /// Reads a mode from its name ([`as_str`](Self::as_str)).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "stream" => Some(Self::Stream),
            "blocks" => Some(Self::Blocks),
            "final" => Some(Self::Final),
            _ => None,
        }
    }
}

/// A [`Channel`] that can show one reply while it is still being written.
///
/// [`open_stream`](Self::open_stream) starts a [`ReplyStream`] for one reply; the caller
/// [`append`](ReplyStream::append)s that reply's committed parts in order and
/// [`finish`](ReplyStream::finish)es it. The streaming session renders nothing: the parts were
/// rendered by [`Channel::renderer`] on the typed path, so what is shown is what was committed.
///
/// The HTTP connectors implement it with their surface's own mechanism; the in-memory
/// [`Recorder`](crate::channel::Recorder) sends each part as a message
/// ([`Blocks`](StreamMode::Blocks)).
pub trait StreamingChannel: Channel {
    /// The mode this channel streams in (see each connector for its default).
    fn stream_mode(&self) -> StreamMode;

    /// Starts streaming one reply. It makes no call yet: the first part starts the stream.
    ///
    /// # Errors
    ///
    /// [`StreamOpenError::NoRuntime`] when no Tokio runtime is running to drive the stream
    /// (the only way it fails).
    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError>;

    /// Whether the surface shows a stream its own way (`true`, the default, and every HTTP
    /// connector's). `false` for a channel that is its own surface (the
    /// [`Recorder`](crate::channel::Recorder), a [`BoxedChannel::new`](crate::channel::BoxedChannel::new)):
    /// its stream only sends each part as a message, so the front door sends the blocks as
    /// messages of their own instead, each through the channel's `commit` and `send` (a durable
    /// outbox then claims and records each as it does any message, not as a streamed part).
    fn streams_natively(&self) -> bool {
        true
    }
}

/// The stream of a channel that is its own surface (the in-memory [`Recorder`] and the
/// like): each part is sent with [`Channel::send`] in [`Blocks`](StreamMode::Blocks) mode.
pub(crate) struct SendEach<C> {
    channel: C,
    messages: Vec<StreamedMessage>,
    confirmed: usize,
    calls: usize,
}

impl<C> SendEach<C> {
    pub(crate) fn new(channel: C) -> Self {
        Self {
            channel,
            messages: Vec::new(),
            confirmed: 0,
            calls: 0,
        }
    }
}

impl<C: Channel + 'static> Driver for SendEach<C> {
    fn mode(&self) -> StreamMode {
        StreamMode::Blocks
    }

    async fn post_queued(&mut self, parts: &mut Parts) -> Result<(), DriverError> {
        while let Some(part) = parts.take(self.confirmed) {
            let text = part.text().to_owned();
            self.calls += 1;
            match self.channel.send(part).await {
                Ok(receipt) => {
                    self.messages.push(StreamedMessage::new(receipt.id(), text));
                    self.confirmed += 1;
                }
                Err(error) => {
                    // The channel handed the part back: it goes back where it was.
                    let source = Box::new(SendFailed(error.to_string()));
                    if let Some(part) = error.into_part() {
                        parts.put_back(self.confirmed, part);
                    }
                    return Err(DriverError::new(source));
                }
            }
        }
        Ok(())
    }

    fn confirmed(&self) -> usize {
        self.confirmed
    }

    fn messages(&self) -> &[StreamedMessage] {
        &self.messages
    }

    fn receipt(&mut self, mode: StreamMode) -> SurfaceStreamReceipt {
        SurfaceStreamReceipt::new(mode, std::mem::take(&mut self.messages), self.calls)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct SendFailed(String);

impl StreamingChannel for crate::channel::Recorder {
    fn stream_mode(&self) -> StreamMode {
        StreamMode::Blocks
    }

    fn streams_natively(&self) -> bool {
        false
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        ReplyStream::spawn(SendEach::new(self.clone()), StreamMode::Blocks, attribution)
    }
}

/// A part's ownership no longer holds (another worker took the conversation): nothing more of
/// the reply is sent.
#[derive(Debug, thiserror::Error)]
#[error("the conversation's ownership was lost; the rest of the reply was not sent")]
pub(crate) struct OwnershipLost;
