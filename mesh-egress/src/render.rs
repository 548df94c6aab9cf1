//! [`Render`]: canonical Markdown in, wire-ready parts out; what a render can fail with, and what
//! a part budget cut away.
//!
//! A leaf module: it imports nothing of ours but [`Markdown`], so every layer may name a
//! renderer without pulling in channels.

use std::borrow::Cow;

use crate::egress::Markdown;

/// How many parts a built-in renderer sends for one reply unless configured otherwise
/// (`with_max_parts` on [`PlainText`](crate::channel::PlainText) and the Markdown renderers).
///
/// Ten parts is a long answer on every surface (Discord: 20,000 code points) and still a
/// readable one; past it a hostile or runaway reply would flood the conversation. A reply that
/// needs more is cut at a clean boundary and ends in a visible "… (reply shortened)" marker;
/// [`Render::render_parts`] reports the cut. For genuinely long output send a file or a link,
/// or raise the budget.
pub const DEFAULT_MAX_PARTS: usize = 10;

/// Turns canonical Markdown into the parts a channel can show, in order, each within the
/// channel's limit.
///
/// Rendering is the only way Markdown becomes wire text; a [`Channel`](crate::channel::Channel)
/// names its renderer and [`Deliver`](crate::channel::Deliver) always calls it.
pub trait Render: Send + Sync {
    /// Renders `body` into one or more parts, in order. A body with nothing to show is an error
    /// ([`RenderError::Empty`]), never an empty send.
    ///
    /// # Errors
    ///
    /// [`RenderError::Empty`] for a body with nothing to show; another [`RenderError`] when the
    /// renderer cannot fit the body (a limit smaller than one unsplittable piece, a body too
    /// large, too many entities).
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError>;

    /// Renders `body` like [`render`](Self::render) and says whether a part budget cut the
    /// reply short. The default wraps `render` and reports no cut; the built-in renderers
    /// report the cut their [`with_max_parts`](crate::channel::SlackMrkdwn::with_max_parts)
    /// budget made, and their `render` returns the same parts.
    ///
    /// # Errors
    ///
    /// As [`render`](Self::render).
    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        self.render(body).map(RenderedParts::new)
    }

    /// Whether the parts are standard Markdown rather than a surface's own dialect: a Slack
    /// connector then sends them as `markdown_text` instead of mrkdwn `text`. Default `false`.
    fn is_standard_markdown(&self) -> bool {
        false
    }
}

impl<R: Render + ?Sized> Render for &R {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        (**self).render(body)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        (**self).render_parts(body)
    }

    fn is_standard_markdown(&self) -> bool {
        (**self).is_standard_markdown()
    }
}

impl<R: Render + ?Sized> Render for Box<R> {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        (**self).render(body)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        (**self).render_parts(body)
    }

    fn is_standard_markdown(&self) -> bool {
        (**self).is_standard_markdown()
    }
}

impl<R: Render + ?Sized> Render for std::sync::Arc<R> {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        (**self).render(body)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        (**self).render_parts(body)
    }

    fn is_standard_markdown(&self) -> bool {
        (**self).is_standard_markdown()
    }
}

/// The parts a render produced, and the part budget's cut if it shortened the reply.
///
/// Without a cut the parts concatenate to the rendered text (give or take the whitespace at
/// each cut and the markers closed and reopened around it); with one they are a prefix of it,
/// the last part ending in a visible marker.
///
/// ```
/// # #[cfg(feature = "markdown")] {
/// use mesh_egress::Markdown;
/// use mesh_egress::channel::{Render, SlackMrkdwn};
/// let slack = SlackMrkdwn::new().with_limit(100).with_max_parts(2);
/// let rendered = slack.render_parts(&Markdown::new("A long sentence. ".repeat(50)))?;
/// assert_eq!(rendered.parts().len(), 2);
/// assert!(rendered.parts()[1].ends_with("… (reply shortened)"));
/// assert_eq!(rendered.cut().map(|cut| (cut.kept(), cut.budget())), Some((2, 2)));
/// # }
/// # Ok::<(), mesh_egress::channel::RenderError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedParts {
    parts: Vec<String>,
    cut: Option<PartBudgetCut>,
}

impl RenderedParts {
    /// Parts that are the whole reply.
    pub fn new(parts: Vec<String>) -> Self {
        Self { parts, cut: None }
    }

    /// Records that a part budget shortened the reply to these parts.
    pub fn with_cut(mut self, cut: PartBudgetCut) -> Self {
        self.cut = Some(cut);
        self
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// The parts, by value.
    pub fn into_parts(self) -> Vec<String> {
        self.parts
    }

    /// The budget's cut, if the reply was shortened.
    pub fn cut(&self) -> Option<&PartBudgetCut> {
        self.cut.as_ref()
    }
}

/// What a part budget cut away: the reply rendered to more parts than the renderer's
/// `max_parts`, so only a prefix was kept and its last part ends in a visible marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartBudgetCut {
    kept: usize,
    budget: usize,
    omitted_bytes: usize,
}

impl PartBudgetCut {
    /// A cut that kept `kept` parts of a budget of `budget`, omitting `omitted_bytes` bytes of
    /// rendered text.
    pub fn new(kept: usize, budget: usize, omitted_bytes: usize) -> Self {
        Self {
            kept,
            budget,
            omitted_bytes,
        }
    }

    /// How many parts were kept.
    pub fn kept(&self) -> usize {
        self.kept
    }

    /// The renderer's part budget (`max_parts`).
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes of rendered text left out (the marker not counted).
    pub fn omitted_bytes(&self) -> usize {
        self.omitted_bytes
    }
}

/// Why a body could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RenderError {
    /// The body renders to nothing visible (blank, an empty code fence, a lone `>`, only a
    /// link reference definition, only control characters): there is nothing to send.
    #[error("the message body renders to nothing visible; nothing would be sent")]
    Empty,
    /// The channel's limit is smaller than one unsplittable piece of the output.
    #[error("a part limit of {limit} is smaller than an unsplittable piece of {needed}")]
    LimitTooSmall {
        /// The configured limit, in the channel's unit.
        limit: usize,
        /// The size of the smallest piece that did not fit.
        needed: usize,
    },
    /// The body is larger than a renderer accepts (hundreds of megabytes: far beyond any
    /// chat message).
    #[error("a body of {bytes} bytes is larger than the {limit} bytes a renderer accepts")]
    TooLarge {
        /// The body's size in bytes.
        bytes: usize,
        /// The largest body accepted, in bytes.
        limit: usize,
    },
    /// The channel's entity limit (Telegram: formatting entities per message) is smaller
    /// than what one unsplittable piece needs, counting the markers it sits inside.
    #[error("an entity limit of {limit} is smaller than the {needed} entities one piece needs")]
    TooManyEntities {
        /// The configured entity limit.
        limit: usize,
        /// The entities the smallest piece that did not fit needs.
        needed: usize,
    },
}

impl RenderError {
    /// A stable snake_case name for this error's kind, for ledgers and metrics: `empty`,
    /// `limit_too_small`, `too_large`, `too_many_entities`.
    pub fn kind(&self) -> &'static str {
        match self {
            RenderError::Empty => "empty",
            RenderError::LimitTooSmall { .. } => "limit_too_small",
            RenderError::TooLarge { .. } => "too_large",
            RenderError::TooManyEntities { .. } => "too_many_entities",
        }
    }
}

/// Whether `c` must never reach a surface or a terminal: C0 controls other than newline and
/// tab (DEL included), C1 controls, and the bidi embedding, override and isolate characters
/// (U+202A–U+202E, U+2066–U+2069).
pub(crate) fn is_hostile_control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A byte that is, or starts, a character [`is_hostile_control`] may name: a C0 control but
/// newline and tab, DEL, or the lead byte of U+0080–U+00BF (C1) or U+2000–U+2FFF (bidi).
fn suspect(b: u8) -> bool {
    (b < 0x20) & (b != b'\n') & (b != b'\t') | (b == 0x7f) | (b == 0xc2) | (b == 0xe2)
}

/// Whether `text` may hold a character [`is_hostile_control`] names: a byte check that is
/// exact for ASCII and conservative above it (any C1 or U+2000–U+2FFF lead byte says maybe),
/// so the char-by-char check runs only on text that could need it.
pub(crate) fn may_hold_hostile_control(text: &str) -> bool {
    // Without short-circuits inside a block, so the compiler can check a block in a few
    // vector instructions; every piece of text a renderer writes passes through here.
    let bytes = text.as_bytes();
    let mut blocks = bytes.chunks_exact(16);
    blocks
        .by_ref()
        .any(|block| block.iter().fold(false, |acc, &b| acc | suspect(b)))
        || blocks.remainder().iter().any(|&b| suspect(b))
}

/// Whether `text` holds a character [`is_hostile_control`] names, exactly: the byte check of
/// [`may_hold_hostile_control`] per block, and only in a suspect block a look at the characters
/// its suspect bytes start. Every suspect byte is ASCII or a lead byte (`0xc2`, `0xe2`), so
/// each one starts a character; emoji joined by U+200D and typographic punctuation (all
/// `0xe2`) cost one decode each, not a char-by-char pass over the text.
#[cfg_attr(not(feature = "markdown"), allow(dead_code))] // read by the Markdown renderers only
pub(crate) fn holds_hostile_control(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut blocks = bytes.chunks_exact(16);
    let mut start = 0;
    for block in blocks.by_ref() {
        // Without short-circuits inside a block, as in `may_hold_hostile_control`.
        if block.iter().fold(false, |acc, &b| acc | suspect(b)) && hostile_from(text, start, block)
        {
            return true;
        }
        start += 16;
    }
    hostile_from(text, start, blocks.remainder())
}

/// Whether a suspect byte of `block`, which starts at byte `start` of `text`, starts a
/// character [`is_hostile_control`] names.
#[inline(never)]
#[cfg_attr(not(feature = "markdown"), allow(dead_code))] // read by the Markdown renderers only
fn hostile_from(text: &str, start: usize, block: &[u8]) -> bool {
    block.iter().enumerate().any(|(i, &b)| {
        suspect(b)
            && text
                .get(start + i..)
                .and_then(|rest| rest.chars().next())
                .is_some_and(is_hostile_control)
    })
}

/// Removes the characters [`is_hostile_control`] names; borrows when there are none.
///
/// Removed rather than replaced by a placeholder: a placeholder would be counted against the
/// channel's limits, would split words the chunker measures, and shows nothing a reader can act
/// on. What removal leaves is what the text means: the printable rest of an ESC sequence
/// (`[31m`) stays visible, and without a bidi override `txt.exe` reads as what it is.
pub(crate) fn strip_controls(text: &str) -> Cow<'_, str> {
    if !may_hold_hostile_control(text) || !text.chars().any(is_hostile_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().filter(|&c| !is_hostile_control(c)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_check_never_misses_a_hostile_control() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10_ffff_u32).filter_map(char::from_u32) {
            let s = c.encode_utf8(&mut buf);
            if is_hostile_control(c) {
                assert!(may_hold_hostile_control(s), "{c:?}");
            }
            if c.is_ascii() {
                assert_eq!(may_hold_hostile_control(s), is_hostile_control(c), "{c:?}");
            }
        }
    }

    #[test]
    fn the_exact_check_agrees_with_a_char_by_char_scan() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10_ffff_u32).filter_map(char::from_u32) {
            let s = c.encode_utf8(&mut buf);
            assert_eq!(holds_hostile_control(s), is_hostile_control(c), "{c:?}");
        }
        // In context: at every offset across a block boundary, beside lookalikes that share
        // the suspect lead bytes (U+2014, U+200D, U+00A0).
        for hostile in ['\u{1b}', '\u{85}', '\u{202e}', '\u{2066}', '\0'] {
            for at in 0..40 {
                let mut text: String = "a—\u{200d}\u{a0}b".repeat(4).chars().take(at).collect();
                assert!(!holds_hostile_control(&text), "{text:?}");
                text.push(hostile);
                text.push_str("z—");
                assert!(holds_hostile_control(&text), "{text:?}");
            }
        }
    }

    #[test]
    fn strip_controls_removes_c0_c1_and_bidi_but_keeps_newline_and_tab() {
        let hostile = "a\u{1b}[31mb\u{7}\u{8}\0c\u{85}\u{9b}d\u{202e}exe.txt\u{2066}\u{2069}\n\tz";
        assert_eq!(strip_controls(hostile), "a[31mbcdexe.txt\n\tz");
        assert!(matches!(strip_controls("plain\ttext\n"), Cow::Borrowed(_)));
        // Zero-width joiners and marks that are not overrides are left alone.
        assert_eq!(
            strip_controls("👩\u{200d}💻 \u{200e}"),
            "👩\u{200d}💻 \u{200e}"
        );
    }

    #[test]
    fn error_kinds_are_stable_names() {
        assert_eq!(RenderError::Empty.kind(), "empty");
        let small = RenderError::LimitTooSmall {
            limit: 1,
            needed: 2,
        };
        assert_eq!(small.kind(), "limit_too_small");
        let large = RenderError::TooLarge { bytes: 2, limit: 1 };
        assert_eq!(large.kind(), "too_large");
        let many = RenderError::TooManyEntities {
            limit: 1,
            needed: 2,
        };
        assert_eq!(many.kind(), "too_many_entities");
    }

    #[test]
    fn default_render_parts_wraps_render_without_a_cut() {
        struct Upper;
        impl Render for Upper {
            fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
                Ok(vec![body.as_str().to_uppercase()])
            }
        }
        let rendered = Upper.render_parts(&Markdown::new("hi")).unwrap();
        assert_eq!(rendered.parts(), ["HI"]);
        assert_eq!(rendered.cut(), None);
        assert_eq!(rendered.into_parts(), ["HI"]);
    }
}
