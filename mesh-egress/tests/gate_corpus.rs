//! The labelled corpus: recall on strings that must never reach a user, and false positives on
//! benign look-alikes, with the judge failing (the worst case: the heuristics stand alone).
//!
//! **Held-out split.** Every sample belongs to the tuning part or the held-out part by a hash
//! of its id alone: 64-bit FNV-1a over the id's UTF-8 bytes (offset basis
//! `0xcbf29ce484222325`, prime `0x100000001b3`), held out when the hash is `0 mod 4` (about a
//! quarter). The split was committed before any rule was tuned on the grown corpus, and a
//! sample keeps its part for as long as it keeps its id. Figures are reported per part; the
//! test fails below 95% recall on the high-confidence (`never`) shapes of either part, or on any
//! false block of a benign sample in either part.
//!
//! `cargo test -p mesh-egress --all-features --test gate_corpus -- --nocapture` prints the
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

/// 64-bit FNV-1a: stable across platforms and Rust releases (unlike `DefaultHasher`).
fn fnv1a(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Whether a sample is in the held-out part.
fn held_out(id: &str) -> bool {
    fnv1a(id).is_multiple_of(4)
}

const PARTS: [(&str, bool); 2] = [("tuning", false), ("held-out", true)];

struct Case {
    id: String,
    class: String,
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
            class: c["class"].as_str().expect("class").to_owned(),
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

#[test]
fn the_split_is_fixed_by_the_id_hash() {
    // Known values pin the hash, so the split cannot drift with a refactor.
    assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is JSON");
    for set in ["never", "benign"] {
        let all = cases(&corpus, set);
        let held = all.iter().filter(|c| held_out(&c.id)).count();
        assert!(held > 0 && held < all.len(), "{set}: {held}/{}", all.len());
    }
}

#[tokio::test]
async fn the_corpus_is_large_enough_and_ids_are_unique() {
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is JSON");
    assert!(cases(&corpus, "never").len() >= 90);
    assert!(cases(&corpus, "benign").len() >= 55);
    let mut ids: Vec<String> = ["never", "benign", "low"]
        .iter()
        .flat_map(|set| cases(&corpus, set))
        .map(|c| c.id)
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "sample ids are unique");
}

/// One part's figures for one gate.
#[derive(Default)]
struct Tally {
    never: usize,
    caught: usize,
    benign: usize,
    flagged: usize,
    false_blocks: usize,
    per_class: std::collections::BTreeMap<String, (usize, usize)>,
}

#[tokio::test]
async fn recall_and_false_blocks_on_the_tuning_and_held_out_parts() {
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is JSON");
    let never = cases(&corpus, "never");
    let benign = cases(&corpus, "benign");
    let low = cases(&corpus, "low");
    let mut failures = Vec::new();
    for (label, gate) in gates(&corpus) {
        let mut tallies = [Tally::default(), Tally::default()];
        for case in &never {
            let t = &mut tallies[usize::from(held_out(&case.id))];
            let e = run(&gate, case).await;
            let high = e
                .findings()
                .iter()
                .any(|f| f.confidence() == Confidence::High);
            let leak = case.leak.as_deref().expect("never cases name their leak");
            let leaked = sent(&e).is_some_and(|body| body.contains(leak));
            t.never += 1;
            let class = t.per_class.entry(case.class.clone()).or_default();
            class.0 += 1;
            if high && !leaked {
                t.caught += 1;
                class.1 += 1;
            } else if !held_out(&case.id) {
                // Only the tuning part's misses are shown: the held-out part is for measuring,
                // and its samples stay unseen while rules are tuned.
                println!(
                    "  [{label}] MISSED never/{} ({}): high={high} leaked={leaked} verdict={:?} findings={:?}",
                    case.id,
                    case.class,
                    e.verdict(),
                    e.findings()
                );
            }
        }
        for case in &benign {
            let t = &mut tallies[usize::from(held_out(&case.id))];
            let e = run(&gate, case).await;
            t.benign += 1;
            if !e.findings().is_empty() {
                t.flagged += 1;
            }
            if !e.findings().is_empty() && !held_out(&case.id) {
                println!(
                    "  [{label}] benign/{} flagged: {:?}",
                    case.id,
                    e.findings()
                        .iter()
                        .map(|f| (f.rule_id(), f.confidence().as_str(), f.demotion()))
                        .collect::<Vec<_>>()
                );
            }
            if sent(&e) != Some(case.candidate.as_str()) {
                t.false_blocks += 1;
                failures.push(if held_out(&case.id) {
                    format!("[{label}] a false block in the held-out part")
                } else {
                    format!(
                        "[{label}] false block of benign/{}: verdict={:?} findings={:?}",
                        case.id,
                        e.verdict(),
                        e.findings()
                    )
                });
            }
        }
        for case in &low {
            let e = run(&gate, case).await;
            let only_low = !e.findings().is_empty()
                && e.findings()
                    .iter()
                    .all(|f| f.confidence() == Confidence::Low);
            if !(only_low && e.verdict() == (GateVerdict::Send { review: true })) {
                failures.push(format!(
                    "[{label}] low/{}: verdict={:?} findings={:?}",
                    case.id,
                    e.verdict(),
                    e.findings()
                ));
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
        for ((part, _), t) in PARTS.iter().zip(&tallies) {
            let classes = t
                .per_class
                .iter()
                .map(|(c, (n, k))| format!("{c} {k}/{n}"))
                .collect::<Vec<_>>()
                .join(", ");
            println!(
                "gate corpus [{label}] {part}: recall {}/{} ({:.1}%); benign {} samples, \
                 {} flagged, {} false blocks; per class: {classes}",
                t.caught,
                t.never,
                pct(t.caught, t.never),
                t.benign,
                t.flagged,
                t.false_blocks,
            );
            if pct(t.caught, t.never) < 95.0 {
                failures.push(format!(
                    "[{label}] {part}: recall {:.1}% is below 95%",
                    pct(t.caught, t.never)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
