//! What a heuristic found: [`Finding`], its [`Rule`] and [`Confidence`].

use std::fmt;
use std::ops::Range;

pub use crate::verdict::Confidence;
pub(crate) use crate::verdict::Rule;

/// Why a finding was lowered from its rule's base confidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Demotion {
    /// The match sits inside fenced or inline code, and the user's message is about code or
    /// errors.
    InCode,
    /// The user's own message contains the same error (they asked about it).
    QuotedFromUser,
    /// The user asked a question about this kind of failure by name ("why does Rust panic
    /// when…?", "how do I read a traceback?"), so a reply that shows one is teaching.
    AskedAbout,
}

/// One heuristic match in a candidate message.
#[derive(Clone, PartialEq, Eq)]
pub struct Finding {
    pub(crate) rule: Rule,
    pub(crate) confidence: Confidence,
    pub(crate) span: Range<usize>,
    pub(crate) excerpt: String,
    pub(crate) demotion: Option<Demotion>,
}

/// The longest excerpt a finding keeps, in bytes (before redaction).
const EXCERPT_MAX: usize = 120;

impl Finding {
    pub(crate) fn new(rule: Rule, span: Range<usize>, text: &str) -> Self {
        let matched = text.get(span.clone()).unwrap_or_default();
        let excerpt = if rule.is_credential() {
            redact(matched)
        } else {
            truncate(matched, EXCERPT_MAX).to_owned()
        };
        Self {
            rule,
            confidence: rule.base_confidence(),
            span,
            excerpt,
            demotion: None,
        }
    }

    pub(crate) fn demote(&mut self, why: Demotion) {
        if self.confidence == Confidence::High {
            self.confidence = Confidence::Low;
            self.demotion = Some(why);
        }
    }

    /// The rule that fired.
    pub fn rule(&self) -> Rule {
        self.rule
    }

    /// The rule's stable id (`reasoning.block`, …).
    pub fn rule_id(&self) -> &'static str {
        self.rule.id()
    }

    /// The confidence after context from the user's message.
    pub fn confidence(&self) -> Confidence {
        self.confidence
    }

    /// The byte range of the match in the candidate's Markdown.
    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// What matched, cut to a short excerpt; a credential is redacted to its first and last
    /// characters, so it is safe to show an operator.
    pub fn excerpt(&self) -> &str {
        &self.excerpt
    }

    /// Why the finding is lower than its rule's base confidence, if it is.
    pub fn demotion(&self) -> Option<Demotion> {
        self.demotion
    }
}

impl fmt::Debug for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Finding")
            .field("rule", &self.rule.id())
            .field("confidence", &self.confidence)
            .field("span", &self.span)
            .field("excerpt", &self.excerpt)
            .field("demotion", &self.demotion)
            .finish()
    }
}

/// Cuts `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Keeps the first four and last two characters of a secret; masks the rest.
pub(crate) fn redact(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= 8 {
        return "[redacted]".to_owned();
    }
    let head: String = chars[..4].iter().collect();
    let tail: String = chars[chars.len() - 2..].iter().collect();
    format!("{head}…[redacted]…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_excerpt_never_holds_the_secret() {
        let key = "sk-proj-Ab3dEf9hIj2kLm5nOp8qRs1tUv4wXy7z";
        let text = format!("here: {key}");
        let f = Finding::new(Rule::ApiKey, 6..text.len(), &text);
        assert!(!f.excerpt().contains("Ab3dEf9h"), "{}", f.excerpt());
        assert!(f.excerpt().starts_with("sk-p"));
    }

    #[test]
    fn demotion_lowers_only_high_findings() {
        let mut f = Finding::new(Rule::StackTrace, 0..3, "abc");
        f.demote(Demotion::InCode);
        assert_eq!(f.confidence(), Confidence::Low);
        assert_eq!(f.demotion(), Some(Demotion::InCode));
        let mut low = Finding::new(Rule::ToneMarker, 0..3, "abc");
        low.demote(Demotion::QuotedFromUser);
        assert_eq!(low.demotion(), None);
    }
}
