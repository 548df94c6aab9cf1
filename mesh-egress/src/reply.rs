//! [`Reply`] and [`Commitment`]: what leaves the egress boundary, always safe to deliver, and
//! the promise a holding line makes. Leaf values: they import nothing but the other egress
//! values, so channels can deliver them and Layer C can make them without knowing each other.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::egress::{AgentMessage, Attribution};
pub use crate::mode::Mode;

/// What leaves an `#[egress_boundary]` handler, and what [`resolve`](crate::boundary::resolve) returns: always something
/// safe to deliver.
#[derive(Debug)]
#[must_use = "a reply does nothing until it is delivered"]
pub enum Reply {
    /// The real answer.
    Answer(AgentMessage),
    /// A warm holding line, and the promise to follow up.
    Holding {
        /// The holding line itself (an ordinary attributed message).
        message: AgentMessage,
        /// The promise it makes.
        commitment: Commitment,
    },
    /// The conversation was handed to a person or queue; no promise (a retry cannot help).
    Handoff {
        /// The handoff line.
        message: AgentMessage,
    },
    /// Nothing is sent (proactive failure; the job retries next cycle).
    Silence,
}

impl Reply {
    /// The message this reply would deliver, if any.
    pub fn message(&self) -> Option<&AgentMessage> {
        match self {
            Self::Answer(message) | Self::Holding { message, .. } | Self::Handoff { message } => {
                Some(message)
            }
            Self::Silence => None,
        }
    }

    /// The same reply with `edit` applied to its message (if it has one).
    pub(crate) fn map_message(self, edit: impl FnOnce(AgentMessage) -> AgentMessage) -> Self {
        match self {
            Self::Answer(message) => Self::Answer(edit(message)),
            Self::Holding {
                message,
                commitment,
            } => Self::Holding {
                message: edit(message),
                commitment,
            },
            Self::Handoff { message } => Self::Handoff {
                message: edit(message),
            },
            Self::Silence => Self::Silence,
        }
    }

    /// Whether this is the real answer.
    pub fn is_answer(&self) -> bool {
        matches!(self, Self::Answer(_))
    }

    /// A stable lowercase name: `answer`, `holding`, `handoff`, `silence`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Answer(_) => "answer",
            Self::Holding { .. } => "holding",
            Self::Handoff { .. } => "handoff",
            Self::Silence => "silence",
        }
    }
}

/// A recorded promise to follow up: who is owed an answer, when the first follow-up runs and
/// how many tries it gets.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a commitment is a promise to a person: hand it to a follow-up runner"]
pub struct Commitment {
    id: CommitmentId,
    attribution: Attribution,
    first_delay: Duration,
    attempts: u32,
}

impl Commitment {
    /// A new promise with a fresh, globally unique id. Only Layer C makes promises.
    pub(crate) fn new(attribution: Attribution, first_delay: Duration, attempts: u32) -> Self {
        Self {
            id: CommitmentId::fresh(),
            attribution,
            first_delay,
            attempts,
        }
    }

    /// The same promise, for the one keeper that keeps it past the turn (the id is kept: it
    /// is one promise, not a second).
    pub(crate) fn duplicate(&self) -> Self {
        Self {
            id: self.id,
            attribution: self.attribution.clone(),
            first_delay: self.first_delay,
            attempts: self.attempts,
        }
    }

    /// Which promise (as recorded on the ledger).
    pub fn id(&self) -> CommitmentId {
        self.id
    }

    /// Who is owed the answer.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// How long after the holding line the first follow-up runs.
    pub fn first_delay(&self) -> Duration {
        self.first_delay
    }

    /// How many follow-up tries were promised.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

/// Identifies one [`Commitment`]: opaque and globally unique (128 bits: the creation time in
/// milliseconds and 80 random bits), so promises made by different processes, or by one process
/// before and after a restart, never share an id. Serialised as a 33-character string
/// (`c` + 32 hex digits); it has no integer accessor and no public constructor.
///
/// ```
/// use mesh_egress::ledger::CommitmentId;
/// let id: CommitmentId = "c0000018c2a4f00000123456789abcdef".parse().unwrap();
/// assert_eq!(id.to_string(), "c0000018c2a4f00000123456789abcdef");
/// assert!("42".parse::<CommitmentId>().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct CommitmentId(u128);

impl CommitmentId {
    pub(crate) fn fresh() -> Self {
        Self(crate::id::unique_u128())
    }
}

impl fmt::Display for CommitmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{:032x}", self.0)
    }
}

impl fmt::Debug for CommitmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<CommitmentId> for String {
    fn from(id: CommitmentId) -> Self {
        id.to_string()
    }
}

/// A string that is not a [`CommitmentId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a commitment id is `c` followed by 32 hexadecimal digits")]
pub struct InvalidCommitmentId;

impl std::str::FromStr for CommitmentId {
    type Err = InvalidCommitmentId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s.strip_prefix('c').ok_or(InvalidCommitmentId)?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(InvalidCommitmentId);
        }
        u128::from_str_radix(hex, 16)
            .map(Self)
            .map_err(|_| InvalidCommitmentId)
    }
}

impl TryFrom<String> for CommitmentId {
    type Error = InvalidCommitmentId;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commitment_ids_are_unique_and_round_trip_through_json() {
        let ids: Vec<CommitmentId> = (0..1000).map(|_| CommitmentId::fresh()).collect();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        let json = serde_json::to_string(&ids[0]).unwrap();
        assert_eq!(json.len(), 35, "{json}");
        assert_eq!(serde_json::from_str::<CommitmentId>(&json).unwrap(), ids[0]);
        assert!(serde_json::from_str::<CommitmentId>("7").is_err());
    }
}
