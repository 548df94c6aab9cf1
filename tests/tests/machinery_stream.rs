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

/// `deltas` sent with `pauses[i - 1]` (cycled) before each after the first.
#[egress_boundary(interactive)]
async fn paused(
    turn: &Turn,
    deltas: Vec<String>,
    pauses: Vec<Duration>,
) -> Result<AnswerStream, EgressError> {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        for (i, delta) in deltas.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(pauses[(i - 1) % pauses.len()]).await;
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
    let deltas: Vec<String> = deltas.iter().map(|d| (*d).to_owned()).collect();
    shown_split(&deltas, &[Duration::from_secs(1)], gate).await
}

/// What was shown of `deltas` sent with `pauses` between them (cycled), gate on or off: each
/// message, how the turn ended, and the Markdown delivered.
async fn shown_split(
    deltas: &[String],
    pauses: &[Duration],
    gate: bool,
) -> (Vec<String>, Outcome, String) {
    let recorder = Recorder::new();
    let mut bot = Bot::new()
        .with_client(recorder.clone())
        .with_idle_flush(Some(Duration::from_millis(500)));
    if gate {
        bot = bot.with_gate(QualityGate::builder().build().expect("the default gate"));
    }
    let turn = bot.turn(Address::Plain, Attribution::new("agent", "c1", "r1"));
    let reply = paused(&turn, deltas.to_vec(), pauses.to_vec()).await;
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

mod split_anywhere {
    use proptest::prelude::*;

    use super::{Duration, Outcome, PREFACE, shown_split};

    /// Calls as models write them into text (the formats Layer A knows), each after the
    /// preface.
    const CALLS: &[&str] = &[
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"deploy\"}}\n</tool_call>",
        "[TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"q\": \"deploy\"}}]",
        "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"deploy\"}}",
        "<function=search>{\"q\": \"deploy\"}</function>",
        "<|tool_call|>[{\"name\": \"search\", \"arguments\": {\"q\": \"deploy\"}}]",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Split into deltas at any character boundaries, with any pauses between them (the
        /// idle flush firing anywhere), gate on or off: nothing of the call is ever shown.
        #[test]
        fn no_character_of_a_call_is_shown(
            call in prop::sample::select(CALLS),
            cuts in prop::collection::vec(0usize..400, 1..4),
            pauses in prop::collection::vec(0u64..1500, 3),
            gate in any::<bool>(),
        ) {
            let text = format!("{PREFACE}{call}");
            let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            let mut at: Vec<usize> = cuts.iter().map(|c| bounds[c % bounds.len()]).collect();
            at.sort_unstable();
            at.dedup();
            let mut deltas = Vec::new();
            let mut from = 0;
            for cut in at.into_iter().chain([text.len()]) {
                if cut > from {
                    deltas.push(text[from..cut].to_owned());
                    from = cut;
                }
            }
            let pauses: Vec<Duration> = pauses.into_iter().map(Duration::from_millis).collect();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            let (sent, outcome, _) = runtime.block_on(shown_split(&deltas, &pauses, gate));
            prop_assert_eq!(outcome, Outcome::Holding, "{:?}", sent);
            // Every message but the holding line is part of the preface.
            let (line, answer) = sent.split_last().expect("a holding line");
            prop_assert!(!line.contains(['<', '[', '{', '|']), "{:?}", sent);
            for part in answer {
                prop_assert!(PREFACE.contains(part.trim()), "{:?} shown: {:?}", part, sent);
            }
        }
    }
}
