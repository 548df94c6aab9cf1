//! Layer A's healthy-path check for text-protocol tool calls (`model::text_tool_format`: a look
//! at the first byte and one Aho-Corasick pass over every format's markers) on clean answers of
//! 1 KB and 64 KB, against the cheapest check that could be written instead: a bare
//! `str::contains` of one marker (`<tool_call>`), which finds one format and no other. Goal: the
//! full check within 2× of it.
//!
//! The silence-token filter on the same text (two tokens declared) is reported beside it.
//!
//! `cargo bench -p mesh-egress --all-features --bench tool_text` (add `-- --quick` on a busy
//! machine)

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mesh_egress::model::text_tool_format;
use mesh_egress::silence::SilenceTokens;

const SENTENCES: &[&str] = &[
    "The Rotterdam consignment cleared customs on Tuesday and is now with the haulier.",
    "Invoice totals for March are up eleven percent, mostly because of the new cold-chain lanes.",
    "Warehouse B will run a second shift next week to absorb the seasonal peak in returns.",
    "Carrier on-time performance improved to ninety-four percent after the route changes.",
    "We recommend consolidating the Leeds and Sheffield pickups into a single morning run.",
    "The pallet audit found three mislabelled bays, which the night team has already fixed.",
    "Fuel surcharges are expected to ease in the second quarter as contracts renew.",
    "Please confirm the delivery window with the customer before booking the tail-lift van.",
];

/// Clean prose of exactly `len` bytes (ASCII, so any cut is a char boundary).
fn clean_text(len: usize) -> String {
    let mut out = String::with_capacity(len + 128);
    let mut i = 0usize;
    while out.len() < len {
        out.push_str(SENTENCES[i % SENTENCES.len()]);
        out.push(if i % 5 == 4 { '\n' } else { ' ' });
        i += 1;
    }
    out.truncate(len);
    out
}

fn healthy_path(c: &mut Criterion) {
    let tokens = SilenceTokens::new(["NO_REPLY", "HEARTBEAT_OK"]).expect("valid tokens");
    let mut group = c.benchmark_group("text_tool_check");
    for (label, len) in [("1KB", 1024usize), ("64KB", 64 * 1024)] {
        let text = clean_text(len);
        assert_eq!(text_tool_format(&text), None, "the text is clean");
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(
            BenchmarkId::new("text_tool_format", label),
            &text,
            |b, t| {
                b.iter(|| text_tool_format(black_box(t)));
            },
        );
        group.bench_with_input(
            BenchmarkId::new("str_contains_one_marker", label),
            &text,
            |b, t| b.iter(|| black_box(t).contains("<tool_call>")),
        );
        group.bench_with_input(
            BenchmarkId::new("silence_tokens_apply", label),
            &text,
            |b, t| {
                b.iter(|| mesh_egress::__internals::silence_changes(&tokens, black_box(t)));
            },
        );
    }
    group.finish();
}

criterion_group!(benches, healthy_path);
criterion_main!(benches);
