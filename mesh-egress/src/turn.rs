//! [`Turn`]: the context of one agent turn — attribution, deadline, cancellation, ownership and
//! the ledger that records what happened.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::egress::Attribution;
use crate::ledger::Ledger;

/// A cancellation signal shared by clones. Cancelling is sticky and wakes every waiter.
///
/// ```
/// use mesh_egress::Cancellation;
/// let token = Cancellation::new();
/// let clone = token.clone();
/// clone.cancel();
/// assert!(token.is_cancelled());
/// ```
#[derive(Clone)]
pub struct Cancellation {
    shared: Arc<CancellationShared>,
}

struct CancellationShared {
    // Read by `is_cancelled` on every healthy call: one atomic load instead of the watch
    // channel's lock. Set before the channel wakes anyone, so a woken waiter sees it too.
    cancelled: AtomicBool,
    flag: watch::Sender<bool>,
}

impl Cancellation {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(CancellationShared {
                cancelled: AtomicBool::new(false),
                flag: watch::Sender::new(false),
            }),
        }
    }

    /// Cancels this token and every clone of it.
    pub fn cancel(&self) {
        self.shared.cancelled.store(true, Ordering::Release);
        self.shared.flag.send_replace(true);
    }

    /// Whether [`cancel`](Self::cancel) has been called.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Acquire)
    }

    /// Resolves once the token is cancelled (at once if it already is).
    pub async fn cancelled(&self) {
        let mut rx = self.shared.flag.subscribe();
        // `wait_for` only fails when the sender is dropped, and we hold it.
        let _ = rx.wait_for(|cancelled| *cancelled).await;
    }
}

impl Default for Cancellation {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Cancellation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancellation")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

type OwnershipCheck = dyn Fn() -> bool + Send + Sync;

/// Whether this process still owns the conversation it is answering.
///
/// Ownership is lost either explicitly ([`revoke`](Self::revoke), e.g. when a lease expires) or
/// when the caller-supplied check returns `false`. Recovery stops and commits fail once it is
/// lost, so two owners never both answer.
///
/// ```
/// use mesh_egress::Ownership;
/// let owned = Ownership::held();
/// assert!(owned.is_held());
/// owned.revoke();
/// assert!(!owned.is_held());
///
/// let checked = Ownership::checked(|| false);
/// assert!(!checked.is_held());
/// ```
#[derive(Clone)]
pub struct Ownership {
    revoked: Cancellation,
    check: Option<Arc<OwnershipCheck>>,
}

impl Ownership {
    /// Ownership that holds until revoked.
    pub fn held() -> Self {
        Self {
            revoked: Cancellation::new(),
            check: None,
        }
    }

    /// Ownership that holds while `check` returns `true` (and until revoked).
    pub fn checked(check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            revoked: Cancellation::new(),
            check: Some(Arc::new(check)),
        }
    }

    /// Gives ownership up; every clone sees it at once.
    pub fn revoke(&self) {
        self.revoked.cancel();
    }

    /// Whether ownership still holds.
    pub fn is_held(&self) -> bool {
        !self.revoked.is_cancelled() && self.check.as_ref().is_none_or(|check| check())
    }

    /// Resolves when ownership is revoked. (A caller-supplied check is polled by whoever asks
    /// [`is_held`](Self::is_held); it cannot wake a waiter.)
    pub async fn revoked(&self) {
        self.revoked.cancelled().await;
    }
}

impl Default for Ownership {
    fn default() -> Self {
        Self::held()
    }
}

impl fmt::Debug for Ownership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ownership")
            .field("held", &self.is_held())
            .finish()
    }
}

/// The context of one turn: who is speaking, until when, whether it was cancelled, whether this
/// process still owns the conversation, and the ledger that records what happened.
///
/// Handlers and the [`Router`](crate::model::Router) take `&Turn`.
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
    deadline: Option<Instant>,
    cancellation: Cancellation,
    ownership: Ownership,
    ledger: Ledger,
}

impl Turn {
    /// A turn with no deadline, a fresh cancellation token, held ownership and a fresh in-memory
    /// ledger.
    pub fn new(attribution: Attribution) -> Self {
        Self {
            attribution,
            deadline: None,
            cancellation: Cancellation::new(),
            ownership: Ownership::held(),
            ledger: Ledger::in_memory(),
        }
    }

    /// Sets the run's deadline.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets the run's deadline to `timeout` from now (`tokio::time`'s clock).
    pub fn with_timeout(self, timeout: std::time::Duration) -> Self {
        self.with_deadline(Instant::now() + timeout)
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

/// Why a turn stopped before it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The caller cancelled the turn.
    Cancelled,
    /// This process no longer owns the conversation.
    OwnershipLost,
    /// The run's deadline passed.
    DeadlineReached,
}

impl StopReason {
    /// A stable lowercase name for logs and ledgers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::OwnershipLost => "ownership_lost",
            Self::DeadlineReached => "deadline_reached",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
