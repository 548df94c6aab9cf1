//! Web chat Markdown: CommonMark for a page that renders it (the AI SDK's `useChat` with a
//! Markdown component), every construct spelled the way a CommonMark reader reads it.

use std::borrow::Cow;

use super::{
    AsciiSet, Dialect, Heading, LinkPolicy, Pair, Quote, Style, break_backtick_runs,
    renderer_options,
};
use crate::channel::atom::Unit;
use crate::channel::chunk::Limits;
use crate::egress::Markdown;
use crate::render::{DEFAULT_MAX_PARTS, Render, RenderError, RenderedParts};

/// Renders Markdown as CommonMark for a web chat page, in parts of at most
/// [`limit`](Self::with_limit) code points (one part is one `text-delta` of the AI SDK's UI
/// message stream).
///
/// The browser renders the Markdown; what it receives is already hardened, so a page that
/// renders CommonMark as written shows nothing the model was not allowed to write:
///
/// - **no raw HTML**: `<` is backslash-escaped everywhere in text, so a tag the model wrote
///   (`<script>`, `<img onerror=…>`) is shown as text, never parsed as HTML; `&` is escaped
///   too, so an entity shows as written;
/// - **links**: live only for [allowed schemes](Self::with_link_schemes) (`http`, `https`,
///   `mailto`), written `[label](<url>)` with `<`, `>` and spaces percent-encoded; any other
///   target (`javascript:`, `data:`, relative) is shown as text beside its label, and a
///   label that reads as another address shows its real target;
/// - **controls**: C0 and C1 control characters (but newline and tab) and the bidi
///   embedding, override and isolate characters are removed;
/// - **the part budget**: at most [`max_parts`](Self::with_max_parts) parts per reply.
///
/// Only CommonMark is written (no GitHub extensions), so the page needs no plugin: headings
/// keep their level, strikethrough shows as plain text, tables become code blocks.
///
/// ```
/// use mesh_egress::Markdown;
/// use mesh_egress::channel::{Render, WebMarkdown};
/// let parts = WebMarkdown::new().render(&Markdown::new(
///     "**Deploy** <b>v2</b> to [prod](https://example.com), not [this](javascript:alert(1))",
/// ))?;
/// assert_eq!(
///     parts,
///     ["**Deploy** \\<b\\>v2\\</b\\> to [prod](<https://example.com>), not this (javascript:alert(1))"]
/// );
/// # Ok::<(), mesh_egress::channel::RenderError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct WebMarkdown {
    limit: usize,
    max_parts: usize,
    links: LinkPolicy,
}

impl WebMarkdown {
    /// The default cap per part, in code points. A page has no message limit; the cap keeps
    /// one part (one `text-delta`, one outbox row) reasonable, and with the part budget it
    /// bounds a reply at 160,000 code points.
    pub const LIMIT: usize = 16_000;

    /// A renderer with the default cap of [`LIMIT`](Self::LIMIT) code points per part.
    pub fn new() -> Self {
        Self {
            limit: Self::LIMIT,
            max_parts: DEFAULT_MAX_PARTS,
            links: LinkPolicy::new(super::DEFAULT_LINK_SCHEMES),
        }
    }

    /// Caps parts at `limit` code points.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// The cap per part, in code points.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Default for WebMarkdown {
    fn default() -> Self {
        Self::new()
    }
}

renderer_options!(WebMarkdown);

impl Render for WebMarkdown {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.render_parts(body).map(RenderedParts::into_parts)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        let limits = Limits {
            units: Some(self.limit),
            entities: None,
        };
        super::render(&Web, body, self.settings(limits))
    }
}

/// The web dialect: CommonMark, every markup character in text escaped.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Web;

impl Dialect for Web {
    const UNIT: Unit = Unit::Chars;
    const MARKUP_COUNTS: bool = true;
    const TEXT_ESCAPES: AsciiSet = AsciiSet::of(b"\\*_~`[]<>&!|#-+=.)");
    const WORD_ESCAPES: AsciiSet = AsciiSet::of(b"\\*_~`[]<>&!|");
    const CODE_ESCAPES: AsciiSet = AsciiSet::NONE;

    fn escape(&self, c: char, at_line_start: bool) -> Option<&'static str> {
        Some(match c {
            '\\' => "\\\\",
            '*' => "\\*",
            '_' => "\\_",
            '~' => "\\~",
            '`' => "\\`",
            '[' => "\\[",
            ']' => "\\]",
            // Raw HTML and autolinks start with `<`; entities with `&`.
            '<' => "\\<",
            '>' => "\\>",
            '&' => "\\&",
            '!' => "\\!",
            '|' => "\\|",
            // Only a line start makes these block syntax (headings, setext underlines, lists).
            '#' if at_line_start => "\\#",
            '-' if at_line_start => "\\-",
            '+' if at_line_start => "\\+",
            '=' if at_line_start => "\\=",
            _ => return None,
        })
    }

    fn list_number_escape(&self, c: char) -> Option<&'static str> {
        match c {
            '.' => Some("\\."),
            ')' => Some("\\)"),
            _ => None,
        }
    }

    fn code_escape(&self, _c: char) -> Option<&'static str> {
        None
    }

    fn code_text<'c>(&self, code: &'c str, inline: bool) -> Cow<'c, str> {
        break_backtick_runs(code, if inline { 2 } else { 3 })
    }

    fn style(&self, style: Style) -> Option<Pair> {
        let mark = match style {
            Style::Emphasis => "*",
            Style::Strong => "**",
            // Strikethrough is a GitHub extension: CommonMark shows `~~` as written.
            Style::Strike => return None,
        };
        Some(Pair::new(mark, mark, 0))
    }

    fn code_span(&self, code: &str) -> Option<Pair> {
        Some(Pair::backtick_span(code))
    }

    fn fence(&self, lang: &str, prefix: &str) -> Option<Pair> {
        Some(Pair::backtick_fence(lang, prefix))
    }

    fn heading(&self, level: u8) -> Heading {
        let mut prefix = "#".repeat(usize::from(level.clamp(1, 6)));
        prefix.push(' ');
        Heading::Prefix(prefix)
    }

    fn quote(&self) -> Quote {
        Quote::Prefix("> ")
    }

    fn bullet(&self, _depth: usize) -> &'static str {
        "- "
    }

    fn link(&self, url: &str) -> Option<Pair> {
        // Inside `<…>` a destination may hold neither `<`, `>` nor a line break; spaces
        // would end it for readers that do not take the angle form.
        Some(Pair::masked_link(url, |c| match c {
            '<' => Some("%3C"),
            '>' => Some("%3E"),
            ' ' => Some("%20"),
            '\n' => Some("%0A"),
            _ => None,
        }))
    }
}
