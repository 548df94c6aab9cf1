//! Fuzzes every renderer and the chunker: any input and limit either renders into parts that
//! fit, are non-blank and keep Telegram's tags balanced, or fails with a typed error; it never
//! panics or hangs.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mesh_egress::Markdown;
use mesh_egress::channel::{
    DiscordMarkdown, PlainText, Render, RenderError, SlackMrkdwn, TelegramHtml,
};

/// Telegram's length of a part: tags removed, entities decoded, in UTF-16 units; and its
/// entity count, asserting the tags nest.
fn telegram_measure(part: &str) -> (usize, usize) {
    let mut units = 0;
    let mut entities = 0;
    let mut stack = Vec::new();
    let mut rest = part;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let end = rest.find('>').expect("tag closes");
            let tag = &rest[1..end];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name.to_owned()), "tags nest in {part:?}");
            } else {
                let name = tag.split(' ').next().unwrap_or("").to_owned();
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

fn check(parts: Result<Vec<String>, RenderError>, measure: impl Fn(&str) -> usize, limit: usize) {
    match parts {
        Ok(parts) => {
            assert!(!parts.is_empty());
            for part in &parts {
                assert!(!part.trim().is_empty(), "blank part");
                assert!(measure(part) <= limit, "{part:?} exceeds {limit}");
            }
        }
        Err(RenderError::Empty) => {}
        Err(RenderError::LimitTooSmall { limit: l, needed }) => assert!(l == limit && needed > l),
        Err(RenderError::TooManyEntities { .. }) => {}
        Err(other) => panic!("unexpected error {other}"),
    }
}

fuzz_target!(|input: (u16, String)| {
    let (limit, text) = input;
    let limit = usize::from(limit % 512);
    let body = Markdown::new(text);
    let chars = |s: &str| s.chars().count();
    check(PlainText::new().with_limit(limit).render(&body), chars, limit);
    check(SlackMrkdwn::new().with_limit(limit).render(&body), chars, limit);
    check(DiscordMarkdown::new().with_limit(limit).render(&body), chars, limit);
    let telegram = TelegramHtml::new().with_limit(limit).render(&body);
    if let Ok(parts) = &telegram {
        for part in parts {
            let (_, entities) = telegram_measure(part);
            assert!(entities <= TelegramHtml::ENTITY_LIMIT);
        }
    }
    check(telegram, |s| telegram_measure(s).0, limit);
});
