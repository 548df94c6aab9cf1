//! Character-level helpers shared by the walk and the dialects: where a line may break, where
//! a sentence ends, and how code is kept from closing its own delimiters.

use std::borrow::Cow;

use pulldown_cmark::{CodeBlockKind, CowStr, Event, Tag};

use crate::channel::atom::is_boundary;
use crate::render::{is_hostile_control, may_hold_hostile_control, strip_controls};

/// Sixty-four spaces, as wide as the widest line prefix: indentation and padding are slices
/// of it.
pub(super) const SPACES: &str = "                                                                ";

/// Whether ASCII byte `b` is whitespace a line may break at (what [`is_break_space`] says of
/// it).
#[inline]
pub(super) const fn is_ascii_break(b: u8) -> bool {
    matches!(b, b' ' | b'\t'..=b'\r')
}

/// Whitespace a line may break at (not the no-break spaces).
pub(super) fn is_break_space(c: char) -> bool {
    if c.is_ascii() {
        // The ASCII White_Space characters, without the table lookup.
        return matches!(c, ' ' | '\t'..='\r');
    }
    c.is_whitespace() && !matches!(c, '\u{a0}' | '\u{2007}' | '\u{202f}')
}

/// Puts a zero-width space into every run of `min` backticks (before each one when `min` is
/// 1), so code cannot close its own delimiters.
pub(crate) fn break_backtick_runs(code: &str, min: usize) -> Cow<'_, str> {
    const RUNS: [&str; 3] = ["`", "``", "```"];
    // A byte search first: most code holds no backtick at all.
    if !code.as_bytes().contains(&b'`') || !code.contains(RUNS[min.clamp(1, 3) - 1]) {
        return Cow::Borrowed(code);
    }
    let mut out = String::with_capacity(code.len() + 8);
    let mut run = 0;
    for c in code.chars() {
        if c == '`' {
            if run + 1 >= min {
                out.push('\u{200b}');
                run = 0;
            }
            run += 1;
        } else {
            run = 0;
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// Whether `s` starts with a web URL (escaped as a URL, not as prose).
pub(super) fn is_url_start(s: &str) -> bool {
    // Asked at every word: the first byte settles almost all of them.
    s.starts_with('h') && (s.starts_with("https://") || s.starts_with("http://"))
}

/// Whether the last two non-space characters of text end a sentence.
pub(super) fn ends_sentence(last: [char; 2]) -> bool {
    let end = |c: char| matches!(c, '.' | '!' | '?' | '…');
    end(last[1]) || (matches!(last[1], '"' | '\'' | ')' | '”' | '’' | '»') && end(last[0]))
}

/// Whether `text[at..end]` is a grapheme cluster of its own (checked only next to non-ASCII).
pub(super) fn stands_alone(text: &str, at: usize, end: usize) -> bool {
    let bytes = text.as_bytes();
    let ascii_around =
        (at == 0 || bytes[at - 1].is_ascii()) && bytes.get(end).is_none_or(u8::is_ascii);
    ascii_around || (is_boundary(text, at) && is_boundary(text, end))
}

/// Removes control characters from a parser string (entities such as `&#x1b;` decode to them,
/// so the source alone cannot be filtered). A string borrowed from a source that holds none
/// has none (`source_clean`): only decoded strings, which the parser owns, are checked then.
#[inline]
fn clean(s: &mut CowStr<'_>, source_clean: bool) {
    if source_clean && matches!(s, CowStr::Borrowed(_)) {
        return;
    }
    clean_decoded(s);
}

/// [`clean`] for a string that needs the look: kept out of line, since most events never
/// get here.
#[inline(never)]
fn clean_decoded(s: &mut CowStr<'_>) {
    if may_hold_hostile_control(s) && s.chars().any(is_hostile_control) {
        *s = CowStr::from(strip_controls(s).into_owned());
    }
}

/// Removes control characters from every string of `event` that can reach the output, in
/// place; `source_clean`: the source the parser reads holds none.
#[inline]
pub(super) fn clean_event(event: &mut Event<'_>, source_clean: bool) {
    match event {
        Event::Text(t)
        | Event::Code(t)
        | Event::Html(t)
        | Event::InlineHtml(t)
        | Event::InlineMath(t)
        | Event::DisplayMath(t)
        | Event::FootnoteReference(t)
        | Event::Start(
            Tag::CodeBlock(CodeBlockKind::Fenced(t))
            | Tag::Link { dest_url: t, .. }
            | Tag::Image { dest_url: t, .. },
        ) => clean(t, source_clean),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backtick_runs_are_broken_at_the_given_length() {
        assert_eq!(break_backtick_runs("a```b", 3), "a``\u{200b}`b");
        assert_eq!(break_backtick_runs("a`b", 1), "a\u{200b}`b");
        assert!(matches!(break_backtick_runs("a``b", 3), Cow::Borrowed(_)));
    }

    #[test]
    fn the_ascii_break_spaces_are_the_ascii_whitespace() {
        for b in 0..0x80_u8 {
            let c = char::from(b);
            assert_eq!(is_break_space(c), c.is_whitespace(), "{c:?}");
            assert_eq!(is_ascii_break(b), is_break_space(c), "{c:?}");
        }
    }

    #[test]
    fn sentence_ends_after_closing_quotes() {
        assert!(ends_sentence(['.', '"']));
        assert!(ends_sentence(['x', '?']));
        assert!(!ends_sentence(['x', ',']));
    }
}
