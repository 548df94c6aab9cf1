//! [`PartRetry`]: when the outbox tries a part again that a surface did not take, and when it
//! gives the part up.

use std::fmt;
use std::time::Duration;

use crate::retry::Backoff;
use crate::setting::{ConfigWarning, read_setting};

const BASE_ENV: &str = "MESH_WORKER_RETRY_BASE_MS";
const MAX_ENV: &str = "MESH_WORKER_RETRY_MAX_MS";
const ATTEMPTS_ENV: &str = "MESH_WORKER_MAX_ATTEMPTS";

/// Per-part retries: exponential backoff with jitter, and an attempt limit.
///
/// A part a surface did not take (a 5xx, a lost answer on a surface that dedupes or was looked
/// up, a "not now") goes back to `pending` with a next-attempt time: after its `n`-th attempt
/// it waits [`Backoff::delay`]`(n, retry_after, u)`, that is
/// `max(step · (1 − jitter · u), min(retry_after, max))` with `step = min(max, base · 2^(n − 1))`
/// and `u` uniform in `[0, 1)`, so parts that failed together do not come back together. A
/// part whose last allowed attempt fails is `failed` (with the later parts of its message), is
/// put on the ledger as [`OutboxRecord::AttemptsExhausted`](crate::ledger::OutboxRecord), and
/// gets one `error` event at target `mesh_egress::egress` naming its conversation (never its
/// text). Nothing else sends a part before its next-attempt time, so a failing surface costs
/// one attempt per step, never one per worker pass.
///
/// Defaults: base 1 s, cap 5 min, 12 attempts (about 19 minutes from the first attempt to the
/// last), jitter 0.25. From the environment ([`PartRetry::from_env`]):
/// `MESH_WORKER_RETRY_BASE_MS` (1000; `0` retries at once), `MESH_WORKER_RETRY_MAX_MS`
/// (300000) and `MESH_WORKER_MAX_ATTEMPTS` (12). An unparseable or negative value, or `0` for
/// the cap or the attempts, restores the default and is reported, as the spec's settings are.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::store::PartRetry;
/// let retry = PartRetry::default().with_jitter(0.0);
/// assert_eq!(retry.next_wait(1, None, 0.0), Some(Duration::from_secs(1)));
/// assert_eq!(retry.next_wait(4, None, 0.0), Some(Duration::from_secs(8)));
/// assert_eq!(retry.next_wait(11, None, 0.0), Some(Duration::from_secs(300)));
/// // A surface's "not now" is honoured, up to the cap.
/// assert_eq!(retry.next_wait(1, Some(Duration::from_secs(7)), 0.0), Some(Duration::from_secs(7)));
/// // The twelfth attempt was the last.
/// assert_eq!(retry.next_wait(12, None, 0.0), None);
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct PartRetry {
    backoff: Backoff,
    max_attempts: u32,
}

impl PartRetry {
    /// The first wait, unless `MESH_WORKER_RETRY_BASE_MS` says.
    pub const DEFAULT_BASE: Duration = Duration::from_secs(1);
    /// The longest wait, unless `MESH_WORKER_RETRY_MAX_MS` says.
    pub const DEFAULT_MAX: Duration = Duration::from_secs(300);
    /// How many attempts a part gets, unless `MESH_WORKER_MAX_ATTEMPTS` says.
    pub const DEFAULT_ATTEMPTS: u32 = 12;
    /// The share of each step jitter may take away.
    pub const DEFAULT_JITTER: f64 = 0.25;

    /// Waits doubling from `base` up to `max`, at most `max_attempts` attempts per part (at
    /// least one), with the default jitter.
    pub fn new(base: Duration, max: Duration, max_attempts: u32) -> Self {
        Self {
            backoff: Backoff::new(base, max).with_jitter(Self::DEFAULT_JITTER),
            max_attempts: max_attempts.max(1),
        }
    }

    /// Lets jitter take up to `share` (clamped into `[0, 1]`) off each wait; `0` makes every
    /// wait exact (what a test of the schedule uses).
    pub fn with_jitter(mut self, share: f64) -> Self {
        self.backoff = self.backoff.with_jitter(share);
        self
    }

    /// The backoff between attempts.
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// How many attempts a part gets before it is `failed`.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// How long to wait after the `attempts`-th attempt failed (the surface asked for
    /// `retry_after`; `unit` is a jitter sample in `[0, 1)`), or `None` when that attempt was
    /// the last.
    pub fn next_wait(
        &self,
        attempts: u32,
        retry_after: Option<Duration>,
        unit: f64,
    ) -> Option<Duration> {
        (attempts < self.max_attempts).then(|| self.backoff.delay(attempts, retry_after, unit))
    }
}

impl Default for PartRetry {
    fn default() -> Self {
        Self::new(
            Self::DEFAULT_BASE,
            Self::DEFAULT_MAX,
            Self::DEFAULT_ATTEMPTS,
        )
    }
}

impl fmt::Debug for PartRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartRetry")
            .field("base", &self.backoff.base())
            .field("max", &self.backoff.max())
            .field("jitter", &self.backoff.jitter())
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}

impl PartRetry {
    /// [`PartRetry`] from `MESH_WORKER_RETRY_BASE_MS`, `MESH_WORKER_RETRY_MAX_MS` and
    /// `MESH_WORKER_MAX_ATTEMPTS`, with the values it ignored (each also logged at `warn` on
    /// target `mesh_egress::store`).
    pub fn from_env() -> (PartRetry, Vec<ConfigWarning>) {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// [`Self::from_env`] through any key lookup.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mesh_egress::store::PartRetry;
    /// let (retry, warnings) = PartRetry::from_lookup(|key| match key {
    ///     "MESH_WORKER_RETRY_BASE_MS" => Some("250".into()),
    ///     "MESH_WORKER_MAX_ATTEMPTS" => Some("0".into()),
    ///     _ => None,
    /// });
    /// assert_eq!(retry.backoff().base(), Duration::from_millis(250));
    /// assert_eq!(retry.max_attempts(), PartRetry::DEFAULT_ATTEMPTS);
    /// assert_eq!(warnings.len(), 1);
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> (PartRetry, Vec<ConfigWarning>) {
        let mut warnings = Vec::new();
        let base = read_setting(&lookup, BASE_ENV, false, &mut warnings)
            .map_or(PartRetry::DEFAULT_BASE, Duration::from_millis);
        let max = read_setting(&lookup, MAX_ENV, true, &mut warnings)
            .map_or(PartRetry::DEFAULT_MAX, Duration::from_millis);
        let attempts = read_setting(&lookup, ATTEMPTS_ENV, true, &mut warnings)
            .map_or(PartRetry::DEFAULT_ATTEMPTS, |n| {
                u32::try_from(n).unwrap_or(u32::MAX)
            });
        for warning in &warnings {
            tracing::warn!(target: "mesh_egress::store", key = warning.key, "{warning}");
        }
        (PartRetry::new(base, max, attempts), warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::ConfigProblem;

    #[test]
    fn unset_settings_give_the_defaults_silently() {
        let (retry, warnings) = PartRetry::from_lookup(|_| None);
        assert_eq!(retry, PartRetry::default());
        assert!(warnings.is_empty());
        assert_eq!(retry.backoff().base(), Duration::from_secs(1));
        assert_eq!(retry.backoff().max(), Duration::from_secs(300));
        assert_eq!(retry.max_attempts(), 12);
    }

    #[test]
    fn bad_values_restore_each_default_and_are_reported() {
        let cases = [
            (BASE_ENV, "soon", ConfigProblem::Unparseable),
            (BASE_ENV, "-5", ConfigProblem::Negative),
            (MAX_ENV, "0", ConfigProblem::Zero),
            (MAX_ENV, "1.5x", ConfigProblem::Unparseable),
            (ATTEMPTS_ENV, "0", ConfigProblem::Zero),
            (ATTEMPTS_ENV, "-1", ConfigProblem::Negative),
        ];
        for (key, value, problem) in cases {
            let (retry, warnings) =
                PartRetry::from_lookup(|k| (k == key).then(|| value.to_owned()));
            assert_eq!(retry, PartRetry::default(), "{key}={value}");
            assert_eq!(warnings.len(), 1, "{key}={value}");
            assert_eq!(warnings[0].key, key);
            assert_eq!(warnings[0].problem, problem, "{key}={value}");
        }
        // Zero is a usable base: retry at once.
        let (retry, warnings) = PartRetry::from_lookup(|k| (k == BASE_ENV).then(|| "0".into()));
        assert!(warnings.is_empty());
        assert_eq!(retry.backoff().base(), Duration::ZERO);
    }

    #[test]
    fn the_schedule_doubles_to_the_cap_and_ends_at_the_limit() {
        let retry =
            PartRetry::new(Duration::from_secs(1), Duration::from_secs(300), 12).with_jitter(0.0);
        let waits: Vec<u64> = (1..12)
            .map(|n| retry.next_wait(n, None, 0.5).unwrap().as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(retry.next_wait(12, None, 0.0), None);
        assert_eq!(retry.next_wait(u32::MAX, None, 0.0), None);
    }

    #[test]
    fn jitter_only_shortens_a_wait_and_by_at_most_its_share() {
        let retry = PartRetry::default();
        for unit in [0.0, 0.3, 0.999] {
            let wait = retry.next_wait(3, None, unit).unwrap();
            assert!(wait <= Duration::from_secs(4), "{unit}: {wait:?}");
            assert!(wait >= Duration::from_secs(3), "{unit}: {wait:?}");
        }
        // A surface's wait is never shortened by jitter.
        let wait = retry.next_wait(1, Some(Duration::from_secs(9)), 0.999);
        assert_eq!(wait, Some(Duration::from_secs(9)));
    }

    #[test]
    fn a_limit_of_zero_attempts_still_allows_one() {
        assert_eq!(
            PartRetry::new(Duration::ZERO, Duration::from_secs(1), 0).max_attempts(),
            1
        );
    }
}
