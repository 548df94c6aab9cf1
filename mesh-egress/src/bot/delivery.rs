//! [`Delivery`] and [`Outcome`]: what the front door delivered.

use crate::channel::Receipt;
use crate::channel::stream::SurfaceStreamReceipt;
use crate::reply::Commitment;
use crate::turn::StopReason;

/// What the person was shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The answer (all of it).
    Answered,
    /// A holding line: the answer, or the rest of a stream, is promised.
    Holding,
    /// A handoff line.
    Handoff,
    /// Nothing (a proactive failure, or the agent's silence token).
    Silent,
    /// The turn stopped (cancelled, or its ownership was lost): nothing more was sent.
    Stopped(StopReason),
}

/// What [`Bot::send`](super::Bot::send) and [`Bot::run`](super::Bot::run) delivered.
#[derive(Debug)]
#[must_use = "a holding line's promise may be in it: see `promise`"]
pub struct Delivery {
    pub(super) outcome: Outcome,
    pub(super) receipts: Vec<Receipt>,
    pub(super) delivered: String,
    pub(super) promise: Option<Promise>,
    pub(super) surface: Option<SurfaceStreamReceipt>,
}

impl Delivery {
    pub(super) fn new(outcome: Outcome) -> Self {
        Self {
            outcome,
            receipts: Vec::new(),
            delivered: String::new(),
            promise: None,
            surface: None,
        }
    }

    /// What the person was shown.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The receipt of each message sent (a stream's blocks sent as messages, then Layer C's
    /// line), in order. A stream the surface showed its own way (a Slack stream, Telegram
    /// drafts, Discord edits) is in [`surface`](Self::surface); here are only the parts it did
    /// not confirm, sent again as messages of their own, and Layer C's line.
    pub fn receipts(&self) -> &[Receipt] {
        &self.receipts
    }

    /// What the surface's own stream confirmed, when the answer was streamed onto one (each
    /// message's text and id, the calls it made); `None` for a whole answer, and for a stream
    /// sent block by block as messages (a channel that is its own surface, such as the
    /// [`Recorder`](crate::channel::Recorder)).
    pub fn surface(&self) -> Option<&SurfaceStreamReceipt> {
        self.surface.as_ref()
    }

    /// The answer's Markdown that reached the person.
    pub fn delivered(&self) -> &str {
        &self.delivered
    }

    /// The holding line's promise, and who keeps it; `None` when no holding line went.
    pub fn promise(&self) -> Option<&Promise> {
        self.promise.as_ref()
    }
}

/// A holding line's promise to follow up, and who keeps it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Promise {
    /// The bot keeps it: a route started the turn, and the bot re-runs that route with the same
    /// input on the commitment's plan (in this process, or with a store by a worker, after a
    /// restart too). Nothing is kept yet when the delivery comes back; see
    /// [`Bot::promises_kept`](super::Bot::promises_kept) for how in-process promises end.
    Bot(Commitment),
    /// Nobody keeps it: no route started the turn, so there is nothing to re-run. Keep it
    /// yourself, e.g. by running the turn again through a route.
    Caller(Commitment),
}

impl Promise {
    /// The commitment: who was promised what, when, and how many tries.
    pub fn commitment(&self) -> &Commitment {
        match self {
            Self::Bot(commitment) | Self::Caller(commitment) => commitment,
        }
    }
}
