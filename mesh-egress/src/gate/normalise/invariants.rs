//! The normaliser's invariants on the fuzz target's seed corpus (run on stable, as an
//! ordinary unit test) and on generated text: the projection never panics, every projected range
//! maps back inside the source on its char boundaries and in order, and every finding's span
//! is a valid range of the candidate. The same checks as `fuzz/fuzz_targets/gate_normalise.rs`.
use std::path::Path;

use super::Projection;
use crate::gate::QualityGate;
use proptest::prelude::*;

/// The seed directory is small and flat; more entries than this is a mistake, not a corpus.
const MAX_SEEDS: usize = 1_000;

fn check(source: &str, gate: &QualityGate) -> Result<(), String> {
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
        if !(span.start <= span.end && span.end <= source.len()) {
            return Err(format!(
                "{:?} -> {span:?} outside 0..{}",
                pair,
                source.len()
            ));
        }
        if !(source.is_char_boundary(span.start) && source.is_char_boundary(span.end)) {
            return Err(format!("{:?} -> {span:?} not on char boundaries", pair));
        }
        if span.start < last_start {
            return Err(format!("{:?} -> {span:?} maps back out of order", pair));
        }
        last_start = span.start;
    }
    let clamped = projection.source_span(projected.len() + 7..usize::MAX);
    if clamped.end > source.len() {
        return Err(format!("clamped span {clamped:?}"));
    }
    let _ = projection.source_span(std::ops::Range { start: 3, end: 1 });
    for finding in gate.scan(source, "why did it fail?") {
        let span = finding.span();
        if !(span.start <= span.end
            && span.end <= source.len()
            && source.is_char_boundary(span.start)
            && source.is_char_boundary(span.end))
        {
            return Err(format!("finding {finding:?} has a bad span"));
        }
    }
    Ok(())
}

fn gate() -> QualityGate {
    QualityGate::builder()
        .canary("mesh-canary-3f9a1c7e")
        .build()
        .expect("gate")
}

#[test]
fn the_fuzz_seed_corpus_keeps_every_invariant() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gate_normalise_seeds");
    let gate = gate();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir)
        .expect("seed directory")
        .take(MAX_SEEDS)
    {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("seed");
        let text = String::from_utf8_lossy(&bytes);
        if let Err(why) = check(&text, &gate) {
            panic!("{}: {why}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 15, "the seed corpus is there ({seen} seeds)");
}

#[test]
fn the_seeds_exercise_each_normalisation() {
    // Each seed is there for a reason; these show a few of them still do what they are for.
    let read = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/gate_normalise_seeds")
            .join(name);
        String::from_utf8(std::fs::read(path).expect("seed")).expect("utf-8 seed")
    };
    assert_eq!(
        Projection::of(&read("entity_word")).text(),
        "LLM request failed"
    );
    assert!(
        Projection::of(&read("entity_hex_think"))
            .text()
            .starts_with("<think>plan</think>")
    );
    assert_eq!(
        Projection::of(&read("full_width")).text(),
        "LLM request failed 3f9"
    );
    assert!(
        !Projection::of(&read("format_chars"))
            .text()
            .contains('\u{200b}')
    );
    assert!(
        Projection::of(&read("confusables"))
            .text()
            .starts_with("mesh-canary")
    );
}

proptest! {
    #[test]
    fn any_mix_of_markup_entities_and_unicode_keeps_every_invariant(
        source in "(\\PC|&#[0-9]{1,8};|&#x[0-9a-fA-F]{1,7};|&[a-zA-Z]{1,6};|\\*|_|`|~|\\\\|[\\u{300}-\\u{36f}]|[\\u{200b}-\\u{200f}]|[\\u{ff01}-\\u{ff5e}]|\\s{1,3}|<think>|</think>|LLM request failed)*",
    ) {
        let gate = gate();
        prop_assert!(check(&source, &gate).is_ok(), "{:?}", check(&source, &gate));
    }
}
