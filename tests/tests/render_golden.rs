//! The renderers' exact output, pinned: every part of every render of a fixed corpus, on every
//! surface at several part limits, hashed per configuration and compared with the hashes the
//! renderers gave when the corpus was fixed. A change to the renderers or the chunker that moves
//! one byte of one part (a different cut, a marker closed or reopened differently, a changed
//! escape, an error where there was a part) fails here; a change that is meant to alter the
//! output regenerates the table below (run with `MESH_GOLDEN_PRINT=1`) and says why.
//!
//! The corpus: every example of the CommonMark 0.31.2 spec (`data/commonmark`, CC-BY-SA 4.0,
//! see its README), the `render` bench's document at 1 KB and 64 KB, and documents drawn by a
//! fixed generator from pieces that sit on the chunker's edges (grapheme clusters that span
//! style markers, emoji sequences, CJK sentence ends, runs of spaces, escapes, code, tables,
//! quotes in list items, long words). The limits go down to a few units, where parts are cut
//! inside words and some renders fail with `LimitTooSmall` (the error is pinned too).
//!
//! `MESH_GOLDEN_DUMP=FILE` writes every render in full, for a diff between two builds.

use std::fmt::Write as _;

use mesh_egress::Markdown;
use mesh_egress::channel::{
    DiscordMarkdown, PlainText, Render, SlackMrkdwn, TelegramHtml, WebMarkdown,
};
use serde_json::Value;

const SPEC: &str = include_str!("data/commonmark/spec-0.31.2.json");

/// The `render` bench's block (`benches/render.rs`).
const BENCH_BLOCK: &str = "## Deploy report\n\nThe **v2** rollout finished in *12 minutes*; two ~~flaky~~ checks were \
retried. See [the dashboard](https://example.com/dash?run=42&view=full) for details.\n\n\
- api: healthy 👍🏽\n- worker: healthy\n  - queue depth `0`\n1. first step\n2. second step\n\n\
```rust\nfn main() {\n    println!(\"deployed <v2> & done\");\n}\n```\n\n\
> Note: the 🇩🇪 region lags by a few seconds.\n\n\
| service | p99 ms |\n|---|---:|\n| api | 41 |\n| worker | 120 |\n\n\
Family 👨‍👩‍👧‍👦 says 漢字かな交じり文。 Done!\n\n";

/// Pieces the generated documents are drawn from.
const PIECES: &[&str] = &[
    "word",
    "words ",
    "a",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "end. ",
    "Why? ",
    "Yes! ",
    "\"quoted.\" ",
    "e\u{301}",
    "\u{301}",
    "*",
    "**",
    "_",
    "~~",
    "`",
    "``",
    "[",
    "]",
    "(",
    ")",
    "<",
    ">",
    "&",
    "&amp;",
    "&#x1b;",
    "\\*",
    "\\",
    "#",
    "- ",
    "+ ",
    "1. ",
    "2) ",
    "10. ",
    "> ",
    "    code",
    "```\n",
    "```rust\n",
    "~~~\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "👍🏽",
    "👨‍👩‍👧‍👦",
    "🇩🇪",
    "漢字",
    "かな",
    "。",
    "！",
    "？",
    "\u{a0}",
    "\u{2003}",
    "\u{200d}",
    "\u{600}",
    "x\u{600}",
    "\u{600} ",
    "@everyone",
    "@here",
    "<@123>",
    "<#c>",
    "<t:1>",
    "https://example.com/a_b?c=d&e=f ",
    "[link](https://example.com/x)",
    "[bad](javascript:x)",
    "![img](https://example.com/i.png)",
    "<b>html</b>",
    "<!-- c -->",
    "\r\n",
    "\u{202e}",
    "Supercalifragilisticexpialidocious",
    "0123456789012345678901234567890123456789",
    "‐—–…",
    "a\u{300}\u{301}\u{302}",
    "ｆｕｌｌ",
    "🏳️‍🌈 ",
    "* item\n",
    "  > quoted\n",
    "- [ ] task\n",
    "- [x] done\n",
    "---\n",
    "$x$",
    "<https://auto.example>",
    "[^1]",
];

/// A document of `n` pieces drawn by `rng`.
fn generated(rng: &mut u64, n: usize) -> String {
    let mut doc = String::new();
    for _ in 0..n {
        // xorshift64: fixed, so the corpus is the same on every machine and every run.
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        doc.push_str(PIECES[(*rng % PIECES.len() as u64) as usize]);
    }
    doc
}

fn corpus() -> Vec<String> {
    let spec: Value = serde_json::from_str(SPEC).expect("the spec examples are JSON");
    let mut docs: Vec<String> = spec
        .as_array()
        .expect("a list of examples")
        .iter()
        .map(|e| {
            e["markdown"]
                .as_str()
                .expect("a markdown field")
                .replace('→', "\t")
        })
        .collect();
    for bytes in [1 << 10, 64 << 10] {
        let mut doc = String::new();
        while doc.len() < bytes {
            doc.push_str(BENCH_BLOCK);
        }
        docs.push(doc);
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    for n in (0..300).map(|i| 1 + i % 60) {
        docs.push(generated(&mut rng, n));
    }
    docs
}

/// FNV-1a, 64 bits: a hash with no key, the same on every build.
fn fnv(hash: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *hash ^= u64::from(b);
        *hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

/// Every configuration pinned: a name and its renderer.
fn configurations() -> Vec<(String, Box<dyn Render>)> {
    let mut out: Vec<(String, Box<dyn Render>)> = Vec::new();
    let unlimited = usize::MAX;
    out.push(("plain/none".into(), Box::new(PlainText::new())));
    for limit in [8, 24, 80, 300, 2000] {
        out.push((
            format!("plain/{limit}"),
            Box::new(PlainText::new().with_limit(limit).with_max_parts(unlimited)),
        ));
        out.push((
            format!("slack/{limit}"),
            Box::new(
                SlackMrkdwn::new()
                    .with_limit(limit)
                    .with_max_parts(unlimited),
            ),
        ));
        out.push((
            format!("discord/{limit}"),
            Box::new(
                DiscordMarkdown::new()
                    .with_limit(limit)
                    .with_max_parts(unlimited),
            ),
        ));
        out.push((
            format!("telegram/{limit}"),
            Box::new(
                TelegramHtml::new()
                    .with_limit(limit)
                    .with_max_parts(unlimited),
            ),
        ));
        out.push((
            format!("web/{limit}"),
            Box::new(
                WebMarkdown::new()
                    .with_limit(limit)
                    .with_max_parts(unlimited),
            ),
        ));
    }
    out.push(("slack/default".into(), Box::new(SlackMrkdwn::new())));
    out.push(("discord/default".into(), Box::new(DiscordMarkdown::new())));
    out.push(("telegram/default".into(), Box::new(TelegramHtml::new())));
    out.push(("web/default".into(), Box::new(WebMarkdown::new())));
    out.push((
        "telegram/300/entities-4".into(),
        Box::new(
            TelegramHtml::new()
                .with_limit(300)
                .with_entity_limit(4)
                .with_max_parts(unlimited),
        ),
    ));
    out.push((
        "telegram/100/entities-1".into(),
        Box::new(
            TelegramHtml::new()
                .with_limit(100)
                .with_entity_limit(1)
                .with_max_parts(unlimited),
        ),
    ));
    out.push((
        "discord/120/parts-2".into(),
        Box::new(DiscordMarkdown::new().with_limit(120).with_max_parts(2)),
    ));
    out.push((
        "slack/60/parts-3".into(),
        Box::new(SlackMrkdwn::new().with_limit(60).with_max_parts(3)),
    ));
    out
}

/// The hash of every render per configuration, taken from the renderers as they were when the
/// corpus was fixed (main at 6fe79cd).
const EXPECTED: &[(&str, u64)] = &[
    ("plain/none", 0xc2f154ab5669c8f0),
    ("plain/8", 0xf15e407822744079),
    ("slack/8", 0x7d5d8b4f43a6c664),
    ("discord/8", 0x42195cfefe1a8f68),
    ("telegram/8", 0x66ad9313d10644d1),
    ("web/8", 0xe7e641863e35e9ba),
    ("plain/24", 0x9a947bd04d87a4dc),
    ("slack/24", 0xc487d836e2f5f6d7),
    ("discord/24", 0x8c1b1322a6f51300),
    ("telegram/24", 0x137b1c8f96d801f9),
    ("web/24", 0x9d1def2a64acdacd),
    ("plain/80", 0xa63a806253995d2d),
    ("slack/80", 0xb0d149533b20fe77),
    ("discord/80", 0x4eceb9aa6f76fcff),
    ("telegram/80", 0x2de6c9a5e122ada6),
    ("web/80", 0x4e89ae61e552f7eb),
    ("plain/300", 0xd32d35e71fae016f),
    ("slack/300", 0xae20f735fe9e2547),
    ("discord/300", 0xdfdf0b2eeaf75a19),
    ("telegram/300", 0x14dfc072e04b72c7),
    ("web/300", 0x7d4e61dc7500f2ae),
    ("plain/2000", 0x790f8d01b3846f7d),
    ("slack/2000", 0xf54dbe9005e689e0),
    ("discord/2000", 0xa7a2592bbd2ca650),
    ("telegram/2000", 0x502b9c45bf2a6645),
    ("web/2000", 0x6d9176cd7aae6102),
    ("slack/default", 0x0a819874e4e6fef4),
    ("discord/default", 0xa39c7542cd6f5166),
    ("telegram/default", 0x7a17ac542df6ffb5),
    ("web/default", 0x28879bc89be20226),
    ("telegram/300/entities-4", 0xbf7482447a227b79),
    ("telegram/100/entities-1", 0xb1334fe2dc77bef6),
    ("discord/120/parts-2", 0x3571af058b4f2130),
    ("slack/60/parts-3", 0x8cc8892847c3e1af),
];

#[test]
fn every_part_of_every_render_is_as_pinned() {
    let docs = corpus();
    let mut dump = std::env::var_os("MESH_GOLDEN_DUMP").map(|_| String::new());
    let mut got = Vec::new();
    for (name, renderer) in configurations() {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for (n, doc) in docs.iter().enumerate() {
            let mut record = String::new();
            match renderer.render_parts(&Markdown::new(doc.as_str())) {
                Ok(rendered) => {
                    for part in rendered.parts() {
                        record.push_str(part);
                        record.push('\u{1}');
                    }
                    let _ = write!(record, "{:?}", rendered.cut());
                }
                Err(e) => {
                    let _ = write!(record, "error {e:?}");
                }
            }
            fnv(&mut hash, record.as_bytes());
            fnv(&mut hash, &[0xff]);
            if let Some(dump) = &mut dump {
                let _ = writeln!(dump, "== {name} #{n}\n{record:?}");
            }
        }
        got.push((name, hash));
    }
    if let (Some(path), Some(dump)) = (std::env::var_os("MESH_GOLDEN_DUMP"), dump) {
        std::fs::write(path, dump).expect("the dump is written");
    }
    if std::env::var_os("MESH_GOLDEN_PRINT").is_some() {
        for (name, hash) in &got {
            println!("    (\"{name}\", {hash:#018x}),");
        }
    }
    let mismatched: Vec<&str> = got
        .iter()
        .zip(EXPECTED)
        .filter(|((name, hash), (want_name, want))| name != want_name || hash != want)
        .map(|((name, _), _)| name.as_str())
        .collect();
    assert_eq!(
        got.len(),
        EXPECTED.len(),
        "one pinned hash per configuration"
    );
    assert!(
        mismatched.is_empty(),
        "the output changed for {mismatched:?} (MESH_GOLDEN_DUMP=FILE writes every render)"
    );
}
