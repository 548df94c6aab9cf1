//! Markdown to atoms: one walk over pulldown-cmark's events, parametrised by a [`Dialect`]
//! (what each channel writes for a style, a fence, a quote, a link, and how it escapes).
//!
//! The walk ([`walker`]) owns the block structure (breaks, line prefixes, lists); inline text
//! ([`inline`]), tables ([`table`]), links ([`link`]) and character helpers ([`text`]) have a
//! module each. Dialects only answer "how does this channel spell it"; each channel's dialect
//! lives in its own module.
//!
//! Model text is hostile input, so the walk is bounded by construction: it never recurses on
//! the input's nesting (a link's label is collected once, iteratively, and links or images
//! inside it are flattened to their words), nesting past [`MAX_NESTING`] levels keeps its words
//! but not its structure, line prefixes are capped at [`MAX_PREFIX_WIDTH`], and control
//! characters are removed from every piece of text the parser hands over.

mod grid;
mod inline;
mod label;
mod link;
mod plain;
mod table;
mod text;
mod walker;
mod web;

pub(crate) use plain::Plain;
pub use web::WebMarkdown;

pub use link::DEFAULT_LINK_SCHEMES;
pub(crate) use link::LinkPolicy;
pub(crate) use text::break_backtick_runs;

use std::borrow::Cow;

#[cfg(test)]
use super::atom::Atoms;
use super::atom::Unit;
use super::chunk::{Limits, Packer, Part};
use crate::egress::Markdown;
use crate::render::{PartBudgetCut, RenderError, RenderedParts};

/// How deep quotes, list items, emphasis, links and images nest before the inner structure is
/// flattened to plain text (the words are kept). Sixteen is far past anything a person writes,
/// and keeps line prefixes and reopened markers small.
pub(crate) const MAX_NESTING: usize = 16;

/// The widest line prefix (quote markers, bullets, indentation) written, in characters.
pub(crate) const MAX_PREFIX_WIDTH: usize = 64;

/// A paired marker as a channel spells it.
#[derive(Clone, Debug)]
pub(crate) struct Pair {
    /// Opening text.
    pub(crate) open: Cow<'static, str>,
    /// Closing text.
    pub(crate) close: Cow<'static, str>,
    /// Entities it costs (Telegram).
    pub(crate) entities: usize,
}

impl Pair {
    pub(crate) fn new(
        open: impl Into<Cow<'static, str>>,
        close: impl Into<Cow<'static, str>>,
        entities: usize,
    ) -> Self {
        Self {
            open: open.into(),
            close: close.into(),
            entities,
        }
    }

    /// A Markdown code span: two backticks and spaces when the code holds one itself.
    pub(crate) fn backtick_span(code: &str) -> Self {
        if code.contains('`') {
            Self::new("`` ", " ``", 0)
        } else {
            Self::new("`", "`", 0)
        }
    }

    /// A Markdown fence, its language kept to the characters an info string needs, its
    /// closing line under `prefix` (a quote's or a list item's).
    pub(crate) fn backtick_fence(lang: &str, prefix: &str) -> Self {
        let keep = |c: &char| c.is_alphanumeric() || matches!(c, '+' | '-' | '#' | '.' | '_');
        let open = if lang.is_empty() {
            Cow::Borrowed("```\n")
        } else {
            let mut open = String::with_capacity(lang.len() + 4);
            open.push_str("```");
            open.extend(lang.chars().filter(keep));
            open.push('\n');
            Cow::Owned(open)
        };
        Self::new(open, fence_close(prefix), 0)
    }

    /// A Markdown link masked by its label, `[label](<url>)`, with each character of the
    /// URL that `encode` names percent-encoded.
    pub(crate) fn masked_link(url: &str, encode: impl Fn(char) -> Option<&'static str>) -> Self {
        let mut close = String::with_capacity(url.len() + 8);
        close.push_str("](<");
        push_replaced(&mut close, url, encode);
        close.push_str(">)");
        Self::new("[", close, 0)
    }
}

/// A fence's closing line under `prefix`: a line break, the prefix, the fence (a copy only
/// when there is a prefix).
pub(crate) fn fence_close(prefix: &str) -> Cow<'static, str> {
    if prefix.is_empty() {
        Cow::Borrowed("\n```")
    } else {
        Cow::Owned(["\n", prefix, "```"].concat())
    }
}

/// Appends `s` to `out`, each character `replace` names written as its replacement.
pub(crate) fn push_replaced(
    out: &mut String,
    s: &str,
    replace: impl Fn(char) -> Option<&'static str>,
) {
    let mut run = 0;
    for (at, c) in s.char_indices() {
        if let Some(replacement) = replace(c) {
            out.push_str(&s[run..at]);
            out.push_str(replacement);
            run = at + c.len_utf8();
        }
    }
    out.push_str(&s[run..]);
}

/// A set of ASCII characters, one flag per character: a membership test is one load (what
/// [`Dialect::TEXT_ESCAPES`] and [`Dialect::CODE_ESCAPES`] are).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AsciiSet([bool; 128]);

impl AsciiSet {
    /// No character.
    pub(crate) const NONE: Self = Self([false; 128]);
    /// Every ASCII character.
    pub(crate) const ALL: Self = Self([true; 128]);

    /// The set of the ASCII characters `chars` (a byte above ASCII is ignored).
    pub(crate) const fn of(chars: &[u8]) -> Self {
        let mut set = [false; 128];
        let mut i = 0;
        while i < chars.len() {
            if chars[i] < 0x80 {
                set[chars[i] as usize] = true;
            }
            i += 1;
        }
        Self(set)
    }

    /// Whether byte `b` is an ASCII character of the set.
    #[inline]
    pub(crate) const fn contains(&self, b: u8) -> bool {
        b < 0x80 && self.0[b as usize]
    }
}

/// An inline style.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Style {
    Emphasis,
    Strong,
    Strike,
}

/// How a channel shows a heading.
pub(crate) enum Heading {
    /// As its text alone.
    Plain,
    /// With a line prefix (`# `).
    Prefix(String),
    /// Inside a style pair (bold).
    Styled(Pair),
}

/// How a channel shows a block quote.
pub(crate) enum Quote {
    /// A prefix on every line.
    Prefix(&'static str),
    /// A paired marker around the quote.
    Paired(Pair),
}

/// What a channel writes; each method answers for one construct.
pub(crate) trait Dialect {
    /// How parts are measured.
    const UNIT: Unit;
    /// Whether markup counts against the limit (false: measured after entity parsing).
    const MARKUP_COUNTS: bool;
    /// Whether a quote's prefix is only read at the very start of a line (Slack): then quote
    /// markers go first and a list item's bullet or indentation after them.
    const QUOTE_STARTS_LINE: bool = false;

    /// The ASCII characters [`escape`](Self::escape) or
    /// [`list_number_escape`](Self::list_number_escape) may escape, as an [`AsciiSet`]: the
    /// walk asks those methods only about these and about non-ASCII characters, so a word of
    /// letters and plain punctuation costs no call per character. A superset is safe; the
    /// `escape_sets_cover_every_escape` test checks each dialect's.
    const TEXT_ESCAPES: AsciiSet = AsciiSet::ALL;
    /// The ASCII characters [`escape`](Self::escape) may escape away from a line's start
    /// (`at_line_start` false): inside a word, past its first character, on a line that does
    /// not start with the word's digits, only these need a look (`1.` and `- x` are syntax
    /// only at a line's start). A superset is safe; the `escape_sets_cover_every_escape` test
    /// checks each dialect's.
    const WORD_ESCAPES: AsciiSet = Self::TEXT_ESCAPES;
    /// The ASCII characters [`code_escape`](Self::code_escape) may escape, likewise.
    const CODE_ESCAPES: AsciiSet = AsciiSet::ALL;
    /// The ASCII characters one of which a word must hold for
    /// [`guard_word`](Self::guard_word) to change it: a word without any is not asked about
    /// (and a word of text without any, and without anything else to look at, is written as
    /// it is). A dialect that guards words names them; its tests check that a word without
    /// them is left alone.
    const GUARDED: AsciiSet = AsciiSet::NONE;

    /// The escape for `c` in ordinary text, if it needs one.
    fn escape(&self, c: char, at_line_start: bool) -> Option<&'static str>;
    /// The escape for the `.` or `)` after the digits a line starts with, which would
    /// otherwise make the line an ordered list item (`1. not a list`).
    fn list_number_escape(&self, c: char) -> Option<&'static str> {
        let _ = c;
        None
    }
    /// The escape for `c` in code and URLs shown as text.
    fn code_escape(&self, c: char) -> Option<&'static str>;
    /// Code text made safe inside this channel's code delimiters (before escaping).
    fn code_text<'c>(&self, code: &'c str, inline: bool) -> Cow<'c, str> {
        let _ = inline;
        Cow::Borrowed(code)
    }
    /// A word of text or a URL shown as text made safe before escaping (Discord: mass
    /// mentions set apart).
    fn guard_word<'w>(&self, word: &'w str) -> Cow<'w, str> {
        Cow::Borrowed(word)
    }
    /// An inline style's markers (`None`: the channel shows the text unstyled).
    fn style(&self, style: Style) -> Option<Pair>;
    /// Inline code's markers for this code.
    fn code_span(&self, code: &str) -> Option<Pair>;
    /// A fenced block's markers; `prefix` is the line prefix of the lines inside.
    fn fence(&self, lang: &str, prefix: &str) -> Option<Pair>;
    /// A heading of `level` (1..=6).
    fn heading(&self, level: u8) -> Heading;
    /// A block quote.
    fn quote(&self) -> Quote;
    /// The bullet of an unordered list item at `depth` (0 = outermost).
    fn bullet(&self, depth: usize) -> &'static str;
    /// Markers around a live link's label (`None`: the label, then the URL in parentheses).
    /// Only called for targets the renderer's [`LinkPolicy`] allows.
    fn link(&self, url: &str) -> Option<Pair>;
}

/// What a built-in renderer is configured with, beyond its dialect.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    /// The channel's limits per part.
    pub(crate) limits: Limits,
    /// The part budget: at most this many parts per reply (at least one).
    pub(crate) max_parts: usize,
    /// Which link targets become live links.
    pub(crate) links: LinkPolicy,
    /// The longest link markup (`<url|` and `>` together) written, in characters; a link
    /// whose markup is longer is shown as text, which the chunker can cut. Half the part
    /// limit, so a long URL cannot make a part impossible.
    pub(crate) link_markup_cap: usize,
}

/// Renders `body` for dialect `d`, chunks it within the settings' limits and applies the
/// part budget.
pub(crate) fn render<D: Dialect>(
    d: &D,
    body: &Markdown,
    settings: Settings,
) -> Result<RenderedParts, RenderError> {
    let (parts, cut) = render_chunks(d, body.as_str(), settings)?;
    let rendered = RenderedParts::new(parts.into_iter().map(|p| p.text).collect());
    Ok(match cut {
        Some(cut) => rendered.with_cut(cut),
        None => rendered,
    })
}

/// Renders `src` and chunks it, keeping each part's layout, with no part budget.
#[cfg(test)]
pub(crate) fn render_parts<D: Dialect>(
    d: &D,
    src: &str,
    limits: Limits,
) -> Result<Vec<Part>, RenderError> {
    let settings = Settings {
        limits,
        max_parts: usize::MAX,
        links: LinkPolicy::default(),
        link_markup_cap: usize::MAX,
    };
    Ok(render_chunks(d, src, settings)?.0)
}

/// Renders `src` and chunks it. Parts are packed while the walk goes on, every [`BATCH`]
/// atoms or more, so a long message never holds all its atoms at once; past the part budget the walk
/// goes on only to measure what the cut leaves out.
pub(crate) fn render_chunks<D: Dialect>(
    d: &D,
    src: &str,
    settings: Settings,
) -> Result<(Vec<Part>, Option<PartBudgetCut>), RenderError> {
    let mut packer = Packer::new(settings.limits, settings.max_parts);
    let cap = settings.link_markup_cap;
    // Without limits the one part is the whole message: packing it early would only rescan it
    // from its start at every batch (quadratic), so it is packed once at the end.
    let unlimited = settings.limits.units.is_none() && settings.limits.entities.is_none();
    // A feed rescans the part still open from its start, so the next feed waits until the
    // buffer has doubled: every atom is scanned a bounded number of times (linear time), where
    // feeding after every event once the buffer is full would rescan a long part per event.
    let mut next_feed = BATCH;
    let out = walker::walk(d, src, settings.links, cap, |out| {
        if !unlimited && out.atoms.len() >= next_feed {
            let done = packer.feed(out, false)?;
            out.atoms.drain(..done);
            packer.drained(done);
            next_feed = BATCH.max(2 * out.atoms.len());
        }
        Ok(())
    })?;
    packer.feed(&out, true)?;
    Ok(packer.finish(out.text.len()))
}

/// Atoms buffered between packings. Small under test, so every test exercises packing in
/// batches.
// 16,384 atoms (about 320 KB with their text) keep the rescan of the part still open at each
// feed, about half a part, to a few percent of the atoms packed.
const BATCH: usize = if cfg!(test) { 8 } else { 16_384 };

/// Renders `src` into the whole atom stream.
#[cfg(test)]
pub(crate) fn atoms<D: Dialect>(d: &D, src: &str) -> Result<Atoms, RenderError> {
    walker::walk(d, src, LinkPolicy::default(), usize::MAX, |_| Ok(()))
}

/// The part budget and link allow-list methods every Markdown renderer has.
macro_rules! renderer_options {
    ($renderer:ty) => {
        impl $renderer {
            /// Sends at most `max_parts` parts per reply (at least one; the default is
            /// [`DEFAULT_MAX_PARTS`](crate::channel::DEFAULT_MAX_PARTS)). A longer reply is
            /// cut at a clean boundary and its last part ends in "… (reply shortened)";
            /// [`render_parts`](crate::channel::Render::render_parts) reports the cut.
            pub fn with_max_parts(mut self, max_parts: usize) -> Self {
                self.max_parts = max_parts.max(1);
                self
            }

            /// The part budget per reply.
            pub fn max_parts(&self) -> usize {
                self.max_parts
            }

            /// Makes links live only for targets with one of `schemes` (compared without
            /// case; the default is [`DEFAULT_LINK_SCHEMES`](crate::channel::DEFAULT_LINK_SCHEMES):
            /// `http`, `https`, `mailto`). Other targets, relative, fragment-only and empty
            /// ones are shown as text beside their label.
            pub fn with_link_schemes(mut self, schemes: &'static [&'static str]) -> Self {
                self.links = $crate::channel::format::LinkPolicy::new(schemes);
                self
            }

            /// The schemes whose targets become live links.
            pub fn link_schemes(&self) -> &'static [&'static str] {
                self.links.schemes()
            }

            fn settings(
                &self,
                limits: $crate::channel::chunk::Limits,
            ) -> $crate::channel::format::Settings {
                $crate::channel::format::Settings {
                    limits,
                    max_parts: self.max_parts,
                    links: self.links,
                    link_markup_cap: limits.units.map_or(usize::MAX, |units| units / 2),
                }
            }
        }
    };
}
pub(crate) use renderer_options;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each escape `d` writes for an ASCII character is in the set the walk asks about.
    fn covers<D: Dialect>(d: &D, name: &str) {
        for b in 0..0x80_u8 {
            let c = char::from(b);
            let in_text = d.escape(c, true).is_some()
                || d.escape(c, false).is_some()
                || d.list_number_escape(c).is_some();
            if in_text {
                assert!(D::TEXT_ESCAPES.contains(b), "{name}: text escape {c:?}");
            }
            if d.escape(c, false).is_some() {
                assert!(D::WORD_ESCAPES.contains(b), "{name}: word escape {c:?}");
            }
            if d.code_escape(c).is_some() {
                assert!(D::CODE_ESCAPES.contains(b), "{name}: code escape {c:?}");
            }
            // The walk counts a line's leading digits on this basis.
            if c.is_ascii_alphanumeric() {
                assert!(!D::TEXT_ESCAPES.contains(b), "{name}: {c:?} escaped");
            }
        }
    }

    #[test]
    fn escape_sets_cover_every_escape() {
        covers(&Plain, "plain");
        covers(&crate::channel::slack::Slack, "slack");
        covers(&crate::channel::discord::Discord, "discord");
        covers(&crate::channel::telegram::Telegram, "telegram");
        covers(&web::Web, "web");
        assert!(!AsciiSet::ALL.contains(0x80));
        let set = AsciiSet::of(b"\0\x7f\xff");
        assert!((0..=0xff).all(|b| set.contains(b) == matches!(b, 0 | 0x7f)));
        assert!((0..=0xff).all(|b| !AsciiSet::NONE.contains(b)));
    }
}
