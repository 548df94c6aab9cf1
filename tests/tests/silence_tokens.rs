//! Silence tokens through the Bot, whole and streamed: a token is matched as a token (glued to
//! text in scripts without spaces too, never inside a longer ASCII word), a token in code is
//! the code's, and cutting one touches only the gap it leaves.

use mesh_egress::bot::Outcome;
use mesh_egress::channel::Recorder;
use mesh_egress::degrade::DegradationPolicy;
use mesh_egress::silence::SilenceTokens;
use mesh_egress::{
    Address, AgentMessage, AnswerStream, Attribution, Bot, EgressError, Turn, egress_boundary,
};

fn bot() -> Bot {
    let tokens = SilenceTokens::new(["NO_REPLY", "HEARTBEAT_OK"]).expect("valid tokens");
    Bot::new()
        .with_client(Recorder::new())
        .with_policy(DegradationPolicy::default().with_silence_tokens(tokens))
}

#[egress_boundary(interactive)]
async fn whole(turn: &Turn, text: &str) -> Result<AgentMessage, EgressError> {
    Ok(turn.message(text))
}

#[egress_boundary(interactive)]
async fn streamed(turn: &Turn, deltas: Vec<String>) -> Result<AnswerStream, EgressError> {
    Ok(AnswerStream::from_chunks(turn, deltas.into_iter().map(Ok)))
}

/// What the person sees of `text` sent whole: the Markdown delivered, or `None` for silence.
async fn whole_shows(text: &str) -> Option<String> {
    let bot = bot();
    let turn = bot.turn(Address::Plain, Attribution::new("agent", "c1", "r1"));
    let delivery = bot
        .send(&turn, whole(&turn, text).await)
        .await
        .expect("sent");
    (delivery.outcome() != Outcome::Silent).then(|| delivery.delivered().to_owned())
}

/// The same, streamed in `deltas`.
async fn stream_shows(deltas: &[&str]) -> Option<String> {
    let bot = bot();
    let turn = bot.turn(Address::Plain, Attribution::new("agent", "c1", "r1"));
    let deltas = deltas.iter().map(|d| (*d).to_owned()).collect();
    let delivery = bot
        .send(&turn, streamed(&turn, deltas).await)
        .await
        .expect("sent");
    (delivery.outcome() != Outcome::Silent).then(|| delivery.delivered().trim_end().to_owned())
}

/// Every split of `text` in two at a character boundary.
fn splits(text: &str) -> impl Iterator<Item = [&str; 2]> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .map(|i| [&text[..i], &text[i..]])
}

/// `text` shows as `shown` (`None`: silence) sent whole, and streamed in two deltas split at
/// every character boundary.
async fn assert_shows(text: &str, shown: Option<&str>) {
    assert_eq!(whole_shows(text).await.as_deref(), shown, "{text:?}");
    for split in splits(text) {
        assert_eq!(stream_shows(&split).await.as_deref(), shown, "{split:?}");
    }
}

/// Glued to text in a script without spaces, the token is still the agent's.
const GLUED: [(&str, &str); 4] = [
    ("部署已完成NO_REPLY", "部署已完成"),
    ("완료되었습니다NO_REPLY", "완료되었습니다"),
    ("готовоNO_REPLY", "готово"),
    (
        "デプロイが完了しました。HEARTBEAT_OK",
        "デプロイが完了しました。",
    ),
];

#[tokio::test]
async fn a_token_glued_to_text_without_spaces_is_cut_whole_and_streamed() {
    for (text, shown) in GLUED {
        assert_shows(text, Some(shown)).await;
    }
}

#[tokio::test]
async fn a_longer_ascii_word_is_not_a_token() {
    for text in [
        "MY_NO_REPLY_FLAG is set.",
        "NO_REPLY2 is the new name.",
        "xNO_REPLY",
    ] {
        // Split anywhere, the word before the token's first letter still joins it.
        assert_shows(text, Some(text)).await;
    }
}

#[tokio::test]
async fn cutting_a_token_keeps_indentation_and_nesting() {
    let answer = "Here it is:\n\n```python\ndef f():\n    return  1\n```\n\n- one\n    - nested\n\
                  \n| a  | b |\n|----|---|\n| 1  | 2 |";
    let text = format!("{answer}\n\nNO_REPLY");
    assert_eq!(whole_shows(&text).await.as_deref(), Some(answer));
    assert_eq!(stream_shows(&[&text]).await.as_deref(), Some(answer));
    // In the middle of a line, only the gap goes.
    assert_eq!(
        whole_shows("Done  in    3 steps. NO_REPLY Next:\n    indented")
            .await
            .as_deref(),
        Some("Done  in    3 steps. Next:\n    indented")
    );
}

#[tokio::test]
async fn a_token_in_code_is_the_codes() {
    for text in [
        "Set it like this:\n\n```sh\nexport MESH_SILENCE_TOKENS=NO_REPLY,HEARTBEAT_OK\n```",
        "Set `MESH_SILENCE_TOKENS=NO_REPLY` and restart.",
        "Answer with `NO_REPLY` to stay quiet.",
        "~~~\nNO_REPLY\n~~~",
    ] {
        assert_shows(text, Some(text)).await;
    }
    // After the block closes, a token is the agent's again.
    let text = "```\nNO_REPLY\n```\nNO_REPLY";
    assert_eq!(
        whole_shows(text).await.as_deref(),
        Some("```\nNO_REPLY\n```")
    );
}

#[tokio::test]
async fn a_reply_of_only_a_token_is_silence_in_backticks_or_bold() {
    for text in [
        "NO_REPLY",
        "`NO_REPLY`",
        "**NO_REPLY**",
        "  `HEARTBEAT_OK`\n",
    ] {
        assert_shows(text, None).await;
    }
    // A lone backtick is literal text: the token after it is still the agent's.
    assert_eq!(
        whole_shows("Done` NO_REPLY").await.as_deref(),
        Some("Done`")
    );
}

mod properties {
    use proptest::prelude::*;

    use super::{stream_shows, whole_shows};

    /// Text without code markers (a fence it left open would make the token code), in several
    /// scripts, starting with a letter.
    fn benign() -> impl Strategy<Value = String> {
        "[a-zA-Z部署已完成완료되었습니다готово][a-zA-Z0-9 ,.!?*_\n部署已完成완료되었습니다готово-]{0,60}"
            .prop_filter("no token inside", |t| {
                !t.contains("NO_REPLY") && !t.contains("HEARTBEAT_OK")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A token appended to any benign text shows exactly the benign text, whole or
        /// streamed in two deltas split anywhere.
        #[test]
        fn an_appended_token_leaves_exactly_the_text(
            text in benign(),
            glue in prop::sample::select(vec![" ", "\n", "\n\n", ""]),
            at in 0usize..200,
        ) {
            // Glued straight on, the token joins an ASCII word: keep a gap there.
            let joins = text.chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            let glue = if glue.is_empty() && joins { " " } else { glue };
            let sent = format!("{text}{glue}NO_REPLY");
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let want = text.trim_end();
            let whole = runtime.block_on(whole_shows(&sent));
            prop_assert_eq!(whole.as_deref(), Some(want));
            let cut = sent.char_indices().map(|(i, _)| i).nth(at % sent.chars().count()).unwrap_or(0);
            let streamed = runtime.block_on(stream_shows(&[&sent[..cut], &sent[cut..]]));
            prop_assert_eq!(streamed.as_deref().map(str::trim_end), Some(want));
        }
    }
}
