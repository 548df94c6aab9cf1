//! What a stream confirmed: [`SurfaceStreamReceipt`], [`StreamedMessage`], and the errors that carry
//! it.

use std::error::Error as StdError;
use std::fmt;

use super::{BLOCK_SEPARATOR, StreamMode};
use crate::outbound::CommittedPart;

/// One message on the surface and the text the surface confirmed it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamedMessage {
    id: String,
    text: String,
    plain_text: bool,
}

impl StreamedMessage {
    pub(crate) fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            text: text.into(),
            plain_text: false,
        }
    }

    /// The message went as plain text: the surface refused its formatting.
    pub(crate) fn with_plain_text(mut self) -> Self {
        self.plain_text = true;
        self
    }

    /// Whether the surface refused the message's formatting (Telegram's "can't parse
    /// entities") and it went, once more, as the plain text a person reads. Its
    /// [`text`](Self::text) is still the text the parts carried.
    pub fn is_plain_text_fallback(&self) -> bool {
        self.plain_text
    }

    /// The surface's id for the message (Slack `ts`, Discord snowflake, Telegram message id).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The message's text as last confirmed by the surface.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub(crate) fn push_block(&mut self, block: &str) {
        if !self.text.is_empty() {
            self.text.push_str(BLOCK_SEPARATOR);
        }
        self.text.push_str(block);
    }
}

/// What one streamed reply left on its surface, as the surface confirmed it.
///
/// A surface message holds whole blocks, [`BLOCK_SEPARATOR`] between them; a reply may span
/// several messages (a stream rolled over, a message full at the surface's limit).
/// [`confirmed_text`](Self::confirmed_text) is every message's text joined the same way, so a
/// complete reply's equals its blocks joined: nothing lost, nothing doubled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SurfaceStreamReceipt {
    mode: StreamMode,
    messages: Vec<StreamedMessage>,
    calls: usize,
    previews: usize,
    rollovers: usize,
    fell_back: bool,
}

impl SurfaceStreamReceipt {
    pub(crate) fn new(mode: StreamMode, messages: Vec<StreamedMessage>, calls: usize) -> Self {
        Self {
            mode,
            messages,
            calls,
            ..Self::default()
        }
    }

    pub(crate) fn with_previews(mut self, previews: usize) -> Self {
        self.previews = previews;
        self
    }

    pub(crate) fn with_rollovers(mut self, rollovers: usize) -> Self {
        self.rollovers = rollovers;
        self
    }

    pub(crate) fn with_fallback(mut self, fell_back: bool) -> Self {
        self.fell_back = fell_back;
        self
    }

    /// The mode the reply was shown in (after any fallback).
    pub fn mode(&self) -> StreamMode {
        self.mode
    }

    /// Every message, in order, with its confirmed text.
    pub fn messages(&self) -> &[StreamedMessage] {
        &self.messages
    }

    /// The surface's ids of the messages, in order.
    pub fn ids(&self) -> Vec<&str> {
        self.messages.iter().map(StreamedMessage::id).collect()
    }

    /// All confirmed text: the messages' texts joined by [`BLOCK_SEPARATOR`].
    pub fn confirmed_text(&self) -> String {
        let texts: Vec<&str> = self
            .messages
            .iter()
            .map(StreamedMessage::text)
            .filter(|t| !t.is_empty())
            .collect();
        texts.join(BLOCK_SEPARATOR)
    }

    /// How many API calls the stream made, failed ones included.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// How many of those calls were previews that confirm nothing (Telegram drafts).
    pub fn previews(&self) -> usize {
        self.previews
    }

    /// How many times a stream was closed (by the surface or ahead of its expiry) and a fresh
    /// one started for the rest.
    pub fn rollovers(&self) -> usize {
        self.rollovers
    }

    /// Whether the surface's streaming was unavailable and the reply went as blocks instead.
    pub fn fell_back(&self) -> bool {
        self.fell_back
    }
}

/// Why [`StreamingChannel::open_stream`](super::StreamingChannel::open_stream) could not start
/// a stream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamOpenError {
    /// No Tokio runtime is running on this thread to drive the stream.
    #[error("a reply stream needs a running Tokio runtime")]
    NoRuntime,
}

/// A stream that stopped before every part was confirmed.
///
/// It carries what the surface had confirmed ([`receipt`](Self::receipt)), the parts of a
/// call whose outcome is unknown ([`uncertain`](Self::uncertain)), and every part after them
/// ([`into_unconfirmed`](Self::into_unconfirmed)), in order: appending those to a new stream
/// resumes the reply from the confirmed offset.
pub struct SurfaceStreamError {
    receipt: SurfaceStreamReceipt,
    refused: bool,
    store_failed: bool,
    uncertain: Vec<CommittedPart>,
    unconfirmed: Vec<CommittedPart>,
    source: Box<dyn StdError + Send + Sync>,
}

impl SurfaceStreamError {
    pub(crate) fn new(
        receipt: SurfaceStreamReceipt,
        unconfirmed: Vec<CommittedPart>,
        source: Box<dyn StdError + Send + Sync>,
    ) -> Self {
        Self {
            receipt,
            refused: false,
            store_failed: false,
            uncertain: Vec::new(),
            unconfirmed,
            source,
        }
    }

    pub(crate) fn refused(mut self) -> Self {
        self.refused = true;
        self
    }

    /// Whether an observer refused the next call (the
    /// durable outbox could not record it, e.g. another worker holds the conversation now).
    /// Then nothing more of the reply should go: not even the unconfirmed parts as messages.
    pub fn is_refused(&self) -> bool {
        self.refused
    }

    pub(crate) fn store_failed(mut self) -> Self {
        self.store_failed = true;
        self
    }

    /// Whether the refusal came from the observer's store failing
    /// (the outbox's journal), not from the
    /// conversation moving on: nothing more goes now, and what the durable outbox holds
    /// `pending` is sent by a worker once the store answers again.
    pub fn is_store_failure(&self) -> bool {
        self.store_failed
    }

    pub(crate) fn with_uncertain(mut self, uncertain: Vec<CommittedPart>) -> Self {
        self.uncertain = uncertain;
        self
    }

    pub(crate) fn push_unconfirmed(&mut self, parts: impl IntoIterator<Item = CommittedPart>) {
        self.unconfirmed.extend(parts);
    }

    /// What the surface confirmed before the stream stopped.
    pub fn receipt(&self) -> &SurfaceStreamReceipt {
        &self.receipt
    }

    /// The parts that were in the call whose outcome is unknown (it got no answer, on a
    /// surface where repeating it could post twice: Telegram's `sendMessage`). They come before
    /// [`unconfirmed`](Self::unconfirmed) and may already be on the surface: sending them
    /// again may show them twice, so the front door ([`Bot::send_to`](crate::Bot::send_to) and
    /// the bot's own sends, streaming onto the surface) does not (at most once), and the durable
    /// outbox marks them `uncertain`.
    pub fn uncertain(&self) -> &[CommittedPart] {
        &self.uncertain
    }

    /// The parts not confirmed (after the [uncertain](Self::uncertain) ones), in order: none
    /// of them was shown.
    pub fn unconfirmed(&self) -> &[CommittedPart] {
        &self.unconfirmed
    }

    /// Takes the unconfirmed parts, to append them to a new stream (or deliver them otherwise).
    pub fn into_unconfirmed(self) -> Vec<CommittedPart> {
        self.unconfirmed
    }
}

impl fmt::Debug for SurfaceStreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SurfaceStreamError")
            .field("receipt", &self.receipt)
            .field("uncertain", &self.uncertain.len())
            .field("unconfirmed", &self.unconfirmed.len())
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for SurfaceStreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the reply stream stopped with {} message(s) confirmed and {} part(s) not: {}",
            self.receipt.messages.len(),
            self.unconfirmed.len(),
            self.source
        )
    }
}

impl StdError for SurfaceStreamError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}
