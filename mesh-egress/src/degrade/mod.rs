//! Layer C: what a person sees when the turn truly cannot answer.
//!
//! Interactive turns get a warm holding line with a [`Commitment`] to follow up (or a handoff
//! when a retry cannot help); proactive turns stay silent and retry on their next cycle. Never,
//! in any mode, the cause.
//!
//! [`resolve`] is the boundary without the macro: it records the error once and returns the
//! [`Reply`] to deliver.
//!
//! ```
//! use mesh_egress::{AgentMessage, Attribution, EgressError};
//! use mesh_egress::degrade::{resolve, DegradationPolicy, Mode, Reply};
//! let attr = Attribution::new("helper", "conv-9", "run-1");
//! let policy = DegradationPolicy::default();
//! let failed = Err(EgressError::transport("503 from upstream", attr.clone()));
//! match resolve(Mode::Interactive, &policy, failed) {
//!     Reply::Holding { message, commitment } => {
//!         assert!(!message.body().as_str().contains("503"));
//!         assert_eq!(commitment.attribution(), &attr);
//!     }
//!     other => panic!("expected a holding line, got {other:?}"),
//! }
//! assert!(matches!(
//!     resolve(Mode::Proactive, &policy, Err(EgressError::transport("x", attr))),
//!     Reply::Silence
//! ));
//! ```

mod follow_up;
mod policy;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use follow_up::{FollowUpOutcome, FollowUpRunner};
pub use policy::{DegradationPolicy, FollowUp};

use crate::egress::{AgentMessage, Attribution, EgressError};
use crate::ledger::{
    BoundaryErrorRecord, CommitmentId, CommitmentRecord, CommitmentState, DegradationOutcome,
    DegradationRecord, Ledger, LedgerRecord,
};

/// The shape of the conversation, which decides what a failure looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A person is waiting on a direct reply.
    Interactive,
    /// Nobody asked: a digest, a heads-up, a background result.
    Proactive,
}

impl Mode {
    /// `interactive` or `proactive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Proactive => "proactive",
        }
    }
}

/// What leaves an `#[egress_boundary]` handler, and what [`resolve`] returns: always something
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

fn next_commitment_id() -> CommitmentId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    CommitmentId(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The boundary without the macro: an answer passes through; an [`EgressError`] is recorded
/// once (the error-tracking event, target `mesh_egress::egress`, the only event that carries a
/// cause) and replaced by what `mode` and `policy` say the person should see.
pub fn resolve(
    mode: Mode,
    policy: &DegradationPolicy,
    result: Result<AgentMessage, EgressError>,
) -> Reply {
    match result {
        Ok(message) => Reply::Answer(message),
        Err(error) => {
            track(&error, policy.ledger());
            degrade(mode, policy, &error)
        }
    }
}

/// The error-tracking event: the one place a cause is written.
pub(crate) fn track(error: &EgressError, ledger: Option<&Ledger>) {
    let attr = error.attribution();
    tracing::error!(
        target: "mesh_egress::egress",
        agent = attr.agent(),
        conversation = attr.conversation(),
        run = attr.run(),
        class = error.class().as_str(),
        retryable = error.retryable(),
        attempt = error.attempt(),
        cause = %error.internal_cause(),
        "egress error reached the boundary"
    );
    if let Some(ledger) = ledger {
        ledger.record(
            attr,
            LedgerRecord::BoundaryError(BoundaryErrorRecord {
                class: error.class(),
                retryable: error.retryable(),
                attempt: error.attempt(),
            }),
        );
    }
}

fn degrade(mode: Mode, policy: &DegradationPolicy, error: &EgressError) -> Reply {
    let attribution = error.attribution().clone();
    let (reply, outcome) = match mode {
        Mode::Proactive => (
            Reply::Silence,
            DegradationOutcome::Silence {
                retry_next_cycle: true,
            },
        ),
        Mode::Interactive if error.retryable() && !policy.always_hands_off() => {
            let line = policy
                .next_holding_line(attribution.conversation())
                .to_owned();
            let follow_up = policy.follow_up();
            let commitment = Commitment {
                id: next_commitment_id(),
                attribution: attribution.clone(),
                first_delay: follow_up.first_delay,
                attempts: follow_up.attempts,
            };
            if let Some(ledger) = policy.ledger() {
                ledger.record(
                    &attribution,
                    LedgerRecord::Commitment(CommitmentRecord {
                        id: commitment.id,
                        state: CommitmentState::Pending,
                        follow_ups: 0,
                        max_follow_ups: commitment.attempts,
                    }),
                );
            }
            let outcome = DegradationOutcome::Holding {
                commitment: commitment.id,
            };
            (
                Reply::Holding {
                    message: AgentMessage::new(line, attribution.clone()),
                    commitment,
                },
                outcome,
            )
        }
        Mode::Interactive => (
            Reply::Handoff {
                message: AgentMessage::new(policy.handoff_line(), attribution.clone()),
            },
            DegradationOutcome::Handoff {
                to: policy.handoff_to().to_owned(),
            },
        ),
    };
    tracing::info!(
        target: "mesh_egress::degrade",
        agent = attribution.agent(),
        conversation = attribution.conversation(),
        run = attribution.run(),
        mode = mode.as_str(),
        reply = reply.kind(),
        "degraded reply chosen"
    );
    if let Some(ledger) = policy.ledger() {
        ledger.record(
            &attribution,
            LedgerRecord::Degradation(DegradationRecord::new(mode.as_str(), outcome)),
        );
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(conv: &str) -> Attribution {
        Attribution::new("agent", conv, "run")
    }

    const MARKER: &str = "CAUSE-MARKER-91c2";

    fn failure(conv: &str) -> Result<AgentMessage, EgressError> {
        Err(EgressError::transport(MARKER, attr(conv)))
    }

    #[test]
    fn an_answer_passes_through_untouched() {
        let msg = AgentMessage::new("42", attr("c"));
        let reply = resolve(
            Mode::Interactive,
            &DegradationPolicy::default(),
            Ok(msg.clone()),
        );
        assert!(matches!(reply, Reply::Answer(m) if m == msg));
    }

    #[test]
    fn consecutive_holding_lines_in_one_conversation_differ() {
        let policy = DegradationPolicy::default();
        let lines: Vec<String> = (0..4)
            .map(
                |_| match resolve(Mode::Interactive, &policy, failure("c1")) {
                    Reply::Holding { message, .. } => message.body().as_str().to_owned(),
                    other => panic!("{other:?}"),
                },
            )
            .collect();
        for pair in lines.windows(2) {
            assert_ne!(pair[0], pair[1]);
        }
        assert!(lines.iter().all(|l| !l.contains(MARKER)));
    }

    #[test]
    fn a_terminal_error_hands_off_without_a_promise() {
        let policy = DegradationPolicy::default().with_handoff("Dana", "Passing you to {to}.");
        let err = EgressError::transport(MARKER, attr("c")).with_retryable(false);
        match resolve(Mode::Interactive, &policy, Err(err)) {
            Reply::Handoff { message } => {
                assert_eq!(message.body().as_str(), "Passing you to Dana.")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn proactive_failures_are_silent_and_recorded() {
        let ledger = Ledger::in_memory();
        let policy = DegradationPolicy::default().with_ledger(ledger.clone());
        assert!(matches!(
            resolve(Mode::Proactive, &policy, failure("c")),
            Reply::Silence
        ));
        let rows = ledger.entries();
        assert!(rows.iter().any(|r| matches!(
            &r.record,
            LedgerRecord::Degradation(DegradationRecord {
                outcome: DegradationOutcome::Silence {
                    retry_next_cycle: true
                },
                ..
            })
        )));
        let dump = format!("{rows:?}");
        assert!(!dump.contains(MARKER), "{dump}");
    }

    #[test]
    fn holding_lines_record_a_pending_commitment() {
        let ledger = Ledger::in_memory();
        let policy = DegradationPolicy::default().with_ledger(ledger.clone());
        let Reply::Holding { commitment, .. } = resolve(Mode::Interactive, &policy, failure("c"))
        else {
            panic!("expected holding");
        };
        let promises = ledger.commitments();
        assert_eq!(promises.len(), 1);
        assert_eq!(promises[0].1.id, commitment.id());
        assert_eq!(promises[0].1.state, CommitmentState::Pending);
    }
}
