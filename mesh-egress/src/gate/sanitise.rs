//! Sanitising: cutting found spans out of the candidate's Markdown, and redacting credentials
//! before the judge sees the candidate. Spans are byte ranges of the source text (the
//! normalised projection maps its spans back), so the cuts land on the bytes the person would
//! have seen.

use std::borrow::Cow;
use std::ops::Range;

use crate::gate::finding::Finding;

/// The candidate as the judge sees it: every credential replaced by its redacted excerpt.
pub(crate) fn redact_credentials<'t>(text: &'t str, findings: &[Finding]) -> Cow<'t, str> {
    let secrets: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.rule().is_credential())
        .collect();
    if secrets.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in secrets {
        let span = f.span();
        if span.start < at {
            continue;
        }
        out.push_str(&text[at..span.start]);
        out.push_str(f.excerpt());
        at = span.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// `text` without `spans` (reasoning blocks), seams tidied: no run of blank lines is left
/// where a block was, and the result is trimmed.
pub(crate) fn strip(text: &str, spans: &[Range<usize>]) -> String {
    let mut spans: Vec<Range<usize>> = spans.to_vec();
    spans.sort_by_key(|s| s.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in spans {
        if span.end <= at {
            continue;
        }
        out.push_str(&text[at..span.start.max(at)]);
        at = span.end;
    }
    out.push_str(&text[at..]);
    let mut tidy = String::with_capacity(out.len());
    let mut newlines = 0;
    for c in out.trim().chars() {
        if c == '\n' {
            newlines += 1;
            if newlines > 2 {
                continue;
            }
        } else if !c.is_whitespace() {
            newlines = 0;
        }
        tidy.push(c);
    }
    tidy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::finding::Rule;

    #[test]
    fn stripping_reasoning_leaves_no_gap_of_blank_lines() {
        let text = "Intro.\n\n<think>x</think>\n\n\n\nAnswer.";
        let start = text.find("<think>").expect("tag");
        let end = text.find("</think>").expect("tag") + "</think>".len();
        assert_eq!(
            strip(text, std::slice::from_ref(&(start..end))),
            "Intro.\n\nAnswer."
        );
    }

    #[test]
    fn overlapping_spans_are_cut_once() {
        assert_eq!(strip("abcdefgh", &[4..6, 1..3, 2..5]), "agh");
    }

    #[test]
    fn the_judge_sees_a_credential_as_its_redacted_excerpt() {
        let text = "key: sk-proj-Ab3dEf9hIj2kLm5nOp8qRs1tUv4wXy7z ok";
        let f = Finding::new(Rule::ApiKey, 5..text.len() - 3, text);
        let seen = redact_credentials(text, std::slice::from_ref(&f));
        assert!(!seen.contains("Ab3dEf9h"), "{seen}");
        assert!(
            seen.starts_with("key: sk-p") && seen.ends_with(" ok"),
            "{seen}"
        );
    }
}
