//! A property of a streamed answer through the front door (`Bot::send_to`, each block a message
//! of its own): however the model's text is chunked, the delivered blocks
//! concatenate to the non-streamed rendering of the same text for the channel (whitespace at
//! the cuts aside), and no block splits a code fence or a grapheme cluster.

use std::future::Future;
use std::sync::{Arc, Mutex};

use mesh_egress::bot::Outcome;
use mesh_egress::channel::{
    BoxedChannel, Channel, DiscordMarkdown, PartReceipt, Render, SendError,
};
use mesh_egress::stream::CutterConfig;
use mesh_egress::{
    Address, AnswerStream, Attribution, Bot, CommittedPart, EgressError, Markdown, Turn,
    egress_boundary,
};
use proptest::prelude::*;
use unicode_segmentation::UnicodeSegmentation as _;

/// Discord keeps fences visible (```), so a split fence would show in a part.
#[derive(Clone)]
struct Parts {
    renderer: DiscordMarkdown,
    sent: Arc<Mutex<Vec<String>>>,
}

impl Channel for Parts {
    type Renderer = DiscordMarkdown;

    fn renderer(&self) -> &DiscordMarkdown {
        &self.renderer
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        self.sent.lock().unwrap().push(part.text().to_owned());
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}

fn renderer() -> DiscordMarkdown {
    DiscordMarkdown::new().with_limit(20_000)
}

/// Words, including clusters a careless cut would break: a combining accent, a ZWJ family, a
/// flag, a skin-tone modifier.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,8}",
        Just("cafe\u{301}".to_owned()),
        Just("👩\u{200d}💻".to_owned()),
        Just("🇫🇷".to_owned()),
        Just("👍🏽".to_owned()),
    ]
}

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(word(), 1..8).prop_map(|w| w.join(" "))
}

/// A paragraph, a fenced code block (with a blank line inside), or a bullet list.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(line(), 1..3).prop_map(|l| format!("{}.", l.join("\n"))),
        prop::collection::vec(line(), 1..4).prop_map(|l| format!(
            "```\n{}\n\n{}\n```",
            l.join("\n"),
            l[0]
        )),
        prop::collection::vec(line(), 1..4).prop_map(|items| items
            .iter()
            .map(|i| format!("- {i}"))
            .collect::<Vec<_>>()
            .join("\n")),
    ]
}

/// `text` cut at the given fractions (each snapped down to a char boundary).
fn chunked(text: &str, cuts: &[f64]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|f| {
            let mut at = ((text.len() as f64) * f) as usize;
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        })
        .collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| text[w[0]..w[1]].to_owned())
        .collect()
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The model's text, as the chunks it arrived in.
#[egress_boundary(interactive)]
async fn answer(turn: &Turn, chunks: Vec<String>) -> Result<AnswerStream, EgressError> {
    Ok(AnswerStream::from_chunks(turn, chunks.into_iter().map(Ok)))
}

fn streamed(text: &str, cuts: &[f64], min_block: usize) -> (Vec<String>, Outcome) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let bot = Bot::new()
            .with_cutter(CutterConfig {
                min_block,
                max_block: 4000,
            })
            .with_idle_flush(None);
        let turn = bot.turn(Address::Plain, Attribution::new("a", "c", "r"));
        let channel = Parts {
            renderer: renderer(),
            sent: Arc::default(),
        };
        let reply = answer(&turn, chunked(text, cuts)).await;
        let delivery = bot
            .send_to(&turn, &BoxedChannel::new(channel.clone()), reply)
            .await
            .expect("delivered");
        let sent = channel.sent.lock().unwrap().clone();
        (sent, delivery.outcome())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn delivered_blocks_concatenate_to_the_whole_rendering_and_split_no_fence_or_grapheme(
        pieces in prop::collection::vec(piece(), 1..7),
        cuts in prop::collection::vec(0.0f64..1.0, 0..30),
        min_block in 1usize..160,
    ) {
        let text = pieces.join("\n\n");
        let whole = renderer().render(&Markdown::new(text.as_str())).expect("renders").concat();
        let (parts, end) = streamed(&text, &cuts, min_block);
        prop_assert_eq!(end, Outcome::Answered);
        prop_assert_eq!(squash(&parts.join("\n")), squash(&whole));
        let clusters: std::collections::HashSet<&str> = whole.graphemes(true).collect();
        for part in &parts {
            prop_assert_eq!(part.matches("```").count() % 2, 0, "a split fence: {:?}", part);
            for cluster in part.graphemes(true) {
                prop_assert!(clusters.contains(cluster), "a split cluster {:?} in {:?}", cluster, part);
            }
        }
    }
}
