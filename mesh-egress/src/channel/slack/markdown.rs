//! [`SlackMarkdown`]: standard Markdown for Slack's `markdown_text` (streams and messages).

use crate::channel::chunk::Limits;
use crate::channel::discord::Discord;
use crate::channel::format::{LinkPolicy, renderer_options};
use crate::egress::Markdown;
use crate::render::{DEFAULT_MAX_PARTS, Render, RenderError, RenderedParts};

/// Renders Markdown as the standard Markdown Slack's `markdown_text` field takes (chat
/// streams, `chat.postMessage`), in parts of at most [`limit`](Self::with_limit) characters
/// (Slack's limit for the field is 12,000 per call).
///
/// `markdown_text` is CommonMark, not mrkdwn, so this renderer writes CommonMark: punctuation
/// in text is backslash-escaped, links are `[label](<url>)`, tables become code blocks. The
/// hostile-text rules of the other renderers hold: links are live only for
/// [allowed schemes](Self::with_link_schemes), control and bidi characters are removed, and a
/// reply renders to at most [`max_parts`](Self::with_max_parts) parts. Mentions: Slack
/// notifies only for `<@U…>`, `<!here>`, `<!channel>`, `<!everyone>` and `<!subteam^…>`;
/// every `<` in text is escaped (`\<`), so model text cannot write them.
///
/// ```
/// use mesh_egress::Markdown;
/// use mesh_egress::channel::{Render, SlackMarkdown};
/// let parts = SlackMarkdown::new().render(&Markdown::new("**Ping** <!channel> at [docs](https://example.com)"))?;
/// assert_eq!(parts, ["**Ping** \\<!channel\\> at [docs](<https://example.com>)"]);
/// # Ok::<(), mesh_egress::channel::RenderError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SlackMarkdown {
    limit: usize,
    max_parts: usize,
    links: LinkPolicy,
}

impl SlackMarkdown {
    /// Slack's limit on `markdown_text` per call, in characters.
    pub const LIMIT: usize = 12_000;

    /// A renderer with Slack's limit of [`LIMIT`](Self::LIMIT) characters.
    pub fn new() -> Self {
        Self {
            limit: Self::LIMIT,
            max_parts: DEFAULT_MAX_PARTS,
            links: LinkPolicy::new(crate::channel::DEFAULT_LINK_SCHEMES),
        }
    }

    /// Caps parts at `limit` characters; values above [`LIMIT`](Self::LIMIT) are capped there.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.min(Self::LIMIT);
        self
    }

    /// The cap per part, in characters.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Default for SlackMarkdown {
    fn default() -> Self {
        Self::new()
    }
}

renderer_options!(SlackMarkdown);

impl Render for SlackMarkdown {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.render_parts(body).map(RenderedParts::into_parts)
    }

    fn is_standard_markdown(&self) -> bool {
        true
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        let limits = Limits {
            units: Some(self.limit),
            entities: None,
        };
        // Discord's dialect is CommonMark with every mention opener escaped: what Slack's
        // `markdown_text` needs too.
        crate::channel::format::render(&Discord, body, self.settings(limits))
    }
}
