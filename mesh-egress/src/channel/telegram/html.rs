//! Telegram HTML parse mode: `<b>`, `<i>`, `<s>`, `<code>`, `<pre>`, `<a>`, `<blockquote>`.

use crate::channel::atom::Unit;
use crate::channel::chunk::Limits;
use crate::channel::format::{
    AsciiSet, Dialect, Heading, LinkPolicy, Pair, Quote, Style, renderer_options,
};
use crate::egress::Markdown;
use crate::render::{DEFAULT_MAX_PARTS, Render, RenderError, RenderedParts};

/// Renders Markdown as Telegram HTML (`parse_mode: "HTML"`), in parts of at most
/// [`limit`](Self::with_limit) UTF-16 code units *after entity parsing* (tags count nothing,
/// `&lt;` counts one) and at most [`entity_limit`](Self::with_entity_limit) formatting
/// entities.
///
/// Telegram's limits are 4,096 units and 100 entities per message. Lists become bullet lines,
/// headings bold lines, tables `<pre>` blocks; nested quotes join the outer `<blockquote>`
/// (Telegram does not nest them); raw HTML is shown as text.
///
/// Hostile text: a reply renders to at most [`max_parts`](Self::with_max_parts) messages;
/// links are live only for [allowed schemes](Self::with_link_schemes) (`tg://` is not one by
/// default: `tg://user?id=…` would mention anyone), never nested (a link inside an image's
/// label is its words); control characters are removed. Mentions: `<`, `>` and `&` are
/// escaped, so model text cannot write a `tg://user?id=` link (the only way to mention a user
/// who has no username) or any tag, and `[x](tg://user?id=1)` is the text `x (tg://user?id=1)`.
/// A plain `@username` is shown as written; Telegram itself recognises it as a mention of that
/// public username, as in any message (the Bot API's `mention` entity), and the renderer does
/// not alter the text to prevent that. There is no `@everyone` on Telegram.
///
/// ```
/// use mesh_egress::Markdown;
/// use mesh_egress::channel::{Render, TelegramHtml};
/// let parts = TelegramHtml::new().render(&Markdown::new("**Deploy** <v2> to [prod](https://example.com)"))?;
/// assert_eq!(parts, ["<b>Deploy</b> &lt;v2&gt; to <a href=\"https://example.com\">prod</a>"]);
/// # Ok::<(), mesh_egress::channel::RenderError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TelegramHtml {
    limit: usize,
    entities: usize,
    max_parts: usize,
    links: LinkPolicy,
}

impl TelegramHtml {
    /// Telegram's limit on a message's text after entity parsing, in UTF-16 code units.
    pub const LIMIT: usize = 4_096;
    /// Telegram's limit on formatting entities per message.
    pub const ENTITY_LIMIT: usize = 100;

    /// A renderer with Telegram's limits.
    pub fn new() -> Self {
        Self {
            limit: Self::LIMIT,
            entities: Self::ENTITY_LIMIT,
            max_parts: DEFAULT_MAX_PARTS,
            links: LinkPolicy::new(crate::channel::format::DEFAULT_LINK_SCHEMES),
        }
    }

    /// Caps parts at `limit` UTF-16 units; values above [`LIMIT`](Self::LIMIT) are capped there.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.min(Self::LIMIT);
        self
    }

    /// Caps parts at `entities` formatting entities; values above
    /// [`ENTITY_LIMIT`](Self::ENTITY_LIMIT) are capped there.
    pub fn with_entity_limit(mut self, entities: usize) -> Self {
        self.entities = entities.min(Self::ENTITY_LIMIT);
        self
    }

    /// The cap per part, in UTF-16 units.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The cap on entities per part.
    pub fn entity_limit(&self) -> usize {
        self.entities
    }
}

impl Default for TelegramHtml {
    fn default() -> Self {
        Self::new()
    }
}

renderer_options!(TelegramHtml);

impl Render for TelegramHtml {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.render_parts(body).map(RenderedParts::into_parts)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        let limits = Limits {
            units: Some(self.limit),
            entities: Some(self.entities),
        };
        crate::channel::format::render(&Telegram, body, self.settings(limits))
    }
}

/// The Telegram HTML dialect.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Telegram;

fn html_escape(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        _ => None,
    }
}

/// Appends a value as it may appear inside a double-quoted attribute.
fn push_attribute(out: &mut String, value: &str) {
    crate::channel::format::push_replaced(out, value, |c| match c {
        '"' => Some("&quot;"),
        c => html_escape(c),
    });
}

/// `before`, `value` as an attribute value, `after`: one allocation.
fn with_attribute(before: &str, value: &str, after: &str) -> String {
    let mut out = String::with_capacity(before.len() + value.len() + after.len() + 8);
    out.push_str(before);
    push_attribute(&mut out, value);
    out.push_str(after);
    out
}

/// The text a person reads in Telegram HTML: tags dropped, the entities Telegram's HTML style
/// knows (`&lt;`, `&gt;`, `&amp;`, `&quot;` and numeric ones) decoded, each link's target kept
/// after its label (`label (url)`, unless they are the same) when the result still fits
/// `limit` UTF-16 units, its label alone otherwise. What a message falls back to when Telegram
/// refuses its formatting ("can't parse entities"); sent without `parse_mode`, so nothing in
/// it is read as markup. One pass, no recursion: the input may be any renderer's output.
///
/// An entity that does not decode to a printable character (an unknown name, a control
/// character, a number past Unicode) stays as written: the control-character rule holds for
/// the plain text too.
#[cfg_attr(not(feature = "http"), allow(dead_code))] // read by the HTTP connectors only
pub(crate) fn plain_text(html: &str, limit: usize) -> String {
    let with_targets = strip(html, true);
    if with_targets.encode_utf16().count() <= limit {
        with_targets
    } else {
        strip(html, false)
    }
}

#[cfg_attr(not(feature = "http"), allow(dead_code))] // read by the HTTP connectors only
fn strip(html: &str, link_targets: bool) -> String {
    let mut out = String::with_capacity(html.len());
    // The open link: its target and where its label starts in `out`.
    let mut link: Option<(String, usize)> = None;
    let mut rest = html;
    while let Some(at) = rest.find(['<', '&']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with('&') {
            match decode_entity(rest) {
                Some((c, used)) => {
                    out.push(c);
                    rest = &rest[used..];
                }
                None => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
            continue;
        }
        let Some(end) = rest.find('>') else {
            // A `<` that opens no tag is text.
            out.push_str(rest);
            rest = "";
            break;
        };
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(target) = link_target(tag) {
            link = Some((target, out.len()));
        } else if tag.trim().eq_ignore_ascii_case("/a")
            && let Some((target, start)) = link.take()
            && link_targets
        {
            let label = out[start..].trim();
            if label.is_empty() {
                out.push_str(&target);
            } else if label != target {
                out.push_str(" (");
                out.push_str(&target);
                out.push(')');
            }
        }
    }
    out.push_str(rest);
    out
}

/// The decoded `href` of an `<a …>` tag's inside, if it is one.
#[cfg_attr(not(feature = "http"), allow(dead_code))] // read by the HTTP connectors only
fn link_target(tag: &str) -> Option<String> {
    let attributes = tag.strip_prefix('a')?;
    if !attributes.starts_with(char::is_whitespace) {
        return None;
    }
    let value = attributes.split_once("href=\"")?.1.split('"').next()?;
    Some(strip(value, false))
}

/// The character `text` starts with as an entity (`&…;`), and how many bytes the entity takes.
#[cfg_attr(not(feature = "http"), allow(dead_code))] // read by the HTTP connectors only
fn decode_entity(text: &str) -> Option<(char, usize)> {
    // The longest entity Telegram knows is a numeric one of a few digits: `&#x10FFFF;`.
    let end = text.get(..12).unwrap_or(text).find(';')?;
    let name = &text[1..end];
    let c = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let number = name.strip_prefix('#')?;
            let value = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse::<u32>().ok()?,
            };
            char::from_u32(value).filter(|c| !crate::render::is_hostile_control(*c))?
        }
    };
    Some((c, end + 1))
}

impl Dialect for Telegram {
    const UNIT: Unit = Unit::Utf16;
    const MARKUP_COUNTS: bool = false;
    const TEXT_ESCAPES: AsciiSet = AsciiSet::of(b"&<>");
    const CODE_ESCAPES: AsciiSet = AsciiSet::of(b"&<>");

    fn escape(&self, c: char, _at_line_start: bool) -> Option<&'static str> {
        html_escape(c)
    }

    fn code_escape(&self, c: char) -> Option<&'static str> {
        html_escape(c)
    }

    fn style(&self, style: Style) -> Option<Pair> {
        // Static tags: a style opens on every emphasised word, so it allocates nothing.
        let (open, close) = match style {
            Style::Emphasis => ("<i>", "</i>"),
            Style::Strong => ("<b>", "</b>"),
            Style::Strike => ("<s>", "</s>"),
        };
        Some(Pair::new(open, close, 1))
    }

    fn code_span(&self, _code: &str) -> Option<Pair> {
        Some(Pair::new("<code>", "</code>", 1))
    }

    fn fence(&self, lang: &str, _prefix: &str) -> Option<Pair> {
        Some(if lang.is_empty() {
            Pair::new("<pre>", "</pre>", 1)
        } else {
            Pair::new(
                with_attribute("<pre><code class=\"language-", lang, "\">"),
                "</code></pre>",
                1,
            )
        })
    }

    fn heading(&self, _level: u8) -> Heading {
        Heading::Styled(Pair::new("<b>", "</b>", 1))
    }

    fn quote(&self) -> Quote {
        Quote::Paired(Pair::new("<blockquote>", "</blockquote>", 1))
    }

    fn bullet(&self, depth: usize) -> &'static str {
        if depth == 0 { "• " } else { "◦ " }
    }

    fn link(&self, url: &str) -> Option<Pair> {
        // Only targets the link policy allows get here (absolute, `http`, `https`, `mailto` by
        // default): Telegram rejects a message whose link is not an absolute URL it knows,
        // and a `tg://user?id=` link mentions anyone.
        Some(Pair::new(
            with_attribute("<a href=\"", url, "\">"),
            "</a>",
            1,
        ))
    }
}
