//! [`Turn`]: the context of one agent turn — attribution, where the conversation lives, its
//! mode and Layer C's policies, deadline, cancellation, ownership, the person's message and the
//! ledger that records what happened.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use crate::address::Address;
use crate::degrade::{DegradationPolicy, Policies};
use crate::egress::{AgentMessage, Attribution, EgressError, Markdown};
use crate::ledger::Ledger;
pub(crate) use crate::ownership::StopReason;
use crate::ownership::{Cancellation, Ownership};
use crate::reply::Mode;

/// The context of one turn: who is speaking, where the conversation lives, its mode and Layer C's
/// policies, until when, whether it was cancelled, whether this process still owns the
/// conversation, what the person said, and the ledger that records what happened.
///
/// Handlers and the [`Router`](crate::model::Router) take `&Turn`. A front door
/// ([`Bot::turn`](crate::Bot::turn)) makes it with the bot's policies and ledger; the boundary
/// reads them from here, so nothing is passed again per call.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::{Attribution, Turn};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let turn = Turn::new(Attribution::new("helper", "conv-1", "run-1"))
///     .with_timeout(Duration::from_secs(30));
/// assert!(turn.deadline().is_some());
/// assert!(!turn.is_stopped());
/// turn.cancellation().cancel();
/// assert!(turn.is_stopped());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Turn {
    attribution: Attribution,
    address: Address,
    deadline: Option<Instant>,
    cancellation: Cancellation,
    ownership: Ownership,
    ledger: Ledger,
    /// Shared by every clone: an `#[egress_boundary]` handler declares its mode here when it
    /// starts, so whoever holds the turn (a deadline that fires before the handler returns)
    /// answers in the handler's mode.
    mode: Arc<DeclaredMode>,
    policies: Policies,
    input: Option<Arc<str>>,
    follow_up: Option<FollowUpSlot>,
}

/// Where the boundary leaves a follow-up turn's failure for whoever keeps the promise (see
/// [`Turn::is_follow_up`]). Shared by the turn's clones.
/// A turn's mode, shared by its clones.
#[derive(Debug, Default)]
struct DeclaredMode(AtomicBool);

impl DeclaredMode {
    fn set(&self, mode: Mode) {
        self.0.store(mode == Mode::Proactive, Ordering::Relaxed);
    }

    fn get(&self) -> Mode {
        if self.0.load(Ordering::Relaxed) {
            Mode::Proactive
        } else {
            Mode::Interactive
        }
    }
}

#[derive(Clone, Default)]
struct FollowUpSlot(Arc<Mutex<Option<EgressError>>>);

impl fmt::Debug for FollowUpSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FollowUpSlot")
    }
}

impl Turn {
    /// A turn with no deadline, a fresh cancellation token, held ownership, a fresh in-memory
    /// ledger, the plain address ([`Address::Plain`]), the interactive mode and the default
    /// [`Policies`].
    pub fn new(attribution: Attribution) -> Self {
        Self {
            attribution,
            address: Address::Plain,
            deadline: None,
            cancellation: Cancellation::new(),
            ownership: Ownership::held(),
            ledger: Ledger::in_memory(),
            mode: Arc::default(),
            policies: Policies::default(),
            input: None,
            follow_up: None,
        }
    }

    /// The mode a reply of this turn is decided by when nothing says otherwise (a message
    /// built by hand; an `#[egress_boundary]` handler's declared mode always wins).
    pub fn with_mode(self, mode: Mode) -> Self {
        self.mode.set(mode);
        self
    }

    /// What an `#[egress_boundary]` handler declares when it starts: its mode, from then on
    /// the turn's (every clone's).
    pub(crate) fn declare_mode(&self, mode: Mode) {
        self.mode.set(mode);
    }

    /// Layer C's policy per mode for this turn (a front door gives its own).
    pub fn with_policies(mut self, policies: Policies) -> Self {
        self.policies = policies;
        self
    }

    /// What the person said, for the quality gate (an answer that quotes it is not a leak).
    ///
    /// ```
    /// use mesh_egress::{Attribution, Turn};
    /// let turn = Turn::new(Attribution::new("helper", "conv-1", "run-1")).with_input("Is it green?");
    /// assert_eq!(turn.input(), Some("Is it green?"));
    /// ```
    pub fn with_input(mut self, input: impl Into<String>) -> Self {
        self.input = Some(Arc::from(input.into()));
        self
    }

    /// Marks the turn as a promise's follow-up: the boundary then records a failure and leaves
    /// it here ([`take_follow_up_failure`](Self::take_follow_up_failure)) instead of making a
    /// second promise, and whoever keeps the first decides (retry on its plan, or hand off).
    pub(crate) fn into_follow_up(mut self) -> Self {
        self.follow_up = Some(FollowUpSlot::default());
        self
    }

    /// Where the conversation lives: the chat its replies go to. Code that learns it from an
    /// event (or a stored row, as the worker does) sets it here, and makes the turn's channel
    /// from the same value, e.g. with
    /// [`SurfaceClient::channel_for`](crate::channel::SurfaceClient::channel_for), so the
    /// handler, the channel and the outbox agree on one destination.
    ///
    /// ```
    /// use mesh_egress::address::SlackAddress;
    /// use mesh_egress::{Address, Attribution, Surface, Turn};
    /// let turn = Turn::new(Attribution::new("helper", "conv-1", "run-1"))
    ///     .with_address(SlackAddress::new("C0123456789").in_thread("1700000000.000100"));
    /// assert_eq!(turn.address().surface(), Surface::Slack);
    /// assert_eq!(Turn::new(turn.attribution().clone()).address(), &Address::Plain);
    /// ```
    pub fn with_address(mut self, address: impl Into<Address>) -> Self {
        self.address = address.into();
        self
    }

    /// Sets the run's deadline.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets the run's deadline to `timeout` from now (`tokio::time`'s clock).
    ///
    /// A timeout too large for the clock (`Duration::MAX`) means no deadline, not a panic.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.deadline = Instant::now().checked_add(timeout);
        self
    }

    /// Uses `cancellation` (e.g. the caller's request token).
    pub fn with_cancellation(mut self, cancellation: Cancellation) -> Self {
        self.cancellation = cancellation;
        self
    }

    /// Uses the caller's ownership check.
    pub fn with_ownership(mut self, ownership: Ownership) -> Self {
        self.ownership = ownership;
        self
    }

    /// Records onto `ledger`.
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = ledger;
        self
    }

    /// Who speaks, where, in which run.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// The conversation's destination ([`Address::Plain`] unless
    /// [`with_address`](Self::with_address) set one).
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The turn's mode (see [`with_mode`](Self::with_mode)).
    pub fn mode(&self) -> Mode {
        self.mode.get()
    }

    /// Layer C's policies for this turn.
    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    /// The policy of `mode` for this turn.
    pub fn policy_for(&self, mode: Mode) -> &DegradationPolicy {
        self.policies.for_mode(mode)
    }

    /// What the person said, if the turn was told ([`with_input`](Self::with_input)).
    pub fn input(&self) -> Option<&str> {
        self.input.as_deref()
    }

    /// Whether this turn keeps a promise made earlier (a worker's or the in-memory keeper's
    /// re-run of the promised handler): its failure is the promise keeper's to decide, never a
    /// second holding line.
    pub fn is_follow_up(&self) -> bool {
        self.follow_up.is_some()
    }

    /// On a follow-up turn, leaves `error` for the promise keeper; gives it back on any other.
    pub(crate) fn stash_follow_up_failure(&self, error: EgressError) -> Result<(), EgressError> {
        match &self.follow_up {
            Some(slot) => {
                *slot.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                Ok(())
            }
            None => Err(error),
        }
    }

    /// The failure the boundary left on this follow-up turn, if any.
    pub(crate) fn take_follow_up_failure(&self) -> Option<EgressError> {
        self.follow_up
            .as_ref()
            .and_then(|slot| slot.0.lock().unwrap_or_else(PoisonError::into_inner).take())
    }

    /// A message from this turn: the turn's attribution, tied to the turn's ownership, so every
    /// channel refuses to commit or send it once the conversation is no longer owned.
    ///
    /// ```
    /// use mesh_egress::{Attribution, Turn};
    /// let turn = Turn::new(Attribution::new("helper", "conv-1", "run-1"));
    /// let msg = turn.message("Deployed **v2**.");
    /// assert_eq!(msg.attribution().conversation(), "conv-1");
    /// assert!(msg.is_owned());
    /// turn.ownership().revoke();
    /// assert!(!msg.is_owned());
    /// ```
    pub fn message(&self, body: impl Into<Markdown>) -> AgentMessage {
        AgentMessage::new(body, self.attribution.clone()).with_ownership(self.ownership.clone())
    }

    /// The run's deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The turn's cancellation token.
    pub fn cancellation(&self) -> &Cancellation {
        &self.cancellation
    }

    /// The turn's ownership check.
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    /// The run ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Why the turn must stop now, if it must: cancelled, ownership lost, or past its deadline.
    pub fn stop_reason(&self) -> Option<StopReason> {
        if self.cancellation.is_cancelled() {
            Some(StopReason::Cancelled)
        } else if !self.ownership.is_held() {
            Some(StopReason::OwnershipLost)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(StopReason::DeadlineReached)
        } else {
            None
        }
    }

    /// Whether the turn must stop now.
    pub fn is_stopped(&self) -> bool {
        self.stop_reason().is_some()
    }

    /// Resolves with the reason as soon as the turn must stop: cancellation, ownership revoked
    /// or the run's deadline. Never resolves for a turn that is never stopped.
    pub async fn stopped(&self) -> StopReason {
        let deadline = async {
            match self.deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = self.cancellation.cancelled() => StopReason::Cancelled,
            () = self.ownership.revoked() => StopReason::OwnershipLost,
            () = deadline => StopReason::DeadlineReached,
        }
    }
}

impl AsRef<Attribution> for Turn {
    fn as_ref(&self) -> &Attribution {
        &self.attribution
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn attr() -> Attribution {
        Attribution::new("a", "c", "r")
    }

    #[tokio::test(start_paused = true)]
    async fn stopped_resolves_at_the_deadline_exactly() {
        let start = Instant::now();
        let turn = Turn::new(attr()).with_timeout(Duration::from_secs(5));
        assert_eq!(turn.stopped().await, StopReason::DeadlineReached);
        assert_eq!(Instant::now() - start, Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn revoking_ownership_stops_the_turn() {
        let turn = Turn::new(attr());
        let ownership = turn.ownership().clone();
        let waiter = async { turn.stopped().await };
        let revoke = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            ownership.revoke();
        };
        let (reason, ()) = tokio::join!(waiter, revoke);
        assert_eq!(reason, StopReason::OwnershipLost);
        assert_eq!(turn.stop_reason(), Some(StopReason::OwnershipLost));
    }

    #[test]
    fn a_failing_ownership_check_reads_as_lost() {
        let turn = Turn::new(attr()).with_ownership(Ownership::checked(|| false));
        assert_eq!(turn.stop_reason(), Some(StopReason::OwnershipLost));
    }

    #[tokio::test]
    async fn cancellation_is_seen_by_clones() {
        let turn = Turn::new(attr());
        let clone = turn.clone();
        turn.cancellation().cancel();
        assert_eq!(clone.stopped().await, StopReason::Cancelled);
    }
}
