//! Fuzzes the gate's normalised projection and the heuristic pass over it: for any input, the
//! projection never panics, every projected range maps back inside the source, on its char
//! boundaries, in order, and every finding's span is a valid range of the candidate.
//!
//! `cargo +nightly fuzz run gate_normalise fuzz/corpus/gate_normalise
//! mesh-egress/tests/data/gate_normalise_seeds -- -max_total_time=60` (new inputs go to the
//! first directory; the seeds are the second). The seeds also run on stable as an ordinary
//! test: `cargo test -p mesh-egress --all-features --lib normalise::invariants`, which applies the
//! same checks (`mesh-egress/src/gate/normalise/invariants.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mesh_egress::__internals::Projection;
use mesh_egress::gate::QualityGate;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let source = text.as_ref();
    let projection = Projection::of(source);
    let projected = projection.text();
    let boundaries: Vec<usize> = projected
        .char_indices()
        .map(|(i, _)| i)
        .chain([projected.len()])
        .collect();
    let mut last_start = 0;
    for pair in boundaries.windows(2) {
        let span = projection.source_span(pair[0]..pair[1]);
        assert!(
            span.start <= span.end && span.end <= source.len(),
            "{span:?}"
        );
        assert!(source.is_char_boundary(span.start) && source.is_char_boundary(span.end));
        assert!(span.start >= last_start, "spans map back in order");
        last_start = span.start;
    }
    let whole = projection.source_span(0..projected.len());
    assert!(whole.end <= source.len());
    // Out-of-range and inverted ranges are clamped, never a panic.
    let _ = projection.source_span(projected.len() + 7..usize::MAX);
    let _ = projection.source_span(std::ops::Range { start: 3, end: 1 });

    let gate = QualityGate::builder()
        .canary("mesh-canary-3f9a1c7e")
        .build()
        .expect("gate");
    for finding in gate.scan(source, "why did it fail?") {
        let span = finding.span();
        assert!(
            span.start <= span.end && span.end <= source.len(),
            "{finding:?}"
        );
        assert!(source.is_char_boundary(span.start) && source.is_char_boundary(span.end));
    }
});
