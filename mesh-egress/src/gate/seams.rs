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

use aho_corasick::AhoCorasick;

/// ASCII bytes the projection changes (entities, escapes, Markdown markers).
const MARK: u8 = 1;
/// ASCII whitespace other than the space (a line break, a tab, …): always a seam.
const BREAK: u8 = 2;
/// The space: a seam when another follows.
const SPACE: u8 = 3;
/// A byte of a non-ASCII character (compatibility or look-alike letters, invisible
/// characters): always projected.
const WIDE: u8 = 4;

/// The class of each byte, for the walk of a block [`may_matter`] flags: one load per byte,
/// and most bytes are of no class.
static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        #[allow(clippy::cast_possible_truncation)]
        let byte = b as u8;
        table[b] = match byte {
            b'&' | b'*' | b'`' | b'~' | b'\\' | b'_' => MARK,
            b'\t' | b'\n' | b'\r' | 0x0C => BREAK,
            b' ' => SPACE,
            0x80.. => WIDE,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// Bytes per block of the class scan.
const BLOCK: usize = 32;

/// Whether `block` but its last byte may hold a byte of a [`CLASS`] other than the space, or
/// a double space (the last byte only completes one). A superset, in comparisons and ranges
/// without branches, which the compiler turns into a few vector instructions per sixteen
/// bytes, where a table lookup is a load per byte: besides the classed bytes it flags the
/// other control bytes and `[`, `]`, `^`, `{`, `|`, `}`, rare in prose, and a flagged block is
/// only walked. `N` is one more than [`BLOCK`] or than two blocks.
#[inline]
fn may_matter<const N: usize>(block: &[u8; N]) -> bool {
    block[..N - 1]
        .iter()
        .zip(&block[1..])
        .fold(false, |found, (&c, &next)| {
            // Below `0x20` or from `{` on, as one range: `c - 0x20` wraps the control bytes
            // to the top.
            found
                | (c.wrapping_sub(0x20) >= b'{' - 0x20)
                | (c == b'&')
                | (c == b'*')
                | (c.wrapping_sub(b'[') <= b'`' - b'[')
                | ((c == b' ') & (next == b' '))
        })
}

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
}

impl Seams {
    pub(crate) fn new<'a>(literals: impl Iterator<Item = &'a str>) -> Self {
        let mut before = [false; 256];
        let mut after = [false; 256];
        let mut reach = 0usize;
        for literal in literals {
            let b = literal.as_bytes();
            reach = reach.max(b.len());
            for k in 1..b.len().saturating_sub(1) {
                if b[k] == b' '
                    && !b[k - 1].is_ascii_whitespace()
                    && !b[k + 1].is_ascii_whitespace()
                {
                    before[usize::from(b[k - 1].to_ascii_lowercase())] = true;
                    after[usize::from(b[k + 1].to_ascii_lowercase())] = true;
                }
            }
        }
        Self {
            before,
            after,
            reach,
        }
    }

    /// Whether `text` may read differently to a person in a way the automaton would notice.
    pub(crate) fn wants_projection(&self, text: &str, automaton: &AhoCorasick) -> bool {
        let b = text.as_bytes();
        let short = text.trim().len() <= SHORT;
        let mut checked = 0usize; // the end of the last whitespace run looked at
        let mut seam = |at: usize, len: usize| {
            if at < checked {
                return false;
            }
            let (start, end) = whitespace_run(b, at, at + len);
            checked = end;
            short || self.joins_a_trigger(text, start, end, automaton)
        };
        // The bytes `lo..hi`, byte by byte.
        let mut walk = |lo: usize, hi: usize| {
            let mut i = lo;
            while let Some(j) = b[i..hi].iter().position(|&c| CLASS[usize::from(c)] != 0) {
                i += j;
                let c = b[i];
                let found = match CLASS[usize::from(c)] {
                    0 => false,
                    MARK => {
                        let intraword = c == b'_'
                            && i > 0
                            && b[i - 1].is_ascii_alphanumeric()
                            && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric);
                        !intraword
                    }
                    BREAK => seam(i, 1),
                    // Double spaces collapse like line breaks.
                    SPACE => b.get(i + 1) == Some(&b' ') && seam(i, 2),
                    _ => true,
                };
                if found {
                    return true;
                }
                i += 1;
            }
            false
        };
        // One pass over blocks, each with the byte after it (a double space may straddle two
        // blocks): two at a time, then each of a flagged pair; only a flagged block is walked.
        let mut base = 0usize;
        while let Some(pair) = b
            .get(base..)
            .and_then(<[u8]>::first_chunk::<{ 2 * BLOCK + 1 }>)
        {
            if may_matter(pair) {
                for half in [base, base + BLOCK] {
                    let block = b.get(half..).and_then(<[u8]>::first_chunk::<{ BLOCK + 1 }>);
                    if block.is_none_or(may_matter) && walk(half, half + BLOCK) {
                        return true;
                    }
                }
            }
            base += 2 * BLOCK;
        }
        if let Some(block) = b.get(base..).and_then(<[u8]>::first_chunk::<{ BLOCK + 1 }>) {
            if may_matter(block) && walk(base, base + BLOCK) {
                return true;
            }
            base += BLOCK;
        }
        // The last bytes, short of a block and the byte after it.
        walk(base, b.len())
    }

    /// Whether collapsing the whitespace run `start..end` to one space makes the automaton
    /// find a trigger across it.
    fn joins_a_trigger(
        &self,
        text: &str,
        start: usize,
        end: usize,
        automaton: &AhoCorasick,
    ) -> bool {
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

/// The whitespace run around `start..end`.
fn whitespace_run(b: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0C);
    while start > 0 && is_space(b[start - 1]) {
        start -= 1;
    }
    while end < b.len() && is_space(b[end]) {
        end += 1;
    }
    (start, end)
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
        (Seams::new(literals.into_iter()), ac)
    }

    /// `wants_projection` as it was: an ASCII check, the class table over blocks, then the
    /// double spaces found by `str::match_indices`.
    fn wants_projection_as_it_was(seams: &Seams, text: &str, automaton: &AhoCorasick) -> bool {
        if !text.is_ascii() {
            return true;
        }
        let b = text.as_bytes();
        let short = text.trim().len() <= SHORT;
        let mut checked = 0usize;
        let seam = |at: usize, len: usize, checked: &mut usize| {
            if at < *checked {
                return false;
            }
            let (start, end) = whitespace_run(b, at, at + len);
            *checked = end;
            short || seams.joins_a_trigger(text, start, end, automaton)
        };
        for (i, &c) in b.iter().enumerate() {
            let class = match c {
                b'&' | b'*' | b'`' | b'~' | b'\\' | b'_' => MARK,
                b'\t' | b'\n' | b'\r' | 0x0C => BREAK,
                _ => 0,
            };
            match class {
                0 => {}
                MARK => {
                    let intraword = c == b'_'
                        && i > 0
                        && b[i - 1].is_ascii_alphanumeric()
                        && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric);
                    if !intraword {
                        return true;
                    }
                }
                _ => {
                    if seam(i, 1, &mut checked) {
                        return true;
                    }
                }
            }
        }
        checked = 0;
        for (i, _) in text.match_indices("  ") {
            if seam(i, 2, &mut checked) {
                return true;
            }
        }
        false
    }

    proptest::proptest! {
        #[test]
        fn one_pass_over_blocks_decides_as_the_table_and_the_double_space_search_did(
            pieces in proptest::collection::vec(0usize..24, 0..120),
            long in proptest::prelude::any::<bool>(),
        ) {
            const PIECES: [&str; 24] = [
                "llm", "request", "failed", "rate", "limit", "reached", "for", " ", " ", " ",
                "  ", "\n", "\t", "\r\n", "**", "_", "request_id", "é", "[x]", "{", "~", "`",
                "&amp;", "\\",
            ];
            let (seams, ac) = setup();
            let mut text = if long { "The consignment cleared customs. ".repeat(11) } else { String::new() };
            for &piece in &pieces {
                text.push_str(PIECES[piece]);
            }
            proptest::prop_assert_eq!(
                seams.wants_projection(&text, &ac),
                wants_projection_as_it_was(&seams, &text, &ac)
            );
        }
    }

    #[test]
    fn the_block_test_flags_every_byte_the_walk_would_stop_at() {
        for c in 0..=255u8 {
            for at in [0, 17, BLOCK - 1] {
                let mut block = [b'a'; BLOCK + 1];
                block[at] = c;
                let walked = !matches!(CLASS[usize::from(c)], 0 | SPACE);
                assert!(!walked || may_matter(&block), "{c:#x} at {at}");
            }
        }
        let mut block = [b'a'; BLOCK + 1];
        block[BLOCK - 1] = b' ';
        block[BLOCK] = b' ';
        assert!(may_matter(&block), "a double space across the block's end");
        block[BLOCK - 1] = b'a';
        assert!(
            !may_matter(&block),
            "a space after the block is the next block's"
        );
    }

    #[test]
    fn clean_prose_with_line_breaks_after_sentences_is_not_projected() {
        let (seams, ac) = setup();
        let text =
            "The consignment cleared customs on Tuesday.\nIt is with the haulier now. ".repeat(20);
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
            assert!(
                seams.wants_projection(&format!("{pad}{mark}"), &ac),
                "{mark}"
            );
        }
        assert!(!seams.wants_projection(&format!("{pad}request_id"), &ac));
    }
}
