//! Delivery's rows: a reply shortened or refused by its renderer, a part the outbox could not
//! settle.

use serde::{Deserialize, Serialize};

use crate::address::Surface;
use crate::render::{PartBudgetCut, RenderError};
use crate::reply::CommitmentId;

/// What the durable outbox reports to operators about one part (`mesh_egress::store`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutboxRecord {
    /// The part may have reached its surface, which can neither dedupe a re-send nor say
    /// whether it holds the part: it is kept `uncertain`, never sent again, never dropped.
    Uncertain {
        /// The delivery (message) id, as the outbox stores it.
        delivery: String,
        /// The part's index within its message, from 0.
        part: usize,
        /// The surface (`plain`, `slack`, `discord`, `telegram`).
        surface: String,
        /// Whether it was found after a restart (its sender died mid-send) rather than by the
        /// send itself.
        after_restart: bool,
    },
    /// The part was stored without a readable address (before migration 0004): it is marked
    /// `failed`, never sent to a guessed destination, until `Store::readdress` gives it one.
    Unaddressed {
        /// The delivery (message) id, as the outbox stores it.
        delivery: String,
        /// The part's index within its message, from 0.
        part: usize,
        /// The surface it was stored for (`plain`, `slack`, `discord`, `telegram`).
        surface: String,
    },
    /// The part's last allowed attempt failed (see
    /// [`PartRetry`](crate::store::PartRetry)): it is marked `failed` with the later parts of
    /// its message, never sent again.
    AttemptsExhausted {
        /// The delivery (message) id, as the outbox stores it.
        delivery: String,
        /// The part's index within its message, from 0.
        part: usize,
        /// The surface (`plain`, `slack`, `discord`, `telegram`).
        surface: String,
        /// How many attempts it had.
        attempts: u32,
    },
    /// The promise was stored without a readable address (before migration 0004): it is ended
    /// `cancelled` with nothing sent, never kept to a guessed destination, until
    /// `Store::readdress` gives it one.
    UnaddressedCommitment {
        /// Which promise.
        commitment: CommitmentId,
        /// The surface it was stored for.
        surface: String,
    },
}

/// What rendering did to a reply that was not simply sent whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RenderRecord {
    /// The reply was longer than the channel's part budget: a prefix was sent, ending in a
    /// visible marker.
    Shortened {
        /// What the budget kept and left out.
        cut: PartBudgetCut,
    },
    /// The reply could not be rendered (nothing visible, a limit too small); Layer C chose
    /// what the person saw instead.
    Failed {
        /// Why (its kind and sizes; never the reply's text).
        error: RenderError,
    },
    /// The surface refused the formatted text of a message (Telegram's 400 "Bad Request: can't
    /// parse entities"), and the same message went once more as the plain text a person reads
    /// (no markup, entities decoded): shown, not dropped.
    SentAsPlainText {
        /// The surface that refused the formatting.
        surface: Surface,
        /// The surface's id of the message that went as plain text.
        message: String,
        /// The delivery (message) id, when the part went as a message of its own (not inside a
        /// streamed message).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delivery: Option<String>,
        /// The part's index within its message, likewise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part: Option<usize>,
    },
}
