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

use crate::address::Surface;
use crate::egress::{Attribution, FailureClass};
use crate::engagement::Engagement;
use crate::failure::FailureReason;
use crate::ownership::StopReason;
use crate::render::{PartBudgetCut, RenderError};
use crate::reply::Mode;

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
                match latest.iter_mut().find(|(_, r)| r.id == row.id) {
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

/// What the ingress classifier decided about one inbound message, and why: the rule, its
/// confidence, and whether the judge was asked and what it answered. Never the message's text;
/// the row's attribution names the conversation (its address) and the message id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressRecord {
    /// The surface the message came from.
    pub surface: Surface,
    /// The decision.
    pub engagement: Engagement,
}

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

/// Layer A's account of one model call: every attempt, and the route that answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// Every attempt, in order.
    pub attempts: Attempts,
    /// The index of the route that answered (0 = primary), if one did.
    pub answered_by: Option<usize>,
    /// The model that answered, if one did.
    pub answered_model: Option<Arc<str>>,
    /// Why recovery ended without an answer, if it did (e.g. `retries_exhausted`, `terminal`,
    /// `deadline_reached`, `cancelled`, `ownership_lost`).
    pub gave_up: Option<String>,
    /// For a streamed call: how much reached the person, where and why the stream failed
    /// after that, and what answered the rest. Absent for a call that was not streamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamReport>,
}

/// Layer A's account of a streamed call's delivery (see [`RecoveryReport::stream`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Bytes of the answer the consumer reported delivered when the stream ended.
    pub delivered_bytes: usize,
    /// The route whose stream failed after something was delivered, if one did.
    #[serde(default)]
    pub failed_route: Option<usize>,
    /// Why it failed, as Layer A classified it (stored as its label, e.g.
    /// `stream_idle_timeout`).
    #[serde(default)]
    pub failure: Option<FailureReason>,
    /// Bytes delivered when it failed.
    #[serde(default)]
    pub failed_after_bytes: Option<usize>,
    /// The route that answered the rest, if one did.
    #[serde(default)]
    pub rest_answered_by: Option<usize>,
    /// How the rest was joined to what was delivered.
    #[serde(default)]
    pub joined_by: Option<JoinedBy>,
}

/// How the rest of a failed stream was joined to what was delivered (see
/// [`StreamReport::joined_by`]); serialized as [`as_str`](Self::as_str)'s label, and a label
/// it does not know is an error when a row is read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JoinedBy {
    /// The next route was given the delivered text as the assistant's prefix.
    Prefill,
    /// The next route was asked the original request again; its answer joined after what
    /// was delivered.
    Afresh,
}

impl JoinedBy {
    /// The label the ledger stores: `prefill` or `afresh`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prefill => "prefill",
            Self::Afresh => "afresh",
        }
    }
}

#[cfg(test)]
mod stream_report_tests {
    use super::*;

    /// A row as the ledger stored it when both fields were strings.
    const STORED: &str = r#"{"delivered_bytes":10,"failed_route":0,"failure":"stream_idle_timeout","failed_after_bytes":10,"rest_answered_by":1,"joined_by":"afresh"}"#;

    #[test]
    fn a_stored_stream_report_reads_back_typed_and_writes_the_same_names() {
        let report: StreamReport = serde_json::from_str(STORED).unwrap();
        assert_eq!(report.failure, Some(FailureReason::StreamIdleTimeout));
        assert_eq!(report.joined_by, Some(JoinedBy::Afresh));
        assert_eq!(serde_json::to_string(&report).unwrap(), STORED);
        for joined in [JoinedBy::Prefill, JoinedBy::Afresh] {
            let label = serde_json::to_value(joined).unwrap();
            assert_eq!(label, joined.as_str());
        }
    }

    #[test]
    fn a_healthy_streams_report_has_neither() {
        let report: StreamReport = serde_json::from_str(r#"{"delivered_bytes":3}"#).unwrap();
        assert_eq!(
            report,
            StreamReport {
                delivered_bytes: 3,
                ..StreamReport::default()
            }
        );
    }

    #[test]
    fn an_unknown_name_is_an_error_that_names_it() {
        for (row, name) in [
            (STORED.replace("afresh", "sideways"), "sideways"),
            (
                STORED.replace("stream_idle_timeout", "gremlins"),
                "gremlins",
            ),
        ] {
            let error = serde_json::from_str::<StreamReport>(&row).unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
        }
    }
}

/// Every attempt of a model call, in order: a list that holds one attempt without allocating
/// (a healthy call makes exactly one), and more on the heap.
///
/// It reads as a slice (`len`, indexing, `iter`) and serializes as a plain list.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use mesh_egress::ledger::{AttemptOutcome, AttemptRecord, Attempts};
/// let ok = AttemptRecord {
///     route_index: 0,
///     model: Arc::from("m"),
///     attempt: 1,
///     outcome: AttemptOutcome::Answered,
///     retryable: true,
///     duration: Duration::ZERO,
///     wait: None,
/// };
/// let mut attempts = Attempts::one(ok.clone());
/// attempts.push(ok.clone());
/// assert_eq!(attempts.len(), 2);
/// assert_eq!(attempts[1], ok);
/// assert_eq!(attempts, Attempts::from(vec![ok.clone(), ok]));
/// ```
#[derive(Clone, Default)]
pub struct Attempts(AttemptsRepr);

#[derive(Clone, Default)]
enum AttemptsRepr {
    #[default]
    None,
    One(AttemptRecord),
    Many(Vec<AttemptRecord>),
}

impl Attempts {
    /// No attempts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Exactly `attempt`, without allocating.
    pub fn one(attempt: AttemptRecord) -> Self {
        Self(AttemptsRepr::One(attempt))
    }

    /// Appends `attempt`.
    pub fn push(&mut self, attempt: AttemptRecord) {
        self.0 = match std::mem::take(&mut self.0) {
            AttemptsRepr::None => AttemptsRepr::One(attempt),
            AttemptsRepr::One(first) => AttemptsRepr::Many(vec![first, attempt]),
            AttemptsRepr::Many(mut all) => {
                all.push(attempt);
                AttemptsRepr::Many(all)
            }
        };
    }

    /// The attempts as a slice.
    pub fn as_slice(&self) -> &[AttemptRecord] {
        match &self.0 {
            AttemptsRepr::None => &[],
            AttemptsRepr::One(one) => std::slice::from_ref(one),
            AttemptsRepr::Many(all) => all,
        }
    }

    /// The attempts as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [AttemptRecord] {
        match &mut self.0 {
            AttemptsRepr::None => &mut [],
            AttemptsRepr::One(one) => std::slice::from_mut(one),
            AttemptsRepr::Many(all) => all,
        }
    }

    /// The attempts as a `Vec`.
    pub fn into_vec(self) -> Vec<AttemptRecord> {
        match self.0 {
            AttemptsRepr::None => Vec::new(),
            AttemptsRepr::One(one) => vec![one],
            AttemptsRepr::Many(all) => all,
        }
    }
}

impl std::ops::Deref for Attempts {
    type Target = [AttemptRecord];

    fn deref(&self) -> &[AttemptRecord] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for Attempts {
    fn deref_mut(&mut self) -> &mut [AttemptRecord] {
        self.as_mut_slice()
    }
}

impl PartialEq for Attempts {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl From<Vec<AttemptRecord>> for Attempts {
    fn from(all: Vec<AttemptRecord>) -> Self {
        Self(AttemptsRepr::Many(all))
    }
}

impl FromIterator<AttemptRecord> for Attempts {
    fn from_iter<I: IntoIterator<Item = AttemptRecord>>(iter: I) -> Self {
        let mut attempts = Self::new();
        for attempt in iter {
            attempts.push(attempt);
        }
        attempts
    }
}

impl IntoIterator for Attempts {
    type Item = AttemptRecord;
    type IntoIter = std::vec::IntoIter<AttemptRecord>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a> IntoIterator for &'a Attempts {
    type Item = &'a AttemptRecord;
    type IntoIter = std::slice::Iter<'a, AttemptRecord>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl Serialize for Attempts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.as_slice())
    }
}

impl<'de> Deserialize<'de> for Attempts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<AttemptRecord>::deserialize(deserializer).map(Self::from)
    }
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
    /// How it ended; written as `ok`, the failure's classification (e.g. `rate_limited`,
    /// `server_error`, `attempt_timeout`, `auth`) or the turn's stop reason, never provider
    /// text.
    pub outcome: AttemptOutcome,
    /// Whether the failure was retryable (`true` for `ok`).
    pub retryable: bool,
    /// How long the attempt took.
    #[serde(with = "millis")]
    pub duration: Duration,
    /// The wait before the next attempt, if one followed on the same route.
    #[serde(with = "millis_opt")]
    pub wait: Option<Duration>,
}

/// How one attempt of a model call ended (see [`AttemptRecord::outcome`]). Written, and shown
/// by `Display`, as one snake_case label: `ok`, a [`FailureReason`] label, a [`StopReason`]
/// label, or `stream_unjoinable`.
///
/// ```
/// use mesh_egress::ledger::AttemptOutcome;
/// use mesh_egress::StopReason;
/// # #[cfg(feature = "model")] {
/// use mesh_egress::model::FailureReason;
/// let limited = AttemptOutcome::Failed(FailureReason::RateLimited);
/// assert_eq!(limited.to_string(), "rate_limited");
/// assert_eq!(serde_json::to_string(&limited).unwrap(), r#""rate_limited""#);
/// # }
/// assert_eq!(AttemptOutcome::Answered.to_string(), "ok");
/// assert_eq!(AttemptOutcome::Stopped(StopReason::Cancelled).as_str(), "cancelled");
/// let back: AttemptOutcome = serde_json::from_str(r#""ok""#).unwrap();
/// assert_eq!(back, AttemptOutcome::Answered);
/// assert!(serde_json::from_str::<AttemptOutcome>(r#""no_such_outcome""#).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// The attempt answered (`ok`).
    Answered,
    /// The attempt failed, classified as this.
    Failed(FailureReason),
    /// The turn stopped the attempt (cancelled, ownership lost, deadline reached).
    Stopped(StopReason),
    /// A stream's continuation could not be joined to what was already delivered
    /// (`stream_unjoinable`).
    Unjoinable,
}

impl AttemptOutcome {
    /// The outcome's stable snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "ok",
            Self::Failed(reason) => reason.as_str(),
            Self::Stopped(reason) => reason.as_str(),
            Self::Unjoinable => "stream_unjoinable",
        }
    }

    /// The outcome a label names, if one does.
    fn from_label(label: &str) -> Option<Self> {
        use serde::de::IntoDeserializer as _;
        use serde::de::value::{Error, StrDeserializer};
        let de = || -> StrDeserializer<'_, Error> { label.into_deserializer() };
        match label {
            "ok" => Some(Self::Answered),
            "stream_unjoinable" => Some(Self::Unjoinable),
            _ => StopReason::deserialize(de())
                .map(Self::Stopped)
                .or_else(|_| FailureReason::deserialize(de()).map(Self::Failed))
                .ok(),
        }
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AttemptOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AttemptOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let label = Cow::<'de, str>::deserialize(deserializer)?;
        Self::from_label(&label).ok_or_else(|| {
            serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&label),
                &"an attempt outcome label (`ok`, a failure reason or a stop reason)",
            )
        })
    }
}

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

pub use crate::reply::{CommitmentId, InvalidCommitmentId};

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

mod gate;
pub use gate::GateRecord;

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
                LedgerRecord::Commitment(CommitmentRecord {
                    id: ids[id],
                    state,
                    follow_ups: 0,
                    max_follow_ups: 3,
                }),
            );
        }
        let states: Vec<_> = ledger
            .commitments()
            .into_iter()
            .map(|(_, r)| (r.id, r.state()))
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
