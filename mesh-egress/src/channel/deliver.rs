//! [`Deliver`]: render -> commit -> send each part in order, for every [`Channel`].

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{Channel, RenderError};
use crate::block::{Block, Checked};
use crate::egress::AgentMessage;
use crate::future::BoxFuture;
use crate::outbound::state::Rendered;
use crate::outbound::{CommitError, CommittedPart, DeliveryId, Outbound};
use crate::reply::{Commitment, Reply};

mod sealed {
    use crate::egress::AgentMessage;
    use crate::reply::Commitment;

    /// Seals [`Deliver`](super::Deliver): only the blanket impl for channels exists.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait SealedDeliver {}

    /// What a deliverable value amounts to.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    #[derive(Debug)]
    pub enum Carried {
        Message {
            message: AgentMessage,
            commitment: Option<Commitment>,
        },
        Silence,
        Resume(super::Undelivered),
    }

    /// Seals [`Deliverable`](super::Deliverable).
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait SealedDeliverable {
        fn into_carried(self) -> Carried;
    }
}

use sealed::Carried;

/// A value that may be delivered to a person: an [`AgentMessage`], a [`Reply`], a streamed
/// [`Block<Checked>`] (one that passed the gate's block check), or the [`Undelivered`] rest of
/// a failed delivery. Sealed.
///
/// Never an `EgressError`, an `Egress`, `Markdown`, a string or a `Block<Unchecked>`: the
/// compiler refuses them here.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be delivered to a user channel",
    label = "only an `AgentMessage`, a `Reply`, a checked `Block` or an `Undelivered` remainder can be delivered",
    note = "an `EgressError` is an internal failure, not a message: return it from an `#[egress_boundary]` handler (or pass it to `mesh_egress::boundary::resolve`) and deliver the `Reply` you get back",
    note = "`Markdown`, `String` and `&str` carry no attribution: wrap the text in `AgentMessage::new(text, attribution)`",
    note = "a streamed `Block<Unchecked>` must pass the gate's block check first: `gate.check_block(..)` gives the `Block<Checked>` to deliver",
    note = "a `StreamedReply` is delivered block by block by the front door, each block checked first: `bot.send(&turn, reply)`"
)]
pub trait Deliverable: sealed::SealedDeliverable + Send + 'static {}

impl sealed::SealedDeliverable for AgentMessage {
    fn into_carried(self) -> Carried {
        Carried::Message {
            message: self,
            commitment: None,
        }
    }
}
impl Deliverable for AgentMessage {}

impl sealed::SealedDeliverable for Reply {
    fn into_carried(self) -> Carried {
        match self {
            Reply::Answer(message) | Reply::Handoff { message } => Carried::Message {
                message,
                commitment: None,
            },
            Reply::Holding {
                message,
                commitment,
            } => Carried::Message {
                message,
                commitment: Some(commitment),
            },
            Reply::Silence => Carried::Silence,
        }
    }
}
impl Deliverable for Reply {}

impl sealed::SealedDeliverable for Block<Checked> {
    fn into_carried(self) -> Carried {
        Carried::Message {
            message: self.into_message(),
            commitment: None,
        }
    }
}
impl Deliverable for Block<Checked> {}

impl sealed::SealedDeliverable for Undelivered {
    fn into_carried(self) -> Carried {
        Carried::Resume(self)
    }
}
impl Deliverable for Undelivered {}

/// Delivers a [`Deliverable`] through a channel: render, commit, then send each part in order.
///
/// Sealed and implemented for every [`Channel`]; it can be neither overridden nor implemented
/// elsewhere, so every delivery takes the same typed path.
pub trait Deliver: sealed::SealedDeliver {
    /// Delivers `message`. Silence sends nothing and returns an empty [`Receipt`].
    fn deliver<M: Deliverable>(&self, message: M) -> Delivering<'_>;
}

impl<C: Channel + ?Sized> sealed::SealedDeliver for C {}

impl<C: Channel + ?Sized> Deliver for C {
    fn deliver<M: Deliverable>(&self, message: M) -> Delivering<'_> {
        // Converting before the future is built keeps the future's type independent of `M`, so
        // a value that is not `Deliverable` is reported once, at the argument, instead of once
        // per place the opaque future mentions `M`.
        let delivery = message.into_carried();
        Delivering {
            inner: Box::pin(deliver_parts(self, delivery)),
        }
    }
}

/// The future [`Deliver::deliver`] returns: `Send`, resolving to the [`Receipt`] or the
/// [`DeliveryError`].
#[must_use = "a delivery does nothing until awaited"]
pub struct Delivering<'a> {
    // One allocation per delivered message (not per part), paid next to a network send.
    inner: BoxFuture<'a, Result<Receipt, DeliveryError>>,
}

impl Future for Delivering<'_> {
    type Output = Result<Receipt, DeliveryError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for Delivering<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivering").finish_non_exhaustive()
    }
}

async fn deliver_parts<C: Channel + ?Sized>(
    channel: &C,
    delivery: Carried,
) -> Result<Receipt, DeliveryError> {
    match delivery {
        Carried::Silence => Ok(Receipt::silent()),
        Carried::Message {
            message,
            commitment,
        } => {
            let rendered = Outbound::new(message).render(channel.renderer())?;
            deliver_rendered(channel, rendered, commitment).await
        }
        Carried::Resume(rest) => {
            let Undelivered {
                delivery,
                parts,
                delivered,
                commitment,
            } = rest;
            send_in_order(channel, delivery, parts, delivered, commitment).await
        }
    }
}

/// Commits and sends a message that is already rendered for `channel` (the boundary renders
/// first, so a reply that cannot be rendered reaches Layer C instead of failing here).
pub(crate) async fn deliver_rendered<C: Channel + ?Sized>(
    channel: &C,
    rendered: Outbound<Rendered>,
    commitment: Option<Commitment>,
) -> Result<Receipt, DeliveryError> {
    let committed = rendered.commit(channel).await?;
    let delivery = committed.delivery_id();
    let parts = committed.into_parts().collect();
    send_in_order(channel, delivery, parts, Vec::new(), commitment).await
}

/// Sends parts that were committed earlier (a surface's stream left them unconfirmed), in
/// order, one message's parts after another; one receipt per message.
#[cfg(feature = "markdown")]
pub(crate) async fn send_committed_parts<C: Channel + ?Sized>(
    channel: &C,
    parts: Vec<CommittedPart>,
) -> Result<Vec<Receipt>, DeliveryError> {
    let mut receipts = Vec::new();
    let mut parts = parts.into_iter().peekable();
    while let Some(first) = parts.next() {
        let delivery = first.delivery_id();
        let mut message = vec![first];
        while let Some(part) = parts.next_if(|part| part.delivery_id() == delivery) {
            message.push(part);
        }
        receipts.push(send_in_order(channel, delivery, message, Vec::new(), None).await?);
    }
    Ok(receipts)
}

async fn send_in_order<C: Channel + ?Sized>(
    channel: &C,
    delivery: DeliveryId,
    parts: Vec<CommittedPart>,
    mut delivered: Vec<PartReceipt>,
    commitment: Option<Commitment>,
) -> Result<Receipt, DeliveryError> {
    let mut pending = parts.into_iter();
    while let Some(part) = pending.next() {
        let index = part.index();
        let total = part.total();
        if !part.is_owned() {
            // Ownership moved on mid-delivery (a lease expired, another worker took over): the
            // rest is not ours to send.
            let mut source = SendError::ownership_lost(part);
            let mut parts: Vec<CommittedPart> = source.part.take().into_iter().collect();
            parts.extend(pending);
            return Err(DeliveryError::Send {
                failed: index,
                total,
                source,
                undelivered: Box::new(Undelivered {
                    delivery,
                    parts,
                    delivered,
                    commitment,
                }),
            });
        }
        match channel.send(part).await {
            Ok(mut receipt) => {
                receipt.index = index;
                delivered.push(receipt);
            }
            Err(mut error) => {
                let mut parts: Vec<CommittedPart> = error.part.take().into_iter().collect();
                parts.extend(pending);
                return Err(DeliveryError::Send {
                    failed: index,
                    total,
                    source: error,
                    undelivered: Box::new(Undelivered {
                        delivery,
                        parts,
                        delivered,
                        commitment,
                    }),
                });
            }
        }
    }
    Ok(Receipt {
        delivery: Some(delivery),
        parts: delivered,
        commitment,
    })
}

/// What a channel returns for one part it sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartReceipt {
    index: usize,
    id: String,
    plain_text: bool,
}

impl PartReceipt {
    /// A receipt carrying the surface's id for the sent part (message id, `ts`, ...).
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            index: 0,
            id: id.into(),
            plain_text: false,
        }
    }

    /// Says the part went as plain text: the surface refused its formatting (Telegram's "can't
    /// parse entities") and the channel sent the text a person reads instead, once. The
    /// boundary and the worker put such a part on the ledger
    /// ([`RenderRecord::SentAsPlainText`](crate::ledger::RenderRecord)).
    pub fn with_plain_text_fallback(mut self) -> Self {
        self.plain_text = true;
        self
    }

    /// Whether the part went as plain text (see
    /// [`with_plain_text_fallback`](Self::with_plain_text_fallback)).
    pub fn is_plain_text_fallback(&self) -> bool {
        self.plain_text
    }

    /// The part's position in its message, from 0 (filled in by [`Deliver`]).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The surface's id for the sent part.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// What a completed delivery produced.
///
/// A healthy receipt may be dropped freely. One that still holds a holding line's
/// [`Commitment`] (see [`take_commitment`](Self::take_commitment)) logs one warning at target
/// `mesh_egress::degrade` when dropped, so a promise to a person is never lost unnoticed.
#[derive(Debug, Default)]
pub struct Receipt {
    delivery: Option<DeliveryId>,
    parts: Vec<PartReceipt>,
    commitment: Option<Commitment>,
}

impl Receipt {
    pub(crate) fn silent() -> Self {
        Self::default()
    }

    /// The delivery id, or `None` for silence.
    pub fn delivery_id(&self) -> Option<DeliveryId> {
        self.delivery
    }

    /// Every part delivered, in order (including parts delivered before a resume).
    pub fn parts(&self) -> &[PartReceipt] {
        &self.parts
    }

    /// The surface's ids of the delivered parts, in order.
    pub fn ids(&self) -> Vec<&str> {
        self.parts.iter().map(PartReceipt::id).collect()
    }

    /// How many parts were delivered.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether nothing was delivered (silence).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The promise made by a delivered holding line, if any.
    pub fn commitment(&self) -> Option<&Commitment> {
        self.commitment.as_ref()
    }

    /// Takes the promise out, to hand it to a follow-up runner.
    pub fn take_commitment(&mut self) -> Option<Commitment> {
        self.commitment.take()
    }
}

impl Drop for Receipt {
    fn drop(&mut self) {
        if let Some(commitment) = &self.commitment {
            let attr = commitment.attribution();
            tracing::warn!(
                target: "mesh_egress::degrade",
                agent = attr.agent(),
                conversation = attr.conversation(),
                run = attr.run(),
                commitment = %commitment.id(),
                "a receipt holding a follow-up commitment was dropped: nobody will keep the promise"
            );
        }
    }
}

/// The parts of a delivery that did not go, ready to be delivered again. Delivering it sends
/// exactly these parts, in order, and nothing that had already gone.
#[must_use = "undelivered parts are lost unless delivered again"]
pub struct Undelivered {
    delivery: DeliveryId,
    parts: Vec<CommittedPart>,
    delivered: Vec<PartReceipt>,
    commitment: Option<Commitment>,
}

impl Undelivered {
    /// The delivery these parts belong to.
    pub fn delivery_id(&self) -> DeliveryId {
        self.delivery
    }

    /// The indexes of the parts still to send, in order.
    pub fn indexes(&self) -> Vec<usize> {
        self.parts.iter().map(CommittedPart::index).collect()
    }

    /// The receipts of the parts that had gone.
    pub fn delivered(&self) -> &[PartReceipt] {
        &self.delivered
    }

    /// The parts still to send.
    pub fn parts(&self) -> &[CommittedPart] {
        &self.parts
    }
}

impl fmt::Debug for Undelivered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Undelivered")
            .field("delivery", &self.delivery)
            .field("indexes", &self.indexes())
            .field("delivered", &self.delivered.len())
            .finish_non_exhaustive()
    }
}

/// Why a channel could not send one part. Hand the part back with it so the delivery can
/// resume.
///
/// Besides the cause it says whether sending again could work ([`retryable`](Self::retryable)),
/// how long the surface asked to wait ([`retry_after`](Self::retry_after)), whether a try may
/// have reached the surface all the same ([`maybe_delivered`](Self::maybe_delivered): it stays
/// set whatever later tries of the same send answered) and whether the send stopped because
/// the conversation is no longer this process's to speak in
/// ([`is_ownership_lost`](Self::is_ownership_lost)).
#[derive(thiserror::Error)]
#[error("the channel did not accept the part")]
pub struct SendError {
    part: Option<CommittedPart>,
    retryable: bool,
    retry_after: Option<Duration>,
    maybe_delivered: bool,
    ownership_lost: bool,
    #[source]
    source: Box<dyn StdError + Send + Sync>,
}

/// The cause of a [`SendError::ownership_lost`].
#[derive(Debug, thiserror::Error)]
#[error("the conversation's ownership was lost, or its lease had too little time left for a try")]
struct NotOwned;

impl SendError {
    /// The part `part` could not be sent because of `source`. Retryable by default.
    pub fn new(part: CommittedPart, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        Self {
            part: Some(part),
            retryable: true,
            retry_after: None,
            maybe_delivered: false,
            ownership_lost: false,
            source: source.into(),
        }
    }

    /// `part` was not tried (again) because its ownership no longer holds, or holds for too
    /// short a time for a try to end before its lease does: it goes back to whoever holds the
    /// conversation next (or to this process once its lease is renewed). A durable outbox puts
    /// it back to `pending`, fenced on the lease.
    pub fn ownership_lost(part: CommittedPart) -> Self {
        let mut error = Self::new(part, NotOwned);
        error.ownership_lost = true;
        error
    }

    /// Marks whether an earlier try of this send may have reached the surface (it got no
    /// answer, a 5xx, or an answer that could not be read), so whoever sends the part next
    /// must reconcile or dedupe it rather than send it blindly.
    pub fn with_maybe_delivered(mut self, maybe: bool) -> Self {
        self.maybe_delivered = maybe;
        self
    }

    /// Whether a try of this send may have reached the surface (see
    /// [`with_maybe_delivered`](Self::with_maybe_delivered)).
    pub fn maybe_delivered(&self) -> bool {
        self.maybe_delivered
    }

    /// Whether the send stopped because the conversation's ownership was lost (see
    /// [`ownership_lost`](Self::ownership_lost)).
    pub fn is_ownership_lost(&self) -> bool {
        self.ownership_lost
    }

    /// Marks whether sending the part again could succeed.
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// The surface asked us to wait this long before trying again.
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// Whether sending again could succeed.
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// How long the surface asked us to wait, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The part that was not sent (`None` once a delivery has taken it into [`Undelivered`]).
    pub fn part(&self) -> Option<&CommittedPart> {
        self.part.as_ref()
    }

    /// Takes the unsent part back.
    pub fn into_part(self) -> Option<CommittedPart> {
        self.part
    }

    /// Takes the unsent part out, leaving the error (to send the part another way).
    #[cfg(feature = "http")]
    pub(crate) fn take_part(&mut self) -> Option<CommittedPart> {
        self.part.take()
    }
}

impl fmt::Debug for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("part", &self.part.as_ref().map(CommittedPart::index))
            .field("retryable", &self.retryable)
            .field("retry_after", &self.retry_after)
            .field("maybe_delivered", &self.maybe_delivered)
            .field("ownership_lost", &self.ownership_lost)
            .field("source", &self.source)
            .finish()
    }
}

/// Why a delivery did not complete. For a failed send it carries the [`Undelivered`] parts,
/// so delivering them again sends only what is missing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The body could not be rendered for this channel; nothing was sent.
    #[error("the message could not be rendered for this channel")]
    Render(#[from] RenderError),
    /// The message could not cross the commit boundary; nothing was sent.
    #[error("the message could not be committed")]
    Commit(#[from] CommitError),
    /// No client serves the conversation's address (a front door's turn addressed to a
    /// surface it has no client for); nothing was rendered or sent.
    #[error(transparent)]
    Unserved(#[from] super::unserved::UnservedAddress),
    /// A part was not sent: the surface refused it or could not be reached, or the
    /// conversation's ownership was lost after commit ([`is_ownership_lost`](Self::is_ownership_lost);
    /// nothing more was sent, and delivering the rest again is refused while ownership is lost).
    /// The rest comes back.
    #[error("part {} of {total} was not sent ({} had gone)", failed + 1, undelivered.delivered.len())]
    Send {
        /// The index of the part that failed.
        failed: usize,
        /// How many parts the message has.
        total: usize,
        /// Why.
        #[source]
        source: SendError,
        /// The failed part and everything after it.
        undelivered: Box<Undelivered>,
    },
}

impl DeliveryError {
    /// Whether the durable outbox failed (a commit it could not write, or a send it could not
    /// record), rather than the surface or the ownership.
    pub fn is_store_failure(&self) -> bool {
        matches!(self, Self::Commit(CommitError::Store(_)))
    }

    /// Whether the conversation's ownership was lost: before commit (nothing was sent) or
    /// while sending (the parts that had not gone come back).
    pub fn is_ownership_lost(&self) -> bool {
        match self {
            Self::Commit(CommitError::OwnershipLost) => true,
            Self::Send { source, .. } => source.is_ownership_lost(),
            _ => false,
        }
    }

    /// The parts still to send, if the failure happened while sending.
    pub fn into_undelivered(self) -> Option<Undelivered> {
        match self {
            Self::Send { undelivered, .. } => Some(*undelivered),
            _ => None,
        }
    }

    /// The delivery (message) id, if the failure happened while sending.
    pub fn delivery_id(&self) -> Option<DeliveryId> {
        match self {
            Self::Send { undelivered, .. } => Some(undelivered.delivery_id()),
            _ => None,
        }
    }

    /// The receipts of the parts that had gone before the failure.
    pub fn delivered(&self) -> &[PartReceipt] {
        match self {
            Self::Send { undelivered, .. } => undelivered.delivered(),
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::boundary::resolve;
    use crate::channel::Recorder;
    use crate::degrade::{DegradationPolicy, Mode};
    use crate::egress::{Attribution, EgressError};

    /// Collects what a subscriber writes, so a test can read the events.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    async fn receipts() -> (Receipt, Receipt) {
        let attr = Attribution::new("bot", "conv-drop", "run-1");
        let channel = Recorder::new();
        let healthy = channel
            .deliver(AgentMessage::new("hi", attr.clone()))
            .await
            .unwrap();
        let failed = Err(EgressError::transport("503", attr));
        let holding = resolve(Mode::Interactive, &DegradationPolicy::default(), failed);
        let promised = channel.deliver(holding).await.unwrap();
        (healthy, promised)
    }

    #[tokio::test]
    async fn dropping_a_receipt_that_holds_a_promise_warns_once_and_a_healthy_one_is_silent() {
        let (healthy, promised) = receipts().await;
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        let id = promised.commitment().unwrap().id().to_string();
        tracing::subscriber::with_default(subscriber, || {
            drop(healthy);
            drop(promised);
        });
        let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(logs.lines().count(), 1, "{logs}");
        assert!(logs.contains("WARN"), "{logs}");
        assert!(logs.contains("mesh_egress::degrade"), "{logs}");
        assert!(logs.contains(&id), "{logs}");
    }

    #[tokio::test]
    async fn a_promise_taken_out_of_its_receipt_is_not_warned_about() {
        let (_healthy, mut promised) = receipts().await;
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .finish();
        let promise = promised.take_commitment().unwrap();
        tracing::subscriber::with_default(subscriber, || drop(promised));
        assert!(captured.0.lock().unwrap().is_empty());
        drop(promise);
    }
}
