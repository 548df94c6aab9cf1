//! `quick | deep` from cheap signals, so a route can be chosen before the turn: a long or
//! multi-part message, code, files, several links, or words that ask for analysis read as
//! deep; everything else as quick.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use crate::engagement::Complexity;
use crate::ingress::inbound::Inbound;

/// Past this many bytes of text a question reads as deep.
const LONG_TEXT: usize = 400;

/// Words that ask for analysis, planning or writing rather than a fact (matched
/// ASCII-case-insensitively anywhere, so `analy` covers analyse, analyze and analysis).
const DEEP_WORDS: &[&str] = &[
    "analy",
    "compare",
    "comparison",
    "design",
    "architect",
    "debug",
    "investigat",
    "root cause",
    "step by step",
    "step-by-step",
    "explain why",
    "explain how",
    "in detail",
    "review",
    "refactor",
    "summari",
    "draft",
    "proposal",
    "report on",
    "write a",
    "write up",
    "migrat",
    "strategy",
    "trade-off",
    "tradeoff",
    "pros and cons",
    "troubleshoot",
    "diagnos",
    "plan for",
    "roadmap",
    "estimate",
    "forecast",
    "breakdown",
    "break down",
    "walk me through",
    "why does",
    "why is",
    "why did",
];

/// The compiled signals.
pub(crate) struct Gauge {
    deep_words: AhoCorasick,
}

impl Gauge {
    pub(crate) fn new() -> Result<Self, String> {
        let deep_words = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(DEEP_WORDS)
            .map_err(|e| e.to_string())?;
        Ok(Self { deep_words })
    }

    /// How hard `inbound` looks.
    pub(crate) fn measure(&self, inbound: &Inbound) -> Complexity {
        let text = inbound.text();
        let deep = text.len() > LONG_TEXT
            || text.contains("```")
            || text.lines().filter(|l| !l.trim().is_empty()).count() >= 4
            || text.matches('?').count() >= 3
            || inbound.attachments() > 0
            || inbound.links >= 2
            || self.deep_words.is_match(text);
        if deep {
            Complexity::Deep
        } else {
            Complexity::Quick
        }
    }
}

impl std::fmt::Debug for Gauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gauge").finish_non_exhaustive()
    }
}
