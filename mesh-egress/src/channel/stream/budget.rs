//! [`RateBudget`]: one conversation's share of a surface's rate limit, spent by previews,
//! edits and final messages alike.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The most a surface's requested wait can pause a conversation: a surface may send any
/// number, and a day is plenty (the same clamp as the connectors' send loop).
const MAX_PAUSE: Duration = Duration::from_secs(24 * 60 * 60);

/// What a call spends the budget on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallKind {
    /// A preview: a draft, an edit of a message still growing, an append to a live stream.
    /// It may be skipped or coalesced, so it never takes the slots held back for finals.
    Preview,
    /// A message the person keeps: a permanent send, the stream's last call.
    Final,
}

/// How fast one conversation may call its surface.
///
/// Three limits apply together: at least [`min_interval`](Self::min_interval) between calls,
/// at most `limit` calls in any `window` ([`window`](Self::window)), of which `reserve` are
/// held back for [`CallKind::Final`] calls ([`final_reserve`](Self::final_reserve)), so a
/// stream of previews can never leave the last message waiting for the window to slide.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::channel::stream::BudgetConfig;
/// // Telegram groups: about one message a second, twenty a minute.
/// let groups = BudgetConfig::new(Duration::from_secs(1))
///     .window(20, Duration::from_secs(60))
///     .final_reserve(4);
/// assert_eq!(groups.interval(), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    min_interval: Duration,
    window: Option<(u32, Duration)>,
    reserve: u32,
}

impl BudgetConfig {
    /// At least `min_interval` between two calls, and no window.
    pub fn new(min_interval: Duration) -> Self {
        Self {
            min_interval,
            window: None,
            reserve: 0,
        }
    }

    /// The spacing between calls.
    pub fn min_interval(mut self, min_interval: Duration) -> Self {
        self.min_interval = min_interval;
        self
    }

    /// At most `limit` calls (at least 1) in any span of `span`.
    pub fn window(mut self, limit: u32, span: Duration) -> Self {
        self.window = Some((limit.max(1), span));
        self
    }

    /// Holds back `reserve` of the window's calls for final messages (at most `limit - 1`,
    /// so previews always keep one).
    pub fn final_reserve(mut self, reserve: u32) -> Self {
        self.reserve = reserve;
        self
    }

    /// The configured spacing between calls.
    pub fn interval(&self) -> Duration {
        self.min_interval
    }

    fn allowed(&self, kind: CallKind) -> Option<(usize, Duration)> {
        let (limit, span) = self.window?;
        let held = match kind {
            CallKind::Preview => self.reserve.min(limit - 1),
            CallKind::Final => 0,
        };
        Some((usize::try_from(limit - held).unwrap_or(usize::MAX), span))
    }
}

#[derive(Debug, Default)]
struct State {
    /// Until when the surface asked us to wait (a 429, a flood wait, an exhausted bucket).
    paused_until: Option<Instant>,
    last: Option<Instant>,
    /// The instants of the calls still inside the window, oldest first.
    recent: VecDeque<Instant>,
}

/// One conversation's rate budget: clones share it, so every stream and message to the same
/// conversation spends from the same account.
///
/// A call first [`acquire`](Self::acquire)s a slot, which waits until the spacing, the window
/// and any pause the surface asked for all allow it. A surface's own answer moves the budget:
/// [`pause_for`](Self::pause_for) after a 429 or flood wait (never shortening a longer pause),
/// and [`exhausted_for`](Self::exhausted_for) when a bucket says no calls remain until it
/// resets (Discord's `X-RateLimit-Remaining: 0` with `X-RateLimit-Reset-After`).
#[derive(Clone, Debug)]
pub struct RateBudget {
    config: BudgetConfig,
    state: Arc<Mutex<State>>,
}

impl RateBudget {
    /// A fresh budget with `config`.
    pub fn new(config: BudgetConfig) -> Self {
        Self {
            config,
            state: Arc::default(),
        }
    }

    /// The budget's limits.
    pub fn config(&self) -> BudgetConfig {
        self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The earliest instant a call of `kind` may go, from now.
    pub fn next_slot(&self, kind: CallKind) -> Instant {
        let now = Instant::now();
        let mut state = self.lock();
        slot(&self.config, &mut state, kind, now)
    }

    /// Waits until a call of `kind` may go without spending the slot (so a caller can gather
    /// what arrived meanwhile before it calls).
    pub async fn ready(&self, kind: CallKind) {
        loop {
            let at = self.next_slot(kind);
            if at <= Instant::now() {
                return;
            }
            tokio::time::sleep_until(at).await;
        }
    }

    /// Waits for a slot for a call of `kind` and spends it; returns how long it waited.
    pub async fn acquire(&self, kind: CallKind) -> Duration {
        let start = Instant::now();
        loop {
            let now = Instant::now();
            let at = {
                let mut state = self.lock();
                let at = slot(&self.config, &mut state, kind, now);
                if at <= now {
                    state.last = Some(now);
                    if self.config.window.is_some() {
                        state.recent.push_back(now);
                    }
                }
                at
            };
            if at <= now {
                return now.saturating_duration_since(start);
            }
            tokio::time::sleep_until(at).await;
        }
    }

    /// The surface asked for `wait` before the next call: no call of any kind goes earlier.
    pub fn pause_for(&self, wait: Duration) {
        let until = later(Instant::now(), wait);
        let mut state = self.lock();
        if state.paused_until.is_none_or(|p| p < until) {
            state.paused_until = Some(until);
        }
    }

    /// The surface's bucket has no calls left until `reset_after` from now.
    pub fn exhausted_for(&self, reset_after: Duration) {
        self.pause_for(reset_after);
    }

    /// How long from now until the surface's pause ends (zero when there is none).
    pub fn pause_left(&self) -> Duration {
        let paused = self.lock().paused_until;
        paused.map_or(Duration::ZERO, |p| {
            p.saturating_duration_since(Instant::now())
        })
    }
}

/// `t + d`, with `d` clamped so no configured or requested span can overflow an instant.
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d.min(MAX_PAUSE)).unwrap_or(t)
}

fn slot(config: &BudgetConfig, state: &mut State, kind: CallKind, now: Instant) -> Instant {
    let mut at = now;
    if let Some(paused) = state.paused_until {
        at = at.max(paused);
    }
    if let Some(last) = state.last {
        at = at.max(later(last, config.min_interval));
    }
    if let Some((allowed, span)) = config.allowed(kind) {
        while state
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= span.min(MAX_PAUSE))
        {
            state.recent.pop_front();
        }
        let used = state.recent.len();
        if used >= allowed {
            // The call that frees a slot for this kind is the (used - allowed)-th oldest.
            if let Some(oldest) = state.recent.get(used - allowed) {
                at = at.max(later(*oldest, span));
            }
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn calls_are_spaced_by_the_interval_from_the_previous_call() {
        let budget = RateBudget::new(BudgetConfig::new(ms(1000)));
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..3 {
            budget.acquire(CallKind::Preview).await;
            at.push(start.elapsed());
        }
        assert_eq!(at, [ms(0), ms(1000), ms(2000)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_wait_holds_back_every_kind_until_its_instant() {
        let budget = RateBudget::new(BudgetConfig::new(ms(100)));
        let start = Instant::now();
        budget.acquire(CallKind::Preview).await;
        budget.pause_for(Duration::from_secs(3));
        budget.pause_for(Duration::from_secs(1)); // a shorter wait does not shorten the pause
        let waited = budget.acquire(CallKind::Final).await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        assert_eq!(waited, Duration::from_secs(3));
        assert_eq!(budget.pause_left(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn previews_leave_the_reserved_window_slots_to_the_final_message() {
        let config = BudgetConfig::new(Duration::ZERO)
            .window(3, Duration::from_secs(60))
            .final_reserve(1);
        let budget = RateBudget::new(config);
        let start = Instant::now();
        budget.acquire(CallKind::Preview).await;
        budget.acquire(CallKind::Preview).await;
        // A third preview would take the final's slot: it has to wait for the window.
        assert_eq!(
            budget.next_slot(CallKind::Preview),
            start + Duration::from_secs(60)
        );
        budget.acquire(CallKind::Final).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "the final went at once");
        budget.acquire(CallKind::Final).await;
        assert_eq!(start.elapsed(), Duration::from_secs(60), "window full");
    }

    #[tokio::test(start_paused = true)]
    async fn ready_waits_without_spending_the_slot() {
        let budget = RateBudget::new(BudgetConfig::new(ms(500)));
        let start = Instant::now();
        budget.acquire(CallKind::Preview).await;
        budget.ready(CallKind::Preview).await;
        assert_eq!(start.elapsed(), ms(500));
        let waited = budget.acquire(CallKind::Preview).await;
        assert_eq!(waited, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn an_absurd_wait_is_clamped_and_does_not_overflow() {
        let budget =
            RateBudget::new(BudgetConfig::new(Duration::MAX).window(u32::MAX, Duration::MAX));
        budget.pause_for(Duration::MAX);
        assert_eq!(budget.pause_left(), MAX_PAUSE);
    }
}
