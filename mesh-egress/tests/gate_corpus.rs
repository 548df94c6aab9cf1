//! The labelled corpus: recall on strings that must never reach a user, and false positives on
//! benign look-alikes, with the judge failing (the worst case: the heuristics stand alone).
//!
//! `cargo test -p mesh-egress --features gate --test gate_corpus -- --nocapture` prints the
//! figures.
#![cfg(feature = "gate")]

use mesh_egress::gate::{
    Confidence, Evaluation, GateVerdict, Judge, JudgeError, JudgeRequest, JudgeVerdict, QualityGate,
};
use mesh_egress::{AgentMessage, Attribution, Turn};
use serde_json::Value;

const CORPUS: &str = include_str!("data/gate_corpus.json");

/// A judge whose model call always fails.
struct Failing;

impl Judge for Failing {
    async fn judge(
        &self,
        _turn: &Turn,
        _request: &JudgeRequest<'_>,
    ) -> Result<JudgeVerdict, JudgeError> {
        Err(JudgeError::model("provider returned 503"))
    }
}

struct Case {
    id: String,
    user: String,
    candidate: String,
    leak: Option<String>,
}

fn cases(corpus: &Value, set: &str) -> Vec<Case> {
    corpus[set]
        .as_array()
        .unwrap_or_else(|| panic!("corpus has no `{set}` array"))
        .iter()
        .map(|c| Case {
            id: c["id"].as_str().expect("id").to_owned(),
            user: c["user"].as_str().expect("user").to_owned(),
            candidate: c["candidate"].as_str().expect("candidate").to_owned(),
            leak: c["leak"].as_str().map(str::to_owned),
        })
        .collect()
}

fn gates(corpus: &Value) -> [(&'static str, QualityGate); 2] {
    let prompt = corpus["system_prompt"].as_str().expect("system_prompt");
    let canary = corpus["canary"].as_str().expect("canary");
    let base = || {
        QualityGate::builder()
            .system_prompt(prompt, 0.5)
            .canary(canary)
    };
    [
        ("no judge", base().build().expect("gate")),
        (
            "failing judge",
            base().judge(Failing).build().expect("gate"),
        ),
    ]
}

async fn run(gate: &QualityGate, case: &Case) -> Evaluation {
    let turn = Turn::new(Attribution::new("atlas", case.id.as_str(), "corpus"));
    let msg = AgentMessage::new(case.candidate.as_str(), turn.attribution().clone());
    gate.evaluate(&turn, case.user.as_str(), msg).await
}

fn sent(e: &Evaluation) -> Option<&str> {
    e.message().map(|m| m.body().as_str())
}

#[tokio::test]
async fn the_corpus_is_large_enough() {
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is JSON");
    assert!(cases(&corpus, "never").len() >= 40);
    assert!(cases(&corpus, "benign").len() >= 30);
}

#[tokio::test]
async fn every_never_string_is_caught_and_every_benign_look_alike_arrives_intact() {
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is JSON");
    let never = cases(&corpus, "never");
    let benign = cases(&corpus, "benign");
    let low = cases(&corpus, "low");
    let mut failures = Vec::new();
    for (label, gate) in gates(&corpus) {
        let mut caught = 0usize;
        for case in &never {
            let e = run(&gate, case).await;
            let high = e
                .findings()
                .iter()
                .any(|f| f.confidence() == Confidence::High);
            let leak = case.leak.as_deref().expect("never cases name their leak");
            let leaked = sent(&e).is_some_and(|body| body.contains(leak));
            if high && !leaked {
                caught += 1;
            } else {
                failures.push(format!(
                    "[{label}] never/{}: high={high} leaked={leaked} verdict={:?} findings={:?}",
                    case.id,
                    e.verdict(),
                    e.findings()
                ));
            }
        }
        let (mut flagged, mut flagged_high, mut false_blocks) = (0usize, 0usize, 0usize);
        for case in &benign {
            let e = run(&gate, case).await;
            if !e.findings().is_empty() {
                flagged += 1;
                println!(
                    "  benign/{} flagged: {:?}",
                    case.id,
                    e.findings()
                        .iter()
                        .map(|f| (f.rule_id(), f.confidence().as_str(), f.demotion()))
                        .collect::<Vec<_>>()
                );
            }
            if e.findings()
                .iter()
                .any(|f| f.confidence() == Confidence::High)
            {
                flagged_high += 1;
            }
            if sent(&e) != Some(case.candidate.as_str()) {
                false_blocks += 1;
                failures.push(format!(
                    "[{label}] benign/{}: verdict={:?} findings={:?}",
                    case.id,
                    e.verdict(),
                    e.findings()
                ));
            }
        }
        let mut low_flagged = 0usize;
        for case in &low {
            let e = run(&gate, case).await;
            let only_low = !e.findings().is_empty()
                && e.findings()
                    .iter()
                    .all(|f| f.confidence() == Confidence::Low);
            if only_low && e.verdict() == (GateVerdict::Send { review: true }) {
                low_flagged += 1;
            } else {
                failures.push(format!(
                    "[{label}] low/{}: verdict={:?} findings={:?}",
                    case.id,
                    e.verdict(),
                    e.findings()
                ));
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let pct = |a: usize, b: usize| 100.0 * a as f64 / b as f64;
        println!(
            "gate corpus ({label}): recall on never-strings {caught}/{} ({:.1}%); benign flagged \
             {flagged}/{} ({:.1}% false-positive rate, {flagged_high} high), false blocks \
             {false_blocks}; low shapes flagged and sent for review {low_flagged}/{}",
            never.len(),
            pct(caught, never.len()),
            benign.len(),
            pct(flagged, benign.len()),
            low.len(),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
