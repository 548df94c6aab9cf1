//! Render+chunk throughput per channel against pulldown-cmark's bare parse of the same text,
//! and the time to render 64 KB of hostile, deeply nested Markdown with the default budget.
//!
//! The throughput renderers have no part budget (`with_max_parts(usize::MAX)`), so a long
//! document is rendered and chunked whole, as before the budget existed.
//!
//! `cargo bench -p mesh-egress --bench render`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mesh_egress::Markdown;
use mesh_egress::channel::{DiscordMarkdown, PlainText, Render, SlackMrkdwn, TelegramHtml};
use pulldown_cmark::{Options, Parser};
use std::hint::black_box;

/// A chat-style message: prose, emphasis, a list, code, a quote, a table, links, emoji.
const BLOCK: &str = "## Deploy report\n\nThe **v2** rollout finished in *12 minutes*; two ~~flaky~~ checks were \
retried. See [the dashboard](https://example.com/dash?run=42&view=full) for details.\n\n\
- api: healthy 👍🏽\n- worker: healthy\n  - queue depth `0`\n1. first step\n2. second step\n\n\
```rust\nfn main() {\n    println!(\"deployed <v2> & done\");\n}\n```\n\n\
> Note: the 🇩🇪 region lags by a few seconds.\n\n\
| service | p99 ms |\n|---|---:|\n| api | 41 |\n| worker | 120 |\n\n\
Family 👨‍👩‍👧‍👦 says 漢字かな交じり文。 Done!\n\n";

fn document(bytes: usize) -> String {
    let mut doc = String::with_capacity(bytes + BLOCK.len());
    while doc.len() < bytes {
        doc.push_str(BLOCK);
    }
    doc
}

fn render(c: &mut Criterion) {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let renderers: [(&str, Box<dyn Render>); 4] = [
        (
            "plain",
            Box::new(PlainText::new().with_limit(4000).with_max_parts(usize::MAX)),
        ),
        (
            "slack",
            Box::new(SlackMrkdwn::new().with_max_parts(usize::MAX)),
        ),
        (
            "discord",
            Box::new(DiscordMarkdown::new().with_max_parts(usize::MAX)),
        ),
        (
            "telegram",
            Box::new(TelegramHtml::new().with_max_parts(usize::MAX)),
        ),
    ];
    for (label, bytes) in [("1KB", 1 << 10), ("64KB", 64 << 10), ("1MB", 1 << 20)] {
        let text = document(bytes);
        let body = Markdown::new(text.clone());
        let mut group = c.benchmark_group(format!("render/{label}"));
        group.throughput(Throughput::Bytes(text.len() as u64));
        if bytes >= 1 << 20 {
            group.sample_size(10);
        }
        group.bench_function("pulldown-cmark parse", |b| {
            b.iter(|| Parser::new_ext(black_box(&text), options).count())
        });
        for (name, renderer) in &renderers {
            group.bench_with_input(BenchmarkId::new("render+chunk", name), &body, |b, body| {
                b.iter(|| renderer.render(black_box(body)).expect("renders"))
            });
        }
        group.finish();
    }
}

/// 64 KB of one nested construct around a word.
fn nested(open: &str, close: &str) -> String {
    let depth = (64 << 10) / (open.len() + close.len());
    format!("{}word{}", open.repeat(depth), close.repeat(depth))
}

fn hostile(c: &mut Criterion) {
    let renderers: [(&str, Box<dyn Render>); 4] = [
        ("plain", Box::new(PlainText::new().with_limit(4000))),
        ("slack", Box::new(SlackMrkdwn::new())),
        ("discord", Box::new(DiscordMarkdown::new())),
        ("telegram", Box::new(TelegramHtml::new())),
    ];
    let shapes = [
        ("images", nested("![", "](u)")),
        ("quotes", nested("> ", "")),
        ("emphasis", nested("*_", "_*")),
        ("links", nested("[", "](https://a.example)")),
    ];
    let mut group = c.benchmark_group("render/hostile-64KB");
    group.sample_size(10);
    for (shape, text) in &shapes {
        let body = Markdown::new(text.clone());
        for (name, renderer) in &renderers {
            group.bench_with_input(BenchmarkId::new(*shape, name), &body, |b, body| {
                b.iter(|| renderer.render(black_box(body)).expect("renders"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, render, hostile);
criterion_main!(benches);
