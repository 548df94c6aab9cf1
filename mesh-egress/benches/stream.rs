//! Per-chunk cost of the streaming SSE parser (`SseDecoder` + `decode_chunk`: bounded line
//! assembly across reads, keep-alive and error handling, the chunk's JSON into a
//! `StreamChunk`) against a bare SSE line parse of the same bytes (split on `\n`, strip
//! `data: `), and against that bare parse plus `serde_json::Value` for each event (the least a
//! client that reads the delta must do).
//!
//! `ours+block_cutter` adds what a streamed turn does with each delta before the gate sees a
//! block: the block cutter (`BlockCutter::push`), against the same bare line parse.
//!
//! `cargo bench -p mesh-egress --all-features --bench stream`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mesh_egress::__internals::{SseDecoder, SseEvent, decode_chunk};
use mesh_egress::stream::{BlockCutter, CutterConfig};
use std::hint::black_box;

/// 600 token chunks exactly as the chat-completions stream sends them, then the finish chunk
/// and `[DONE]`.
fn wire(tokens: usize) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..tokens {
        // A paragraph break every 25 tokens, so the cutter cuts blocks as it would in a reply.
        let word = if i % 25 == 24 {
            "done.\\n\\n"
        } else {
            [
                "The ", "build ", "is ", "green ", "and ", "the ", "tests ", "pass. ",
            ][i % 8]
        };
        out.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\
             \"model\":\"gpt-4o-mini\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{word}\"}},\
             \"finish_reason\":null}}]}}\n\n"
        ));
    }
    out.push_str("data: {\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

/// The parser under test, fed in reads of `read` bytes (lines cut across reads).
fn ours(bytes: &[u8], read: usize) -> usize {
    let mut decoder = SseDecoder::new(1 << 20, 8 << 20);
    let mut events = Vec::new();
    let mut text = 0;
    for part in bytes.chunks(read) {
        decoder.feed(part, &mut events).expect("well-formed");
        for event in events.drain(..) {
            if let SseEvent::Data { data, error } = event {
                text += decode_chunk(&data, error).expect("a chunk").text.len();
            }
        }
    }
    text
}

/// The parser, then every delta through the block cutter: the blocks a streamed turn checks.
fn ours_and_cutter(bytes: &[u8], read: usize) -> usize {
    let mut decoder = SseDecoder::new(1 << 20, 8 << 20);
    let mut cutter = BlockCutter::new(CutterConfig::default());
    let mut events = Vec::new();
    let mut blocks = 0;
    for part in bytes.chunks(read) {
        decoder.feed(part, &mut events).expect("well-formed");
        for event in events.drain(..) {
            if let SseEvent::Data { data, error } = event {
                let chunk = decode_chunk(&data, error).expect("a chunk");
                blocks += black_box(cutter.push(&chunk.text)).len();
            }
        }
    }
    blocks + usize::from(cutter.finish().is_some())
}

/// The bare line parse: split on `\n`, keep what follows `data: `, stop at `[DONE]`.
fn bare_lines(bytes: &[u8]) -> usize {
    let mut payload = 0;
    for line in bytes.split(|&b| b == b'\n') {
        if let Some(data) = line.strip_prefix(b"data: ") {
            if data == b"[DONE]" {
                break;
            }
            payload += black_box(data).len();
        }
    }
    payload
}

/// The bare line parse plus each event's JSON as a `serde_json::Value`, reading the delta.
fn bare_lines_json(bytes: &[u8]) -> usize {
    let mut text = 0;
    for line in bytes.split(|&b| b == b'\n') {
        if let Some(data) = line.strip_prefix(b"data: ") {
            if data == b"[DONE]" {
                break;
            }
            let value: serde_json::Value = serde_json::from_slice(data).expect("json");
            text += value["choices"][0]["delta"]["content"]
                .as_str()
                .map_or(0, str::len);
        }
    }
    text
}

fn stream(c: &mut Criterion) {
    const TOKENS: usize = 600;
    let bytes = wire(TOKENS);
    let mut group = c.benchmark_group("sse/600_chunks");
    // Per chunk: criterion reports time per element.
    group.throughput(Throughput::Elements(TOKENS as u64 + 1));
    group.bench_function("ours_reads_1460B", |b| {
        b.iter(|| ours(black_box(&bytes), 1460))
    });
    group.bench_function("ours_reads_64B", |b| b.iter(|| ours(black_box(&bytes), 64)));
    group.bench_function("ours+block_cutter_reads_1460B", |b| {
        b.iter(|| ours_and_cutter(black_box(&bytes), 1460))
    });
    group.bench_function("bare_line_split", |b| {
        b.iter(|| bare_lines(black_box(&bytes)))
    });
    group.bench_function("bare_line_split+serde_json_value", |b| {
        b.iter(|| bare_lines_json(black_box(&bytes)))
    });
    group.finish();
}

criterion_group!(benches, stream);
criterion_main!(benches);
