//! Tool-call markup across a streamed answer's blocks: a block is never shown ending in a marker
//! that may still open a call, whatever cut it (the idle flush after a pause, a blank line, the
//! size cap), so the person never sees `<tool_call>` before the call is recognised.

use std::time::Duration;

use mesh_egress::bot::Outcome;
use mesh_egress::channel::Recorder;
use mesh_egress::gate::QualityGate;
use mesh_egress::{Address, AnswerStream, Attribution, Bot, EgressError, Turn, egress_boundary};

const PREFACE: &str = "Here is what I found for you.\n";
const CALL: &str =
    "{\"name\": \"search\", \"arguments\": {\"q\": \"deploy status\"}}\n</tool_call>";

/// `deltas` sent with `pause` before each after the first.
#[egress_boundary(interactive)]
async fn paused(
    turn: &Turn,
    deltas: Vec<String>,
    pause: Duration,
) -> Result<AnswerStream, EgressError> {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        for (i, delta) in deltas.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(pause).await;
            }
            if tx.send(Ok(delta)).await.is_err() {
                return;
            }
        }
    });
    Ok(AnswerStream::from_receiver(turn, rx))
}

/// What the person was shown of `deltas`, each message, and how the turn ended.
async fn shown(deltas: &[&str]) -> (Vec<String>, Outcome, String) {
    shown_through(deltas, true).await
}

/// [`shown`], with the gate on or with none configured.
async fn shown_through(deltas: &[&str], gate: bool) -> (Vec<String>, Outcome, String) {
    let recorder = Recorder::new();
    let mut bot = Bot::new()
        .with_client(recorder.clone())
        .with_idle_flush(Some(Duration::from_millis(500)));
    if gate {
        bot = bot.with_gate(QualityGate::builder().build().expect("the default gate"));
    }
    let turn = bot.turn(Address::Plain, Attribution::new("agent", "c1", "r1"));
    let deltas = deltas.iter().map(|d| (*d).to_owned()).collect();
    let reply = paused(&turn, deltas, Duration::from_secs(1)).await;
    let delivery = bot.send(&turn, reply).await.expect("delivered");
    (
        recorder.sent(),
        delivery.outcome(),
        delivery.delivered().to_owned(),
    )
}

fn assert_no_markup(sent: &[String]) {
    for text in sent {
        assert!(
            !text.contains("<tool_") && !text.contains("tool_call"),
            "machinery shown: {sent:#?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_pause_after_the_marker_never_shows_it() {
    for tail in ["<tool_call>\n", "<tool_call>", "<tool_call>\n\n", "<tool_"] {
        let rest = format!("{}{CALL}", &"<tool_call>\n"[tail.len().min(12)..]);
        let (sent, outcome, _) = shown(&[&format!("{PREFACE}{tail}"), &rest]).await;
        assert_no_markup(&sent);
        // What came before the call reached the person; the call itself ended the answer.
        assert_eq!(
            sent.first().map(String::as_str),
            Some(PREFACE.trim_end()),
            "{tail:?}"
        );
        assert_eq!(outcome, Outcome::Holding, "{tail:?}: {sent:#?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_only_names_the_tag_streams_whole() {
    let (sent, outcome, delivered) = shown(&[
        "Qwen wraps each call in a tag: ",
        "the `<tool_call>` tag, then a JSON object.\n",
    ])
    .await;
    assert_eq!(outcome, Outcome::Answered, "{sent:#?}");
    assert_eq!(
        delivered.trim_end(),
        "Qwen wraps each call in a tag: the `<tool_call>` tag, then a JSON object."
    );
}

/// The holds that need no gate: without one configured, a call written as text mid-stream still
/// never reaches the person, split by a pause or whole in one block.
#[tokio::test(start_paused = true)]
async fn without_a_gate_the_call_is_not_shown_either() {
    for deltas in [
        vec![format!("{PREFACE}<tool_call>\n"), CALL.to_owned()],
        vec![format!(
            "{PREFACE}\n<tool_call>\n{CALL}\n\nMore text after it."
        )],
    ] {
        let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
        let (sent, outcome, _) = shown_through(&deltas, false).await;
        assert_no_markup(&sent);
        assert_eq!(outcome, Outcome::Holding, "{sent:#?}");
    }
    // Prose that names the tag streams whole with no gate too.
    let (_, outcome, delivered) = shown_through(
        &[
            "Qwen wraps each call in a tag: ",
            "the `<tool_call>` tag, then JSON.\n",
        ],
        false,
    )
    .await;
    assert_eq!(outcome, Outcome::Answered);
    assert_eq!(
        delivered.trim_end(),
        "Qwen wraps each call in a tag: the `<tool_call>` tag, then JSON."
    );
}
