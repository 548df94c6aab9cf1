//! Slack mrkdwn: `*bold*`, `_italic_`, `~strike~`, `<url|label>`, `&`, `<`, `>` escaped.

use std::borrow::Cow;

use crate::channel::atom::Unit;
use crate::channel::chunk::Limits;
use crate::channel::format::{
    AsciiSet, Dialect, Heading, LinkPolicy, Pair, Quote, Style, break_backtick_runs,
    renderer_options,
};
use crate::egress::Markdown;
use crate::render::{DEFAULT_MAX_PARTS, Render, RenderError, RenderedParts};

/// Renders Markdown as Slack mrkdwn, in parts of at most [`limit`](Self::with_limit)
/// characters of the text as sent (escapes and markup count).
///
/// Slack truncates a message's `text` past 40,000 characters and recommends far less; the
/// default cap is 3,000, which is also the most a section block's text can hold. Slack has no
/// escape for `*`, `_` or `~`: those show as written; a backtick in text gets a zero-width
/// space before it so text cannot open a code block. Headings become bold lines,
/// tables become code blocks, raw HTML is shown as text.
///
/// Hostile text: a reply renders to at most [`max_parts`](Self::with_max_parts) messages;
/// links are live only for [allowed schemes](Self::with_link_schemes), never nested, and a
/// label that reads as another address shows its target beside it; control characters are
/// removed. Mentions: `&`, `<` and `>` are always escaped, so `<!channel>`, `<!here>`,
/// `<@U123>`, `<#C123>` or `<!subteam^S1>` in model text is shown as written and notifies no
/// one, and a link target can never produce them (`[z](!channel)` is the text `z (!channel)`).
/// A plain `@name` is text: Slack only notifies for the `<@…>` syntax.
///
/// ```
/// use mesh_egress::Markdown;
/// use mesh_egress::channel::{Render, SlackMrkdwn};
/// let parts = SlackMrkdwn::new().render(&Markdown::new("**Deploy** <v2> to [prod](https://example.com)"))?;
/// assert_eq!(parts, ["*Deploy* &lt;v2&gt; to <https://example.com|prod>"]);
/// # Ok::<(), mesh_egress::channel::RenderError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SlackMrkdwn {
    limit: usize,
    max_parts: usize,
    links: LinkPolicy,
}

impl SlackMrkdwn {
    /// The default practical cap per part, in characters.
    pub const DEFAULT_LIMIT: usize = 3_000;
    /// Slack's hard limit on a message's text, in characters.
    pub const HARD_LIMIT: usize = 40_000;

    /// A renderer with the default cap of [`DEFAULT_LIMIT`](Self::DEFAULT_LIMIT) characters.
    pub fn new() -> Self {
        Self {
            limit: Self::DEFAULT_LIMIT,
            max_parts: DEFAULT_MAX_PARTS,
            links: LinkPolicy::new(crate::channel::format::DEFAULT_LINK_SCHEMES),
        }
    }

    /// Caps parts at `limit` characters; values above [`HARD_LIMIT`](Self::HARD_LIMIT) are
    /// capped there.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.min(Self::HARD_LIMIT);
        self
    }

    /// The cap per part, in characters.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Default for SlackMrkdwn {
    fn default() -> Self {
        Self::new()
    }
}

renderer_options!(SlackMrkdwn);

impl Render for SlackMrkdwn {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.render_parts(body).map(RenderedParts::into_parts)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        let limits = Limits {
            units: Some(self.limit),
            entities: None,
        };
        crate::channel::format::render(&Slack, body, self.settings(limits))
    }
}

/// The Slack mrkdwn dialect.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Slack;

fn slack_escape(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        _ => None,
    }
}

/// Appends a URL as it may appear inside `<…|…>`.
fn push_slack_url(out: &mut String, url: &str) {
    crate::channel::format::push_replaced(out, url, |c| match c {
        '|' => Some("%7C"),
        ' ' => Some("%20"),
        c => slack_escape(c),
    });
}

impl Dialect for Slack {
    const UNIT: Unit = Unit::Chars;
    const MARKUP_COUNTS: bool = true;
    // Slack reads `>` as a quote only at a line's start: in a list item it goes before the
    // item's indentation.
    const QUOTE_STARTS_LINE: bool = true;
    const TEXT_ESCAPES: AsciiSet = AsciiSet::of(b"`&<>");
    const CODE_ESCAPES: AsciiSet = AsciiSet::of(b"&<>");

    fn escape(&self, c: char, _at_line_start: bool) -> Option<&'static str> {
        match c {
            // Slack has no escape for a backtick; a zero-width space keeps three of them in
            // text from opening a code block.
            '`' => Some("\u{200b}`"),
            c => slack_escape(c),
        }
    }

    fn code_escape(&self, c: char) -> Option<&'static str> {
        slack_escape(c)
    }

    fn code_text<'c>(&self, code: &'c str, inline: bool) -> Cow<'c, str> {
        // Slack cannot escape a backtick: inside inline code every one is set apart from
        // its neighbours and the delimiters; in a block, runs of three are broken.
        break_backtick_runs(code, if inline { 1 } else { 3 })
    }

    fn style(&self, style: Style) -> Option<Pair> {
        let mark = match style {
            Style::Emphasis => "_",
            Style::Strong => "*",
            Style::Strike => "~",
        };
        Some(Pair::new(mark, mark, 0))
    }

    fn code_span(&self, _code: &str) -> Option<Pair> {
        Some(Pair::new("`", "`", 0))
    }

    fn fence(&self, _lang: &str, prefix: &str) -> Option<Pair> {
        // Slack shows no language; writing one would make it the code's first line.
        Some(Pair::new(
            "```\n",
            crate::channel::format::fence_close(prefix),
            0,
        ))
    }

    fn heading(&self, _level: u8) -> Heading {
        Heading::Styled(Pair::new("*", "*", 0))
    }

    fn quote(&self) -> Quote {
        Quote::Prefix("> ")
    }

    fn bullet(&self, depth: usize) -> &'static str {
        if depth == 0 { "• " } else { "◦ " }
    }

    fn link(&self, url: &str) -> Option<Pair> {
        // `<!…>`, `<@…>` and `<#…>` are Slack's mention and channel syntax
        // (https://api.slack.com/reference/surfaces/formatting#advanced): a target that could
        // open one is never a link. The link policy already requires a scheme; this keeps
        // that true whatever schemes are allowed.
        if url.starts_with(['!', '@', '#']) {
            return None;
        }
        let mut open = String::with_capacity(url.len() + 8);
        open.push('<');
        push_slack_url(&mut open, url);
        open.push('|');
        Some(Pair::new(open, ">", 0))
    }
}
