//! Per-chunk encoding cost of the web surface's UI message stream: `UiChunk::write_sse` (the
//! `data: ` prefix, the chunk's JSON, the blank line, into a reused buffer) against
//! `serde_json::to_string` of the same chunk alone, the floor any encoder of the chunk pays.
//! Two deltas: a typical block (one paragraph, 120 bytes) and a long one (a 2 KiB part with
//! quotes and newlines to escape); and the fixed chunks a part adds around its delta.
//!
//! `cargo bench -p mesh-egress --all-features --bench web_chunk`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mesh_egress::web::UiChunk;
use std::hint::black_box;

fn paragraph() -> String {
    "Release 2.4 is **green**: all 412 tests passed, the canary has been healthy for an hour, and nothing blocks it."
        .to_owned()
}

fn long_part() -> String {
    let line = "The \"rollout\" starts at 14:00;\nthe on-call engineer watches the error budget. ";
    line.repeat(2048 / line.len() + 1)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("web_chunk");
    for (name, delta) in [("delta_120B", paragraph()), ("delta_2KiB", long_part())] {
        let chunk = UiChunk::TextDelta {
            id: "t3",
            delta: &delta,
        };
        group.throughput(Throughput::Elements(1));
        let mut out = Vec::with_capacity(4096);
        group.bench_function(format!("{name}/write_sse"), |b| {
            b.iter(|| {
                out.clear();
                black_box(&chunk).write_sse(&mut out);
                black_box(out.len())
            })
        });
        group.bench_function(format!("{name}/serde_json_to_string"), |b| {
            b.iter(|| {
                black_box(
                    serde_json::to_string(black_box(&chunk))
                        .expect("json")
                        .len(),
                )
            })
        });
    }
    let fixed = [
        UiChunk::TextStart { id: "t3" },
        UiChunk::TextEnd { id: "t3" },
    ];
    let mut out = Vec::with_capacity(256);
    group.bench_function("start_and_end/write_sse", |b| {
        b.iter(|| {
            out.clear();
            for chunk in &fixed {
                black_box(chunk).write_sse(&mut out);
            }
            black_box(out.len())
        })
    });
    group.bench_function("start_and_end/serde_json_to_string", |b| {
        b.iter(|| {
            let mut len = 0;
            for chunk in &fixed {
                len += serde_json::to_string(black_box(chunk)).expect("json").len();
            }
            black_box(len)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
