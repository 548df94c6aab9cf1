//! The atom stream: rendered output as a sequence of pieces the chunker may never split.
//!
//! A renderer writes its whole output into one [`Atoms`] buffer; each atom is a byte range of
//! that buffer plus its kind and its length in the channel's unit. The chunker only ever cuts
//! between atoms, or inside a [`Kind::Graphemes`] run at a grapheme-cluster boundary.

use std::borrow::Cow;

/// How a channel measures a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Unicode scalar values (Rust `char`s): Discord, Slack, plain text.
    Chars,
    /// UTF-16 code units: Telegram.
    Utf16,
}

impl Unit {
    /// The length of `s` in this unit.
    pub(crate) fn measure(self, s: &str) -> usize {
        if s.is_ascii() {
            return s.len();
        }
        match self {
            Unit::Chars => s.chars().count(),
            Unit::Utf16 => s.chars().map(char::len_utf16).sum(),
        }
    }
}

/// How strongly a break separates what is on either side; the chunker prefers the strongest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Between words.
    Word = 0,
    /// After a sentence's final punctuation.
    Sentence = 1,
    /// A line break.
    Line = 2,
    /// A blank line between blocks.
    Paragraph = 3,
}

/// What an atom is, which decides where the chunker may cut around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A run of grapheme clusters (a word, or part of one). Cut inside only as a last resort,
    /// and then only at a cluster boundary.
    Graphemes,
    /// An escape or character entity (`&lt;`, `\*`): shown as one character, never split.
    Escape,
    /// A line prefix (quote marker, list bullet, indentation) written after a line break.
    Prefix,
    /// Whitespace (possibly empty) where a part may end. `keep` whitespace stays in the part
    /// (code); other whitespace is dropped at a cut.
    Space {
        /// The strength of this break.
        level: Level,
        /// Whether the whitespace must survive a cut here.
        keep: bool,
    },
    /// Opens the marker with this index in [`Atoms::markers`].
    Open(u32),
    /// Closes the marker with this index in [`Atoms::markers`].
    Close(u32),
}

/// One unsplittable piece of rendered output. Offsets are `u32` to keep atoms small (a large
/// message has hundreds of thousands); [`MAX_SOURCE`] keeps them in range.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Atom {
    start: u32,
    end: u32,
    units: u32,
    /// What the atom is.
    pub(crate) kind: Kind,
    /// This atom continues the previous one's grapheme cluster (a combining mark after a
    /// style marker, say): no hard cut before it.
    pub(crate) joins_prev: bool,
    /// The atom shows something (see [`Atoms::is_visible`]); decided once when it is
    /// written, since the chunker asks for every atom of every part it scans.
    visible: bool,
}

impl Atom {
    /// Start of its byte range in [`Atoms::text`].
    pub(crate) fn start(&self) -> usize {
        self.start as usize
    }

    /// End of its byte range (exclusive).
    pub(crate) fn end(&self) -> usize {
        self.end as usize
    }

    /// Length in the channel's unit.
    pub(crate) fn units(&self) -> usize {
        self.units as usize
    }
}

/// The largest Markdown source rendered, in bytes: escaping grows text at most sixfold
/// (`"` to `&quot;`), which keeps every offset within `u32`.
pub(crate) const MAX_SOURCE: usize = (u32::MAX / 8) as usize;

/// A length known to fit, because the source is at most [`MAX_SOURCE`] (the walk refuses a
/// larger one before it writes an atom).
#[inline]
fn small(n: usize) -> u32 {
    debug_assert!(u32::try_from(n).is_ok(), "an offset past u32: {n}");
    n as u32
}

/// A paired style or fence marker: what closes it at a part end and what reopens it in the next.
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    /// Written at the end of a part that cuts through the marker (and by its own `Close` atom).
    pub(crate) close: Cow<'static, str>,
    /// Length of `close` in the channel's unit.
    pub(crate) close_units: usize,
    /// Written at the start of the next part.
    pub(crate) reopen: Cow<'static, str>,
    /// Length of `reopen` in the channel's unit.
    pub(crate) reopen_units: usize,
    /// Entities this marker costs in a part (Telegram counts formatting entities).
    pub(crate) entities: usize,
    /// Reopen only when the part starts mid-line; at a line start the line's own prefix
    /// (a block quote's `> `) already carries it.
    pub(crate) mid_line_only: bool,
}

/// A renderer's complete output as atoms.
#[derive(Debug)]
pub(crate) struct Atoms {
    /// The rendered text; atoms index into it.
    pub(crate) text: String,
    /// The atoms, in order.
    pub(crate) atoms: Vec<Atom>,
    /// Markers referenced by `Open`/`Close` atoms.
    pub(crate) markers: Vec<Marker>,
    /// The channel's length unit.
    pub(crate) unit: Unit,
    /// Whether markup (tags) counts against the limit; Telegram measures text after entity
    /// parsing, so its tags count zero and an entity counts one character.
    pub(crate) markup_counts: bool,
    /// Whether a visible atom has been written.
    visible: bool,
}

impl Atoms {
    /// An empty stream measuring in `unit`, with room for `capacity` bytes of text and at
    /// most `max_atoms` atoms buffered at once.
    pub(crate) fn new(unit: Unit, markup_counts: bool, capacity: usize, max_atoms: usize) -> Self {
        Self {
            text: String::with_capacity(capacity),
            // About one atom per three bytes of chat text (a word, a space, a marker); packing
            // in batches keeps far fewer than that buffered for a long message. Sized once:
            // growing a full buffer copies all of it.
            atoms: Vec::with_capacity((capacity / 3).min(max_atoms)),
            // About one marker (a style, a link, a code span) per 64 bytes of chat text; the
            // markers are kept for the whole message.
            markers: Vec::with_capacity(capacity / 64),
            unit,
            markup_counts,
            visible: false,
        }
    }

    /// Whether anything visible has been written (markers and whitespace do not count), even
    /// if its atoms have since been packed and dropped.
    pub(crate) fn has_content(&self) -> bool {
        self.visible
    }

    /// Whether `atom` shows something: an escape, or a grapheme run that is not all
    /// whitespace (code indentation, say).
    #[inline]
    pub(crate) fn is_visible(&self, atom: &Atom) -> bool {
        self.is_visible_from(atom, atom.start())
    }

    /// Whether what is left of `atom` from byte `from` shows something.
    #[inline]
    pub(crate) fn is_visible_from(&self, atom: &Atom, from: usize) -> bool {
        if from == atom.start() {
            return atom.visible;
        }
        match atom.kind {
            Kind::Escape => true,
            Kind::Graphemes => !self.text[from..atom.end()].trim().is_empty(),
            _ => false,
        }
    }

    #[inline]
    fn push(&mut self, s: &str, units: usize, mut kind: Kind) {
        let start = self.text.len();
        self.text.push_str(s);
        let joins_prev = self.joins_prev(start, &mut kind);
        let visible = match kind {
            Kind::Escape => true,
            Kind::Graphemes => shows_something(s),
            _ => false,
        };
        self.append(start, units, kind, joins_prev, visible);
    }

    /// Whether the text written from byte `start` (not empty) continues the cluster before
    /// it (see [`continues_cluster`](Self::continues_cluster), which may change `kind`).
    #[inline]
    fn joins_prev(&mut self, start: usize, kind: &mut Kind) -> bool {
        // Only non-ASCII text can continue a cluster across an atom boundary (CR LF aside,
        // which renderers never write): the common case decides it from two bytes.
        let bytes = self.text.as_bytes();
        start > 0
            && start < bytes.len()
            && (!bytes[start].is_ascii() || !bytes[start - 1].is_ascii())
            && self.continues_cluster(start, kind)
    }

    /// Records the atom written from byte `start` to the end of the text.
    #[inline]
    fn append(&mut self, start: usize, units: usize, kind: Kind, joins_prev: bool, visible: bool) {
        self.visible |= visible;
        self.atoms.push(Atom {
            start: small(start),
            end: small(self.text.len()),
            units: small(units),
            kind,
            joins_prev,
            visible,
        });
    }

    /// Whether the text written from byte `start` continues the cluster before it; if so,
    /// whitespace on either side of `start` is no break (`kind` and the previous atom become
    /// grapheme runs). Kept out of [`push`](Self::push): most atoms never get here.
    #[cold]
    #[inline(never)]
    fn continues_cluster(&mut self, start: usize, kind: &mut Kind) -> bool {
        if clearly_a_boundary(&self.text[..start], &self.text[start..])
            || is_grapheme_boundary(&self.text, start)
        {
            return false;
        }
        if let Kind::Space { .. } = kind {
            // Whitespace inside a cluster (after a prepend mark) is no break.
            *kind = Kind::Graphemes;
        }
        if let Some(prev) = self.atoms.last_mut()
            && matches!(prev.kind, Kind::Space { .. })
        {
            // A mark that extends the whitespace before it: that whitespace is no break.
            prev.kind = Kind::Graphemes;
        }
        true
    }

    /// Appends a run of grapheme clusters (no escapes, no whitespace breaks inside).
    pub(crate) fn graphemes(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        let units = self.unit.measure(s);
        self.push(s, units, Kind::Graphemes);
    }

    /// Appends a word of ASCII characters none of which is whitespace, as
    /// [`graphemes`](Self::graphemes) does: its length in either unit is its length in bytes
    /// and it shows something, so nothing needs measuring.
    #[inline]
    pub(crate) fn ascii_word(&mut self, s: &str) {
        debug_assert!(
            !s.is_empty() && s.bytes().all(|b| b.is_ascii() && !is_ascii_white_space(b)),
            "not an ASCII word: {s:?}"
        );
        self.push_ascii(s, true);
    }

    /// Appends a run of code as [`graphemes`](Self::graphemes) does; `ascii`: the run is
    /// ASCII, so its length in either unit is its length in bytes.
    #[inline]
    pub(crate) fn code_graphemes(&mut self, s: &str, ascii: bool) {
        if !ascii {
            self.graphemes(s);
        } else if !s.is_empty() {
            debug_assert!(s.is_ascii(), "not ASCII: {s:?}");
            // Indentation alone shows nothing.
            self.push_ascii(s, s.bytes().any(|b| !is_ascii_white_space(b)));
        }
    }

    /// Appends a grapheme run of ASCII (not empty) that shows something if `visible`.
    #[inline]
    fn push_ascii(&mut self, s: &str, visible: bool) {
        let start = self.text.len();
        self.text.push_str(s);
        let mut kind = Kind::Graphemes;
        let joins_prev = self.joins_prev(start, &mut kind);
        self.append(start, s.len(), kind, joins_prev, visible);
    }

    /// Appends an escape shown as `shown` (one character).
    pub(crate) fn escape(&mut self, escaped: &str, shown: char) {
        let units = if self.markup_counts {
            self.unit.measure(escaped)
        } else {
            match self.unit {
                Unit::Chars => 1,
                Unit::Utf16 => shown.len_utf16(),
            }
        };
        self.push(escaped, units, Kind::Escape);
    }

    /// Appends a line prefix.
    pub(crate) fn prefix(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        // Bullets and indentation are text the reader sees, in every channel.
        let units = self.unit.measure(s);
        self.push(s, units, Kind::Prefix);
    }

    /// Appends a break: `s` is whitespace (or empty), measured as text.
    #[inline(always)]
    pub(crate) fn space(&mut self, s: &str, level: Level, keep: bool) {
        debug_assert!(s.trim().is_empty(), "a break that shows: {s:?}");
        // Most breaks are one ASCII space or line break: one unit, written without a copy
        // call. Whitespace shows nothing, even where it joins a cluster.
        if let &[b] = s.as_bytes()
            && b.is_ascii()
        {
            let start = self.text.len();
            self.text.push(char::from(b));
            let mut kind = Kind::Space { level, keep };
            let joins_prev = self.joins_prev(start, &mut kind);
            self.append(start, 1, kind, joins_prev, false);
            return;
        }
        self.long_space(s, level, keep);
    }

    /// [`space`](Self::space) for any other whitespace; out of line, so that the step for one
    /// byte inlines where breaks are written.
    #[inline(never)]
    fn long_space(&mut self, s: &str, level: Level, keep: bool) {
        // Mostly a blank line or code indentation: ASCII, one unit a byte.
        let units = if s.bytes().all(|b| b.is_ascii()) {
            s.len()
        } else {
            self.unit.measure(s)
        };
        self.push(s, units, Kind::Space { level, keep });
    }

    /// Opens a marker written as `open`, closed by `close`, reopened as `reopen` (`None`: as
    /// `open`); returns its index for [`close`](Self::close).
    pub(crate) fn open(
        &mut self,
        open: Cow<'static, str>,
        close: Cow<'static, str>,
        reopen: Option<Cow<'static, str>>,
        entities: usize,
        mid_line_only: bool,
    ) -> u32 {
        let id = small(self.markers.len());
        let units = self.markup_units(&open);
        self.push(&open, units, Kind::Open(id));
        let reopen = reopen.unwrap_or(open);
        self.markers.push(Marker {
            close_units: self.markup_units(&close),
            close,
            reopen_units: self.markup_units(&reopen),
            reopen,
            entities,
            mid_line_only,
        });
        id
    }

    /// Closes marker `id`, writing its close text; a marker closed right after it opened
    /// styles nothing and is removed instead.
    pub(crate) fn close(&mut self, id: u32) {
        if let Some(last) = self.atoms.last()
            && last.kind == Kind::Open(id)
        {
            self.text.truncate(last.start());
            self.atoms.pop();
            return;
        }
        // Taken for the write and put back: no copy of the text.
        let marker = &mut self.markers[id as usize];
        let units = marker.close_units;
        let close = std::mem::take(&mut marker.close);
        self.push(&close, units, Kind::Close(id));
        self.markers[id as usize].close = close;
    }

    /// The marker with index `id`.
    pub(crate) fn marker(&self, id: u32) -> &Marker {
        &self.markers[id as usize]
    }

    fn markup_units(&self, s: &str) -> usize {
        if self.markup_counts {
            self.unit.measure(s)
        } else {
            0
        }
    }
}

/// Whether `s` holds a character that is not whitespace: most words start with one that is
/// ASCII, which settles it without a trim.
fn shows_something(s: &str) -> bool {
    match s.as_bytes().first() {
        Some(&b) if b.is_ascii() && !is_ascii_white_space(b) => true,
        _ => !s.trim().is_empty(),
    }
}

/// Whether ASCII byte `b` is White_Space (`char::is_whitespace`, what `str::trim` removes):
/// tab, line feed, vertical tab, form feed, carriage return and space. Not
/// `u8::is_ascii_whitespace`, which leaves out the vertical tab.
fn is_ascii_white_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

/// Whether the end of `before` and the start of `after` are certainly in different grapheme
/// clusters, decided from the two characters alone (`false`: ask the segmenter). An ASCII
/// character after anything but CR or a prepended mark starts a cluster (UAX #29: only GB3
/// and GB9b keep an ASCII character with the one before it), and two characters below U+0300
/// are never joined but by CR LF. Every Prepend character lies in U+0600–U+0D4E or
/// U+11000–U+11FFF, so outside those ranges the character before is not one.
fn clearly_a_boundary(before: &str, after: &str) -> bool {
    let (Some(p), Some(c)) = (before.chars().next_back(), after.chars().next()) else {
        return true;
    };
    if p == '\r' {
        return false;
    }
    let prepend_free = !matches!(u32::from(p), 0x600..=0xd4e | 0x1_1000..=0x1_1fff);
    (c.is_ascii() && prepend_free)
        || (u32::from(p) < 0x300 && u32::from(c) < 0x300)
        || (p.is_ascii() && never_extends(c))
}

/// Whether `c` lies in a range with no Extend, ZWJ or SpacingMark character (UAX #29), so
/// after an ASCII character other than CR it always starts a cluster: the emoji people put
/// between words (skin-tone modifiers, U+1F3FB–U+1F3FF, excepted), CJK ideographs, and the
/// letters of hiragana and katakana. The `never_extends_is_true_to_the_segmenter` test checks
/// every character of these ranges.
fn never_extends(c: char) -> bool {
    matches!(u32::from(c),
        0x1_f300..=0x1_f3fa | 0x1_f400..=0x1_faff | 0x4e00..=0x9fff | 0x3041..=0x3096
        | 0x30a1..=0x30fa)
}

/// Whether byte offset `at` of `text` is an extended grapheme cluster boundary, asking the
/// segmenter only when the characters on either side do not settle it.
pub(crate) fn is_boundary(text: &str, at: usize) -> bool {
    match (text.get(..at), text.get(at..)) {
        (Some(before), Some(after)) if clearly_a_boundary(before, after) => true,
        _ => is_grapheme_boundary(text, at),
    }
}

/// Whether byte offset `at` of `text` is an extended grapheme cluster boundary.
pub(crate) fn is_grapheme_boundary(text: &str, at: usize) -> bool {
    use unicode_segmentation::GraphemeCursor;
    if at == 0 || at >= text.len() {
        return true;
    }
    if !text.is_char_boundary(at) {
        return false;
    }
    let mut cursor = GraphemeCursor::new(at, text.len(), true);
    // The whole text is one chunk, so the cursor never asks for more context.
    cursor.is_boundary(text, 0).unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `clearly_a_boundary` may only say yes where the segmenter says yes.
    fn agrees(p: char, c: char) {
        let text = format!("{p}{c}");
        let at = p.len_utf8();
        if clearly_a_boundary(&text[..at], &text[at..]) {
            assert!(is_grapheme_boundary(&text, at), "{p:?} {c:?}");
        }
    }

    #[test]
    fn the_ascii_white_space_is_what_trim_removes() {
        for b in 0..0x80_u8 {
            assert_eq!(
                is_ascii_white_space(b),
                char::from(b).is_whitespace(),
                "{b:#x}"
            );
        }
    }

    #[test]
    fn never_extends_is_true_to_the_segmenter() {
        for c in (0..=0x10_ffff_u32).filter_map(char::from_u32) {
            if never_extends(c) {
                for p in [' ', 'a', '\n', '.', '~'] {
                    let text = format!("{p}{c}");
                    assert!(is_grapheme_boundary(&text, 1), "{p:?} {c:?}");
                }
            }
        }
    }

    #[test]
    fn the_quick_boundary_check_never_contradicts_the_segmenter() {
        // Every character before an ASCII one (the Prepend rule), and every pair below U+0300.
        for p in (0..=0x10_ffff_u32).filter_map(char::from_u32) {
            agrees(p, 'a');
        }
        for p in (0..0x300_u32).filter_map(char::from_u32) {
            for c in (0..0x300_u32).filter_map(char::from_u32) {
                agrees(p, c);
            }
        }
    }
}
