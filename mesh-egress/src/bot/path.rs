//! The one path (see the [module docs](super)): every entry (`send`, `send_to`, `run`,
//! `run_to`, a kept promise's follow-up) resolves here, once: the mode the handler declared,
//! the gate, render first (an answer that cannot be shown goes to Layer C), the promise kept
//! before its line goes, commit and send, or stream block by block.

#[cfg(feature = "markdown")]
use super::deadline::Deadlined;
use super::follow_up::Started;
use super::sendable::{Outgoing, Shape};
use super::{Bot, Delivery, Outcome, Promise};
use crate::address::Address;
use crate::answer::{AnswerStream, Streamed};
use crate::boundary::{Ready, Shown, ToKeep, prepare, record_delivered, resolve_in};
use crate::channel::stream::{ReplyStream, StreamingChannel};
use crate::channel::{BoxedChannel, Channel, DeliveryError, UnservedAddress, deliver_rendered};
use crate::degrade::DegradationPolicy;
use crate::outbound::CommitError;
use crate::reply::{Mode, Reply};
use crate::turn::Turn;

impl Bot {
    /// Whether a promise made at `address` is kept durably: the bot has a store, and a client
    /// for its surface that its worker rebuilds the channel with.
    pub(super) fn durably_serves(&self, address: &Address) -> bool {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if self.shared.store.is_some() {
            return self.shared.clients.contains_key(&address.surface());
        }
        let _ = address;
        false
    }

    /// The one path to the turn's address, through the bot's client for it (and the store's
    /// outbox, with a store).
    pub(super) async fn send_started(
        &self,
        turn: &Turn,
        reply: Outgoing,
        started: Option<Started<'_>>,
    ) -> Result<Delivery, DeliveryError> {
        let channel = match self.channel_for(turn.address()) {
            Ok(channel) => channel,
            Err(unserved) => return Err(unserved_error(turn, unserved)),
        };
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(store) = &self.shared.store {
            let durable = store.channel(channel);
            return self.deliver(turn, &durable, reply, started).await;
        }
        self.deliver(turn, &channel, reply, started).await
    }

    /// The channel of the bot's client for `address`.
    pub(crate) fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match self.shared.clients.get(&address.surface()) {
            Some(client) => client.channel_for(address),
            None => Err(UnservedAddress::new(address.surface(), address.clone())),
        }
    }

    /// The one path to a channel that may stream natively (a Slack stream, Telegram drafts,
    /// Discord edits); one that does not gets each block as a message of its own.
    pub(crate) async fn deliver<C: StreamingChannel>(
        &self,
        turn: &Turn,
        channel: &C,
        reply: Outgoing,
        started: Option<Started<'_>>,
    ) -> Result<Delivery, DeliveryError> {
        self.respond(turn, channel, reply, started, |attribution| {
            if channel.streams_natively() {
                channel.open_stream(attribution).ok()
            } else {
                None
            }
        })
        .await
    }

    /// The one path: the reply whole, or its stream block by block (onto the surface's own
    /// stream when `open` gives one).
    pub(super) async fn respond<C: Channel + ?Sized>(
        &self,
        turn: &Turn,
        channel: &C,
        reply: Outgoing,
        started: Option<Started<'_>>,
        open: impl FnOnce(&crate::egress::Attribution) -> Option<ReplyStream>,
    ) -> Result<Delivery, DeliveryError> {
        match reply.0 {
            Shape::Whole(reply) => self.whole(turn, channel, reply, started).await,
            Shape::Streamed(streamed) => match streamed.into_inner() {
                Streamed::Resolved(reply) => self.whole(turn, channel, reply, started).await,
                Streamed::Stream { stream, mode } => {
                    self.streamed(turn, channel, stream, mode, started, open)
                        .await
                }
            },
        }
    }

    /// A whole reply: gated, rendered first, its promise kept before its line goes, committed
    /// and sent.
    pub(crate) async fn whole<C: Channel + ?Sized>(
        &self,
        turn: &Turn,
        channel: &C,
        reply: Reply,
        started: Option<Started<'_>>,
    ) -> Result<Delivery, DeliveryError> {
        let mode = turn.mode();
        let policy = turn.policy_for(mode);
        let reply = self.gate(turn, mode, policy, reply).await;
        let answer = match &reply {
            Reply::Answer(message) => message.body().as_str().to_owned(),
            _ => String::new(),
        };
        let (rendered, commitment, shown) = match prepare(turn, mode, policy, channel, reply)? {
            Ready::Silence => return Ok(Delivery::new(Outcome::Silent)),
            Ready::Send {
                rendered,
                commitment,
                shown,
            } => (rendered, commitment, shown),
        };
        if let (Some(commitment), Some(started)) = (&commitment, started) {
            let address = channel.address();
            let promise = ToKeep {
                commitment,
                address: &address,
                mode,
                delivered: "",
                rerun: started.rerun,
                input: turn.input(),
                ledger: turn.ledger(),
            };
            // Kept before the line goes: a crash after it leaves a promise to keep.
            self.keeper(started.destination)
                .keep(promise)
                .await
                .map_err(|error| DeliveryError::Commit(CommitError::Store(error)))?;
        }
        let attribution = rendered.attribution().clone();
        let delivered = deliver_rendered(channel, rendered, commitment).await;
        record_delivered(turn.ledger(), &attribution, channel, &delivered);
        let mut receipt = delivered?;
        let mut delivery = Delivery::new(match shown {
            Shown::Answer => Outcome::Answered,
            Shown::Holding => Outcome::Holding,
            Shown::Handoff => Outcome::Handoff,
        });
        delivery.promise = promised(receipt.take_commitment(), started);
        if shown == Shown::Answer {
            delivery.delivered = answer;
        }
        delivery.receipts.push(receipt);
        Ok(delivery)
    }

    /// The gate on a whole answer (the one place it runs for one): blocked goes to Layer C.
    #[cfg(feature = "gate")]
    async fn gate(
        &self,
        turn: &Turn,
        mode: Mode,
        policy: &DegradationPolicy,
        reply: Reply,
    ) -> Reply {
        let gate = &self.shared.gate;
        match reply {
            Reply::Answer(message) if gate.is_on() => {
                let input = turn.input().unwrap_or_default();
                match gate.check(turn, input, Ok(message)).await {
                    Ok(message) => Reply::Answer(message),
                    Err(blocked) => resolve_in(turn, mode, policy, Err(blocked)),
                }
            }
            other => other,
        }
    }

    #[cfg(not(feature = "gate"))]
    async fn gate(&self, _: &Turn, _: Mode, _: &DegradationPolicy, reply: Reply) -> Reply {
        reply
    }

    /// A stream, block by block through the block check, onto `open`'s surface stream or as
    /// messages of their own; the turn's deadline is the stream's too.
    #[cfg(feature = "markdown")]
    async fn streamed<C: Channel + ?Sized>(
        &self,
        turn: &Turn,
        channel: &C,
        stream: AnswerStream,
        mode: Mode,
        started: Option<Started<'_>>,
        open: impl FnOnce(&crate::egress::Attribution) -> Option<ReplyStream>,
    ) -> Result<Delivery, DeliveryError> {
        let policy = turn.policy_for(mode);
        let mut plan =
            crate::boundary::StreamPlan::new(mode, policy).with_blocks(self.shared.blocks);
        #[cfg(feature = "gate")]
        {
            plan = plan.with_gate(&self.shared.gate, turn.input().unwrap_or_default());
        }
        if let Some(started) = started {
            plan = plan
                .with_promise_keeper(self.keeper(started.destination))
                .with_rerun(started.rerun.clone());
        }
        let source = Deadlined::new(stream, turn.deadline(), turn.attribution());
        let live = open(turn.attribution());
        let mut receipt = crate::boundary::stream(turn, &plan, channel, source, live).await?;
        Ok(streamed_delivery(&mut receipt, started))
    }

    /// Without the streamed boundary (feature `markdown`), a stream is read to its end and
    /// delivered as one answer (the build warns once: nothing streams).
    #[cfg(not(feature = "markdown"))]
    async fn streamed<C: Channel + ?Sized>(
        &self,
        turn: &Turn,
        channel: &C,
        stream: AnswerStream,
        mode: Mode,
        started: Option<Started<'_>>,
        _open: impl FnOnce(&crate::egress::Attribution) -> Option<ReplyStream>,
    ) -> Result<Delivery, DeliveryError> {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(target: "mesh_egress::bot", "mesh-egress was built without the `markdown` feature: streamed answers are sent whole, at their end");
        });
        let reply = collect(turn, stream, mode).await;
        self.whole(turn, channel, reply, started).await
    }
}

/// Whose a holding line's promise is: the bot's when a route started the turn (its keeper took
/// it), the caller's otherwise.
fn promised(
    commitment: Option<crate::reply::Commitment>,
    started: Option<Started<'_>>,
) -> Option<Promise> {
    commitment.map(|commitment| match started {
        Some(_) => Promise::Bot(commitment),
        None => Promise::Caller(commitment),
    })
}

/// What a streamed turn delivered, as the front door reports it.
#[cfg(feature = "markdown")]
fn streamed_delivery(
    receipt: &mut crate::boundary::StreamedTurnReceipt,
    started: Option<Started<'_>>,
) -> Delivery {
    use crate::boundary::StreamEnd;
    let rest = receipt.take_rest();
    let outcome = match receipt.end() {
        StreamEnd::Answered => Outcome::Answered,
        StreamEnd::Stopped(reason) => Outcome::Stopped(reason),
        StreamEnd::Degraded if rest.is_some() => Outcome::Holding,
        StreamEnd::Degraded if receipt.layer_c().is_some() => Outcome::Handoff,
        _ => Outcome::Silent,
    };
    let mut delivery = Delivery::new(outcome);
    delivery.delivered = receipt.delivered().to_owned();
    delivery.promise = promised(rest, started);
    (delivery.receipts, delivery.surface) = receipt.take_parts();
    delivery
}

/// `stream` read to its end as one reply of `turn` in `mode` (the boundary's: a failure goes
/// to Layer C, or is left for the keeper on a follow-up turn).
pub(crate) async fn collect(turn: &Turn, mut stream: AnswerStream, mode: Mode) -> Reply {
    let mut text = String::new();
    loop {
        match stream.next().await {
            Some(Ok(delta)) => {
                if stream.restarted() {
                    // Nothing was shown: the answer starts again with this delta.
                    text.clear();
                }
                text.push_str(&delta);
            }
            Some(Err(error)) => return resolve_in(turn, mode, turn.policy_for(mode), Err(error)),
            None => break,
        }
    }
    stream.mark_delivered(&text);
    resolve_in(turn, mode, turn.policy_for(mode), Ok(turn.message(text)))
}

/// A turn whose address no client of the bot serves: nothing was rendered or sent.
fn unserved_error(turn: &Turn, unserved: UnservedAddress) -> DeliveryError {
    tracing::warn!(
        target: "mesh_egress::bot",
        conversation = turn.attribution().conversation(),
        error = %unserved,
        "no client of this bot serves the turn's address; nothing was sent"
    );
    DeliveryError::Unserved(unserved)
}
