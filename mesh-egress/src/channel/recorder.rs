//! [`Recorder`]: an in-memory channel to assert against.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Channel, PartReceipt, PlainText, SendError};
use crate::address::Address;
use crate::outbound::{CommitError, CommitRecord, CommittedPart};
use crate::ownership::Ownership;

/// An in-memory [`Channel`] that records every delivered part, for tests and demos.
///
/// Plain text, no part limit unless [`with_limit`](Self::with_limit) sets one. Clones share the
/// same record, so a test can hand one clone to the code under test and read the other.
///
/// ```
/// use mesh_egress::{AgentMessage, Attribution};
/// use mesh_egress::channel::{Deliver, Recorder};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let rec = Recorder::new();
/// rec.deliver(AgentMessage::new("hi", Attribution::new("a", "c", "r"))).await.unwrap();
/// assert_eq!(rec.sent(), ["hi"]);
/// # }
/// ```
#[derive(Clone, Default)]
pub struct Recorder {
    renderer: PlainText,
    ownership: Option<Ownership>,
    /// `None`: [`Address::Plain`], the default channel's one destination.
    address: Option<Address>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    sent: Vec<String>,
    succeed_first: usize,
    fail_next: usize,
    attempts: usize,
}

impl Recorder {
    /// A plain-text recorder with no limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Splits messages into parts of at most `limit` characters.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.renderer = PlainText::new().with_limit(limit);
        self
    }

    /// Stands in for a channel that sends to `address` (a test double of a Discord channel,
    /// say): [`Channel::address`] answers `address`, so a durable outbox stores it with every
    /// part and applies that surface's duplicate rules. What the recorder does with a send
    /// does not change: it records it.
    ///
    /// ```
    /// use mesh_egress::address::DiscordAddress;
    /// use mesh_egress::channel::{Channel, Recorder};
    /// use mesh_egress::{Address, Surface};
    /// let discord = Recorder::new().with_address(DiscordAddress::new("1100000000000000001"));
    /// assert_eq!(discord.address().surface(), Surface::Discord);
    /// assert_eq!(Recorder::new().address(), Address::Plain);
    /// ```
    pub fn with_address(mut self, address: impl Into<Address>) -> Self {
        self.address = Some(address.into());
        self
    }

    /// Refuses to commit once `ownership` is lost.
    pub fn with_ownership(mut self, ownership: Ownership) -> Self {
        self.ownership = Some(ownership);
        self
    }

    /// Makes the next `n` sends fail (retryably), to exercise resumable delivery.
    pub fn fail_next_sends(&self, n: usize) {
        self.fail_sends_after(0, n);
    }

    /// Lets the next `successes` sends through, then fails the `n` after them.
    pub fn fail_sends_after(&self, successes: usize, n: usize) {
        let mut state = self.lock();
        state.succeed_first = successes;
        state.fail_next = n;
    }

    /// Every delivered part's text, in order.
    pub fn sent(&self) -> Vec<String> {
        self.lock().sent.clone()
    }

    /// How many sends were attempted, failed ones included.
    pub fn attempts(&self) -> usize {
        self.lock().attempts
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("sent", &self.lock().sent.len())
            .finish_non_exhaustive()
    }
}

/// The error a [`Recorder`] reports for a send it was told to fail.
#[derive(Debug, thiserror::Error)]
#[error("recorder was told to fail this send")]
pub(crate) struct InjectedFailure;

impl Channel for Recorder {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn address(&self) -> Address {
        self.address.clone().unwrap_or(Address::Plain)
    }

    fn commit(
        &self,
        _record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        let held = self.ownership.as_ref().is_none_or(Ownership::is_held);
        std::future::ready(if held {
            Ok(())
        } else {
            Err(CommitError::OwnershipLost)
        })
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let mut state = self.lock();
        state.attempts += 1;
        let result = if state.succeed_first == 0 && state.fail_next > 0 {
            state.fail_next -= 1;
            Err(SendError::new(part, InjectedFailure))
        } else {
            state.succeed_first = state.succeed_first.saturating_sub(1);
            state.sent.push(part.text().to_owned());
            Ok(PartReceipt::new(format!("rec-{}", state.sent.len())))
        };
        std::future::ready(result)
    }
}
