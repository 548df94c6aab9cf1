//! The boundary's and Layer C's rows: an error that reached the boundary, what the person saw
//! instead of an answer, a promise and how it ended, the agent's silence.

use serde::{Deserialize, Serialize};

use crate::egress::FailureClass;
use crate::reply::{CommitmentId, Mode};

/// An `EgressError` that reached the boundary (the cause itself goes only to the
/// error-tracking event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundaryErrorRecord {
    class: FailureClass,
    retryable: bool,
    attempt: u32,
}

impl BoundaryErrorRecord {
    pub(crate) fn new(class: FailureClass, retryable: bool, attempt: u32) -> Self {
        Self {
            class,
            retryable,
            attempt,
        }
    }

    /// Transport or semantic.
    pub fn class(&self) -> FailureClass {
        self.class
    }

    /// Whether a retry could succeed.
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// Attempts made before the error reached the boundary.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// What Layer C chose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DegradationRecord {
    mode: Mode,
    outcome: DegradationOutcome,
}

impl DegradationRecord {
    pub(crate) fn new(mode: Mode, outcome: DegradationOutcome) -> Self {
        Self { mode, outcome }
    }

    /// The turn's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// What the person saw.
    pub fn outcome(&self) -> &DegradationOutcome {
        &self.outcome
    }
}

/// What the person saw when the turn could not answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DegradationOutcome {
    /// A holding line, with a promise to follow up.
    Holding {
        /// The promise made.
        commitment: CommitmentId,
    },
    /// A handoff to a person or queue.
    Handoff {
        /// Who the conversation was handed to.
        to: String,
    },
    /// Nothing was sent.
    Silence {
        /// Whether the job retries on its next cycle.
        retry_next_cycle: bool,
    },
}

/// A promise to follow up, and its state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitmentRecord {
    id: CommitmentId,
    state: CommitmentState,
    follow_ups: u32,
    max_follow_ups: u32,
}

impl CommitmentRecord {
    pub(crate) fn new(
        id: CommitmentId,
        state: CommitmentState,
        follow_ups: u32,
        max_follow_ups: u32,
    ) -> Self {
        Self {
            id,
            state,
            follow_ups,
            max_follow_ups,
        }
    }

    /// Which promise.
    pub fn id(&self) -> CommitmentId {
        self.id
    }

    /// How it stands.
    pub fn state(&self) -> CommitmentState {
        self.state
    }

    /// Follow-up attempts made so far.
    pub fn follow_ups(&self) -> u32 {
        self.follow_ups
    }

    /// Follow-up attempts promised at most.
    pub fn max_follow_ups(&self) -> u32 {
        self.max_follow_ups
    }
}

/// How a commitment stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CommitmentState {
    /// Made, not yet kept.
    Pending,
    /// The real answer was delivered.
    Fulfilled,
    /// Follow-ups ran out; a handoff was delivered instead.
    HandedOff,
    /// The caller cancelled the follow-up.
    Cancelled,
}

impl CommitmentState {
    /// A stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Fulfilled => "fulfilled",
            Self::HandedOff => "handed_off",
            Self::Cancelled => "cancelled",
        }
    }
}

/// What the boundary did with an agent's silence tokens (`mesh_egress::silence`): the reply was
/// only a token, so nothing was sent, or tokens were cut from an answer before it was rendered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SilenceRecord {
    /// The reply was only this token: the agent chose to say nothing, and nothing was sent.
    Silent {
        /// The token (an application-declared word, never model prose).
        token: String,
    },
    /// Tokens were cut from an answer; the rest was sent.
    Removed {
        /// How many.
        count: usize,
    },
}
