//! Plain-text rendering.

use crate::render::{Render, RenderError};
use crate::egress::Markdown;

/// Renders Markdown as plain text: the words without markup, links as `label (url)`, lists
/// with bullets, quotes with `> `, tables as aligned columns, raw HTML as text. Split into
/// parts of at most `limit` characters (Unicode scalar values) when a limit is set.
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
#[derive(Clone, Debug, Default)]
pub struct PlainText {
    limit: Option<usize>,
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
}

#[cfg(feature = "markdown")]
impl Render for PlainText {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        super::format::render(
            &super::format::Plain,
            body,
            super::chunk::Limits {
                units: self.limit,
                entities: None,
            },
        )
    }
}

/// Without the `markdown` feature there is no parser: the source is sent as written, cut at
/// whitespace where possible and never inside a character.
#[cfg(not(feature = "markdown"))]
impl Render for PlainText {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        let text = body.as_str().replace("\r\n", "\n");
        let text = text.trim();
        if text.is_empty() {
            return Err(RenderError::Empty);
        }
        let Some(limit) = self.limit else {
            return Ok(vec![text.to_owned()]);
        };
        if limit == 0 {
            return Err(RenderError::LimitTooSmall {
                limit: 0,
                needed: 1,
            });
        }
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
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
        Ok(parts)
    }
}
