//! One conversation's share of a surface's rate limit, spent by previews, edits and final
//! messages alike: [`BudgetConfig`] (public: how fast a conversation may call) and the
//! crate-private `RateBudget` the connectors spend.

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
pub(crate) enum CallKind {
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
/// held back for final messages ([`final_reserve`](Self::final_reserve)), so a
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

/// Whether a call keeps the budget's spacing ([`BudgetConfig::min_interval`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spacing {
    /// At least the spacing after the previous call: previews, edits, a stream's calls.
    Spaced,
    /// As soon as the pause and the window allow: a plain message send. Slack and Telegram
    /// document short bursts as allowed; the spacing is for a message that keeps changing.
    Unspaced,
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
///
/// The HTTP connectors' plain [`Channel::send`](crate::channel::Channel::send) spends the same
/// budget as a [`CallKind::Final`] call: it waits for the pause and the window (never longer
/// than its [`SendPolicy::max_wait`](crate::channel::SendPolicy::max_wait)) but not for
/// the spacing, since Slack and Telegram allow short bursts of messages and a ten-part reply
/// must not take nine seconds. Each send is still recorded, so a stream's next preview is
/// spaced after it and the window counts it.
#[derive(Clone, Debug)]
pub(crate) struct RateBudget {
    config: BudgetConfig,
    state: Arc<Mutex<State>>,
}

impl RateBudget {
    /// A fresh budget with `config`.
    pub(crate) fn new(config: BudgetConfig) -> Self {
        Self {
            config,
            state: Arc::default(),
        }
    }

    /// The budget's limits.
    #[cfg(test)]
    pub(crate) fn config(&self) -> BudgetConfig {
        self.config
    }

    /// Whether `other` is the same budget (a clone of this one), so that spending one spends
    /// the other: two channels to one chat share one.
    #[cfg(test)]
    pub(crate) fn shares_with(&self, other: &RateBudget) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The earliest instant a call of `kind` may go, from now.
    pub(crate) fn next_slot(&self, kind: CallKind) -> Instant {
        let now = Instant::now();
        let mut state = self.lock();
        slot(&self.config, &mut state, kind, Spacing::Spaced, now)
    }

    /// Waits until a call of `kind` may go without spending the slot (so a caller can gather
    /// what arrived meanwhile before it calls).
    #[cfg(test)]
    pub(crate) async fn ready(&self, kind: CallKind) {
        self.ready_within(kind, Duration::MAX).await;
    }

    /// Waits for a slot for a call of `kind` and spends it; returns how long it waited.
    #[cfg(test)]
    pub(crate) async fn acquire(&self, kind: CallKind) -> Duration {
        match self.take(kind, Spacing::Spaced, None).await {
            Ok(waited) | Err(waited) => waited,
        }
    }

    /// [`acquire`](Self::acquire), but never waiting longer than `cap` in all: when the slot is
    /// further than what is left of `cap`, it returns at once with how far the slot is
    /// (`Err(wait)`), without waiting or spending it.
    pub(crate) async fn acquire_within(
        &self,
        kind: CallKind,
        cap: Duration,
    ) -> Result<Duration, Duration> {
        self.take(kind, Spacing::Spaced, Some(cap)).await
    }

    /// [`acquire_within`](Self::acquire_within) without the spacing
    /// ([`BudgetConfig::min_interval`]): it still waits for the surface's pause and the
    /// window, and still records the call, so a later spaced call (a stream's next preview)
    /// is spaced after it and the window counts it. What a plain message send spends.
    pub(crate) async fn acquire_unspaced_within(
        &self,
        kind: CallKind,
        cap: Duration,
    ) -> Result<Duration, Duration> {
        self.take(kind, Spacing::Unspaced, Some(cap)).await
    }

    /// Waits until a spaced call of `kind` may go without spending the slot, as
    /// [`ready`](Self::ready), unless that is further than `cap` from now: then it returns at
    /// once (the call that follows fails fast on the same cap instead of sleeping past it).
    pub(crate) async fn ready_within(&self, kind: CallKind, cap: Duration) {
        let start = Instant::now();
        loop {
            let at = self.next_slot(kind);
            // `next_slot` reads the clock itself: a free slot is `now` there, never later here.
            if at <= Instant::now() || at.saturating_duration_since(start) > cap {
                return;
            }
            tokio::time::sleep_until(at).await;
        }
    }

    async fn take(
        &self,
        kind: CallKind,
        spacing: Spacing,
        cap: Option<Duration>,
    ) -> Result<Duration, Duration> {
        let start = Instant::now();
        loop {
            let now = Instant::now();
            let at = {
                let mut state = self.lock();
                let at = slot(&self.config, &mut state, kind, spacing, now);
                if at <= now {
                    state.last = Some(now);
                    if self.config.window.is_some() {
                        state.recent.push_back(now);
                    }
                }
                at
            };
            if at <= now {
                return Ok(now.saturating_duration_since(start));
            }
            let wait = at.saturating_duration_since(now);
            let waited = now.saturating_duration_since(start);
            if cap.is_some_and(|cap| wait > cap.saturating_sub(waited)) {
                return Err(wait);
            }
            tokio::time::sleep_until(at).await;
        }
    }

    /// The surface asked for `wait` before the next call: no call of any kind goes earlier.
    pub(crate) fn pause_for(&self, wait: Duration) {
        let until = later(Instant::now(), wait);
        let mut state = self.lock();
        if state.paused_until.is_none_or(|p| p < until) {
            state.paused_until = Some(until);
        }
    }

    /// The surface's bucket has no calls left until `reset_after` from now.
    pub(crate) fn exhausted_for(&self, reset_after: Duration) {
        self.pause_for(reset_after);
    }

    /// How long from now until the surface's pause ends (zero when there is none).
    #[cfg(test)]
    pub(crate) fn pause_left(&self) -> Duration {
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

fn slot(
    config: &BudgetConfig,
    state: &mut State,
    kind: CallKind,
    spacing: Spacing,
    now: Instant,
) -> Instant {
    let mut at = now;
    if let Some(paused) = state.paused_until {
        at = at.max(paused);
    }
    if let Some(last) = state.last.filter(|_| spacing == Spacing::Spaced) {
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
    async fn a_slot_beyond_the_cap_fails_at_once_with_its_wait_and_spends_nothing() {
        let budget = RateBudget::new(BudgetConfig::new(ms(0)).window(2, Duration::from_secs(60)));
        let start = Instant::now();
        budget.acquire(CallKind::Final).await;
        budget.acquire(CallKind::Final).await;
        let capped = budget
            .acquire_within(CallKind::Final, Duration::from_secs(30))
            .await;
        assert_eq!(capped, Err(Duration::from_secs(60)));
        assert_eq!(start.elapsed(), Duration::ZERO, "no sleep past the cap");
        // Nothing was spent: the slot is still the oldest call's expiry.
        assert_eq!(
            budget.next_slot(CallKind::Final),
            start + Duration::from_secs(60)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_within_the_cap_is_waited_for_exactly() {
        let budget = RateBudget::new(BudgetConfig::new(ms(1000)));
        let start = Instant::now();
        budget.acquire(CallKind::Preview).await;
        budget.pause_for(ms(2500));
        let waited = budget.acquire_within(CallKind::Preview, ms(2500)).await;
        assert_eq!(waited, Ok(ms(2500)));
        assert_eq!(start.elapsed(), ms(2500));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unspaced_call_skips_the_spacing_yet_spaces_the_next_spaced_call_and_fills_the_window()
     {
        let config = BudgetConfig::new(ms(1000))
            .window(3, Duration::from_secs(60))
            .final_reserve(1);
        let budget = RateBudget::new(config);
        let start = Instant::now();
        let cap = Duration::from_secs(30);
        for _ in 0..2 {
            let waited = budget.acquire_unspaced_within(CallKind::Final, cap).await;
            assert_eq!(waited, Ok(Duration::ZERO));
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "a burst of messages");
        // A preview is spaced after the last message, and the window counts both messages:
        // the previews' share (3 - 1 reserved) is gone.
        assert_eq!(
            budget.next_slot(CallKind::Preview),
            start + Duration::from_secs(60)
        );
        // The reserved slot is still there for a final, at once.
        let third = budget.acquire_unspaced_within(CallKind::Final, cap).await;
        assert_eq!(third, Ok(Duration::ZERO));
        let fourth = budget.acquire_unspaced_within(CallKind::Final, cap).await;
        assert_eq!(fourth, Err(Duration::from_secs(60)), "the window is full");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unspaced_call_still_waits_for_the_surfaces_pause() {
        let budget = RateBudget::new(BudgetConfig::new(ms(1000)));
        let start = Instant::now();
        budget.pause_for(ms(1500));
        let waited = budget
            .acquire_unspaced_within(CallKind::Final, Duration::from_secs(30))
            .await;
        assert_eq!(waited, Ok(ms(1500)));
        assert_eq!(start.elapsed(), ms(1500));
    }

    #[tokio::test(start_paused = true)]
    async fn ready_within_waits_for_a_slot_inside_the_cap_and_not_for_one_beyond() {
        let budget = RateBudget::new(BudgetConfig::new(ms(500)));
        let start = Instant::now();
        budget.acquire(CallKind::Preview).await;
        budget.ready_within(CallKind::Preview, ms(500)).await;
        assert_eq!(start.elapsed(), ms(500));
        budget.pause_for(Duration::from_secs(60));
        budget.ready_within(CallKind::Preview, ms(30_000)).await;
        assert_eq!(start.elapsed(), ms(500), "beyond the cap: back at once");
    }

    #[tokio::test(start_paused = true)]
    async fn an_absurd_wait_is_clamped_and_does_not_overflow() {
        let budget =
            RateBudget::new(BudgetConfig::new(Duration::MAX).window(u32::MAX, Duration::MAX));
        budget.pause_for(Duration::MAX);
        assert_eq!(budget.pause_left(), MAX_PAUSE);
    }
}
