//! Plain-text rendering.

use crate::egress::Markdown;
use crate::render::{DEFAULT_MAX_PARTS, Render, RenderError, RenderedParts};
#[cfg(not(feature = "markdown"))]
use crate::render::{PartBudgetCut, strip_controls};

/// Renders Markdown as plain text: the words without markup, links as `label (url)`, lists
/// with bullets, quotes with `> `, tables as aligned columns, raw HTML as text. Split into
/// parts of at most `limit` characters (Unicode scalar values) when a limit is set, and at
/// most [`max_parts`](Self::with_max_parts) parts.
///
/// Plain text has no live links, so it needs no link allow-list; control characters (C0 and
/// C1 but newline and tab, bidi embeddings, overrides and isolates) are removed, so nothing
/// model-written can drive a terminal.
///
/// ```
/// # #[cfg(feature = "markdown")] {
/// use mesh_egress::Markdown;
/// use mesh_egress::channel::{PlainText, Render};
/// let parts = PlainText::new().render(&Markdown::new("Deployed **v2**, see [notes](https://example.com)."))?;
/// assert_eq!(parts, ["Deployed v2, see notes (https://example.com)."]);
/// # }
/// # Ok::<(), mesh_egress::channel::RenderError>(())
/// ```
#[derive(Clone, Debug)]
pub struct PlainText {
    limit: Option<usize>,
    max_parts: usize,
}

impl Default for PlainText {
    fn default() -> Self {
        Self {
            limit: None,
            max_parts: DEFAULT_MAX_PARTS,
        }
    }
}

impl PlainText {
    /// A plain-text renderer with no part limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Splits output into parts of at most `limit` characters.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The part limit in characters, if any.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// Sends at most `max_parts` parts per reply (at least one; the default is
    /// [`DEFAULT_MAX_PARTS`]). A longer reply is cut at a clean boundary and its last part
    /// ends in "… (reply shortened)"; [`Render::render_parts`] reports the cut.
    pub fn with_max_parts(mut self, max_parts: usize) -> Self {
        self.max_parts = max_parts.max(1);
        self
    }

    /// The part budget per reply.
    pub fn max_parts(&self) -> usize {
        self.max_parts
    }
}

#[cfg(feature = "markdown")]
impl Render for PlainText {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.render_parts(body).map(RenderedParts::into_parts)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        let settings = super::format::Settings {
            limits: super::chunk::Limits {
                units: self.limit,
                entities: None,
            },
            max_parts: self.max_parts,
            links: super::format::LinkPolicy::default(),
            link_markup_cap: usize::MAX,
        };
        super::format::render(&super::format::Plain, body, settings)
    }
}

/// Without the `markdown` feature there is no parser: the source is sent as written (control
/// characters removed), cut at whitespace where possible and never inside a character.
#[cfg(not(feature = "markdown"))]
impl Render for PlainText {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.render_parts(body).map(RenderedParts::into_parts)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        let text = body.as_str().replace("\r\n", "\n").replace('\r', "\n");
        let text = strip_controls(&text);
        let text = text.trim();
        if text.is_empty() {
            return Err(RenderError::Empty);
        }
        let Some(limit) = self.limit else {
            return Ok(RenderedParts::new(vec![text.to_owned()]));
        };
        if limit == 0 {
            return Err(RenderError::LimitTooSmall {
                limit: 0,
                needed: 1,
            });
        }
        const MARKER: &str = "\n\n… (reply shortened)";
        let marker = MARKER.chars().count();
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if parts.len() == self.max_parts {
                let omitted = rest.len();
                let kept = parts.len();
                if let Some(last) = parts.last_mut() {
                    shorten(last, limit, MARKER, marker);
                }
                let cut = PartBudgetCut::new(kept, self.max_parts, omitted);
                return Ok(RenderedParts::new(parts).with_cut(cut));
            }
            let end = rest
                .char_indices()
                .nth(limit)
                .map_or(rest.len(), |(i, _)| i);
            let cut = if end == rest.len() {
                end
            } else {
                match rest[..end].rfind(char::is_whitespace) {
                    Some(space) if space > 0 => space,
                    _ => end,
                }
            };
            parts.push(rest[..cut].trim_end().to_owned());
            rest = rest[cut..].trim_start();
        }
        Ok(RenderedParts::new(parts))
    }
}

/// Makes room for the budget marker at the end of `part` (at most `limit` characters) and
/// appends it; a part too short for the marker ends in "…" instead.
#[cfg(not(feature = "markdown"))]
fn shorten(part: &mut String, limit: usize, marker: &str, marker_chars: usize) {
    let (marker, room) = if limit >= 4 * marker_chars {
        (marker, limit - marker_chars)
    } else {
        ("…", limit.saturating_sub(1))
    };
    let keep = part.char_indices().nth(room).map_or(part.len(), |(i, _)| i);
    let cut = match part[..keep].rfind(char::is_whitespace) {
        Some(space) if space > 0 && keep < part.len() => space,
        _ => keep,
    };
    part.truncate(cut);
    let trimmed = part.trim_end().len();
    part.truncate(trimmed);
    part.push_str(marker);
}
