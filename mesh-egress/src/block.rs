//! [`Block`]: one block of a streamed answer on its way out, `Unchecked -> Checked`.
//!
//! A streamed answer reaches the person block by block (see `mesh_egress::stream` for the
//! cutter), and each block must pass the quality gate's block check before it may be
//! delivered: [`QualityGate::check_block`](crate::gate::QualityGate::check_block) is the only
//! way to turn a `Block<Unchecked>` into a `Block<Checked>` (the constructor is private to the
//! crate, the states are sealed, and no `Default`, `Clone`, `From` or struct literal produces
//! one). Only a `Block<Checked>` is [`Deliverable`](crate::channel::Deliverable); a raw delta
//! `String` or an unchecked block is refused by the compiler.
//!
//! A leaf value (it imports only the other egress values), so the gate can make checked blocks
//! and the channels can deliver them without knowing each other.

use std::fmt;
use std::marker::PhantomData;

use crate::egress::{AgentMessage, Attribution};
use crate::ownership::Ownership;

mod sealed {
    /// The seal: only this crate adds block states.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait Sealed {}
}

/// A state of a [`Block`]. Sealed: implemented only by [`Unchecked`] and [`Checked`].
pub trait BlockState: sealed::Sealed {}

/// A block as the cutter gave it: the gate has not seen it, so it cannot be delivered.
#[derive(Debug)]
pub struct Unchecked {
    _sealed: (),
}

/// A block that passed the quality gate's block check (or a gate that is off): deliverable.
#[derive(Debug)]
pub struct Checked {
    _sealed: (),
}

impl sealed::Sealed for Unchecked {}
impl sealed::Sealed for Checked {}
impl BlockState for Unchecked {}
impl BlockState for Checked {}

/// One block of a streamed answer: canonical Markdown that renders on its own, with who is
/// speaking and the ownership it is sent under.
///
/// ```
/// use mesh_egress::block::{Block, Unchecked};
/// use mesh_egress::Attribution;
/// let block: Block<Unchecked> = Block::new("First paragraph.\n\n", Attribution::new("a", "c", "r"), 0);
/// assert_eq!(block.text(), "First paragraph.\n\n");
/// assert_eq!(block.index(), 0);
/// ```
#[must_use = "a block does nothing until it is checked and delivered"]
pub struct Block<S: BlockState> {
    text: String,
    attribution: Attribution,
    ownership: Option<Ownership>,
    index: usize,
    // `fn() -> S` keeps the block Send + Sync whatever the marker is, and says we never own an
    // `S`.
    _state: PhantomData<fn() -> S>,
}

impl Block<Unchecked> {
    /// A block cut from a streamed answer: `index` is its position in the stream, from 0.
    pub fn new(text: impl Into<String>, attribution: Attribution, index: usize) -> Self {
        Self {
            text: text.into(),
            attribution,
            ownership: None,
            index,
            _state: PhantomData,
        }
    }

    /// Ties the block to an ownership: no channel sends it once the ownership is lost.
    pub fn with_ownership(mut self, ownership: Ownership) -> Self {
        self.ownership = Some(ownership);
        self
    }

    /// The gate's verdict made the block deliverable, with `text` the block's text as the gate
    /// lets it through (the same, or sanitised). Only a block check calls this.
    #[cfg_attr(
        not(any(feature = "gate", feature = "markdown")),
        allow(
            dead_code,
            reason = "a block check needs the gate or the streamed boundary"
        )
    )]
    pub(crate) fn into_checked(self, text: String) -> Block<Checked> {
        Block {
            text,
            attribution: self.attribution,
            ownership: self.ownership,
            index: self.index,
            _state: PhantomData,
        }
    }

    /// The block as it is, checked by nothing but the holds that need no gate (a build without
    /// the `gate` feature): Layer A's tool-call markers and the silence tokens, which act on
    /// the text the block was cut from.
    #[cfg(all(feature = "markdown", not(feature = "gate")))]
    pub(crate) fn passed(mut self) -> Block<Checked> {
        let text = std::mem::take(&mut self.text);
        self.into_checked(text)
    }
}

impl Block<Checked> {
    /// The block as a message of its own, for the typed path (`Outbound::new`, or
    /// [`Deliver`](crate::channel::Deliver), which takes the block itself).
    pub fn into_message(self) -> AgentMessage {
        let message = AgentMessage::new(self.text, self.attribution);
        match self.ownership {
            Some(ownership) => message.with_ownership(ownership),
            None => message,
        }
    }

    /// Whether nothing is left to send (the gate stripped the whole block, e.g. a reasoning
    /// block): skip it.
    pub fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }
}

impl<S: BlockState> Block<S> {
    /// The block's Markdown.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Who is speaking.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// The ownership the block is sent under, if any.
    pub fn ownership(&self) -> Option<&Ownership> {
        self.ownership.as_ref()
    }

    /// Its position in the stream, from 0.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl<S: BlockState> fmt::Debug for Block<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The text is model output (hostile, possibly a secret the gate is about to stop): its
        // length only.
        f.debug_struct("Block")
            .field(
                "state",
                &std::any::type_name::<S>().rsplit("::").next().unwrap_or(""),
            )
            .field("index", &self.index)
            .field("len", &self.text.len())
            .finish_non_exhaustive()
    }
}
