//! The normalised projection of a candidate: the text as the person will see it, with a map
//! from every projected byte back to the source bytes it came from.
//!
//! A model (or a prompt injection it read) can write a leak so that a byte-level matcher misses
//! it while the person still reads it plainly: `f&#97;iled`, `re**quest**`, full-width letters,
//! a zero-width space inside a word, a line break or a double space between words,
//! `&lt;think&gt;…&lt;/think&gt;` (which a renderer shows as a literal reasoning block), a
//! Cyrillic `е` in a canary. The projection undoes each of those:
//!
//! - HTML character references are decoded (named ones from a table of the common names,
//!   decimal and hex ones per CommonMark: 1–7 decimal or 1–6 hex digits; a zero, surrogate or
//!   out-of-range value becomes U+FFFD), and backslash escapes of ASCII punctuation lose their
//!   backslash, except inside code, where a renderer shows them literally too;
//! - Markdown emphasis and code markers (`*`, `~`, backticks, and `_` except inside a word,
//!   where CommonMark does not treat it as emphasis) are removed; inside code only the
//!   backticks go;
//! - each character with its combining marks is put in NFKC (full-width and other
//!   compatibility forms become their plain letters), non-ASCII letters are lowercased (ASCII
//!   keeps its case: every matcher of the gate is ASCII-case-insensitive, and key material is
//!   case-sensitive), and Cyrillic and Greek letters that look like Latin ones are mapped to
//!   them (confusables, so a canary or a trigger cannot hide behind a homoglyph);
//! - zero-width and other format characters (general category Cf, variation selectors) are
//!   removed;
//! - every run of whitespace (line breaks, tabs, double spaces) becomes one space.
//!
//! Each projected byte maps back to a source range on char boundaries, so a finding on the
//! projection becomes a span of the source and sanitising cuts the bytes the person saw.
//! The walk is one forward pass with no recursion; the projection is at most a small constant
//! factor longer than the source (NFKC expansions are bounded).
//!
//! `LLM re**quest** f&#97;iled` projects to `LLM request failed`, and the span of `failed` in
//! the projection maps back to `f&#97;iled` in the source.

use std::ops::Range;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;

use crate::gate::code::code_regions;
use tables::{NAMED, confusable, is_format};

mod tables;

// The fuzz target's invariants, on its seed corpus and on generated text.
#[cfg(test)]
mod invariants;

/// One run of projected bytes and the source bytes it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    /// Where the run starts in the projection.
    proj: usize,
    /// Where its source starts.
    src: usize,
    /// How many source bytes it came from.
    src_len: usize,
    /// Byte-for-byte: the run's bytes are the source's (so offsets inside it map one to one).
    /// Otherwise every byte of the run maps to the whole source range.
    copy: bool,
}

/// The text as the person will see it, and the way back to the source.
#[derive(Clone, Debug)]
pub struct Projection {
    text: String,
    segments: Vec<Segment>,
    source_len: usize,
}

impl Projection {
    /// Projects `source`.
    pub fn of(source: &str) -> Self {
        let mut out = Builder {
            text: String::with_capacity(source.len()),
            segments: Vec::new(),
            space: false,
        };
        let code = code_regions(source);
        let mut region = code.iter().peekable();
        let bytes = source.as_bytes();
        let mut i = 0usize;
        while i < bytes.len() {
            while region.peek().is_some_and(|r| r.end <= i) {
                region.next();
            }
            let in_code = region.peek().is_some_and(|r| r.start <= i);
            let b = bytes[i];
            if b.is_ascii() {
                let next = i + 1;
                match b {
                    b'`' => {}
                    b'*' | b'~' if !in_code => {}
                    b'_' if !in_code && !intraword(source, i) => {}
                    b'\\' if !in_code && bytes.get(next).is_some_and(u8::is_ascii_punctuation) => {
                        out.push_char(char::from(bytes[next]), i..next + 1);
                        i = next + 1;
                        continue;
                    }
                    b'&' if !in_code => {
                        if let Some((c, len)) = reference(&source[i..]) {
                            out.push_decoded(c, i..i + len);
                            i += len;
                            continue;
                        }
                        out.push_ascii(b, i);
                    }
                    b' ' if !out.space => {
                        out.push_ascii(b, i);
                        out.space = true;
                    }
                    _ if b.is_ascii_whitespace() => out.push_space(i..next),
                    _ if combining_follows(source, next) => {
                        let end = cluster_end(source, next);
                        for c in source[i..end].nfkc() {
                            out.push_folded(c, i..end);
                        }
                        i = end;
                        continue;
                    }
                    _ => out.push_ascii(b, i),
                }
                i = next;
                continue;
            }
            // A non-ASCII character and the combining marks that follow it, normalised as one.
            let end = cluster_end(source, i + utf8_len(b));
            let cluster = &source[i..end];
            for c in cluster.nfkc() {
                out.push_folded(c, i..end);
            }
            i = end;
        }
        Projection {
            text: out.text,
            segments: out.segments,
            source_len: source.len(),
        }
    }

    /// The projected text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the projection is the source byte for byte.
    pub fn is_identity(&self) -> bool {
        self.text.len() == self.source_len
            && self.segments.iter().all(|s| s.copy)
            && self
                .segments
                .windows(2)
                .all(|w| w[0].src + w[0].src_len == w[1].src)
    }

    /// The source range a projected range came from: from the start of the source of its first
    /// byte to the end of the source of its last. An empty range maps to an empty range at the
    /// source of the byte it precedes. Always within the source and on its char boundaries
    /// (out-of-range input is clamped to the projection first).
    pub fn source_span(&self, range: Range<usize>) -> Range<usize> {
        let end = range.end.min(self.text.len());
        let start = range.start.min(end);
        if self.segments.is_empty() {
            return self.source_len..self.source_len;
        }
        let from = self.source_start(start);
        if start == end {
            return from..from;
        }
        let to = self.source_end(end - 1);
        from..to.max(from)
    }

    fn segment(&self, at: usize) -> &Segment {
        let i = self.segments.partition_point(|s| s.proj <= at);
        &self.segments[i.saturating_sub(1)]
    }

    /// The source offset where the source of projected byte `at` starts (the source's end for
    /// `at` past the projection).
    fn source_start(&self, at: usize) -> usize {
        if at >= self.text.len() {
            return self.source_len;
        }
        let s = self.segment(at);
        if s.copy { s.src + (at - s.proj) } else { s.src }
    }

    /// The source offset just past the source of projected byte `at`.
    fn source_end(&self, at: usize) -> usize {
        let s = self.segment(at);
        if s.copy {
            // A copied run is ASCII (see `Builder::push_ascii`): one byte per byte.
            s.src + (at - s.proj) + 1
        } else {
            s.src + s.src_len
        }
    }
}

/// The projection as it is built.
struct Builder {
    text: String,
    segments: Vec<Segment>,
    /// Whether the last projected byte is a collapsed space.
    space: bool,
}

impl Builder {
    fn push_ascii(&mut self, b: u8, at: usize) {
        self.space = b == b' ';
        let proj = self.text.len();
        self.text.push(char::from(b));
        if let Some(last) = self.segments.last_mut()
            && last.copy
            && last.src + last.src_len == at
            && last.proj + last.src_len == proj
        {
            last.src_len += 1;
            return;
        }
        self.segments.push(Segment {
            proj,
            src: at,
            src_len: 1,
            copy: true,
        });
    }

    /// One whitespace byte: a space unless the last projected byte already is one.
    fn push_space(&mut self, src: Range<usize>) {
        if self.space {
            // Extend the space's source to cover the whole run. A space copied from the source
            // ends a byte-for-byte run; it is split off that run first.
            let len = self.text.len();
            if let Some(last) = self.segments.last_mut() {
                if last.copy && last.proj + last.src_len == len {
                    let space_src = last.src + last.src_len - 1;
                    if last.src_len == 1 {
                        last.copy = false;
                        last.src_len = src.end - space_src;
                    } else {
                        last.src_len -= 1;
                        self.segments.push(Segment {
                            proj: len - 1,
                            src: space_src,
                            src_len: src.end - space_src,
                            copy: false,
                        });
                    }
                } else if !last.copy && last.proj + 1 == len {
                    last.src_len = src.end - last.src;
                }
            }
            return;
        }
        self.push_mapped(" ", src);
        self.space = true;
    }

    /// A character decoded from a reference or escape: normalised like any other character.
    fn push_decoded(&mut self, c: char, src: Range<usize>) {
        let mut buf = [0u8; 4];
        for n in c.encode_utf8(&mut buf).nfkc() {
            self.push_folded(n, src.clone());
        }
    }

    /// A character escaped with a backslash: shown as itself, never a marker.
    fn push_char(&mut self, c: char, src: Range<usize>) {
        let mut buf = [0u8; 4];
        self.space = false;
        self.push_mapped(c.encode_utf8(&mut buf), src);
    }

    /// A character after NFKC: format characters dropped, whitespace collapsed, non-ASCII
    /// lowercased and confusables mapped.
    fn push_folded(&mut self, c: char, src: Range<usize>) {
        if is_format(c) {
            return;
        }
        if c.is_whitespace() {
            self.push_space(src);
            return;
        }
        self.space = false;
        if c.is_ascii() {
            let mut buf = [0u8; 4];
            self.push_mapped(c.encode_utf8(&mut buf), src);
            return;
        }
        for lower in c.to_lowercase() {
            let mapped = confusable(lower).unwrap_or(lower);
            let mut buf = [0u8; 4];
            self.push_mapped(mapped.encode_utf8(&mut buf), src.clone());
        }
    }

    /// Projected bytes that all map to the whole of `src`.
    fn push_mapped(&mut self, s: &str, src: Range<usize>) {
        let proj = self.text.len();
        self.text.push_str(s);
        if let Some(last) = self.segments.last()
            && !last.copy
            && last.src == src.start
            && last.src_len == src.len()
        {
            // Another output character of the same source cluster: the same segment.
            return;
        }
        self.segments.push(Segment {
            proj,
            src: src.start,
            src_len: src.len(),
            copy: false,
        });
    }
}

/// Whether a combining mark starts at `at`.
fn combining_follows(source: &str, at: usize) -> bool {
    source.as_bytes().get(at).is_some_and(|&b| b >= 0x80)
        && source[at..]
            .chars()
            .next()
            .is_some_and(|c| canonical_combining_class(c) != 0)
}

/// The end of the run of combining marks starting at `at`.
fn cluster_end(source: &str, mut at: usize) -> usize {
    while let Some(c) = source.get(at..).and_then(|s| s.chars().next()) {
        if canonical_combining_class(c) == 0 {
            break;
        }
        at += c.len_utf8();
    }
    at
}

/// Whether the `_` at `at` sits between two alphanumerics (CommonMark: not emphasis there).
fn intraword(source: &str, at: usize) -> bool {
    let before = source[..at].chars().next_back();
    let after = source[at + 1..].chars().next();
    before.is_some_and(char::is_alphanumeric) && after.is_some_and(char::is_alphanumeric)
}

fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        _ => 2,
    }
}

/// The longest named reference, in bytes after `&` and before `;`.
const NAME_MAX: usize = 32;

/// A character reference at the start of `s` (which starts with `&`): the character and the
/// reference's length in bytes.
fn reference(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    if b.get(1) == Some(&b'#') {
        let (hex, digits_at) = match b.get(2) {
            Some(b'x' | b'X') => (true, 3),
            _ => (false, 2),
        };
        let max = if hex { 6 } else { 7 };
        let digits = b[digits_at..]
            .iter()
            .take(max + 1)
            .take_while(|c| {
                if hex {
                    c.is_ascii_hexdigit()
                } else {
                    c.is_ascii_digit()
                }
            })
            .count();
        if digits == 0 || digits > max || b.get(digits_at + digits) != Some(&b';') {
            return None;
        }
        let radix = if hex { 16 } else { 10 };
        let value = u32::from_str_radix(&s[digits_at..digits_at + digits], radix).ok()?;
        let c = match value {
            0 => '\u{FFFD}',
            v => char::from_u32(v).unwrap_or('\u{FFFD}'),
        };
        return Some((c, digits_at + digits + 1));
    }
    let name_len = b[1..]
        .iter()
        .take(NAME_MAX + 1)
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    if name_len == 0 || name_len > NAME_MAX || b.get(1 + name_len) != Some(&b';') {
        return None;
    }
    let name = &s[1..1 + name_len];
    let c = NAMED.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)?;
    Some((c, name_len + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_word_projects_plainly_and_maps_back_to_its_source() {
        let source = "LLM re**quest** f&#97;iled";
        let p = Projection::of(source);
        assert_eq!(p.text(), "LLM request failed");
        let at = p.text().find("failed").unwrap();
        let span = p.source_span(at..at + "failed".len());
        assert_eq!(&source[span], "f&#97;iled");
    }

    fn find(source: &str, needle: &str) -> Option<String> {
        let p = Projection::of(source);
        let at = p.text().find(needle)?;
        Some(source[p.source_span(at..at + needle.len())].to_owned())
    }

    #[test]
    fn clean_ascii_prose_is_its_own_projection() {
        let p = Projection::of("Your parcel arrives Friday, at 10:00.");
        assert!(p.is_identity());
        assert_eq!(p.source_span(5..11), 5..11);
    }

    #[test]
    fn each_disguise_projects_to_the_plain_words_and_maps_back_to_its_source() {
        for (source, seen) in [
            ("LLM request f&#97;iled", "LLM request f&#97;iled"),
            ("LLM request f&#x61;iled", "LLM request f&#x61;iled"),
            (
                "ＬＬＭ ｒｅｑｕｅｓｔ ｆａｉｌｅｄ",
                "ＬＬＭ ｒｅｑｕｅｓｔ ｆａｉｌｅｄ",
            ),
            ("LLM re**quest** failed", "LLM re**quest** failed"),
            ("LLM request\nfailed", "LLM request\nfailed"),
            ("LLM  request   failed", "LLM  request   failed"),
            (
                "LLM req\u{200B}uest fa\u{2060}iled",
                "LLM req\u{200B}uest fa\u{2060}iled",
            ),
            ("LLM rеquеst failed", "LLM rеquеst failed"),
            ("LLM request&nbsp;failed", "LLM request&nbsp;failed"),
        ] {
            assert_eq!(
                find(&format!("Sorry: {source}!"), "LLM request failed").as_deref(),
                Some(seen),
                "{source:?} -> {:?}",
                Projection::of(source).text()
            );
        }
    }

    #[test]
    fn an_entity_encoded_think_block_is_a_think_block() {
        let source = "&lt;think&gt;plan&lt;/think&gt;Hi";
        let p = Projection::of(source);
        assert_eq!(p.text(), "<think>plan</think>Hi");
        assert_eq!(
            &source[p.source_span(0..19)],
            "&lt;think&gt;plan&lt;/think&gt;"
        );
    }

    #[test]
    fn code_keeps_its_entities_and_markers_but_loses_its_backticks() {
        assert_eq!(Projection::of("`&lt;b&gt; *x*`").text(), "&lt;b&gt; *x*");
        assert_eq!(Projection::of("&lt;b&gt; *x*").text(), "<b> x");
    }

    #[test]
    fn snake_case_keeps_its_underscores_and_escapes_keep_their_character() {
        assert_eq!(
            Projection::of("request_id _x_ \\*y\\*").text(),
            "request_id x *y*"
        );
    }

    #[test]
    fn bad_references_are_left_as_text() {
        for s in [
            "&#;",
            "&#x;",
            "&#12345678;",
            "&nosuch;",
            "& amp;",
            "&amp",
            "&#x1234567;",
        ] {
            assert_eq!(Projection::of(s).text(), s);
        }
        assert_eq!(Projection::of("&#1114112;").text(), "\u{FFFD}");
        assert_eq!(Projection::of("&#0;&#xD800;").text(), "\u{FFFD}\u{FFFD}");
    }

    #[test]
    fn a_combining_sequence_is_composed_and_maps_back_whole() {
        let source = "cafe\u{301} ok";
        let p = Projection::of(source);
        assert_eq!(p.text(), "café ok");
        let at = p.text().find('é').expect("composed");
        assert_eq!(&source[p.source_span(at..at + 'é'.len_utf8())], "e\u{301}");
    }

    #[test]
    fn spans_are_clamped_and_empty_spans_stay_empty() {
        let p = Projection::of("a **b**");
        assert_eq!(p.text(), "a b");
        assert_eq!(p.source_span(10..20), 7..7);
        assert_eq!(p.source_span(2..2), 4..4);
        assert_eq!(
            p.source_span(Range { start: 2, end: 1 }),
            1..1,
            "an inverted range is empty at its end"
        );
        assert_eq!(Projection::of("").source_span(0..3), 0..0);
    }
}
