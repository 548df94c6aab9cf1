//! The gate's tool rules: tool-call markup and tool-trace lines anywhere in a candidate are
//! cut when what is left answers on its own, and go to Layer C when it does not; in a streamed
//! block, markup stops the stream while a trace line is cut and the stream goes on; a user who
//! asked about tool calling is shown it.
#![cfg(all(feature = "gate", feature = "markdown"))]

use mesh_egress::block::Block;
use mesh_egress::bot::Outcome;
use mesh_egress::bot::Promise;
use mesh_egress::channel::Recorder;
use mesh_egress::gate::{Confidence, GateVerdict, QualityGate};
use mesh_egress::stream::CutterConfig;
use mesh_egress::{
    Address, AgentMessage, AnswerStream, Attribution, Bot, EgressError, Turn, egress_boundary,
};

fn gate() -> QualityGate {
    QualityGate::builder().build().expect("gate")
}

fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "c", "r"))
}

async fn gated(user: &str, candidate: &str) -> (GateVerdict, Option<String>, Vec<&'static str>) {
    let turn = turn();
    let message = AgentMessage::new(candidate, turn.attribution().clone());
    let e = gate().evaluate(&turn, user, message).await;
    let rules = e
        .findings()
        .iter()
        .filter(|f| f.confidence() == Confidence::High)
        .map(|f| f.rule_id())
        .collect();
    (
        e.verdict(),
        e.message().map(|m| m.body().as_str().to_owned()),
        rules,
    )
}

#[tokio::test]
async fn a_trace_line_before_a_complete_answer_is_cut_and_the_answer_sent() {
    let (verdict, sent, rules) = gated(
        "What's in the app directory?",
        "🔧 exec: ls -la /srv/app\n\nThe app directory holds main.py, app.yaml and README.md.",
    )
    .await;
    assert!(
        matches!(verdict, GateVerdict::Sanitised { .. }),
        "{verdict:?} {rules:?}"
    );
    assert_eq!(
        sent.as_deref(),
        Some("The app directory holds main.py, app.yaml and README.md.")
    );
    assert_eq!(rules, ["tool.trace"]);
}

#[tokio::test]
async fn markup_after_an_answer_is_cut_and_markup_after_an_announcement_goes_to_layer_c() {
    let call =
        "<tool_call>{\"name\": \"notify\", \"arguments\": {\"channel\": \"#ops\"}}</tool_call>";
    let (verdict, sent, _) = gated(
        "Is the build green?",
        &format!("The build on main is green as of 09:40.\n\n{call}"),
    )
    .await;
    assert!(
        matches!(verdict, GateVerdict::Sanitised { .. }),
        "{verdict:?}"
    );
    assert_eq!(
        sent.as_deref(),
        Some("The build on main is green as of 09:40.")
    );

    for announcement in ["Let me check the build for you.", "Here is what I found:"] {
        let (verdict, sent, rules) =
            gated("Is the build green?", &format!("{announcement}\n{call}")).await;
        assert_eq!(
            verdict,
            GateVerdict::Blocked { retryable: true },
            "{announcement}"
        );
        assert_eq!(sent, None);
        assert_eq!(rules, ["tool.call_markup"]);
    }
    // A bare function-call reply has nothing left once cut.
    let (verdict, _, rules) = gated(
        "Weather?",
        r#"{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}"#,
    )
    .await;
    assert_eq!(verdict, GateVerdict::Blocked { retryable: true });
    assert_eq!(rules, ["tool.call_markup"]);
}

#[tokio::test]
async fn a_user_who_asked_about_tool_calling_is_shown_it() {
    for (user, reply) in [
        (
            "How does a Hermes model format a tool call?",
            "Like this: <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>",
        ),
        (
            "Why does my bot print <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>?",
            "That <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> is a call your server did not parse.",
        ),
        (
            "Show me a Mistral tool call in code",
            "```\n[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}\n```",
        ),
    ] {
        let (verdict, sent, rules) = gated(user, reply).await;
        assert!(rules.is_empty(), "{user}: {rules:?}");
        assert!(verdict.sends(), "{user}: {verdict:?}");
        assert_eq!(sent.as_deref(), Some(reply));
    }
}

#[tokio::test]
async fn in_a_stream_markup_stops_it_and_a_trace_line_is_cut_while_the_stream_goes_on() {
    let gate = gate();
    let turn = turn();
    let attr = turn.attribution().clone();
    let delivered = "The build finished and every test passed.\n\n";
    let markup = Block::new(
        "<tool_call>{\"name\": \"notify\", \"arguments\": {}}</tool_call>\n",
        attr.clone(),
        1,
    );
    let blocked = gate
        .evaluate_block(&turn, "Green?", delivered, markup)
        .await;
    assert_eq!(blocked.verdict(), GateVerdict::Blocked { retryable: true });
    assert!(blocked.into_result().is_err());

    let trace = Block::new("💻 terminal: \"make test\"\n\n", attr, 1);
    let checked = gate
        .check_block(&turn, "Green?", delivered, trace)
        .await
        .expect("a trace line alone is cut, not a failure");
    assert!(checked.is_blank());
}

/// The model's streamed answer, as the chunks it arrived in.
#[egress_boundary(interactive)]
async fn streamed(turn: &Turn, chunks: Vec<&'static str>) -> Result<AnswerStream, EgressError> {
    Ok(AnswerStream::from_chunks(
        turn,
        chunks.into_iter().map(|chunk| Ok(chunk.to_owned())),
    ))
}

#[tokio::test]
async fn a_streamed_turn_keeps_what_was_delivered_and_layer_c_answers_for_the_rest() {
    let bot = Bot::new()
        .with_gate(gate())
        .with_cutter(CutterConfig {
            min_block: 1,
            max_block: 4000,
        })
        .with_idle_flush(None);
    let turn = bot
        .turn(Address::Plain, Attribution::new("agent", "c", "r"))
        .with_input("Is the build green?");
    let reply = streamed(
        &turn,
        vec![
            "The build is green.\n\n",
            "💻 terminal: \"make deploy\"\n\n",
            "Deploying now.\n\n",
            "<tool_call>{\"name\": \"notify\", \"arguments\": {}}</tool_call>\n\n",
            "Done.",
        ],
    )
    .await;
    let channel = Recorder::new();
    let delivery = bot
        .send_to(&turn, &channel, reply)
        .await
        .expect("delivered");
    let sent = channel.sent();
    assert_eq!(sent[..2], ["The build is green.", "Deploying now."]);
    assert_eq!(sent.len(), 3, "then Layer C's line: {sent:?}");
    assert!(
        sent.iter()
            .all(|s| !s.contains("tool_call") && !s.contains("terminal"))
    );
    // A holding line after the two blocks that were shown (the trace line's block was cut to
    // nothing and never sent).
    assert_eq!(delivery.outcome(), Outcome::Holding);
    assert_eq!(delivery.receipts().len(), 3, "two blocks, then the line");
    let Some(Promise::Caller(_kept_on_the_ledger)) = delivery.promise() else {
        panic!("a promise for the rest")
    };
}
