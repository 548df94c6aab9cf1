//! Plain-text rendering.

use super::render::{Render, RenderError};
use crate::egress::Markdown;

/// Renders Markdown as plain text, split into parts of at most `limit` characters when a limit
/// is set.
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
}

impl Render for PlainText {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        if body.is_blank() {
            return Err(RenderError::Empty);
        }
        let text = to_plain(&body.as_str().replace("\r\n", "\n"));
        let text = text.trim();
        match self.limit {
            None => Ok(vec![text.to_owned()]),
            Some(0) => Err(RenderError::LimitTooSmall {
                limit: 0,
                needed: 1,
            }),
            Some(limit) => {
                let chars: Vec<char> = text.chars().collect();
                Ok(chars.chunks(limit).map(|c| c.iter().collect()).collect())
            }
        }
    }
}

#[cfg(feature = "markdown")]
fn to_plain(markdown: &str) -> String {
    use pulldown_cmark::{Event, Parser, TagEnd};
    let mut out = String::with_capacity(markdown.len());
    for event in Parser::new(markdown) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                out.push_str(&t)
            }
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::End(TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock) => {
                out.push_str("\n\n")
            }
            Event::End(TagEnd::Item) => out.push('\n'),
            _ => {}
        }
    }
    out
}

#[cfg(not(feature = "markdown"))]
fn to_plain(markdown: &str) -> String {
    markdown.to_owned()
}
