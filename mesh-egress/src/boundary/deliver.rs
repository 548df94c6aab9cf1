//! [`deliver`]: a reply rendered for its channel before anything is committed, so a reply that
//! cannot be shown reaches Layer C instead of ending in nothing.

use crate::address::Surface;
use crate::channel::{Channel, DeliveryError, PartReceipt, Receipt, RenderError, deliver_rendered};
use crate::degrade::{DegradationPolicy, Mode};
use crate::egress::{Attribution, EgressError};
use crate::ledger::Ledger;
use crate::ledger::{LedgerRecord, RenderRecord};
use crate::outbound::DeliveryId;
use crate::outbound::Outbound;
use crate::outbound::state::Rendered;
use crate::reply::{Commitment, Reply};
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
/// proactive turns stay silent. The turn's ledger records the render failure (its kind, never
/// the text) and then Layer C's rows like any boundary error; a reply shortened to its
/// channel's part budget is recorded there too. Plain [`Deliver`](crate::channel::Deliver) still returns its typed
/// [`RenderError`].
///
/// Not public on its own, so that there is one door: the front door's path to a channel
/// ([`Bot::send_to`](crate::Bot::send_to) and the bot's own sends) ends here for a whole
/// answer.
// Its callers: the streamed path (`gate` and `markdown`) and the unit tests.
#[cfg_attr(not(feature = "markdown"), allow(dead_code))]
pub(crate) async fn deliver<C: Channel + ?Sized>(
    turn: &Turn,
    mode: Mode,
    policy: &DegradationPolicy,
    channel: &C,
    reply: Reply,
) -> Result<Receipt, DeliveryError> {
    match prepare(turn, mode, policy, channel, reply)? {
        Ready::Silence => Ok(Receipt::silent()),
        Ready::Send {
            rendered,
            commitment,
            ..
        } => {
            let attribution = rendered.attribution().clone();
            let delivered = deliver_rendered(channel, rendered, commitment).await;
            record_delivered(turn.ledger(), &attribution, channel, &delivered);
            delivered
        }
    }
}

/// What a reply is once it is ready for its channel.
pub(crate) enum Ready {
    /// Nothing goes out.
    Silence,
    /// `rendered` goes out (with `commitment`, for a holding line).
    Send {
        rendered: Outbound<Rendered>,
        commitment: Option<Commitment>,
        shown: Shown,
    },
}

/// What a ready reply shows the person.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// The answer.
    Answer,
    /// Layer C's holding line (with its promise).
    Holding,
    /// Layer C's handoff line.
    Handoff,
}

/// Renders `reply` for `channel` before anything is committed: an answer that cannot be shown
/// there is recorded and goes to Layer C once (with `mode` and `policy`), whose line is
/// rendered in turn; a Layer C line that cannot be rendered is the caller's typed error (the
/// channel is misconfigured). A shortened answer's cut is recorded on the turn's ledger.
pub(crate) fn prepare<C: Channel + ?Sized>(
    turn: &Turn,
    mode: Mode,
    policy: &DegradationPolicy,
    channel: &C,
    reply: Reply,
) -> Result<Ready, RenderError> {
    let reply = match reply {
        Reply::Answer(message) => {
            let attribution = message.attribution().clone();
            match Outbound::new(message).render(channel.renderer()) {
                Ok(rendered) => {
                    if let Some(cut) = rendered.cut() {
                        turn.ledger().record(
                            &attribution,
                            LedgerRecord::Render(RenderRecord::Shortened { cut }),
                        );
                    }
                    return Ok(Ready::Send {
                        rendered,
                        commitment: None,
                        shown: Shown::Answer,
                    });
                }
                Err(error) => {
                    turn.ledger().record(
                        &attribution,
                        LedgerRecord::Render(RenderRecord::Failed {
                            error: error.clone(),
                        }),
                    );
                    resolve_in(turn, mode, policy, Err(unrenderable(error, attribution)))
                }
            }
        }
        other => other,
    };
    // Layer C's own lines are short plain sentences.
    let (message, commitment, shown) = match reply {
        Reply::Silence => return Ok(Ready::Silence),
        // Layer C never answers for the agent; a hand-built reply that does is rendered as is.
        Reply::Answer(message) => (message, None, Shown::Answer),
        Reply::Handoff { message } => (message, None, Shown::Handoff),
        Reply::Holding {
            message,
            commitment,
        } => (message, Some(commitment), Shown::Holding),
    };
    Ok(Ready::Send {
        rendered: Outbound::new(message).render(channel.renderer())?,
        commitment,
        shown,
    })
}

/// Puts the parts of a delivery that went as plain text (the surface refused their
/// formatting) on `ledger`, whether or not the delivery completed.
pub(crate) fn record_delivered<C: Channel + ?Sized>(
    ledger: &Ledger,
    attribution: &Attribution,
    channel: &C,
    delivered: &Result<Receipt, DeliveryError>,
) {
    let (delivery, parts) = match delivered {
        Ok(receipt) => (receipt.delivery_id(), receipt.parts()),
        Err(error) => (error.delivery_id(), error.delivered()),
    };
    record_plain_text(
        ledger,
        attribution,
        channel.address().surface(),
        delivery,
        parts,
    );
}

/// Puts each of `parts` (of delivery `delivery`) that went as plain text on `ledger`.
pub(crate) fn record_plain_text(
    ledger: &Ledger,
    attribution: &Attribution,
    surface: Surface,
    delivery: Option<DeliveryId>,
    parts: &[PartReceipt],
) {
    for part in parts.iter().filter(|part| part.is_plain_text_fallback()) {
        ledger.sent_as_plain_text(
            attribution,
            surface,
            part.id(),
            delivery.map(|id| id.to_string()),
            Some(part.index()),
        );
    }
}

/// Renders an answer for `channel`, or says why it cannot be shown there as a semantic
/// [`EgressError`]: retryable for an empty render (asking again may produce text), not for a
/// limit problem (the same text would fail again).
// Its callers: the worker (a store feature) and the unit tests.
pub(super) fn unrenderable(error: RenderError, attribution: Attribution) -> EgressError {
    let retryable = matches!(error, RenderError::Empty);
    EgressError::semantic(error, attribution).with_retryable(retryable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Recorder;
    use crate::egress::Attribution;

    fn turn() -> Turn {
        Turn::new(Attribution::new("bot", "conv-r", "run-r"))
    }

    fn renders(turn: &Turn) -> Vec<RenderRecord> {
        turn.ledger()
            .entries()
            .into_iter()
            .filter_map(|e| match e.into_record() {
                LedgerRecord::Render(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn an_unrenderable_answer_is_recorded_and_reaches_layer_c() {
        let turn = turn();
        let channel = Recorder::new();
        let reply = Reply::Answer(turn.message("```\n```"));
        let policy = DegradationPolicy::default();
        let receipt = deliver(&turn, Mode::Interactive, &policy, &channel, reply)
            .await
            .expect("a holding line is delivered");
        assert!(receipt.commitment().is_some());
        assert_eq!(
            renders(&turn),
            [RenderRecord::Failed {
                error: RenderError::Empty
            }]
        );
        assert_eq!(turn.ledger().commitments().len(), 1);

        // Proactive: silence, nothing sent.
        let quiet = Recorder::new();
        let receipt = deliver(
            &turn,
            Mode::Proactive,
            &policy,
            &quiet,
            Reply::Answer(turn.message(">")),
        )
        .await
        .unwrap();
        assert!(receipt.is_empty());
        assert!(quiet.sent().is_empty());
    }

    #[tokio::test]
    async fn a_reply_past_the_part_budget_is_shortened_and_the_cut_recorded() {
        let turn = turn();
        let channel = Recorder::new().with_limit(20);
        let long = "word ".repeat(200);
        let receipt = deliver(
            &turn,
            Mode::Interactive,
            &DegradationPolicy::default(),
            &channel,
            Reply::Answer(turn.message(long)),
        )
        .await
        .unwrap();
        assert_eq!(receipt.len(), crate::render::DEFAULT_MAX_PARTS);
        let [RenderRecord::Shortened { cut }] = renders(&turn)[..] else {
            panic!("expected one cut, got {:?}", renders(&turn));
        };
        assert_eq!(cut.kept(), crate::render::DEFAULT_MAX_PARTS);
        assert!(cut.omitted_bytes() > 0);
    }
}
