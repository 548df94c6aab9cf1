//! The run ledger: what happened in a turn, reconstructable afterwards.
//!
//! Every layer records here — Layer A its [`RecoveryReport`], Layer C the degradation it chose
//! and the commitments it made, the gate its findings. No row ever holds a request body or
//! provider error text: the ledger is for operators reconstructing a turn, and the one place a
//! cause is written is the error-tracking event at the boundary.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::egress::{Attribution, FailureClass};

/// Where ledger rows go. Implement it to make the ledger durable; [`InMemoryLedger`] is the
/// default.
pub trait LedgerStore: Send + Sync + 'static {
    /// Appends one row.
    fn record(&self, entry: LedgerEntry);

    /// Every row recorded so far, oldest first.
    fn entries(&self) -> Vec<LedgerEntry>;
}

/// A ledger that keeps rows in memory.
#[derive(Default)]
pub struct InMemoryLedger {
    rows: Mutex<Vec<LedgerEntry>>,
}

impl LedgerStore for InMemoryLedger {
    fn record(&self, entry: LedgerEntry) {
        // A panic elsewhere while the lock was held cannot corrupt an append-only Vec.
        self.rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }

    fn entries(&self) -> Vec<LedgerEntry> {
        self.rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A cheap, clonable handle to a [`LedgerStore`].
///
/// ```
/// use mesh_egress::Attribution;
/// use mesh_egress::ledger::{DegradationOutcome, DegradationRecord, Ledger, LedgerRecord};
/// let ledger = Ledger::in_memory();
/// ledger.record(
///     &Attribution::new("a", "c", "r"),
///     LedgerRecord::Degradation(DegradationRecord::new("proactive", DegradationOutcome::Silence { retry_next_cycle: true })),
/// );
/// assert_eq!(ledger.entries().len(), 1);
/// ```
#[derive(Clone)]
pub struct Ledger {
    store: Arc<dyn LedgerStore>,
}

impl Ledger {
    /// A fresh in-memory ledger.
    pub fn in_memory() -> Self {
        Self::new(InMemoryLedger::default())
    }

    /// A ledger writing to `store`.
    pub fn new(store: impl LedgerStore) -> Self {
        Self {
            store: Arc::new(store),
        }
    }

    /// A ledger writing to a shared `store`.
    pub fn from_arc(store: Arc<dyn LedgerStore>) -> Self {
        Self { store }
    }

    /// Appends a row attributed to `attribution`.
    pub fn record(&self, attribution: &Attribution, record: LedgerRecord) {
        self.store.record(LedgerEntry {
            attribution: attribution.clone(),
            record,
        });
    }

    /// Every row so far, oldest first.
    pub fn entries(&self) -> Vec<LedgerEntry> {
        self.store.entries()
    }

    /// Every commitment and its latest state, in the order they were made.
    pub fn commitments(&self) -> Vec<(Attribution, CommitmentRecord)> {
        let mut latest: Vec<(Attribution, CommitmentRecord)> = Vec::new();
        for entry in self.entries() {
            if let LedgerRecord::Commitment(row) = entry.record {
                match latest.iter_mut().find(|(_, r)| r.id == row.id) {
                    Some(slot) => slot.1 = row,
                    None => latest.push((entry.attribution, row)),
                }
            }
        }
        latest
    }
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger").finish_non_exhaustive()
    }
}

/// One ledger row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Which agent, conversation and run the row is about.
    pub attribution: Attribution,
    /// What happened.
    pub record: LedgerRecord,
}

/// What a ledger row records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LedgerRecord {
    /// Layer A: every attempt of a model call and which route answered.
    Recovery(RecoveryReport),
    /// The boundary: an `EgressError` reached it (class and retryability only, never the cause).
    BoundaryError(BoundaryErrorRecord),
    /// Layer C: what the person saw instead of an answer.
    Degradation(DegradationRecord),
    /// Layer C: a promise to follow up, and how it ended.
    Commitment(CommitmentRecord),
    /// The quality gate: a finding and the verdict on it.
    Gate(GateRecord),
}

/// Layer A's account of one model call: every attempt, and the route that answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRecord>,
    /// The index of the route that answered (0 = primary), if one did.
    pub answered_by: Option<usize>,
    /// The model that answered, if one did.
    pub answered_model: Option<Arc<str>>,
    /// Why recovery ended without an answer, if it did (e.g. `retries_exhausted`, `terminal`,
    /// `deadline_reached`, `cancelled`, `ownership_lost`).
    pub gave_up: Option<String>,
}

/// One attempt of a model call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Route index (0 = primary).
    pub route_index: usize,
    /// The model asked.
    pub model: Arc<str>,
    /// Attempt number on this route, from 1.
    pub attempt: u32,
    /// How it ended: `ok`, or the failure's classification (e.g. `rate_limited`,
    /// `server_error`, `attempt_timeout`, `auth`), never provider text.
    pub outcome: Cow<'static, str>,
    /// Whether the failure was retryable (`true` for `ok`).
    pub retryable: bool,
    /// How long the attempt took.
    #[serde(with = "millis")]
    pub duration: Duration,
    /// The wait before the next attempt, if one followed on the same route.
    #[serde(with = "millis_opt")]
    pub wait: Option<Duration>,
}

/// An `EgressError` that reached the boundary (the cause itself goes only to the
/// error-tracking event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundaryErrorRecord {
    /// Transport or semantic.
    pub class: FailureClass,
    /// Whether a retry could succeed.
    pub retryable: bool,
    /// Attempts made before the error reached the boundary.
    pub attempt: u32,
}

/// What Layer C chose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DegradationRecord {
    /// `interactive` or `proactive`.
    pub mode: String,
    /// What the person saw.
    pub outcome: DegradationOutcome,
}

impl DegradationRecord {
    /// A record of `outcome` in `mode`.
    pub fn new(mode: impl Into<String>, outcome: DegradationOutcome) -> Self {
        Self {
            mode: mode.into(),
            outcome,
        }
    }
}

/// What the person saw when the turn could not answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
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

/// Identifies one [`Commitment`](crate::degrade::Commitment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommitmentId(pub u64);

impl fmt::Display for CommitmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// A promise to follow up, and its state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitmentRecord {
    /// Which promise.
    pub id: CommitmentId,
    /// How it stands.
    pub state: CommitmentState,
    /// Follow-up attempts made so far.
    pub follow_ups: u32,
    /// Follow-up attempts promised at most.
    pub max_follow_ups: u32,
}

/// How a commitment stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// A quality-gate finding and the verdict on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateRecord {
    /// The heuristic rule that fired.
    pub rule: String,
    /// `high` or `low`.
    pub confidence: String,
    /// What the gate did: `sent`, `sent_flagged`, `sanitised`, `blocked`, ...
    pub verdict: String,
    /// Whether the message was flagged for offline review.
    pub review: bool,
    /// How the judge's part ended (`allow`, `block`, `timeout`, `error`, `budget_exhausted`,
    /// `turn_stopped`, `no_judge`), if it was asked.
    #[serde(default)]
    pub judge: Option<String>,
    /// The byte range of the finding in the candidate (never its text).
    #[serde(default)]
    pub span: Option<(usize, usize)>,
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

mod millis_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(d).map(|ms| ms.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commitments_reports_the_latest_state_of_each_promise() {
        let ledger = Ledger::in_memory();
        let attr = Attribution::new("a", "c", "r");
        for (id, state) in [
            (1, CommitmentState::Pending),
            (2, CommitmentState::Pending),
            (1, CommitmentState::Fulfilled),
        ] {
            ledger.record(
                &attr,
                LedgerRecord::Commitment(CommitmentRecord {
                    id: CommitmentId(id),
                    state,
                    follow_ups: 0,
                    max_follow_ups: 3,
                }),
            );
        }
        let states: Vec<_> = ledger
            .commitments()
            .into_iter()
            .map(|(_, r)| (r.id.0, r.state))
            .collect();
        assert_eq!(
            states,
            vec![
                (1, CommitmentState::Fulfilled),
                (2, CommitmentState::Pending)
            ]
        );
    }
}
