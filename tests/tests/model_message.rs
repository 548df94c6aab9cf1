//! `Completion::into_message` end to end: a tool-only or empty completion reaches Layer C as a
//! semantic, retryable `EgressError` (a holding line interactively, silence proactively), never
//! an empty body that fails at delivery.

use mesh_egress::boundary::resolve;
use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
use mesh_egress::model::{Completion, ToolCall};
use mesh_egress::{Attribution, FailureClass, Turn};

fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "conv", "run"))
}

#[test]
fn a_tool_only_completion_becomes_a_holding_line_not_an_empty_message() {
    let turn = turn();
    let completion = Completion::tool_calls("m", vec![ToolCall::function("c1", "lookup", "{}")]);
    let result = completion.into_message(&turn);
    let error = result.as_ref().expect_err("no text");
    assert_eq!(error.class(), FailureClass::Semantic);
    assert!(error.retryable());
    let reply = resolve(Mode::Interactive, &DegradationPolicy::default(), result);
    assert!(matches!(reply, Reply::Holding { .. }), "{reply:?}");
}

#[test]
fn an_empty_completion_is_silence_for_a_proactive_turn() {
    let turn = turn();
    let reply = resolve(
        Mode::Proactive,
        &DegradationPolicy::default(),
        Completion::text("m", "   ").into_message(&turn),
    );
    assert!(matches!(reply, Reply::Silence), "{reply:?}");
}

#[test]
fn text_is_the_answer_and_carries_the_turns_ownership() {
    let turn = turn();
    let reply = resolve(
        Mode::Interactive,
        &DegradationPolicy::default(),
        Completion::text("m", "All green.").into_message(&turn),
    );
    match reply {
        Reply::Answer(message) => {
            assert_eq!(message.body().as_str(), "All green.");
            assert!(message.is_owned());
        }
        other => panic!("expected the answer, got {other:?}"),
    }
}
