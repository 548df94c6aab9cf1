//! Layer C: what a person sees when the turn truly cannot answer.
//!
//! Interactive turns get a warm holding line with a [`Commitment`] to follow up (or a handoff
//! when a retry cannot help); proactive turns stay silent and retry on their next cycle. Never,
//! in any mode, the cause.
//!
//! [`boundary::resolve`](crate::boundary::resolve) is the boundary without the macro: it records
//! the error once and returns the [`Reply`] to deliver.
//!
//! ```
//! use mesh_egress::{AgentMessage, Attribution, EgressError};
//! use mesh_egress::boundary::resolve;
//! use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
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

mod policies;
mod policy;

pub use policies::Policies;
pub use policy::{DegradationPolicy, FollowUp};

use crate::egress::{AgentMessage, EgressError};
use crate::ledger::{
    CommitmentRecord, CommitmentState, DegradationOutcome, DegradationRecord, Ledger, LedgerRecord,
};
pub use crate::reply::{Commitment, Mode, Reply, ReplyKind};

/// What the person sees instead of `error`: Layer C's decision for `mode` under `policy`,
/// recorded on `ledger` (the degradation and any commitment). Never the cause.
pub(crate) fn choose(
    mode: Mode,
    policy: &DegradationPolicy,
    error: &EgressError,
    ledger: Option<&Ledger>,
) -> Reply {
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
            let commitment = Commitment::new(
                attribution.clone(),
                follow_up.first_delay,
                follow_up.attempts,
            );
            if let Some(ledger) = ledger {
                ledger.record(
                    &attribution,
                    LedgerRecord::Commitment(CommitmentRecord::new(
                        commitment.id(),
                        CommitmentState::Pending,
                        0,
                        commitment.attempts(),
                    )),
                );
            }
            let outcome = DegradationOutcome::Holding {
                commitment: commitment.id(),
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
        reply = reply.kind().as_str(),
        "degraded reply chosen"
    );
    if let Some(ledger) = ledger {
        ledger.record(
            &attribution,
            LedgerRecord::Degradation(DegradationRecord::new(mode, outcome)),
        );
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::resolve;
    use crate::egress::Attribution;

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
            r.record(),
            LedgerRecord::Degradation(d) if matches!(
                d.outcome(),
                DegradationOutcome::Silence { retry_next_cycle: true }
            ) && d.mode() == Mode::Proactive
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
        assert_eq!(promises[0].1.id(), commitment.id());
        assert_eq!(promises[0].1.state(), CommitmentState::Pending);
    }
}
