//! [`Cancellation`] and [`Ownership`]: the two signals that stop a turn from outside, and
//! [`StopReason`], which of them (or the deadline) stopped it. Leaf values: they import nothing
//! of ours, so the typestate, the ledger and every layer can name them.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

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
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    fence: Option<Arc<Fence>>,
}

/// The identity of a stored conversation lease and the local instant it runs out, so a commit
/// can be fenced on the lease (holder and token) and not only on a flag in this process.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) struct Fence {
    pub(crate) conversation: String,
    pub(crate) holder: String,
    pub(crate) token: i64,
    // The store's expiry translated to this process's clock when the lease was taken or renewed
    // (measured from before the request, so it errs early, never late), and the length it was
    // granted for: what a try's window is measured against.
    deadline: std::sync::Mutex<(tokio::time::Instant, std::time::Duration)>,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Fence {
    pub(crate) fn new(
        conversation: String,
        holder: String,
        token: i64,
        deadline: tokio::time::Instant,
        length: std::time::Duration,
    ) -> Self {
        Self {
            conversation,
            holder,
            token,
            deadline: std::sync::Mutex::new((deadline, length)),
        }
    }

    /// A renewal: the lease now runs to `deadline`, granted for `length`.
    pub(crate) fn extend_to(&self, deadline: tokio::time::Instant, length: std::time::Duration) {
        *self
            .deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (deadline, length);
    }

    pub(crate) fn deadline(&self) -> tokio::time::Instant {
        self.deadline_and_length().0
    }

    fn deadline_and_length(&self) -> (tokio::time::Instant, std::time::Duration) {
        *self
            .deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_live(&self) -> bool {
        tokio::time::Instant::now() < self.deadline()
    }
}

impl Ownership {
    /// Ownership that holds until revoked.
    pub fn held() -> Self {
        Self {
            revoked: Cancellation::new(),
            check: None,
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            fence: None,
        }
    }

    /// Ownership that holds while `check` returns `true` (and until revoked).
    pub fn checked(check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            revoked: Cancellation::new(),
            check: Some(Arc::new(check)),
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            fence: None,
        }
    }

    /// Ownership backed by a stored lease: it holds while the lease's expiry is ahead and it
    /// was not revoked (a failed renewal or a release revokes it).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn leased(fence: Arc<Fence>) -> Self {
        Self {
            revoked: Cancellation::new(),
            check: None,
            fence: Some(fence),
        }
    }

    /// The lease behind this ownership, if any: a durable commit verifies it in its transaction.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn fence(&self) -> Option<&Fence> {
        self.fence.as_deref()
    }

    /// Gives ownership up; every clone sees it at once.
    pub fn revoke(&self) {
        self.revoked.cancel();
    }

    /// Whether ownership still holds.
    pub fn is_held(&self) -> bool {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if self.fence.as_ref().is_some_and(|fence| !fence.is_live()) {
            return false;
        }
        !self.revoked.is_cancelled() && self.check.as_ref().is_none_or(|check| check())
    }

    /// Resolves when ownership is revoked. (A caller-supplied check is polled by whoever asks
    /// [`is_held`](Self::is_held); it cannot wake a waiter.)
    pub async fn revoked(&self) {
        self.revoked.cancelled().await;
    }

    /// Whether a request that may take up to `timeout` may start under this ownership now, and
    /// for how long: the check every try and every stream call makes, in memory (no database
    /// round trip: a failed renewal has revoked the ownership already).
    ///
    /// Without a lease, a held ownership opens the whole `timeout`. With one, no try may
    /// outlast the lease: its timeout is cut to the time left, and when less is left than the
    /// whole `timeout` and than half the lease's length (a healthy renewal, every third of the
    /// length, never lets it fall that low) the try does not start at all
    /// ([`TryWindow::TooShort`]): the part goes back to wait for a renewed lease or its next
    /// holder.
    #[cfg(feature = "http")]
    pub(crate) fn try_window(&self, timeout: std::time::Duration) -> TryWindow {
        if !self.is_held() {
            return TryWindow::Lost;
        }
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(fence) = &self.fence {
            let (deadline, length) = fence.deadline_and_length();
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left < timeout.min(length / 2) {
                return TryWindow::TooShort;
            }
            return TryWindow::Open(timeout.min(left));
        }
        TryWindow::Open(timeout)
    }

    /// Whether `other` is a clone of this ownership (the same signal, the same lease).
    #[cfg(feature = "http")]
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.revoked.shared, &other.revoked.shared)
    }
}

/// What [`Ownership::try_window`] allows a request.
#[cfg(feature = "http")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TryWindow {
    /// Ownership is lost: nothing may start.
    Lost,
    /// Still held, but the lease has too little time left for a try: it must not start.
    TooShort,
    /// It may start, with this timeout (never past the lease's end).
    Open(std::time::Duration),
}

#[cfg(feature = "http")]
impl TryWindow {
    /// The window of a request under every one of `owners`: the narrowest.
    pub(crate) fn of_all<'a>(
        owners: impl IntoIterator<Item = &'a Ownership>,
        timeout: std::time::Duration,
    ) -> Self {
        let mut window = Self::Open(timeout);
        for owner in owners {
            window = match (window, owner.try_window(timeout)) {
                (Self::Lost, _) | (_, Self::Lost) => Self::Lost,
                (Self::TooShort, _) | (_, Self::TooShort) => Self::TooShort,
                (Self::Open(a), Self::Open(b)) => Self::Open(a.min(b)),
            };
        }
        window
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

/// Why a turn stopped before it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
