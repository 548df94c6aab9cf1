//! Telegram HTML parse mode: `<b>`, `<i>`, `<s>`, `<code>`, `<pre>`, `<a>`, `<blockquote>`.

use super::{Dialect, Heading, LinkPolicy, Pair, Quote, Style, renderer_options};
use crate::channel::atom::Unit;
use crate::channel::chunk::Limits;
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
            links: LinkPolicy::new(super::DEFAULT_LINK_SCHEMES),
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
        super::render(&Telegram, body, self.settings(limits))
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

/// A value as it may appear inside a double-quoted attribute.
fn attribute(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            c => match html_escape(c) {
                Some(e) => out.push_str(e),
                None => out.push(c),
            },
        }
    }
    out
}

impl Dialect for Telegram {
    const UNIT: Unit = Unit::Utf16;
    const MARKUP_COUNTS: bool = false;

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
                format!("<pre><code class=\"language-{}\">", attribute(lang)),
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
            format!("<a href=\"{}\">", attribute(url)),
            "</a>",
            1,
        ))
    }
}
