//! Layer A's rows: a model call's attempts, the route that answered, a stream's delivery.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::failure::FailureReason;
use crate::ownership::StopReason;

/// Layer A's account of one model call: every attempt, and the route that answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// Every attempt, in order (read with [`attempts`](Self::attempts)).
    pub(crate) attempts: Attempts,
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

impl RecoveryReport {
    /// Every attempt, in order.
    pub fn attempts(&self) -> &[AttemptRecord] {
        &self.attempts
    }

    /// This report with `attempt` appended to its attempts.
    #[must_use]
    pub fn with_attempt(mut self, attempt: AttemptRecord) -> Self {
        self.attempts.push(attempt);
        self
    }
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
/// (a healthy call makes exactly one), and more on the heap. It reads as a slice and serializes
/// as a plain list.
#[derive(Clone, Default)]
pub(crate) struct Attempts(AttemptsRepr);

#[derive(Clone, Default)]
enum AttemptsRepr {
    #[default]
    None,
    One(AttemptRecord),
    Many(Vec<AttemptRecord>),
}

impl Attempts {
    /// No attempts.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Exactly `attempt`, without allocating.
    #[cfg_attr(not(feature = "model"), allow(dead_code))] // the Router's healthy row
    pub(crate) fn one(attempt: AttemptRecord) -> Self {
        Self(AttemptsRepr::One(attempt))
    }

    /// Appends `attempt`.
    pub(crate) fn push(&mut self, attempt: AttemptRecord) {
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
    pub(crate) fn as_slice(&self) -> &[AttemptRecord] {
        match &self.0 {
            AttemptsRepr::None => &[],
            AttemptsRepr::One(one) => std::slice::from_ref(one),
            AttemptsRepr::Many(all) => all,
        }
    }

    /// The attempts as a mutable slice.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [AttemptRecord] {
        match &mut self.0 {
            AttemptsRepr::None => &mut [],
            AttemptsRepr::One(one) => std::slice::from_mut(one),
            AttemptsRepr::Many(all) => all,
        }
    }

    /// The attempts as a `Vec`.
    pub(crate) fn into_vec(self) -> Vec<AttemptRecord> {
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
