//! [`Sendable`]: what the front door sends, sealed.

use crate::answer::StreamedReply;
use crate::reply::Reply;

/// What the front door sends: only what an `#[egress_boundary]` handler returns, a [`Reply`]
/// or a [`StreamedReply`] (sealed: text, an [`AnswerStream`](crate::AnswerStream) or a block never skips the
/// boundary).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent by the front door",
    label = "only what an `#[egress_boundary]` handler returns can be sent: a `Reply` or a `StreamedReply`",
    note = "an `AnswerStream` must leave through the boundary first: return `Result<AnswerStream, EgressError>` from an `#[egress_boundary]` handler and send the `StreamedReply` it gives you",
    note = "text (a delta, a `String`, `Markdown`) or an unchecked `Block` is never sent as it is: return `Ok(turn.message(text))` (or an `AnswerStream`) from an `#[egress_boundary]` handler, so it is gated, rendered and committed on the way",
    note = "an `EgressError` (or an unresolved `Result`) goes through the boundary too: the handler's `Err` becomes Layer C's reply"
)]
pub trait Sendable: sealed::Sealed {}

pub(super) mod sealed {
    /// The conversion the front door makes (unnameable outside the crate: the trait cannot
    /// be implemented there).
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait Sealed {
        fn into_outgoing(self) -> Outgoing;
    }

    /// What a handler gave, in the shape the front door delivers.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    #[derive(Debug)]
    pub struct Outgoing(pub(in crate::bot) super::Shape);
}

pub(super) use sealed::Outgoing;

impl Sendable for Reply {}
impl Sendable for StreamedReply {}

impl sealed::Sealed for Reply {
    fn into_outgoing(self) -> Outgoing {
        Outgoing(Shape::Whole(self))
    }
}

impl sealed::Sealed for StreamedReply {
    fn into_outgoing(self) -> Outgoing {
        Outgoing(Shape::Streamed(self))
    }
}

#[derive(Debug)]
pub(super) enum Shape {
    Whole(Reply),
    Streamed(StreamedReply),
}

impl From<Reply> for Outgoing {
    fn from(reply: Reply) -> Self {
        Self(Shape::Whole(reply))
    }
}
