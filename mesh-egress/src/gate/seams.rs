//! When the projection pass is worth running: a cheap look at the source that says whether a
//! person could read it differently from its bytes.
//!
//! Building the [`Projection`](crate::gate::normalise::Projection) and scanning it costs about
//! a second heuristic pass, so clean text must not pay it. Clean prose differs from its
//! projection only in whitespace (line breaks and double spaces collapse to one space), and a
//! collapsed run can only join a trigger whose literal has a space at that seam. So the pass
//! runs when the source holds anything else the projection changes (a reference, an escape, a
//! Markdown marker, a non-ASCII character), or a whitespace run that is not one space where
//! the characters either side could be those around a space in some trigger literal and the
//! automaton, run over a small collapsed window around the seam, finds a trigger across it.
//! Short replies (the whole-reply checks read them) are projected whenever they differ.

use aho_corasick::{AhoCorasick, MatchKind};

/// What the prefilter looks for: the ASCII bytes the projection changes, and whitespace that
/// is not a single space. Few enough for the automaton's SIMD prefilter, so clean text is
/// skimmed, not walked byte by byte (non-ASCII text is found by `str::is_ascii` first).
const MARKS: &[&str] = &["&", "*", "`", "~", "\\", "_", "\n", "\t", "\r", "\x0c", "  "];

/// Replies up to this long (trimmed) are projected whenever they differ from their source.
const SHORT: usize = 320;

/// What the trigger literals look like around their spaces.
#[derive(Debug)]
pub(crate) struct Seams {
    /// Lowercased bytes that end a word before a space in some literal.
    before: [bool; 256],
    /// Lowercased bytes that start a word after a space in some literal.
    after: [bool; 256],
    /// The longest literal, in bytes: how far either side of a seam a trigger can reach.
    reach: usize,
    /// Finds [`MARKS`].
    marks: AhoCorasick,
}

impl Seams {
    pub(crate) fn new<'a>(
        literals: impl Iterator<Item = &'a str>,
    ) -> Result<Self, aho_corasick::BuildError> {
        let mut before = [false; 256];
        let mut after = [false; 256];
        let mut reach = 0usize;
        for literal in literals {
            let b = literal.as_bytes();
            reach = reach.max(b.len());
            for k in 1..b.len().saturating_sub(1) {
                if b[k] == b' ' && !b[k - 1].is_ascii_whitespace() && !b[k + 1].is_ascii_whitespace()
                {
                    before[usize::from(b[k - 1].to_ascii_lowercase())] = true;
                    after[usize::from(b[k + 1].to_ascii_lowercase())] = true;
                }
            }
        }
        let marks = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(MARKS)?;
        Ok(Self {
            before,
            after,
            reach,
            marks,
        })
    }

    /// Whether `text` may read differently to a person in a way the automaton would notice.
    pub(crate) fn wants_projection(&self, text: &str, automaton: &AhoCorasick) -> bool {
        if !text.is_ascii() {
            return true;
        }
        let b = text.as_bytes();
        let short = text.trim().len() <= SHORT;
        let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0C);
        let mut checked = 0usize; // the end of the last whitespace run looked at
        for m in self.marks.find_iter(text) {
            let i = m.start();
            match b[i] {
                b'_' => {
                    let intraword = i > 0
                        && b[i - 1].is_ascii_alphanumeric()
                        && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric);
                    if !intraword {
                        return true;
                    }
                }
                b'&' | b'*' | b'`' | b'~' | b'\\' => return true,
                _ if i < checked => {}
                _ => {
                    let mut start = i;
                    while start > 0 && is_space(b[start - 1]) {
                        start -= 1;
                    }
                    let mut end = m.end();
                    while end < b.len() && is_space(b[end]) {
                        end += 1;
                    }
                    checked = end;
                    if short || self.joins_a_trigger(text, start, end, automaton) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Whether collapsing the whitespace run `start..end` to one space makes the automaton
    /// find a trigger across it.
    fn joins_a_trigger(&self, text: &str, start: usize, end: usize, automaton: &AhoCorasick) -> bool {
        let b = text.as_bytes();
        let (Some(&prev), Some(&next)) = (start.checked_sub(1).and_then(|p| b.get(p)), b.get(end))
        else {
            return false;
        };
        if !self.before[usize::from(prev.to_ascii_lowercase())]
            || !self.after[usize::from(next.to_ascii_lowercase())]
        {
            return false;
        }
        let lo = floor_boundary(text, start.saturating_sub(self.reach));
        let hi = ceil_boundary(text, end.saturating_add(self.reach));
        // The window with every whitespace run collapsed, and where the seam's space lands.
        let mut window = String::with_capacity(hi - lo);
        let mut seam = 0usize;
        let mut in_space = false;
        for (at, c) in text[lo..hi].char_indices() {
            if c.is_ascii_whitespace() {
                if lo + at == start {
                    seam = window.len();
                }
                if !in_space {
                    window.push(' ');
                }
                in_space = true;
            } else {
                in_space = false;
                window.push(c);
            }
        }
        automaton
            .find_iter(window.as_str())
            .any(|m| m.start() <= seam && seam < m.end())
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::AhoCorasickBuilder;

    fn setup() -> (Seams, AhoCorasick) {
        let literals = ["llm request failed", "rate limit reached for"];
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .build(literals)
            .expect("automaton");
        (Seams::new(literals.into_iter()).expect("seams"), ac)
    }

    #[test]
    fn clean_prose_with_line_breaks_after_sentences_is_not_projected() {
        let (seams, ac) = setup();
        let text = "The consignment cleared customs on Tuesday.\nIt is with the haulier now. "
            .repeat(20);
        assert!(!seams.wants_projection(&text, &ac));
    }

    #[test]
    fn a_line_break_or_double_space_inside_a_trigger_is_projected() {
        let (seams, ac) = setup();
        let pad = "The consignment cleared customs on Tuesday. ".repeat(10);
        for seam in ["\n", "  ", "\r\n", "\t", " \n ", "\n\n"] {
            let text = format!("{pad}LLM request{seam}failed. {pad}");
            assert!(seams.wants_projection(&text, &ac), "{seam:?}");
        }
        let near_miss = format!("{pad}the request\nfailed us once. {pad}");
        assert!(!seams.wants_projection(&near_miss, &ac));
    }

    #[test]
    fn markers_references_and_non_ascii_are_projected_but_snake_case_is_not() {
        let (seams, ac) = setup();
        let pad = "The consignment cleared customs on Tuesday. ".repeat(10);
        for mark in ["**b**", "&amp;", "\\*", "`x`", "é", "_x_"] {
            assert!(seams.wants_projection(&format!("{pad}{mark}"), &ac), "{mark}");
        }
        assert!(!seams.wants_projection(&format!("{pad}request_id"), &ac));
    }
}
