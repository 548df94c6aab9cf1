//! [`Stdout`]: the channel the examples deliver to.

use std::fmt::Write as _;
use std::future::Future;
use std::io::Write as _;

use super::{Channel, PartReceipt, PlainText, Render, SendError};
use crate::outbound::CommittedPart;

/// A [`Channel`] that prints each delivered part to standard output followed by a newline, or,
/// in JSON mode, one `{"part": N, "text": "..."}` object per line (`part` counting from 1).
#[derive(Clone, Debug, Default)]
pub struct Stdout<R = PlainText> {
    renderer: R,
    json: bool,
}

impl Stdout<PlainText> {
    /// Plain text, no part limit.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<R: Render> Stdout<R> {
    /// Prints what `renderer` produces.
    pub fn with_renderer(renderer: R) -> Self {
        Self {
            renderer,
            json: false,
        }
    }

    /// Prints one JSON object per part instead of the bare text.
    pub fn json(mut self, json: bool) -> Self {
        self.json = json;
        self
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl<R: Render> Channel for Stdout<R> {
    type Renderer = R;

    fn renderer(&self) -> &R {
        &self.renderer
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let line = if self.json {
            format!(
                "{{\"part\":{},\"text\":{}}}\n",
                part.index() + 1,
                json_string(part.text())
            )
        } else {
            format!("{}\n", part.text())
        };
        let mut out = std::io::stdout().lock();
        let result = out.write_all(line.as_bytes()).and_then(|()| out.flush());
        std::future::ready(match result {
            Ok(()) => Ok(PartReceipt::new(part.idempotency_key())),
            Err(e) => Err(SendError::new(part, e)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::json_string;

    #[test]
    fn json_strings_escape_quotes_controls_and_newlines() {
        assert_eq!(
            json_string("a\"b\\c\nd\u{1}é"),
            "\"a\\\"b\\\\c\\nd\\u0001é\""
        );
    }
}
