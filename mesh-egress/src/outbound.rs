//! [`Outbound<S>`]: a message on its way out, `Unrendered -> Rendered -> Committed`.
//!
//! Each step consumes the previous state, and no later state can be built any other way: the
//! states are sealed, their fields are private, and nothing (`Default`, `Clone`, `From`,
//! `Deserialize`, a struct literal, a generic cast, `__private`) produces one. Only the parts of
//! an `Outbound<Committed>` ([`CommittedPart`]) reach [`Channel::send`](crate::channel::Channel::send).
//!
//! ```
//! use mesh_egress::{AgentMessage, Attribution, Outbound};
//! use mesh_egress::channel::{Channel, PlainText, Recorder};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = Recorder::new();
//! let msg = AgentMessage::new("All *green*.", Attribution::new("ops", "c1", "r1"));
//! let rendered = Outbound::new(msg).render(&PlainText::new())?;
//! let committed = rendered.commit(&channel).await?;
//! for part in committed.into_parts() {
//!     channel.send(part).await?;
//! }
//! assert_eq!(channel.sent(), ["All green."]);
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::egress::{AgentMessage, Attribution};
use crate::ownership::Ownership;
use crate::render::{PartBudgetCut, Render, RenderError, strip_controls};

mod sealed {
    /// The seal: only this crate names it, so only this crate adds states. Each state carries
    /// its own data, so a state cannot be reinterpreted as another.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait Sealed {
        type Data;
    }
}

/// The states of an [`Outbound`](super::Outbound).
pub mod state {
    /// A state of [`Outbound`](crate::Outbound). Sealed: implemented only by the three states
    /// below.
    pub trait State: super::sealed::Sealed {}

    /// Canonical Markdown that no renderer has touched.
    #[derive(Debug)]
    pub struct Unrendered {
        _sealed: (),
    }

    /// Rendered into the parts a channel can show; not yet committed.
    #[derive(Debug)]
    pub struct Rendered {
        _sealed: (),
    }

    /// Past the commit boundary: its parts may be sent.
    #[derive(Debug)]
    pub struct Committed {
        _sealed: (),
    }

    impl State for Unrendered {}
    impl State for Rendered {}
    impl State for Committed {}
}

use state::{Committed, Rendered, State, Unrendered};

impl sealed::Sealed for Unrendered {
    type Data = AgentMessage;
}

impl sealed::Sealed for Rendered {
    type Data = RenderedData;
}

impl sealed::Sealed for Committed {
    type Data = CommittedData;
}

#[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
#[doc(hidden)]
#[derive(Debug)]
pub struct RenderedData {
    attribution: Attribution,
    ownership: Option<Ownership>,
    parts: Vec<String>,
    cut: Option<PartBudgetCut>,
}

#[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
#[doc(hidden)]
#[derive(Debug)]
pub struct CommittedData {
    attribution: Attribution,
    ownership: Option<Ownership>,
    delivery: DeliveryId,
    parts: Vec<String>,
}

/// A message on its way to a channel, in state `S`.
#[must_use = "an outbound message does nothing until it is rendered, committed and sent"]
pub struct Outbound<S: State> {
    data: <S as sealed::Sealed>::Data,
    // `fn() -> S` keeps `Outbound` Send + Sync whatever the marker is, and says we never own
    // an `S`.
    _state: PhantomData<fn() -> S>,
}

impl<S: State> Outbound<S> {
    fn with(data: <S as sealed::Sealed>::Data) -> Self {
        Self {
            data,
            _state: PhantomData,
        }
    }
}

impl Outbound<Unrendered> {
    /// Starts a message on its way out.
    pub fn new(message: AgentMessage) -> Self {
        Self::with(message)
    }

    /// The message, still Markdown.
    pub fn message(&self) -> &AgentMessage {
        &self.data
    }

    /// Renders the Markdown body into the parts a channel can show.
    ///
    /// Whatever the renderer, no part carries a C0/C1 control character (other than newline and
    /// tab) or a bidi embedding, override or isolate character: they are removed here, so a
    /// user-written renderer cannot let them through either. A render with nothing visible left
    /// is [`RenderError::Empty`].
    ///
    /// # Errors
    ///
    /// [`RenderError::Empty`] when nothing visible is left; otherwise the [`RenderError`]
    /// `renderer` returns.
    pub fn render(self, renderer: &impl Render) -> Result<Outbound<Rendered>, RenderError> {
        let rendered = renderer.render_parts(self.data.body())?;
        let cut = rendered.cut().copied();
        let mut parts = rendered.into_parts();
        for part in &mut parts {
            if let std::borrow::Cow::Owned(clean) = strip_controls(part) {
                *part = clean;
            }
        }
        if parts.is_empty() || parts.iter().all(|p| p.trim().is_empty()) {
            return Err(RenderError::Empty);
        }
        if let Some(cut) = cut {
            let attr = self.data.attribution();
            tracing::warn!(
                target: "mesh_egress::egress",
                agent = attr.agent(),
                conversation = attr.conversation(),
                run = attr.run(),
                kept = cut.kept(),
                budget = cut.budget(),
                omitted_bytes = cut.omitted_bytes(),
                "reply shortened to its part budget"
            );
        }
        let ownership = self.data.ownership().cloned();
        let (_, attribution) = self.data.into_parts();
        Ok(Outbound::with(RenderedData {
            attribution,
            ownership,
            parts,
            cut,
        }))
    }
}

impl Outbound<Rendered> {
    /// The rendered parts, read-only.
    pub fn parts(&self) -> &[String] {
        &self.data.parts
    }

    /// The part budget's cut, if the renderer shortened the reply (the last part then ends in a
    /// visible marker).
    pub fn cut(&self) -> Option<PartBudgetCut> {
        self.data.cut
    }

    /// Who is speaking.
    pub fn attribution(&self) -> &Attribution {
        &self.data.attribution
    }

    /// Crosses the commit boundary: a message tied to an ownership (from
    /// [`Turn::message`](crate::Turn::message) or the turn-aware boundary) is refused once it is
    /// lost, whatever the channel; then `boundary` checks its own conditions and, where
    /// configured, writes a durable record. Only a committed message can be sent.
    ///
    /// # Errors
    ///
    /// [`CommitError::OwnershipLost`] when the message's ownership is lost (nothing is
    /// written); otherwise what `boundary` refuses with, such as [`CommitError::Store`] when
    /// the durable record cannot be written.
    pub async fn commit<B>(self, boundary: &B) -> Result<Outbound<Committed>, CommitError>
    where
        B: CommitBoundary + ?Sized,
    {
        if self.data.ownership.as_ref().is_some_and(|o| !o.is_held()) {
            return Err(CommitError::OwnershipLost);
        }
        let delivery = DeliveryId::next();
        boundary
            .commit(&CommitRecord {
                delivery,
                attribution: &self.data.attribution,
                parts: &self.data.parts,
                ownership: self.data.ownership.as_ref(),
            })
            .await?;
        let RenderedData {
            attribution,
            ownership,
            parts,
            cut: _,
        } = self.data;
        Ok(Outbound::with(CommittedData {
            attribution,
            ownership,
            delivery,
            parts,
        }))
    }
}

impl Outbound<Committed> {
    /// The delivery id assigned at commit; every part carries it.
    pub fn delivery_id(&self) -> DeliveryId {
        self.data.delivery
    }

    /// How many parts will be sent.
    pub fn len(&self) -> usize {
        self.data.parts.len()
    }

    /// Whether there are no parts (never true: rendering refuses empty output).
    pub fn is_empty(&self) -> bool {
        self.data.parts.is_empty()
    }

    /// The parts, in order, each to be sent exactly once.
    pub fn into_parts(self) -> impl ExactSizeIterator<Item = CommittedPart> + Send {
        let CommittedData {
            attribution,
            ownership,
            delivery,
            parts,
        } = self.data;
        let total = parts.len();
        parts
            .into_iter()
            .enumerate()
            .map(move |(index, text)| CommittedPart {
                delivery,
                index,
                total,
                text,
                attribution: attribution.clone(),
                ownership: ownership.clone(),
            })
    }
}

impl<S: State> fmt::Debug for Outbound<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbound")
            .field("state", &std::any::type_name::<S>().rsplit("::").next())
            .finish_non_exhaustive()
    }
}

/// One rendered, committed part: the only thing [`Channel::send`](crate::channel::Channel::send)
/// accepts.
///
/// It is neither `Clone` nor constructible outside this crate, so each part is sent at most
/// once; its delivery id and index make a natural idempotency key.
pub struct CommittedPart {
    delivery: DeliveryId,
    index: usize,
    total: usize,
    text: String,
    attribution: Attribution,
    ownership: Option<Ownership>,
}

impl CommittedPart {
    /// Whether the part may still be sent: its message carried no ownership, or it still holds.
    /// [`Deliver`](crate::channel::Deliver) checks this before every send.
    pub fn is_owned(&self) -> bool {
        self.ownership.as_ref().is_none_or(Ownership::is_held)
    }

    /// The exact payload to put on the wire.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Position in the message, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many parts the message has.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The delivery this part belongs to.
    pub fn delivery_id(&self) -> DeliveryId {
        self.delivery
    }

    /// Who is speaking.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// An idempotency key unique to this part of this delivery (`<delivery>-<index>`).
    pub fn idempotency_key(&self) -> String {
        format!("{}-{}", self.delivery, self.index)
    }

    /// A part rebuilt from a durable outbox row: only the store, inside this crate, may do it,
    /// so a user-written store cannot forge a sendable part.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn restored(
        delivery: DeliveryId,
        index: usize,
        total: usize,
        text: String,
        attribution: Attribution,
        ownership: Option<Ownership>,
    ) -> Self {
        Self {
            delivery,
            index,
            total,
            text,
            attribution,
            ownership,
        }
    }

    /// The ownership the part is sent under: a connector re-checks it before every try, and a
    /// lease-backed one fences the outbox's updates.
    #[cfg(any(feature = "http", feature = "sqlite", feature = "postgres"))]
    pub(crate) fn ownership(&self) -> Option<&Ownership> {
        self.ownership.as_ref()
    }
}

impl fmt::Debug for CommittedPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommittedPart")
            .field("delivery", &self.delivery)
            .field("index", &self.index)
            .field("total", &self.total)
            .field("len", &self.text.len())
            .finish_non_exhaustive()
    }
}

/// Identifies one delivery (one committed message). Unique within a process and unlikely to
/// repeat across restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeliveryId(u64);

impl DeliveryId {
    fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Seed from the clock once so ids from two runs of the same process rarely collide.
        if NEXT.load(Ordering::Relaxed) == 0 {
            let seed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| (d.as_nanos() as u64) << 16 | 1);
            let _ = NEXT.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
        }
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The id a durable outbox row recorded (its `Display` form parsed back).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn from_stored(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw id.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for DeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// What is being committed: handed to a [`CommitBoundary`].
#[derive(Debug)]
pub struct CommitRecord<'a> {
    /// The id every part will carry.
    pub delivery: DeliveryId,
    /// Who is speaking.
    pub attribution: &'a Attribution,
    /// The rendered parts, in order.
    pub parts: &'a [String],
    /// The ownership the message was committed under (a durable boundary fences on its lease).
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres")),
        allow(dead_code, reason = "only the durable store fences on it")
    )]
    pub(crate) ownership: Option<&'a Ownership>,
}

/// What crossing the commit boundary means: an ownership check, a durable record, or nothing.
///
/// Every [`Channel`](crate::channel::Channel) is a boundary (its
/// [`commit`](crate::channel::Channel::commit) method, in memory by default); so is an
/// [`Ownership`], which refuses once ownership is lost.
pub trait CommitBoundary: Send + Sync {
    /// Accepts or refuses `record`.
    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send;
}

impl CommitBoundary for Ownership {
    fn commit(
        &self,
        _record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        std::future::ready(if self.is_held() {
            Ok(())
        } else {
            Err(CommitError::OwnershipLost)
        })
    }
}

/// Why a message could not cross the commit boundary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// This process no longer owns the conversation; another owner may answer.
    #[error("ownership of the conversation was lost before commit")]
    OwnershipLost,
    /// The durable record could not be written.
    #[error("the commit record could not be written")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
}
