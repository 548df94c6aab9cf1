//! The run ledger: what happened in a turn, reconstructable afterwards.
//!
//! Every layer records here — Layer A its [`RecoveryReport`], Layer C the degradation it chose
//! and the commitments it made, the gate its findings. No row ever holds a request body or
//! provider error text: the ledger is for operators reconstructing a turn, and the one place a
//! cause is written is the error-tracking event at the boundary.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::address::Surface;
use crate::egress::Attribution;

/// Where ledger rows go. Implement it to make the ledger durable; [`Ledger::in_memory`] keeps
/// them in memory.
pub trait LedgerStore: Send + Sync + 'static {
    /// Appends one row.
    fn record(&self, entry: LedgerEntry);

    /// Every row recorded so far, oldest first.
    fn entries(&self) -> Vec<LedgerEntry>;
}

/// A ledger that keeps rows in memory.
#[derive(Debug, Default)]
pub(crate) struct InMemoryLedger {
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
/// Every layer records on the turn's ledger; an operator reads the rows back (or a
/// [`LedgerStore`] writes them out as JSON lines):
///
/// ```
/// use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Turn};
/// use mesh_egress::degrade::Mode;
/// use mesh_egress::ledger::{DegradationOutcome, LedgerRecord};
///
/// #[egress_boundary(proactive)]
/// fn digest(turn: &Turn) -> Result<AgentMessage, EgressError> {
///     Err(EgressError::transport("503", turn.attribution().clone()))
/// }
///
/// let turn = Turn::new(Attribution::new("a", "c", "r"));
/// let _silence = digest(&turn);
/// let rows = turn.ledger().entries();
/// assert!(rows.iter().any(|row| matches!(
///     row.record(),
///     LedgerRecord::Degradation(d)
///         if d.mode() == Mode::Proactive
///             && matches!(d.outcome(), DegradationOutcome::Silence { retry_next_cycle: true })
/// )));
/// let json = serde_json::to_string(&rows[0]).unwrap();
/// assert!(json.contains("\"kind\":\"boundary_error\""));
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
    // Inlined so a caller's row is built in place, not moved into the entry once more.
    #[inline]
    pub fn record(&self, attribution: &Attribution, record: LedgerRecord) {
        self.store
            .record(LedgerEntry::new(attribution.clone(), record));
    }

    /// Appends a row attributed to `attribution`, which it takes (no copy made).
    #[cfg(feature = "ingress")]
    pub(crate) fn record_owned(&self, attribution: Attribution, record: LedgerRecord) {
        self.store.record(LedgerEntry::new(attribution, record));
    }

    /// Records that message `message` on `surface` went as plain text because the surface
    /// refused its formatting ([`RenderRecord::SentAsPlainText`]); `delivery` and `part` name
    /// the outbox part when it was a message of its own.
    pub(crate) fn sent_as_plain_text(
        &self,
        attribution: &Attribution,
        surface: Surface,
        message: &str,
        delivery: Option<String>,
        part: Option<usize>,
    ) {
        self.record(
            attribution,
            LedgerRecord::Render(RenderRecord::SentAsPlainText {
                surface,
                message: message.to_owned(),
                delivery,
                part,
            }),
        );
    }

    /// Every row so far, oldest first.
    pub fn entries(&self) -> Vec<LedgerEntry> {
        self.store.entries()
    }

    /// Every commitment and its latest state, in the order they were made.
    pub fn commitments(&self) -> Vec<(Attribution, CommitmentRecord)> {
        let mut latest: Vec<(Attribution, CommitmentRecord)> = Vec::new();
        for entry in self.entries() {
            let LedgerEntry {
                attribution,
                record,
            } = entry;
            if let LedgerRecord::Commitment(row) = record {
                match latest.iter_mut().find(|(_, r)| r.id() == row.id()) {
                    Some(slot) => slot.1 = row,
                    None => latest.push((attribution, row)),
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

/// One ledger row: who it is about and what happened. Serialised as one JSON object
/// (`{"attribution": {..}, "record": {"kind": .., ..}}`), so a sink can write JSON lines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    attribution: Attribution,
    record: LedgerRecord,
}

impl LedgerEntry {
    #[inline]
    pub(crate) fn new(attribution: Attribution, record: LedgerRecord) -> Self {
        Self {
            attribution,
            record,
        }
    }

    /// Which agent, conversation and run the row is about.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// What happened.
    pub fn record(&self) -> &LedgerRecord {
        &self.record
    }

    /// The record, owned.
    pub fn into_record(self) -> LedgerRecord {
        self.record
    }
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
    /// The boundary: a reply was shortened to its part budget, or could not be rendered for
    /// its channel (and went to Layer C).
    Render(RenderRecord),
    /// The durable outbox: a part it could not settle (see [`OutboxRecord`]).
    Outbox(OutboxRecord),
    /// The ingress classifier: what it decided about one inbound message (see
    /// [`IngressRecord`]).
    Ingress(IngressRecord),
    /// The boundary: the agent answered with one of its silence tokens (see [`SilenceRecord`]).
    Silence(SilenceRecord),
}

mod delivery;
mod gate;
mod ingress;
mod layer_c;
mod recovery;

pub use crate::reply::{CommitmentId, InvalidCommitmentId};
pub use delivery::{OutboxRecord, RenderRecord};
pub use gate::GateRecord;
pub use ingress::IngressRecord;
pub use layer_c::{
    BoundaryErrorRecord, CommitmentRecord, CommitmentState, DegradationOutcome, DegradationRecord,
    SilenceRecord,
};
#[cfg(feature = "model")]
pub(crate) use recovery::Attempts;
pub use recovery::{AttemptOutcome, AttemptRecord, JoinedBy, RecoveryReport, StreamReport};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::failure::FailureReason;
    use crate::ownership::StopReason;

    fn attempt(n: u32) -> AttemptRecord {
        AttemptRecord {
            route_index: 0,
            model: Arc::from("m"),
            attempt: n,
            outcome: if n == 3 {
                AttemptOutcome::Answered
            } else {
                AttemptOutcome::Failed(FailureReason::RateLimited)
            },
            retryable: true,
            duration: Duration::from_millis(u64::from(n)),
            wait: None,
        }
    }

    #[test]
    fn attempts_serialize_as_a_plain_list_whatever_their_count() {
        for n in 0..=3u32 {
            let attempts: Attempts = (1..=n).map(attempt).collect();
            let vec: Vec<AttemptRecord> = (1..=n).map(attempt).collect();
            assert_eq!(attempts.len(), vec.len());
            let json = serde_json::to_value(&attempts).expect("serialize");
            assert_eq!(json, serde_json::to_value(&vec).expect("serialize"));
            let back: Attempts = serde_json::from_value(json).expect("deserialize");
            assert_eq!(back, attempts);
            assert_eq!(back.into_vec(), vec);
        }
    }

    #[test]
    fn every_attempt_outcome_is_written_as_its_label_and_read_back() {
        use FailureReason as F;
        let failures = [
            F::ServerError,
            F::RateLimited,
            F::RequestTimeout,
            F::AttemptTimeout,
            F::FirstTokenTimeout,
            F::StreamIdleTimeout,
            F::Connection,
            F::EmptyCompletion,
            F::MalformedToolCall,
            F::InvalidResponse,
            F::InvalidRequest,
            F::Auth,
            F::ContextOverflow,
            F::QuotaExhausted,
            F::RequestTooLarge,
            F::ResponseTooLarge,
            F::UnknownModel,
            F::ClientError,
        ];
        let stops = [
            StopReason::Cancelled,
            StopReason::OwnershipLost,
            StopReason::DeadlineReached,
        ];
        let outcomes = [AttemptOutcome::Answered, AttemptOutcome::Unjoinable]
            .into_iter()
            .chain(failures.map(AttemptOutcome::Failed))
            .chain(stops.map(AttemptOutcome::Stopped));
        for outcome in outcomes {
            let json = serde_json::to_value(outcome).expect("serialize");
            assert_eq!(json, serde_json::Value::from(outcome.as_str()));
            assert_eq!(outcome.to_string(), outcome.as_str());
            let back: AttemptOutcome = serde_json::from_value(json).expect("deserialize");
            assert_eq!(back, outcome);
        }
        assert!(serde_json::from_str::<AttemptOutcome>(r#""""#).is_err());
        assert!(serde_json::from_str::<AttemptOutcome>("3").is_err());
    }

    #[test]
    fn pushed_attempts_keep_their_order() {
        let mut attempts = Attempts::new();
        assert!(attempts.is_empty());
        attempts.push(attempt(1));
        assert_eq!(attempts, Attempts::one(attempt(1)));
        attempts.push(attempt(2));
        attempts.push(attempt(3));
        let numbers: Vec<u32> = attempts.iter().map(|a| a.attempt).collect();
        assert_eq!(numbers, [1, 2, 3]);
        assert_eq!(attempts[2].outcome, AttemptOutcome::Answered);
        assert_eq!(
            format!("{attempts:?}"),
            format!("{:?}", attempts.into_vec())
        );
    }

    #[test]
    fn commitments_reports_the_latest_state_of_each_promise() {
        let ledger = Ledger::in_memory();
        let attr = Attribution::new("a", "c", "r");
        let ids = [CommitmentId::fresh(), CommitmentId::fresh()];
        for (id, state) in [
            (0, CommitmentState::Pending),
            (1, CommitmentState::Pending),
            (0, CommitmentState::Fulfilled),
        ] {
            ledger.record(
                &attr,
                LedgerRecord::Commitment(CommitmentRecord::new(ids[id], state, 0, 3)),
            );
        }
        let states: Vec<_> = ledger
            .commitments()
            .into_iter()
            .map(|(_, r)| (r.id(), r.state()))
            .collect();
        assert_eq!(
            states,
            vec![
                (ids[0], CommitmentState::Fulfilled),
                (ids[1], CommitmentState::Pending)
            ]
        );
    }
}
