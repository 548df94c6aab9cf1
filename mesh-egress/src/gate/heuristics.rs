//! The heuristic pass: one Aho-Corasick scan, hits confirmed where they occur, then context
//! from the user's message.

use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::Regex;

use crate::gate::code::code_regions;
use crate::gate::context::{asks_about, quoted};
use crate::gate::credential::credential;
use crate::gate::finding::{Demotion, Finding, Rule};
use crate::gate::normalise::Projection;
use crate::gate::overlap::PromptOverlap;
use crate::gate::rules::{
    APOLOGY_OPENERS, Check, DEFLECTIONS, OWN_CAUSES, TECHNICAL_WORDS, TRIGGERS, TagFamily, Trigger,
};
use crate::gate::seams::Seams;
use crate::gate::tool_markup;

/// How far before a hit a confirming regex may start, and after it end (bytes).
const WINDOW_BEFORE: usize = 200;
const WINDOW_AFTER: usize = 600;
/// A refusal opener must start within this many bytes of the reply's first character.
const OPENER_REACH: usize = 120;
/// Replies up to this long (trimmed) are checked as a whole: a bare error line, an apology
/// with no answer.
const SHORT_REPLY: usize = 320;

/// One automaton entry: the rule it serves, how a hit is confirmed, and the literal (the key a
/// user's message is compared against).
#[derive(Debug)]
struct Entry {
    rule: Rule,
    check: Check,
    literal: String,
    regex: Option<Regex>,
    word_start: bool,
}

/// A compile failure of the heuristics (a bad canary or an automaton limit).
#[derive(Debug, thiserror::Error)]
#[error("the gate's heuristics did not compile: {0}")]
pub(crate) struct CompileError(String);

/// The compiled heuristics of one gate.
#[derive(Debug)]
pub(crate) struct Heuristics {
    automaton: AhoCorasick,
    entries: Vec<Entry>,
    technical: AhoCorasick,
    bare_error: Regex,
    prompt: Option<PromptOverlap>,
    seams: Seams,
}

/// A finding before context: which entry produced it.
struct Raw {
    finding: Finding,
    key: Option<usize>,
}

impl Heuristics {
    pub(crate) fn compile(
        canaries: &[String],
        prompt: Option<PromptOverlap>,
    ) -> Result<Self, CompileError> {
        let mut entries = Vec::with_capacity(TRIGGERS.len() * 2 + canaries.len());
        let mut regexes: Vec<(&str, Regex)> = Vec::new();
        let own = OWN_CAUSES.iter().map(|&pattern| Trigger {
            pattern,
            rule: Rule::LlmRequestFailed,
            check: Check::Always,
        });
        for trigger in TRIGGERS.iter().copied().chain(own) {
            let regex = match trigger.check {
                Check::Regex(src) => Some(match regexes.iter().find(|(s, _)| *s == src) {
                    Some((_, r)) => r.clone(),
                    None => {
                        let r = Regex::new(src).map_err(|e| CompileError(e.to_string()))?;
                        regexes.push((src, r.clone()));
                        r
                    }
                }),
                _ => None,
            };
            let mut literals = vec![trigger.pattern.to_owned()];
            if trigger.pattern.contains('\'') {
                literals.push(trigger.pattern.replace('\'', "\u{2019}"));
            }
            for literal in literals {
                entries.push(Entry {
                    rule: trigger.rule,
                    check: trigger.check,
                    word_start: literal.starts_with(|c: char| c.is_ascii_alphanumeric()),
                    literal,
                    regex: regex.clone(),
                });
            }
        }
        for (literal, rule, check) in tool_markup::triggers() {
            entries.push(Entry {
                rule,
                check,
                word_start: literal.starts_with(|c: char| c.is_ascii_alphanumeric()),
                literal: literal.to_owned(),
                regex: None,
            });
        }
        for canary in canaries {
            // The canary as written and as the projection reads it (the projection pass looks
            // for the latter).
            let projected = Projection::of(canary).text().to_owned();
            let forms = if projected == *canary {
                vec![projected]
            } else {
                vec![canary.clone(), projected]
            };
            for literal in forms.into_iter().filter(|l| !l.is_empty()) {
                entries.push(Entry {
                    rule: Rule::Canary,
                    check: Check::Always,
                    literal,
                    regex: None,
                    word_start: false,
                });
            }
        }
        // A full DFA: the crate picks one by itself only up to 100 patterns, and the trigger
        // table has about twice that; the DFA keeps the clean-text pass at one lookup per byte.
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::DFA))
            .build(entries.iter().map(|e| e.literal.as_str()))
            .map_err(|e| CompileError(e.to_string()))?;
        let technical = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .build(TECHNICAL_WORDS)
            .map_err(|e| CompileError(e.to_string()))?;
        let bare_error = Regex::new(
            r"(?x)^(?:
                (?i:error|fatal|failure|exception)(?:\s*:|\s+\d{3}\b|[.!]?\s*$)
              | [A-Z][A-Za-z0-9_.]*(?:Error|Exception):\s
              | (?i:request\ timed\ out|connection\ error|overloaded|internal\ server\ error
                   |internal\ error|unknown\ error|an\ unknown\ error\ occurred|bad\ gateway
                   |service\ unavailable|upstream\ request\ timeout|something\ went\ wrong
                   |failed\ to\ fetch|network\ error)[.!]*\s*$
              | (?:null|undefined|NaN|\{\s*\}|\[\s*\])\s*$
            )",
        )
        .map_err(|e| CompileError(e.to_string()))?;
        let seams = Seams::new(entries.iter().map(|e| e.literal.as_str()));
        Ok(Self {
            automaton,
            entries,
            seams,
            technical,
            bare_error,
            prompt,
        })
    }

    /// The literals the automaton looks for.
    pub(crate) fn literals(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.literal.as_str())
    }

    /// Every finding in `text`, answering `user_message`, with `canaries` (per request) checked.
    ///
    /// Two passes: over the source, and, when [`Seams::wants_projection`] says the text could
    /// read differently to a person, over its normalised [`Projection`], whose findings are
    /// mapped back to source spans. Context is applied once, on the source.
    pub(crate) fn scan(&self, text: &str, user_message: &str, canaries: &[&str]) -> Vec<Finding> {
        let mut raw: Vec<Raw> = Vec::new();
        self.collect(text, user_message, canaries, &mut raw);
        if self.seams.wants_projection(text, &self.automaton) {
            let projection = Projection::of(text);
            if !projection.is_identity() {
                self.collect_projected(text, &projection, user_message, canaries, &mut raw);
            }
        }
        if raw.is_empty() {
            return Vec::new();
        }
        self.apply_context(text, user_message, &mut raw);
        merge(raw)
    }

    /// The projection pass: findings on `projection` as source findings.
    fn collect_projected(
        &self,
        text: &str,
        projection: &Projection,
        user_message: &str,
        canaries: &[&str],
        raw: &mut Vec<Raw>,
    ) {
        let mut found = Vec::new();
        self.collect(projection.text(), user_message, &[], &mut found);
        // Per-request canaries, compared as the person reads them: normalised, ASCII case
        // folded (the projection already folded the rest and mapped confusables).
        let folded = projection.text().to_ascii_lowercase();
        for canary in canaries.iter().filter(|c| !c.trim().is_empty()) {
            let needle = Projection::of(canary).text().to_ascii_lowercase();
            if let Some(at) = folded.find(needle.as_str()) {
                found.push(Raw {
                    finding: Finding::new(Rule::Canary, at..at + needle.len(), projection.text()),
                    key: None,
                });
            }
        }
        // A trace is a line, and the projection folds line breaks into spaces: read there, a
        // trace line would run on into the answer below it. The source pass finds them.
        for Raw { finding, key } in found
            .into_iter()
            .filter(|r| r.finding.rule() != Rule::ToolTrace)
        {
            let span = projection.source_span(finding.span());
            raw.push(Raw {
                finding: Finding::new(finding.rule(), span, text),
                key,
            });
        }
    }

    /// Every raw finding of one text (the source or its projection), before context.
    fn collect(&self, text: &str, user_message: &str, canaries: &[&str], raw: &mut Vec<Raw>) {
        let mut tags: Vec<(TagFamily, bool, Range<usize>, usize)> = Vec::new();
        for m in self.automaton.find_iter(text) {
            let id = m.pattern().as_usize();
            let entry = &self.entries[id];
            // A literal that starts with a letter or digit starts a word: `ENOTFOUND` is not in
            // `ModuleNotFoundError`.
            if entry.word_start
                && m.start() > 0
                && text.as_bytes()[m.start() - 1].is_ascii_alphanumeric()
            {
                continue;
            }
            let span = match entry.check {
                Check::Always => Some(m.range()),
                Check::Display => is_display(text, m.start()).then(|| m.range()),
                Check::Status => status_code_before(text, m.start())
                    .filter(|&start| is_display(text, start))
                    .map(|start| start..m.end()),
                Check::Opener => {
                    let lead = text.len() - text.trim_start().len();
                    (m.start() <= lead + OPENER_REACH).then(|| m.range())
                }
                Check::Regex(_) => entry
                    .regex
                    .as_ref()
                    .and_then(|re| confirm(re, text, m.start())),
                Check::Tag(family, open) => {
                    if let Some(end) = tag_end(text, m.end(), open, family) {
                        tags.push((family, open, m.start()..end, id));
                    }
                    None
                }
                Check::Credential(shape) => credential(text, m.range(), &entry.literal, shape),
                Check::ToolMarkup => tool_markup::markup(text, m.start()),
                Check::ToolTrace => tool_markup::trace_line(text, m.start()),
            };
            if let Some(span) = span {
                raw.push(Raw {
                    finding: Finding::new(entry.rule, span, text),
                    key: Some(id),
                });
            }
        }
        if !tags.is_empty() {
            pair_tags(text, &tags, raw);
        }
        for span in tool_markup::pictograph_traces(text) {
            raw.push(Raw {
                finding: Finding::new(Rule::ToolTrace, span, text),
                key: None,
            });
        }
        for canary in canaries.iter().filter(|c| !c.is_empty()) {
            if let Some(at) = text.find(canary) {
                raw.push(Raw {
                    finding: Finding::new(Rule::Canary, at..at + canary.len(), text),
                    key: None,
                });
            }
        }
        let trimmed = text.trim();
        if trimmed.len() <= SHORT_REPLY {
            self.short_reply(text, trimmed, user_message, raw);
        }
        if let Some(span) = tool_markup::whole_reply(text) {
            raw.push(Raw {
                finding: Finding::new(Rule::ToolCallMarkup, span, text),
                key: None,
            });
        }
        if let Some(prompt) = &self.prompt
            && let Some(span) = prompt.find(text)
        {
            raw.push(Raw {
                finding: Finding::new(Rule::SystemPromptOverlap, span, text),
                key: None,
            });
        }
    }

    fn short_reply(&self, text: &str, trimmed: &str, user: &str, raw: &mut Vec<Raw>) {
        let start = text.len() - text.trim_start().len();
        let whole = start..start + trimmed.len();
        if trimmed.lines().count() <= 2 && self.bare_error.is_match(trimmed) {
            raw.push(Raw {
                finding: Finding::new(Rule::BareError, whole.clone(), text),
                key: None,
            });
        }
        if apology_only(trimmed, user) {
            raw.push(Raw {
                finding: Finding::new(Rule::ApologyOnly, whole, text),
                key: None,
            });
        }
    }

    /// Lowers findings the user's message explains: code they asked about, errors they quoted.
    fn apply_context(&self, text: &str, user: &str, raw: &mut [Raw]) {
        let user_lower = user.to_lowercase();
        let technical = self.technical.is_match(user);
        let code = code_regions(text);
        let user_quotes_prompt = self
            .prompt
            .as_ref()
            .is_some_and(|p| !user.is_empty() && p.find(user).is_some());
        for r in raw.iter_mut() {
            let f = &mut r.finding;
            let rule = f.rule();
            if rule == Rule::Canary {
                continue;
            }
            let matched = text.get(f.span()).unwrap_or_default();
            if rule.is_credential() {
                if !user.is_empty() && user.contains(matched.trim()) {
                    f.demote(Demotion::QuotedFromUser);
                }
                continue;
            }
            if rule == Rule::SystemPromptOverlap {
                if user_quotes_prompt {
                    f.demote(Demotion::QuotedFromUser);
                }
                continue;
            }
            let entry = r.key.map(|id| &self.entries[id]);
            let asked = if rule.is_sanitisable() {
                // Reasoning counts as quoted only when the user wrote the tag itself: a number
                // or phrase inside the reasoning proves nothing.
                entry.is_some_and(|e| user_lower.contains(e.literal.as_str()))
            } else {
                quoted(&user_lower, matched, entry.map(|e| e.literal.as_str()))
            };
            if asked {
                f.demote(Demotion::QuotedFromUser);
            } else if technical && code.iter().any(|c| c.contains(&f.span().start)) {
                f.demote(Demotion::InCode);
            } else if asks_about(rule, &user_lower) {
                f.demote(Demotion::AskedAbout);
            }
        }
    }
}

/// Sorts findings and merges touching findings of one rule and confidence.
fn merge(mut raw: Vec<Raw>) -> Vec<Finding> {
    raw.sort_by_key(|r| (r.finding.span.start, r.finding.span.end));
    let mut out: Vec<Finding> = Vec::with_capacity(raw.len());
    for Raw { finding, .. } in raw {
        if let Some(last) = out.last_mut()
            && last.rule == finding.rule
            && last.confidence == finding.confidence
            && finding.span.start <= last.span.end
        {
            last.span.end = last.span.end.max(finding.span.end);
            continue;
        }
        out.push(finding);
    }
    out
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The span of a match of `re` that covers `at`, searched in a window around it.
fn confirm(re: &Regex, text: &str, at: usize) -> Option<Range<usize>> {
    let lo = floor_boundary(text, at.saturating_sub(WINDOW_BEFORE));
    let hi = ceil_boundary(text, at.saturating_add(WINDOW_AFTER));
    let rel = at - lo;
    re.find_iter(&text[lo..hi])
        .find(|m| m.start() <= rel && rel < m.end())
        .map(|m| lo + m.start()..lo + m.end())
}

/// Whether text at `at` is displayed as an error: first on its line (after list or quote
/// markers), or right after `…:`, `error`, `failed` or `exception` on the same line.
fn is_display(text: &str, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let prefix = text[line_start..at]
        .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '>' | '-' | '*' | '#' | '`'))
        .trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '`' | '['));
    if prefix.is_empty() || prefix.ends_with(':') {
        return true;
    }
    let last = prefix
        .rsplit(|c: char| c.is_whitespace())
        .next()
        .unwrap_or_default()
        .trim_end_matches(|c: char| !c.is_alphanumeric() && c != '/')
        .to_ascii_lowercase();
    matches!(
        last.as_str(),
        "error" | "failed" | "exception" | "status" | "code"
    ) || last.starts_with("http/")
}

/// The start of a three-digit status code right before `at` (`502 Bad Gateway`).
fn status_code_before(text: &str, at: usize) -> Option<usize> {
    let b = text.as_bytes();
    if at < 4 || b[at - 1] != b' ' {
        return None;
    }
    let code = &b[at - 4..at - 1];
    let digits = code.iter().all(u8::is_ascii_digit) && matches!(code[0], b'1'..=b'5');
    let clean_start = at == 4 || !b[at - 5].is_ascii_alphanumeric();
    (digits && clean_start).then_some(at - 4)
}

/// The end of a reasoning tag whose literal ends at `end`, if it is a tag.
fn tag_end(text: &str, end: usize, open: bool, family: TagFamily) -> Option<usize> {
    if family == TagFamily::Kimi {
        return Some(end);
    }
    let rest = &text.as_bytes()[end..];
    match rest.first()? {
        b'>' => Some(end + 1),
        b if b.is_ascii_whitespace() => {
            let reach = &rest[..rest.len().min(80)];
            let close = reach.iter().position(|&c| c == b'>')?;
            let inner = &reach[..close];
            let ok = if open {
                !inner.iter().any(|&c| c == b'<' || c == b'\n')
            } else {
                inner.iter().all(u8::is_ascii_whitespace)
            };
            ok.then_some(end + close + 1)
        }
        _ => None,
    }
}

/// Pairs reasoning tags into blocks; an opener with no close runs to the end, a close with no
/// opener covers everything before it.
fn pair_tags(text: &str, tags: &[(TagFamily, bool, Range<usize>, usize)], raw: &mut Vec<Raw>) {
    let mut open: Vec<(TagFamily, usize, usize)> = Vec::new();
    let mut consumed = 0usize;
    for (family, is_open, range, id) in tags {
        if *is_open {
            open.push((*family, range.start, *id));
            continue;
        }
        let (rule, span, key) = match open.iter().rposition(|(f, ..)| f == family) {
            Some(i) => {
                let (_, start, key) = open.remove(i);
                open.truncate(i);
                (Rule::ReasoningBlock, start..range.end, key)
            }
            None => (Rule::ReasoningStrayClose, consumed..range.end, *id),
        };
        consumed = consumed.max(span.end);
        raw.push(Raw {
            finding: Finding::new(rule, span, text),
            key: Some(key),
        });
    }
    if let Some(&(_, start, key)) = open.first() {
        raw.push(Raw {
            finding: Finding::new(Rule::ReasoningUnclosed, start..text.len(), text),
            key: Some(key),
        });
    }
}

/// A short apology that never answers, to a message that asked for something.
fn apology_only(trimmed: &str, user: &str) -> bool {
    let lower = trimmed.to_lowercase().replace('\u{2019}', "'");
    if !APOLOGY_OPENERS.iter().any(|o| lower.starts_with(o)) {
        return false;
    }
    let substantive = user.contains('?') || user.split_whitespace().count() >= 4;
    if !substantive {
        return false;
    }
    let cut = lower
        .find(['.', '!', '?', '\n'])
        .map_or(lower.len(), |i| i + 1);
    let (first, rest) = lower.split_at(cut);
    let rest = rest.trim();
    rest.is_empty()
        || DEFLECTIONS.iter().any(|d| first.contains(d))
        || DEFLECTIONS.iter().any(|d| rest.starts_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str, user: &str) -> Vec<(&'static str, bool)> {
        let h = Heuristics::compile(&[], None).expect("compiles");
        h.scan(text, user, &[])
            .iter()
            .map(|f| (f.rule_id(), f.confidence() == crate::gate::Confidence::High))
            .collect()
    }

    #[test]
    fn code_regions_cover_fences_and_inline_spans() {
        let text = "a `b` c\n```rust\nlet x;\n```\nd";
        let regions = code_regions(text);
        assert_eq!(regions.len(), 2);
        assert_eq!(&text[regions[0].clone()], "`b`");
        assert!(text[regions[1].clone()].contains("let x;"));
    }

    #[test]
    fn a_stray_close_tag_covers_the_reasoning_before_it() {
        let found = scan(
            "The user wants a date. </think>\n\nIt is Tuesday.",
            "what day is it?",
        );
        assert_eq!(found, vec![("reasoning.stray_close", true)]);
    }

    #[test]
    fn words_that_merely_contain_a_key_prefix_are_not_keys() {
        assert!(scan("This is a risk-free, task-based plan.", "plan?").is_empty());
    }

    #[test]
    fn a_partly_masked_key_is_still_a_key() {
        let found = scan("Use sk-proj-Ab3d...9xQz for that.", "which key?");
        assert_eq!(found, vec![("credential.api_key", true)]);
    }

    #[test]
    fn documentation_placeholders_are_not_keys() {
        assert!(scan("Set `OPENAI_API_KEY=sk-...` or sk-your-key-here.", "how?").is_empty());
    }

    #[test]
    fn a_status_phrase_in_prose_is_not_an_error_display() {
        assert!(
            scan(
                "When a server is busy it may answer 503 Service Unavailable.",
                "hm"
            )
            .is_empty()
        );
        assert!(
            scan("Error: 503 Service Unavailable", "hm").contains(&("failure.http_status", true))
        );
    }

    #[test]
    fn a_telegram_bot_token_is_found_at_its_seam() {
        let found = scan(
            "token: 6482910375:AAHk3Zq9Xw2Lm8Np4Rt6Vy1Bc5Df7Gh0Jk2",
            "bot?",
        );
        assert_eq!(found, vec![("credential.bot_token", true)]);
    }

    #[test]
    fn an_opaque_bearer_token_is_a_credential_and_a_placeholder_is_not() {
        assert_eq!(
            scan(
                "Authorization: Bearer 9xQz3kLm2Vb7Nc4Rt8Yp1Ws6Df0Gh5Jk",
                "auth?"
            ),
            vec![("credential.bot_token", true)]
        );
        assert!(scan("Authorization: Bearer $API_TOKEN", "auth?").is_empty());
    }

    #[test]
    fn a_pem_header_without_key_material_is_not_a_key() {
        assert!(
            scan(
                "It starts with -----BEGIN PRIVATE KEY----- and ends with END.",
                "pem?"
            )
            .is_empty()
        );
    }

    #[test]
    fn a_refusal_opener_counts_only_at_the_start() {
        assert_eq!(
            scan("I'm sorry, but I can't share that.", "share the file"),
            vec![("refusal.opener", false)]
        );
        let late = format!(
            "{} I'm sorry, but I can't share that part.",
            "Here is the summary. ".repeat(8)
        );
        assert!(scan(&late, "summary please").is_empty());
    }

    #[test]
    fn an_error_the_user_named_is_lowered_to_low() {
        let h = Heuristics::compile(&[], None).expect("compiles");
        let found = h.scan(
            "Error 429 Too Many Requests means slow down.",
            "why do I get 429?",
            &[],
        );
        assert!(!found.is_empty());
        assert!(
            found
                .iter()
                .all(|f| f.demotion() == Some(Demotion::QuotedFromUser))
        );
    }

    #[test]
    fn failure_text_in_code_is_high_when_the_user_did_not_ask_about_code() {
        let text = "Done!\n\n```\nTraceback (most recent call last):\n  File \"x.py\", line 1\n```";
        assert!(scan(text, "book me a room for Tuesday").contains(&("failure.stack_trace", true)));
        assert!(
            scan(text, "why does my python script fail?")
                .iter()
                .all(|(_, high)| !high)
        );
    }

    #[test]
    fn reasoning_is_not_lowered_by_a_number_the_user_mentioned() {
        let found = scan(
            "<think>user said 503 twice</think>It is back up.",
            "is 503 fixed?",
        );
        assert_eq!(found, vec![("reasoning.block", true)]);
        let asked = scan("Wrap it in `<think>` tags.", "what are <think> tags?");
        assert!(asked.iter().all(|(_, high)| !high), "{asked:?}");
    }

    #[test]
    fn a_canary_is_never_lowered_by_context() {
        let h = Heuristics::compile(&["cnry-77aa".to_owned()], None).expect("compiles");
        let found = h.scan("`cnry-77aa`", "what is cnry-77aa in code?", &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].confidence(), crate::gate::Confidence::High);
    }

    proptest::proptest! {
        #[test]
        fn scanning_any_text_never_panics_and_spans_are_char_boundaries(
            text in "(\\PC|<think>|</think>|sk-|:AA|\\n    at |`|```|•|Error: )*",
            user in "\\PC{0,40}",
        ) {
            let h = Heuristics::compile(&["c4n".to_owned()], PromptOverlap::new(
                "you are a helpful assistant for the shipping team at northwind",
                3,
                0.5,
            ))
            .expect("compiles");
            for f in h.scan(&text, &user, &["x"]) {
                proptest::prop_assert!(f.span().end <= text.len());
                proptest::prop_assert!(text.is_char_boundary(f.span().start));
                proptest::prop_assert!(text.is_char_boundary(f.span().end));
            }
        }
    }
}
