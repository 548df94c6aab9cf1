//! The egress boundary: where a handler's `Result<AgentMessage, EgressError>` becomes a
//! [`Reply`] (the error recorded once, Layer C deciding what the person sees), and the glue the
//! [`Bot`](crate::Bot) drives from there to a channel.
//!
//! This is the only module that sees both the channels and Layer C; everything else points one
//! way (see `ARCHITECTURE.md`).
//!
//! Public: [`resolve`], the boundary without the macro (for a mode chosen at run time, or a
//! trait method whose signature cannot change). The rest is the front door's machinery,
//! crate-private so that there is one door (the `Bot`):
//!
//! - `resolve_in` (the turn-aware form `#[egress_boundary]` uses on a handler that takes a
//!   `&Turn`): a handler's result becomes a [`Reply`], its mode declared on the turn.
//! - `prepare`: a reply rendered for its channel first, so one that cannot be shown reaches
//!   Layer C instead of failing at delivery.
//! - `PromiseKeeper`: the seam a holding line's promise is handed through before the line goes.
//! - `stream` (feature `markdown`): a streamed turn delivered block by block, each block through
//!   the block check, failures after the first block handled without repeating a word (a
//!   mid-stream promise's follow-up delivers only what follows the prefix, `rest_after`).

mod deliver;
mod promise;
#[cfg(feature = "markdown")]
mod stream;
#[cfg(feature = "markdown")]
mod stream_rest;
#[cfg(feature = "markdown")]
mod stream_silence;

pub(crate) use deliver::record_delivered;
pub(crate) use deliver::{Ready, Shown, prepare};
pub(crate) use promise::{PromiseKeeper, Rerun, ToKeep};
#[cfg(feature = "markdown")]
pub(crate) use stream::{Blocks, StreamEnd, StreamPlan, StreamedTurnReceipt, stream};
#[cfg(feature = "markdown")]
pub(crate) use stream_rest::rest_after;

use crate::answer::{AnswerStream, StreamedReply};
use crate::degrade::{DegradationPolicy, Mode, choose};
use crate::egress::{AgentMessage, EgressError};
use crate::ledger::{BoundaryErrorRecord, Ledger, LedgerRecord, SilenceRecord};
use crate::reply::Reply;
use crate::silence::Silenced;
use crate::turn::Turn;

/// The boundary without the macro: an answer passes through (less the policy's
/// [silence tokens](DegradationPolicy::with_silence_tokens): an answer that is only one is
/// [`Reply::Silence`]); an [`EgressError`] is recorded
/// once (the error-tracking event, target `mesh_egress::egress`, the only event that carries a
/// cause) and replaced by what `mode` and `policy` say the person should see.
///
/// This form knows no turn: it records on the policy's ledger, if it has one
/// ([`DegradationPolicy::with_ledger`]). When a [`Turn`] is at hand, annotate the handler with
/// `#[egress_boundary]` and give it the `&Turn`: Layer C's rows then land on the turn's ledger
/// and the reply is tied to the turn's ownership (and the [`Bot`](crate::Bot) delivers it).
///
/// ```
/// use mesh_egress::{AgentMessage, Attribution, EgressError};
/// use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
/// use mesh_egress::boundary::resolve;
/// let attr = Attribution::new("helper", "conv-9", "run-1");
/// let policy = DegradationPolicy::default();
/// let failed = Err(EgressError::transport("503 from upstream", attr.clone()));
/// match resolve(Mode::Interactive, &policy, failed) {
///     Reply::Holding { message, commitment } => {
///         assert!(!message.body().as_str().contains("503"));
///         assert_eq!(commitment.attribution(), &attr);
///     }
///     other => panic!("expected a holding line, got {other:?}"),
/// }
/// ```
pub fn resolve(
    mode: Mode,
    policy: &DegradationPolicy,
    result: Result<AgentMessage, EgressError>,
) -> Reply {
    let reply = match result {
        Ok(message) => answer(policy, message, policy.ledger()),
        Err(error) => {
            track(&error, policy.ledger());
            choose(mode, policy, &error, policy.ledger())
        }
    };
    reply.map_message(|message| message.with_mode(mode))
}

/// An answer as the agent meant it, under `policy`'s silence tokens: [`Reply::Silence`] when it
/// is only a token, the answer without its tokens otherwise (recorded on `ledger`).
fn answer(policy: &DegradationPolicy, message: AgentMessage, ledger: Option<&Ledger>) -> Reply {
    match unsilenced(policy, message, ledger) {
        Some(message) => Reply::Answer(message),
        None => Reply::Silence,
    }
}

/// `message` with `policy`'s silence tokens cut out, or `None` when it is only a token (the
/// agent chose to say nothing); either is recorded on `ledger`. With no tokens declared this
/// does no work. The follow-up runner and the worker use it too, so a kept promise obeys the
/// same choice.
pub(crate) fn unsilenced(
    policy: &DegradationPolicy,
    message: AgentMessage,
    ledger: Option<&Ledger>,
) -> Option<AgentMessage> {
    let record = |record: SilenceRecord| {
        if let Some(ledger) = ledger {
            ledger.record(message.attribution(), LedgerRecord::Silence(record));
        }
    };
    match policy.silence_tokens().apply(message.body().as_str()) {
        Silenced::Untouched => Some(message),
        Silenced::Silence { token } => {
            record(SilenceRecord::Silent { token });
            tracing::info!(
                target: "mesh_egress::degrade",
                agent = message.attribution().agent(),
                conversation = message.attribution().conversation(),
                run = message.attribution().run(),
                "the agent answered with a silence token; nothing is sent"
            );
            None
        }
        Silenced::Removed { text, count } => {
            record(SilenceRecord::Removed { count });
            Some(message.with_body(text))
        }
    }
}

/// The turn-aware boundary: like [`resolve`], but what happens is recorded on the **turn's**
/// ledger (the boundary error, the degradation, the commitment), and every message in the reply
/// is tied to the turn's ownership, so no channel sends it once the conversation is no longer
/// owned. `#[egress_boundary]` uses this form when the handler takes a `&Turn`.
///
/// The policy only supplies configuration and its shared holding-line rotation: consecutive
/// holding lines in one conversation differ, whichever turn carries them.
///
/// On a follow-up turn (a promise's keeper re-running the promised handler,
/// [`Turn::is_follow_up`]) a failure is recorded the same way but makes no second promise: it is
/// left on the turn for the keeper, which retries on the promise's plan or hands off, and the
/// reply is [`Reply::Silence`].
///
/// Crate-private: users reach it through `#[egress_boundary]` on a handler that takes a
/// `&Turn`, and the [`Bot`](crate::Bot) through its one path.
pub(crate) fn resolve_in(
    turn: &Turn,
    mode: Mode,
    policy: &DegradationPolicy,
    result: Result<AgentMessage, EgressError>,
) -> Reply {
    let reply = match result {
        Ok(message) => answer(policy, message, Some(turn.ledger())),
        Err(error) => {
            track(&error, Some(turn.ledger()));
            match turn.stash_follow_up_failure(error) {
                Ok(()) => Reply::Silence,
                Err(error) => choose(mode, policy, &error, Some(turn.ledger())),
            }
        }
    };
    reply.map_message(|message| owned_by(turn, message).with_mode(mode))
}

/// The boundary for a handler that streams, without a turn: its stream and `mode`, or Layer C's
/// reply for a failure before the first word (see [`resolve`]).
pub(crate) fn resolve_stream(
    mode: Mode,
    policy: &DegradationPolicy,
    result: Result<AnswerStream, EgressError>,
) -> StreamedReply {
    streamed_or(mode, result, |error| resolve(mode, policy, Err(error)))
}

/// The turn-aware boundary for a handler that streams (see [`resolve_in`]).
pub(crate) fn resolve_stream_in(
    turn: &Turn,
    mode: Mode,
    policy: &DegradationPolicy,
    result: Result<AnswerStream, EgressError>,
) -> StreamedReply {
    streamed_or(mode, result, |error| {
        resolve_in(turn, mode, policy, Err(error))
    })
}

/// A handler's stream in `mode`, or the reply `degrade` makes of its failure.
fn streamed_or(
    mode: Mode,
    result: Result<AnswerStream, EgressError>,
    degrade: impl FnOnce(EgressError) -> Reply,
) -> StreamedReply {
    match result {
        Ok(stream) => StreamedReply::stream(stream, mode),
        Err(error) => StreamedReply::resolved(degrade(error)),
    }
}

/// `message`, tied to the turn's ownership unless it carries one already.
pub(crate) fn owned_by(turn: &Turn, message: AgentMessage) -> AgentMessage {
    match message.ownership() {
        Some(_) => message,
        None => message.with_ownership(turn.ownership().clone()),
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
            LedgerRecord::BoundaryError(BoundaryErrorRecord::new(
                error.class(),
                error.retryable(),
                error.attempt(),
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::Attribution;
    use crate::ledger::{CommitmentState, LedgerRecord};

    fn failure(turn: &Turn) -> Result<AgentMessage, EgressError> {
        Err(EgressError::transport(
            "CAUSE-e1",
            turn.attribution().clone(),
        ))
    }

    fn holding_line(reply: Reply) -> String {
        match reply {
            Reply::Holding { message, .. } => message.body().as_str().to_owned(),
            other => panic!("expected a holding line, got {other:?}"),
        }
    }

    #[test]
    fn a_turn_aware_failure_is_held_with_its_promise_on_the_turns_ledger_and_owned_by_the_turn() {
        let turn = Turn::new(Attribution::new("helper", "conv-9", "run-1"));
        let policy = DegradationPolicy::default();
        let failed = Err(EgressError::transport("503", turn.attribution().clone()));
        let reply = resolve_in(&turn, Mode::Interactive, &policy, failed);
        assert!(matches!(reply, Reply::Holding { .. }));
        assert!(!turn.ledger().commitments().is_empty());
        assert!(reply.message().unwrap().ownership().is_some());
    }

    #[test]
    fn consecutive_holding_lines_differ_across_turns_of_one_conversation() {
        let policy = DegradationPolicy::default();
        let lines: Vec<String> = (0..4)
            .map(|run| {
                let turn = Turn::new(Attribution::new("a", "conv-7", format!("run-{run}")));
                holding_line(resolve_in(
                    &turn,
                    Mode::Interactive,
                    &policy,
                    failure(&turn),
                ))
            })
            .collect();
        for pair in lines.windows(2) {
            assert_ne!(pair[0], pair[1]);
        }
    }

    #[test]
    fn attaching_a_ledger_to_the_policy_keeps_its_rotation() {
        let policy = DegradationPolicy::default();
        let turn = Turn::new(Attribution::new("a", "conv-8", "r"));
        let first = holding_line(resolve(Mode::Interactive, &policy, failure(&turn)));
        let with_ledger = policy.clone().with_ledger(Ledger::in_memory());
        let second = holding_line(resolve(Mode::Interactive, &with_ledger, failure(&turn)));
        assert_ne!(first, second);
    }

    #[test]
    fn layer_c_rows_land_on_the_turns_ledger() {
        let turn = Turn::new(Attribution::new("a", "conv-9", "r"));
        let policy = DegradationPolicy::default();
        let Reply::Holding { commitment, .. } =
            resolve_in(&turn, Mode::Interactive, &policy, failure(&turn))
        else {
            panic!("expected a holding line");
        };
        let rows = turn.ledger().entries();
        assert!(
            rows.iter()
                .any(|r| matches!(r.record(), LedgerRecord::BoundaryError(_)))
        );
        assert!(
            rows.iter()
                .any(|r| matches!(r.record(), LedgerRecord::Degradation(_)))
        );
        let promises = turn.ledger().commitments();
        assert_eq!(promises.len(), 1);
        assert_eq!(promises[0].1.id(), commitment.id());
        assert_eq!(promises[0].1.state(), CommitmentState::Pending);
    }

    #[test]
    fn a_silence_token_is_the_agents_choice_recorded_on_the_ledger_never_text() {
        use crate::ledger::SilenceRecord;
        use crate::silence::SilenceTokens;
        let policy = DegradationPolicy::default()
            .with_silence_tokens(SilenceTokens::new(["NO_REPLY"]).expect("a word"));
        let turn = Turn::new(Attribution::new("a", "c", "r"));
        let answer = |body: &str| Ok(turn.message(body));
        let quiet = resolve_in(&turn, Mode::Interactive, &policy, answer("NO_REPLY"));
        assert!(matches!(quiet, Reply::Silence));
        let cut = resolve_in(&turn, Mode::Interactive, &policy, answer("Sent. NO_REPLY"));
        let message = cut.message().expect("an answer");
        assert_eq!(message.body().as_str(), "Sent.");
        assert!(message.ownership().is_some(), "still the turn's");
        let rows: Vec<SilenceRecord> = turn
            .ledger()
            .entries()
            .into_iter()
            .filter_map(|e| match e.into_record() {
                LedgerRecord::Silence(record) => Some(record),
                _ => None,
            })
            .collect();
        assert_eq!(
            rows,
            [
                SilenceRecord::Silent {
                    token: "NO_REPLY".into()
                },
                SilenceRecord::Removed { count: 1 }
            ]
        );
    }

    #[test]
    fn a_follow_up_turn_leaves_its_failure_for_the_keeper_and_makes_no_second_promise() {
        let turn = Turn::new(Attribution::new("a", "conv-f", "r")).into_follow_up();
        let policy = DegradationPolicy::default();
        let reply = resolve_in(&turn, Mode::Interactive, &policy, failure(&turn));
        assert!(matches!(reply, Reply::Silence), "{reply:?}");
        assert!(turn.ledger().commitments().is_empty(), "no second promise");
        let rows = turn.ledger().entries();
        assert!(
            rows.iter()
                .any(|r| matches!(r.record(), LedgerRecord::BoundaryError(_))),
            "the failure is recorded once, as at the boundary"
        );
        let left = turn.take_follow_up_failure().expect("left for the keeper");
        assert!(left.retryable());
        assert!(turn.take_follow_up_failure().is_none());
        // A turn that is not a follow-up degrades as always.
        let plain = Turn::new(Attribution::new("a", "conv-f", "r2"));
        assert!(matches!(
            resolve_in(&plain, Mode::Interactive, &policy, failure(&plain)),
            Reply::Holding { .. }
        ));
    }

    #[test]
    fn the_boundary_stamps_the_mode_on_every_message_it_lets_out() {
        let turn = Turn::new(Attribution::new("a", "conv-m", "r"));
        let policy = DegradationPolicy::default();
        let held = resolve_in(&turn, Mode::Interactive, &policy, failure(&turn));
        assert_eq!(held.message().unwrap().mode(), Some(Mode::Interactive));
        let answer = resolve(Mode::Proactive, &policy, Ok(turn.message("hi")));
        assert_eq!(answer.message().unwrap().mode(), Some(Mode::Proactive));
        assert_eq!(turn.message("by hand").mode(), None);
    }

    #[test]
    fn every_message_of_a_turn_aware_reply_is_tied_to_the_turns_ownership() {
        let turn = Turn::new(Attribution::new("a", "c", "r"));
        let policy = DegradationPolicy::default();
        let answer = resolve_in(
            &turn,
            Mode::Interactive,
            &policy,
            Ok(AgentMessage::new("hi", turn.attribution().clone())),
        );
        let held = resolve_in(&turn, Mode::Interactive, &policy, failure(&turn));
        turn.ownership().revoke();
        assert!(!answer.message().unwrap().is_owned());
        assert!(!held.message().unwrap().is_owned());
    }
}
