//! [`deliver`]: a reply rendered for its channel before anything is committed, so a reply that
//! cannot be shown reaches Layer C instead of ending in nothing.

use crate::channel::{Channel, DeliveryError, Receipt, RenderError, deliver_rendered};
use crate::degrade::{DegradationPolicy, Mode};
use crate::egress::{AgentMessage, EgressError};
use crate::outbound::Outbound;
use crate::outbound::state::Rendered;
use crate::reply::Reply;
use crate::turn::Turn;

use super::resolve_in;

/// Delivers `reply` to `channel` the way the egress contract says, even when the model's answer
/// cannot be shown there.
///
/// The answer is rendered for the channel first. A body that renders to nothing visible (an
/// empty code fence, a lone `>`), or that the channel cannot carry (a limit too small for one
/// piece, a body past the renderer's size bound), becomes a semantic [`EgressError`] —
/// retryable for an empty render, since asking again may produce text; not retryable for a
/// limit problem, since the same text would fail again — and goes through
/// [`resolve_in`](super::resolve_in): interactive turns get a holding line or a handoff,
/// proactive turns stay silent. The error is recorded on the turn's ledger like any boundary
/// error. Plain [`Deliver`](crate::channel::Deliver) still returns its typed
/// [`RenderError`]; use this function at the edge of a bot, where every turn must end as the
/// contract says.
///
/// ```
/// use mesh_egress::boundary::deliver;
/// use mesh_egress::channel::Recorder;
/// use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
/// use mesh_egress::{Attribution, Turn};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let turn = Turn::new(Attribution::new("helper", "conv-1", "run-1"));
/// let channel = Recorder::new();
/// // The model answered with a lone block quote marker: nothing to show.
/// let reply = Reply::Answer(turn.message(">"));
/// let receipt = deliver(&turn, Mode::Interactive, &DegradationPolicy::default(), &channel, reply)
///     .await
///     .unwrap();
/// assert!(receipt.commitment().is_some()); // a holding line, with its promise
/// assert_eq!(channel.sent().len(), 1);
/// # }
/// ```
pub async fn deliver<C: Channel + ?Sized>(
    turn: &Turn,
    mode: Mode,
    policy: &DegradationPolicy,
    channel: &C,
    reply: Reply,
) -> Result<Receipt, DeliveryError> {
    let (message, commitment, is_answer) = match reply {
        Reply::Silence => return Ok(Receipt::silent()),
        Reply::Answer(message) => (message, None, true),
        Reply::Handoff { message } => (message, None, false),
        Reply::Holding {
            message,
            commitment,
        } => (message, Some(commitment), false),
    };
    if !is_answer {
        // Layer C's own lines are short plain sentences; if even they cannot be rendered the
        // channel is misconfigured, and that is the caller's typed error.
        let rendered = Outbound::new(message).render(channel.renderer())?;
        return deliver_rendered(channel, rendered, commitment).await;
    }
    match render_for(channel, message) {
        Ok(rendered) => deliver_rendered(channel, rendered, commitment).await,
        Err(failure) => {
            let fallback = resolve_in(turn, mode, policy, Err(failure));
            Box::pin(deliver(turn, mode, policy, channel, fallback)).await
        }
    }
}

/// Renders an answer for `channel`, or says why it cannot be shown there as a semantic
/// [`EgressError`]: retryable for an empty render (asking again may produce text), not for a
/// limit problem (the same text would fail again).
pub(crate) fn render_for<C: Channel + ?Sized>(
    channel: &C,
    message: AgentMessage,
) -> Result<Outbound<Rendered>, EgressError> {
    let attribution = message.attribution().clone();
    Outbound::new(message)
        .render(channel.renderer())
        .map_err(|error| {
            let retryable = matches!(error, RenderError::Empty);
            EgressError::semantic(error, attribution).with_retryable(retryable)
        })
}
