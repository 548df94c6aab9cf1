//! Rendering is bounded by construction (issue 11): any Markdown up to 64 KB, nested up to
//! 10,000 levels, renders on a thread with a 256 KiB stack without panicking, within the part
//! budget, and with output at most four times the input (plus the budget marker and what
//! escaping adds), on every channel.

use proptest::prelude::*;

use crate::Markdown;
use crate::channel::chunk::BUDGET_MARKER;
use crate::channel::{
    DEFAULT_MAX_PARTS, DiscordMarkdown, PlainText, Render, RenderError, SlackMrkdwn, TelegramHtml,
    WebMarkdown,
};

/// What opens one level of nesting, and what closes it (empty: closed by the line's end).
const OPENERS: &[(&str, &str)] = &[
    ("> ", ""),
    (">", ""),
    ("*", "*"),
    ("**", "**"),
    ("_", "_"),
    ("~~", "~~"),
    ("[", "](https://a.example)"),
    ("![", "](https://b.example/i.png)"),
    ("[", "](javascript:x)"),
    ("- ", ""),
    ("1. ", ""),
    ("* ", ""),
    ("`", "`"),
];

/// Text between the levels: words, escapable characters, breaks, lazy continuation lines.
const FILLERS: &[&str] = &[
    "word ",
    "x",
    "&<>",
    "\n",
    "\nlazy\n",
    "\n\n",
    "@everyone ",
    "\u{1b}[31m",
    "\u{202e}",
    "[r]",
    "\n[r]: https://ref.example/long\n",
    "```\ncode\n```\n",
    "| a | b |\n|---|---|\n| c | d |\n",
    "  - ",
];

/// Hostile Markdown: runs of one opener nested up to 10,000 deep around filler, repeated,
/// capped at 64 KB.
fn hostile() -> impl Strategy<Value = String> {
    let run = (
        prop::sample::select(OPENERS),
        0usize..10_000,
        prop::collection::vec(prop::sample::select(FILLERS), 0..8),
        any::<bool>(),
    )
        .prop_map(|((open, close), depth, fill, closed)| {
            let mut s = open.repeat(depth);
            s.push_str(&fill.concat());
            if closed {
                s.push_str(&close.repeat(depth));
            }
            s
        });
    prop::collection::vec(run, 1..4).prop_map(|runs| {
        let mut s = runs.concat();
        if s.len() > 64 * 1024 {
            let mut end = 64 * 1024;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
        }
        s
    })
}

/// The renderers under test, with limits small enough that the budget is reached.
fn renderers() -> Vec<(&'static str, Box<dyn Render>)> {
    vec![
        ("plain", Box::new(PlainText::new())),
        ("plain-limited", Box::new(PlainText::new().with_limit(500))),
        ("slack", Box::new(SlackMrkdwn::new())),
        ("slack-small", Box::new(SlackMrkdwn::new().with_limit(300))),
        ("discord", Box::new(DiscordMarkdown::new())),
        ("telegram", Box::new(TelegramHtml::new())),
        ("web", Box::new(WebMarkdown::new())),
    ]
}

/// Renders `src` with every renderer on a 256 KiB stack: per renderer, the parts or the error.
fn render_on_small_stack(src: String) -> Vec<(&'static str, Result<Vec<String>, RenderError>)> {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let body = Markdown::new(src);
            renderers()
                .into_iter()
                .map(|(name, r)| (name, r.render(&body)))
                .collect()
        })
        .expect("spawns")
        .join()
        .expect("no panic and no stack overflow on a 256 KiB stack")
}

/// How many bytes escaping may add: `&` becomes `&amp;` (four more bytes) on Slack and
/// Telegram, and every escapable character is at most that.
fn escape_growth(src: &str) -> usize {
    4 * src
        .chars()
        .filter(|c| matches!(c, '&' | '<' | '>' | '"'))
        .count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hostile_markdown_renders_bounded_on_every_channel(src in hostile()) {
        let bound = 4 * src.len() + BUDGET_MARKER.len() + escape_growth(&src);
        for (name, result) in render_on_small_stack(src.clone()) {
            match result {
                Ok(parts) => {
                    prop_assert!(!parts.is_empty(), "{}", name);
                    prop_assert!(parts.len() <= DEFAULT_MAX_PARTS, "{}: {} parts", name, parts.len());
                    prop_assert!(parts.iter().all(|p| !p.trim().is_empty()), "{}: a blank part", name);
                    let len: usize = parts.iter().map(String::len).sum();
                    prop_assert!(len <= bound, "{}: {} bytes from {}", name, len, src.len());
                }
                Err(RenderError::Empty) => {}
                Err(e) => prop_assert!(false, "{}: {}", name, e),
            }
        }
    }
}

/// 64 KB of each hostile shape, for measuring time and peak memory in release mode:
///
/// `cargo test --release -p mesh-egress --all-features --lib hostile_64kb_figures -- --ignored --nocapture`
/// (run the test binary under `/usr/bin/time -v` for the peak).
fn hostile_64kb() -> Vec<(&'static str, String)> {
    const KB64: usize = 64 * 1024;
    let fit = |unit: &str, tail: &str| {
        let depth = (KB64 - tail.len()) / unit.len();
        format!("{}{tail}", unit.repeat(depth))
    };
    let images = {
        let depth = KB64 / 6;
        format!("{}x{}", "![".repeat(depth), "](u)".repeat(depth))
    };
    let emphasis = {
        let depth = KB64 / 4;
        format!("{}x{}", "*_".repeat(depth), "_*".repeat(depth))
    };
    let lists: String = {
        let mut s = String::new();
        let mut d = 0;
        while s.len() < KB64 {
            s.push_str(&format!("{}- item\n", "  ".repeat(d)));
            d += 1;
        }
        s
    };
    vec![
        ("nested images", images),
        ("nested quotes", fit("> ", "deep words\n")),
        (
            "quotes with lazy lines",
            format!("{}\n{}", "> ".repeat(1000), "x\n".repeat(31_000)),
        ),
        ("nested lists", lists),
        ("nested emphasis", emphasis),
        ("nested links", fit("[", "x")),
    ]
}

/// Also checks the bounds; ignored because its figures only mean something in release mode.
#[test]
#[ignore = "a measurement, run in release mode by hand"]
fn hostile_64kb_figures() {
    for (shape, src) in hostile_64kb() {
        let body = Markdown::new(src.clone());
        for (name, r) in renderers() {
            let start = std::time::Instant::now();
            let parts = r.render(&body);
            let took = start.elapsed();
            let parts = parts.unwrap_or_else(|e| panic!("{shape} on {name}: {e}"));
            let out: usize = parts.iter().map(String::len).sum();
            let count = parts.len();
            assert!(
                count <= DEFAULT_MAX_PARTS,
                "{shape} on {name}: {count} parts"
            );
            assert!(
                out <= 4 * src.len() + BUDGET_MARKER.len(),
                "{shape} on {name}: {out} B"
            );
            println!(
                "{shape:24} {name:14} {:>6} B in  {took:>10.2?}  {count:>2} parts  {out:>7} B out",
                src.len()
            );
        }
    }
}
