//! Issue 37, item 6: the machinery corpus, both ways (`data/machinery_corpus.json`).
//!
//! At least 100 pieces of machinery taken from real agents' issues and from the model families'
//! parser fixtures (tool progress lines of hermes-agent and openclaw, ReAct logs, tool-call
//! markup written as text, control tokens), and at least 100 benign look-alikes taken from real
//! answers and docs (REPL transcripts, emoji changelogs, answers in Chinese, Japanese, Korean and
//! Russian, shell and config snippets, answers about tool-calling formats, explanations of an
//! HTTP error the person asked about), each citing its source. Every sample runs through Layer
//! A's text check (`text_tool_format`) and through the default quality gate (no judge, as `turn
//! --gate on` builds it), and the figures are printed (`-- --nocapture`) for the tuning part and
//! the held-out part apart. The held-out part is a quarter fixed by the text alone: a sample is
//! held out when the first byte of the SHA-256 of its `text` is below 64.
//!
//! The floors below are what the held-out part scores today (a ratchet: a change that catches
//! fewer machinery samples or delivers fewer benign ones unchanged fails here; raise them as
//! the rules improve).
//!
//! Held-out samples missed today (30 machinery, 24 benign), for the maintainers to fix:
//!
//! - machinery Layer A does not flag (17): `oc-noreply-appended`, `oc-bare-heartbeat-ok`,
//!   `oc-trace-show-path`, `oc-claude-cli-args`, `ha-webui-exec`, `ha-webui-read`,
//!   `ha-webui-three`, `ha-slack-skill-views`, `ha-slack-execute-code`, `ha-slack-skill-emoji`,
//!   `react-dspy-go-hallucinated`, `functools-surrounding`, `llama3json-trailing-brace`,
//!   `react-lc-pandas`, `helloagents-react-warn`, `lmstudio-lfm-failed-call`,
//!   `llamacpp-empty-tool-calls` (traces, ReAct logs, control tokens and error text are not
//!   Layer A's to catch; `functools-surrounding` and `llama3json-trailing-brace` are calls it
//!   misses).
//! - machinery the gate delivers (15): the same, less `ha-slack-skill-emoji` and
//!   `react-lc-pandas`. The bare control token (`oc-bare-heartbeat-ok`) is the silence
//!   filter's, which this test does not run.
//! - benign Layer A flags (1): `tabby-lfm2-explain` (a PR description naming LFM2's
//!   `<|tool_call_start|>[...]<|tool_call_end|>` sentinels outside code).
//! - benign the gate changes or blocks (1): `tabby-lfm2-explain`.
#![cfg(test)]

use mesh_egress::gate::{GateVerdict, QualityGate};
use mesh_egress::model::text_tool_format;
use mesh_egress::{AgentMessage, Attribution, Turn};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};

const CORPUS: &str = include_str!("data/machinery_corpus.json");

/// The person's message when a sample records none.
const DEFAULT_USER: &str = "Can you help me with this?";

/// Held-out floors, measured on today's code (see the list of misses above).
const HELD_MACHINERY_LAYER_A: usize = 13;
const HELD_MACHINERY_GATE: usize = 15;
const HELD_MACHINERY_EITHER: usize = 15;
const HELD_BENIGN_LAYER_A: usize = 23;
const HELD_BENIGN_GATE: usize = 23;
const HELD_BENIGN_BOTH: usize = 23;

struct Sample {
    id: String,
    machinery: bool,
    family: String,
    text: String,
    source: String,
    user: Option<String>,
}

fn corpus() -> Vec<Sample> {
    let doc: Value = serde_json::from_str(CORPUS).expect("the corpus is JSON");
    let field = |s: &Value, k: &str| s.get(k).and_then(Value::as_str).map(str::to_owned);
    doc["samples"]
        .as_array()
        .expect("`samples` is an array")
        .iter()
        .map(|s| {
            let id = field(s, "id").expect("every sample has an id");
            let kind = field(s, "kind").unwrap_or_default();
            assert!(
                kind == "machinery" || kind == "benign",
                "{id}: kind {kind:?}"
            );
            Sample {
                machinery: kind == "machinery",
                family: field(s, "family").unwrap_or_else(|| panic!("{id}: no family")),
                text: field(s, "text").unwrap_or_else(|| panic!("{id}: no text")),
                source: field(s, "source").unwrap_or_default(),
                user: field(s, "user"),
                id,
            }
        })
        .collect()
}

fn held_out(text: &str) -> bool {
    Sha256::digest(text.as_bytes())[0] < 64
}

/// What happened to one sample.
struct Outcome {
    /// Layer A says the text holds a text tool call.
    layer_a: bool,
    /// The gate blocked it, or sent something other than the text.
    gate_changed: bool,
}

async fn run(sample: &Sample, gate: &QualityGate) -> Outcome {
    let turn = Turn::new(Attribution::new("atlas", "c1", "r1"));
    let message = AgentMessage::new(sample.text.as_str(), turn.attribution().clone());
    let user = sample.user.as_deref().unwrap_or(DEFAULT_USER);
    let e = gate.evaluate(&turn, user, message).await;
    let sent = e.message().map(|m| m.body().as_str().to_owned());
    let gate_changed = matches!(e.verdict(), GateVerdict::Blocked { .. })
        || sent.as_deref() != Some(sample.text.as_str());
    Outcome {
        layer_a: text_tool_format(&sample.text).is_some(),
        gate_changed,
    }
}

#[derive(Default)]
struct Figures {
    machinery: usize,
    machinery_layer_a: usize,
    machinery_gate: usize,
    machinery_either: usize,
    benign: usize,
    benign_layer_a: usize,
    benign_gate: usize,
    benign_both: usize,
    missed: Vec<String>,
}

impl Figures {
    fn add(&mut self, sample: &Sample, o: &Outcome) {
        if sample.machinery {
            self.machinery += 1;
            self.machinery_layer_a += usize::from(o.layer_a);
            self.machinery_gate += usize::from(o.gate_changed);
            self.machinery_either += usize::from(o.layer_a || o.gate_changed);
            if !o.layer_a {
                self.missed
                    .push(format!("machinery not flagged by Layer A: {}", sample.id));
            }
            if !o.gate_changed {
                self.missed
                    .push(format!("machinery delivered by the gate: {}", sample.id));
            }
        } else {
            self.benign += 1;
            self.benign_layer_a += usize::from(!o.layer_a);
            self.benign_gate += usize::from(!o.gate_changed);
            self.benign_both += usize::from(!o.layer_a && !o.gate_changed);
            if o.layer_a {
                self.missed
                    .push(format!("benign flagged by Layer A: {}", sample.id));
            }
            if o.gate_changed {
                self.missed.push(format!(
                    "benign changed or blocked by the gate: {}",
                    sample.id
                ));
            }
        }
    }

    fn print(&self, part: &str) {
        let pct = |n: usize, d: usize| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        println!("{part}:");
        println!(
            "  machinery caught ({}): Layer A {} ({:.0}%), gate {} ({:.0}%), either {} ({:.0}%)",
            self.machinery,
            self.machinery_layer_a,
            pct(self.machinery_layer_a, self.machinery),
            self.machinery_gate,
            pct(self.machinery_gate, self.machinery),
            self.machinery_either,
            pct(self.machinery_either, self.machinery),
        );
        println!(
            "  benign delivered unchanged ({}): Layer A {} ({:.0}%), gate {} ({:.0}%), both {} ({:.0}%)",
            self.benign,
            self.benign_layer_a,
            pct(self.benign_layer_a, self.benign),
            self.benign_gate,
            pct(self.benign_gate, self.benign),
            self.benign_both,
            pct(self.benign_both, self.benign),
        );
        for m in &self.missed {
            println!("    {m}");
        }
    }
}

#[test]
fn the_corpus_keeps_its_rules() {
    let samples = corpus();
    let machinery = samples.iter().filter(|s| s.machinery).count();
    let benign = samples.len() - machinery;
    assert!(machinery >= 100, "{machinery} machinery samples");
    assert!(benign >= 100, "{benign} benign samples");
    let mut ids = HashSet::new();
    let mut per_source: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &samples {
        assert!(ids.insert(s.id.as_str()), "{} appears twice", s.id);
        assert!(!s.source.trim().is_empty(), "{} cites no source", s.id);
        assert!(!s.family.trim().is_empty(), "{} names no family", s.id);
        assert!(!s.text.is_empty(), "{} has no text", s.id);
        *per_source.entry(s.source.as_str()).or_default() += 1;
    }
    for (source, n) in per_source {
        assert!(n <= 10, "{n} samples from {source}");
    }
    // Both parts hold both kinds.
    for machinery in [true, false] {
        let kind: Vec<_> = samples
            .iter()
            .filter(|s| s.machinery == machinery)
            .collect();
        assert!(kind.iter().any(|s| held_out(&s.text)));
        assert!(kind.iter().any(|s| !held_out(&s.text)));
    }
}

#[tokio::test]
async fn the_figures_on_the_held_out_part_do_not_fall() {
    let gate = QualityGate::builder().build().expect("the default gate");
    let (mut tuning, mut held) = (Figures::default(), Figures::default());
    for sample in corpus() {
        let outcome = run(&sample, &gate).await;
        if held_out(&sample.text) {
            held.add(&sample, &outcome);
        } else {
            tuning.add(&sample, &outcome);
        }
    }
    tuning.print("tuning part");
    held.print("held-out part");
    let floors = [
        (
            "held-out machinery caught by Layer A",
            held.machinery_layer_a,
            HELD_MACHINERY_LAYER_A,
        ),
        (
            "held-out machinery caught by the gate",
            held.machinery_gate,
            HELD_MACHINERY_GATE,
        ),
        (
            "held-out machinery caught by either",
            held.machinery_either,
            HELD_MACHINERY_EITHER,
        ),
        (
            "held-out benign unflagged by Layer A",
            held.benign_layer_a,
            HELD_BENIGN_LAYER_A,
        ),
        (
            "held-out benign delivered by the gate",
            held.benign_gate,
            HELD_BENIGN_GATE,
        ),
        (
            "held-out benign delivered by both",
            held.benign_both,
            HELD_BENIGN_BOTH,
        ),
    ];
    for (what, now, floor) in floors {
        assert!(now >= floor, "{what}: {now}, below the floor {floor}");
    }
}
