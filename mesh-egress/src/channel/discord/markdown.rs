//! Discord markdown: CommonMark-like, with backslash escapes and masked links.

use std::borrow::Cow;

use crate::channel::atom::Unit;
use crate::channel::chunk::Limits;
use crate::channel::format::{
    AsciiSet, Dialect, Heading, LinkPolicy, Pair, Quote, Style, break_backtick_runs,
    renderer_options,
};
use crate::egress::Markdown;
use crate::render::{DEFAULT_MAX_PARTS, Render, RenderError, RenderedParts};

/// Renders Markdown as Discord markdown, in parts of at most [`limit`](Self::with_limit)
/// code points (Discord's message limit is 2,000).
///
/// Markdown punctuation in text is backslash-escaped, links become masked links
/// `[label](<url>)`, headings keep `#` (up to `###`), tables become code blocks, raw HTML is
/// shown as text. Code that contains its own delimiter gets a zero-width space inside the
/// backtick run.
///
/// Hostile text: a reply renders to at most [`max_parts`](Self::with_max_parts) messages;
/// links are live only for [allowed schemes](Self::with_link_schemes), never nested, and a
/// label that reads as another address shows its target beside it; control characters are
/// removed. Mentions: [`DiscordChannel`](crate::channel::DiscordChannel) sends
/// `allowed_mentions: {"parse": []}`, so no mention in a reply notifies anyone. The text is
/// also defused on its own: `<` is escaped, so `<@123>`, `<@&role>` and `<#channel>` show as
/// written, and `@everyone` / `@here` get a zero-width space after the `@` in text and code,
/// so they neither notify nor render as a mention pill even through a sender that sets no
/// `allowed_mentions`. A plain `@name` is text: Discord only mentions through `<@id>`.
///
/// ```
/// use mesh_egress::Markdown;
/// use mesh_egress::channel::{DiscordMarkdown, Render};
/// let parts = DiscordMarkdown::new().render(&Markdown::new("**Deploy** v2_final to [prod](https://example.com)"))?;
/// assert_eq!(parts, ["**Deploy** v2\\_final to [prod](<https://example.com>)"]);
/// # Ok::<(), mesh_egress::channel::RenderError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DiscordMarkdown {
    limit: usize,
    max_parts: usize,
    links: LinkPolicy,
}

impl DiscordMarkdown {
    /// Discord's limit on a message's content, in code points.
    pub const LIMIT: usize = 2_000;

    /// A renderer with Discord's limit of [`LIMIT`](Self::LIMIT) code points.
    pub fn new() -> Self {
        Self {
            limit: Self::LIMIT,
            max_parts: DEFAULT_MAX_PARTS,
            links: LinkPolicy::new(crate::channel::format::DEFAULT_LINK_SCHEMES),
        }
    }

    /// Caps parts at `limit` code points; values above [`LIMIT`](Self::LIMIT) are capped there.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.min(Self::LIMIT);
        self
    }

    /// The cap per part, in code points.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Default for DiscordMarkdown {
    fn default() -> Self {
        Self::new()
    }
}

renderer_options!(DiscordMarkdown);

impl Render for DiscordMarkdown {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.render_parts(body).map(RenderedParts::into_parts)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        let limits = Limits {
            units: Some(self.limit),
            entities: None,
        };
        crate::channel::format::render(&Discord, body, self.settings(limits))
    }
}

/// Puts a zero-width space after the `@` of `@everyone` and `@here`, which Discord parses as
/// mass mentions anywhere in a message's content, code included
/// (https://discord.com/developers/docs/resources/message#allowed-mentions-object).
fn defuse_mass_mentions(text: &str) -> Cow<'_, str> {
    // One byte search settles the text without an `@`: most code and every plain word.
    if !text.as_bytes().contains(&b'@') || (!text.contains("@everyone") && !text.contains("@here"))
    {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.replace("@everyone", "@\u{200b}everyone")
            .replace("@here", "@\u{200b}here"),
    )
}

/// Puts a zero-width space after a `<` that would open Discord's mention, channel, command,
/// emoji or timestamp syntax (`<@…>`, `<#…>`, `<:…>`, `<a:…>`, `<t:…>`).
fn defuse_mention_syntax(text: &str) -> Cow<'_, str> {
    let opens = |rest: &str| {
        rest.starts_with(['@', '#', ':']) || rest.starts_with("a:") || rest.starts_with("t:")
    };
    if !text
        .match_indices('<')
        .any(|(at, _)| opens(&text[at + 1..]))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 6);
    for (at, c) in text.char_indices() {
        out.push(c);
        if c == '<' && opens(&text[at + 1..]) {
            out.push('\u{200b}');
        }
    }
    Cow::Owned(out)
}

/// The Discord dialect.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Discord;

impl Dialect for Discord {
    const UNIT: Unit = Unit::Chars;
    const MARKUP_COUNTS: bool = true;
    const TEXT_ESCAPES: AsciiSet = AsciiSet::of(b"\\*_~`|[]<>&#-+.)");
    const WORD_ESCAPES: AsciiSet = AsciiSet::of(b"\\*_~`|[]<>&");
    const CODE_ESCAPES: AsciiSet = AsciiSet::NONE;
    // Both mention guards need an `@` or a `<`.
    const GUARDED: AsciiSet = AsciiSet::of(b"@<");

    fn escape(&self, c: char, at_line_start: bool) -> Option<&'static str> {
        Some(match c {
            '\\' => "\\\\",
            '*' => "\\*",
            '_' => "\\_",
            '~' => "\\~",
            '`' => "\\`",
            '|' => "\\|",
            '[' => "\\[",
            ']' => "\\]",
            '<' => "\\<",
            '>' => "\\>",
            // A CommonMark reader (Slack's `markdown_text`) decodes `&ouml;`; Discord shows it
            // as written, and shows `\&` as `&`, so the escape keeps both to the text.
            '&' => "\\&",
            // Only a line start makes these block syntax (headings, subtext, lists).
            '#' if at_line_start => "\\#",
            '-' if at_line_start => "\\-",
            '+' if at_line_start => "\\+",
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
        match break_backtick_runs(code, if inline { 2 } else { 3 }) {
            Cow::Borrowed(code) => defuse_mass_mentions(code),
            Cow::Owned(code) => Cow::Owned(defuse_mass_mentions(&code).into_owned()),
        }
    }

    fn guard_word<'w>(&self, word: &'w str) -> Cow<'w, str> {
        // A URL shown as text is not backslash-escaped (the backslash would show), so a
        // mention written inside one (`[x](a<@1>b)`) is set apart here. Asked only of words
        // holding an `@` or a `<` (`GUARDED`), what both guards look for.
        match defuse_mass_mentions(word) {
            Cow::Borrowed(word) => defuse_mention_syntax(word),
            Cow::Owned(word) => Cow::Owned(defuse_mention_syntax(&word).into_owned()),
        }
    }

    fn style(&self, style: Style) -> Option<Pair> {
        let mark = match style {
            Style::Emphasis => "*",
            Style::Strong => "**",
            Style::Strike => "~~",
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
        // Discord draws `#` to `###`; deeper levels show as the smallest.
        let prefix = ["# ", "## ", "### "][usize::from(level.clamp(1, 3)) - 1];
        Heading::Prefix(prefix.to_owned())
    }

    fn quote(&self) -> Quote {
        Quote::Prefix("> ")
    }

    fn bullet(&self, _depth: usize) -> &'static str {
        "- "
    }

    fn link(&self, url: &str) -> Option<Pair> {
        Some(Pair::masked_link(url, |c| match c {
            '>' => Some("%3E"),
            ' ' => Some("%20"),
            _ => None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_without_a_guarded_byte_is_left_alone() {
        let words = [
            "plain",
            "@everyone",
            "@here",
            "a@here",
            "<@1>",
            "<#c>",
            "<:e:1>",
            "<a:e:1>",
            "<t:1>",
            "x<@&r>y",
            "me@example.com",
            "<",
            "@",
            "—@here",
            "🙂<@2>",
        ];
        for word in words {
            let guarded = word.bytes().any(|b| Discord::GUARDED.contains(b));
            if !guarded {
                assert!(matches!(Discord.guard_word(word), Cow::Borrowed(w) if w == word));
            }
            if Discord.guard_word(word) != word {
                assert!(guarded, "{word:?}");
            }
        }
    }
}
