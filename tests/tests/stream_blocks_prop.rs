//! A property of `boundary::stream`: however the model's text is chunked, the delivered blocks
//! concatenate to the non-streamed rendering of the same text for the channel (whitespace at
//! the cuts aside), and no block splits a code fence or a grapheme cluster.

use std::future::Future;
use std::sync::Mutex;

use mesh_egress::boundary::{StreamEnd, StreamPlan, stream};
use mesh_egress::channel::{Channel, DiscordMarkdown, PartReceipt, Render, SendError};
use mesh_egress::degrade::{DegradationPolicy, Mode};
use mesh_egress::model::RoutedStream;
use mesh_egress::stream::CutterConfig;
use mesh_egress::{Attribution, CommittedPart, Markdown, Turn};
use proptest::prelude::*;
use unicode_segmentation::UnicodeSegmentation as _;

/// Discord keeps fences visible (```), so a split fence would show in a part.
struct Parts {
    renderer: DiscordMarkdown,
    sent: Mutex<Vec<String>>,
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

fn streamed(text: &str, cuts: &[f64], min_block: usize) -> (Vec<String>, StreamEnd) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let turn = Turn::new(Attribution::new("a", "c", "r"));
        let policy = DegradationPolicy::default();
        let plan = StreamPlan::new(Mode::Interactive, &policy)
            .with_cutter(CutterConfig {
                min_block,
                max_block: 4000,
            })
            .with_idle_flush(None);
        let channel = Parts {
            renderer: renderer(),
            sent: Mutex::new(Vec::new()),
        };
        let source =
            RoutedStream::from_chunks(&turn, chunked(text, cuts).into_iter().map(Ok).collect());
        let receipt = stream(&turn, &plan, &channel, source)
            .await
            .expect("delivered");
        let end = receipt.end();
        (channel.sent.into_inner().unwrap(), end)
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
        prop_assert_eq!(end, StreamEnd::Answered);
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
