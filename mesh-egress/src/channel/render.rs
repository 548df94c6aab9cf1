//! [`Render`]: canonical Markdown in, wire-ready parts out.

use crate::egress::Markdown;

/// Turns canonical Markdown into the parts a channel can show, in order, each within the
/// channel's limit.
///
/// Rendering is the only way Markdown becomes wire text; a [`Channel`](super::Channel) names its
/// renderer and [`Deliver`](super::Deliver) always calls it.
pub trait Render: Send + Sync {
    /// Renders `body` into one or more parts, in order. A body with nothing to show is an error
    /// ([`RenderError::Empty`]), never an empty send.
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError>;
}

impl<R: Render + ?Sized> Render for &R {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        (**self).render(body)
    }
}

impl<R: Render + ?Sized> Render for Box<R> {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        (**self).render(body)
    }
}

impl<R: Render + ?Sized> Render for std::sync::Arc<R> {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        (**self).render(body)
    }
}

/// Why a body could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// The body is empty or only whitespace: there is nothing to send.
    #[error("the message body is empty or whitespace-only; nothing would be sent")]
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
