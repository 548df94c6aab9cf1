//! The renderers' fuzz check, shared by the fuzz target (`fuzz_targets/render_chunk.rs`) and
//! by the workspace test that replays the seed corpus (`tests/tests/render_channels.rs`), so
//! the seeds run on stable with every `cargo test`.
//!
//! Input layout: bytes 0–1 the part limit (little-endian, modulo 512), bytes 2–3 a nesting
//! depth (modulo 10,001), byte 4 which construct to nest, the rest the text (lossy UTF-8). The
//! text is wrapped in `depth` levels of the construct, so the fuzzer reaches deep nesting
//! without having to write thousands of brackets.

use mesh_egress::Markdown;
use mesh_egress::channel::{
    DEFAULT_MAX_PARTS, DiscordMarkdown, PlainText, Render, RenderError, SlackMrkdwn, TelegramHtml,
};

/// Constructs to nest: the opening and the closing text of one level.
const NESTING: &[(&str, &str)] = &[
    ("", ""),
    ("> ", ""),
    ("![", "](u)"),
    ("[", "](https://a.example)"),
    ("*", "*"),
    ("**", "**"),
    ("_", "_"),
    ("~~", "~~"),
    ("- ", ""),
    ("1. ", ""),
    ("[![", "](https://i.example)](javascript:x)"),
    ("> - ", ""),
];

/// The Markdown source and the part limit an input stands for.
pub(crate) fn decode(data: &[u8]) -> (String, usize) {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let limit = usize::from(u16::from_le_bytes([byte(0), byte(1)]) % 512);
    let depth = usize::from(u16::from_le_bytes([byte(2), byte(3)])) % 10_001;
    let (open, close) = NESTING[usize::from(byte(4)) % NESTING.len()];
    let text = String::from_utf8_lossy(data.get(5..).unwrap_or_default());
    let src = format!("{}{text}{}", open.repeat(depth), close.repeat(depth));
    (src, limit)
}

/// Telegram's length of a part: tags removed, entities decoded, in UTF-16 units; and its
/// entity count, asserting the tags nest and links are never nested.
fn telegram_measure(part: &str) -> (usize, usize) {
    let mut units = 0;
    let mut entities = 0;
    let mut stack: Vec<String> = Vec::new();
    let mut rest = part;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let end = rest.find('>').expect("tag closes");
            let tag = &rest[1..end];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "tags nest in {part:?}");
            } else {
                let name = tag.split(' ').next().unwrap_or("").to_owned();
                if name == "a" {
                    assert!(!stack.iter().any(|t| t == "a"), "nested <a> in {part:?}");
                    let href = tag.strip_prefix("a href=\"").expect("a link has an href");
                    assert!(
                        ["http://", "https://", "mailto:"]
                            .iter()
                            .any(|s| href.starts_with(s)),
                        "live link to {href:?}"
                    );
                }
                if !(name == "code" && stack.last().is_some_and(|t| t == "pre")) {
                    entities += 1;
                }
                stack.push(name);
            }
            rest = &rest[end + 1..];
        } else if c == '&' {
            let end = rest.find(';').expect("entity ends");
            units += 1;
            rest = &rest[end + 1..];
        } else {
            units += c.len_utf16();
            rest = &rest[c.len_utf8()..];
        }
    }
    assert!(stack.is_empty(), "tags close in {part:?}");
    (units, entities)
}

/// Whether `c` must never reach a surface (C0/C1 controls but newline and tab, bidi
/// embeddings, overrides and isolates).
fn hostile_control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn check(
    name: &str,
    parts: Result<Vec<String>, RenderError>,
    measure: impl Fn(&str) -> usize,
    limit: usize,
) {
    match parts {
        Ok(parts) => {
            assert!(!parts.is_empty(), "{name}: no parts");
            assert!(
                parts.len() <= DEFAULT_MAX_PARTS,
                "{name}: {} parts",
                parts.len()
            );
            for part in &parts {
                assert!(!part.trim().is_empty(), "{name}: blank part");
                assert!(measure(part) <= limit, "{name}: {part:?} exceeds {limit}");
                assert!(
                    !part.chars().any(hostile_control),
                    "{name}: control in {part:?}"
                );
            }
            if name == "slack" {
                // Text escapes `<`: every one left opens a live link to an allowed scheme.
                for link in parts.concat().split('<').skip(1) {
                    assert!(
                        ["http://", "https://", "mailto:"]
                            .iter()
                            .any(|s| link.starts_with(s)),
                        "slack: <{link:?}"
                    );
                }
            }
        }
        Err(RenderError::Empty) => {}
        Err(RenderError::LimitTooSmall { limit: l, needed }) => {
            assert!(
                l == limit && needed > l,
                "{name}: limit {l} needed {needed}"
            )
        }
        Err(RenderError::TooManyEntities { .. }) => {}
        Err(other) => panic!("{name}: unexpected error {other}"),
    }
}

/// Renders one input with every renderer and checks the parts: they fit the limit in the
/// channel's unit (Telegram: UTF-16 units after entity parsing, at most 100 entities, tags
/// balanced, no nested or forbidden links), are at most [`DEFAULT_MAX_PARTS`], none is blank,
/// none carries a control character; or the render fails with a typed error. Never a panic.
pub(crate) fn run(data: &[u8]) {
    let (src, limit) = decode(data);
    let body = Markdown::new(src);
    let chars = |s: &str| s.chars().count();
    check(
        "plain",
        PlainText::new().with_limit(limit).render(&body),
        chars,
        limit,
    );
    check(
        "slack",
        SlackMrkdwn::new().with_limit(limit).render(&body),
        chars,
        limit,
    );
    check(
        "discord",
        DiscordMarkdown::new().with_limit(limit).render(&body),
        chars,
        limit,
    );
    let telegram = TelegramHtml::new().with_limit(limit).render(&body);
    if let Ok(parts) = &telegram {
        for part in parts {
            let (_, entities) = telegram_measure(part);
            assert!(entities <= TelegramHtml::ENTITY_LIMIT);
        }
    }
    check("telegram", telegram, |s| telegram_measure(s).0, limit);
}
