//! Properties over arbitrary Markdown-ish input, for every channel: every part fits the
//! channel's unit and entity limits, no part starts or ends inside a grapheme cluster, fences
//! and tags balance within every part, the parts rebuild the rendering (whitespace at cuts and
//! reopening markers aside), and chunking terminates (with a typed error when the limit is too
//! small for one piece).

use proptest::prelude::*;

use super::support::{ALL, Ch, check};
use crate::render::RenderError;

const PIECES: &[&str] = &[
    "word",
    "words",
    "a",
    "The",
    "end.",
    "Why?",
    "yes!",
    " ",
    " ",
    " ",
    "  ",
    "\n",
    "\n\n",
    "**",
    "*",
    "_",
    "__",
    "~~",
    "`",
    "```",
    "```rust\n",
    "\n```\n",
    "~~~\n",
    "> ",
    "\n> ",
    "- ",
    "\n- ",
    "\n  - ",
    "1. ",
    "\n2. ",
    "# ",
    "\n## ",
    "[label](https://example.com/a_(b)?q=1&r=2)",
    "<https://example.org/x>",
    "![alt](https://e.com/i.png)",
    "<b>",
    "</b>",
    "&",
    "<",
    ">",
    "\"",
    "|",
    "\n| a | b |\n|---|---|\n| c | d |\n",
    "\\",
    "\r\n",
    "\t",
    "👨‍👩‍👧‍👦",
    "🇩🇪",
    "🇫🇷",
    "👍🏽",
    "1️⃣",
    "😀",
    "e\u{301}",
    "\u{301}",
    "\u{200d}",
    "क्षि",
    "漢字",
    "かな。",
    "！",
    "שלום",
    "\u{200f}",
    "مرحبا",
    "\u{202b}",
    "\u{a0}",
];

fn markdownish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => prop::sample::select(PIECES).prop_map(str::to_owned),
        1 => "\\PC{1,6}",
        1 => "[a-z]{8,40}",
    ];
    prop::collection::vec(piece, 1..40).prop_map(|pieces| pieces.concat())
}

fn keeps_invariants(ch: Ch, src: &str, limit: usize) -> Result<(), TestCaseError> {
    match check(ch, src, limit) {
        Ok(_) | Err(RenderError::Empty) => Ok(()),
        Err(RenderError::LimitTooSmall { limit: l, needed }) => {
            prop_assert_eq!(l, limit);
            prop_assert!(needed > limit, "{needed} would have fit in {limit}");
            Ok(())
        }
        Err(e) => Err(TestCaseError::fail(format!("{ch:?}: {e}"))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn plain_parts_keep_every_invariant(src in markdownish(), limit in 8usize..120) {
        keeps_invariants(Ch::Plain, &src, limit)?;
    }

    #[test]
    fn slack_parts_keep_every_invariant(src in markdownish(), limit in 8usize..120) {
        keeps_invariants(Ch::Slack, &src, limit)?;
    }

    #[test]
    fn discord_parts_keep_every_invariant(src in markdownish(), limit in 8usize..120) {
        keeps_invariants(Ch::Discord, &src, limit)?;
    }

    #[test]
    fn telegram_parts_keep_every_invariant(src in markdownish(), limit in 8usize..120) {
        keeps_invariants(Ch::Telegram, &src, limit)?;
    }

    #[test]
    fn a_generous_limit_gives_one_part_holding_the_whole_rendering(src in markdownish()) {
        for ch in ALL {
            if let Ok(full) = ch.full(&src) {
                let parts = ch.parts(&src, 100_000).expect("renders");
                prop_assert_eq!(parts.len(), 1);
                let part = &parts[0];
                prop_assert_eq!((part.head, part.tail), (0, 0));
                prop_assert_eq!(part.body.end, full.len());
                prop_assert!(full[..part.body.start].trim().is_empty());
            }
        }
    }
}
