//! Jitter for the Router's backoff, and [`backoff_delay`]: a thin form of
//! [`crate::retry::Backoff::delay`] for a [`RetryConfig`] (formula in its documentation). The
//! backoff itself is `crate::retry::Backoff`, shared with the chat connectors and the follow-up
//! runner; its tests live there.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::config::RetryConfig;

/// Where jitter comes from: a source of numbers in `[0, 1)`. Injectable so tests are exact.
///
/// ```
/// use mesh_egress::model::Jitter;
/// let none = Jitter::fixed(0.0); // never shortens a wait
/// assert_eq!(none.sample(), 0.0);
/// let random = Jitter::random();
/// assert!((0.0..1.0).contains(&random.sample()));
/// ```
#[derive(Clone)]
pub struct Jitter(Arc<dyn Fn() -> f64 + Send + Sync>);

impl Jitter {
    /// Uniform random numbers (the default).
    pub fn random() -> Self {
        Self::from_fn(fastrand::f64)
    }

    /// Always `unit` (clamped into `[0, 1)`).
    pub fn fixed(unit: f64) -> Self {
        Self::from_fn(move || unit)
    }

    /// Numbers from `source`; values outside `[0, 1)` are clamped, `NaN` reads as 0.
    pub fn from_fn(source: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        Self(Arc::new(source))
    }

    /// The next number, in `[0, 1)`.
    pub fn sample(&self) -> f64 {
        let u = (self.0)();
        if u.is_nan() {
            0.0
        } else {
            u.clamp(0.0, 1.0 - f64::EPSILON)
        }
    }
}

impl Default for Jitter {
    fn default() -> Self {
        Self::random()
    }
}

impl fmt::Debug for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Jitter")
    }
}

/// The wait after the `failed_attempt`-th failure on a route (from 1), given the provider's
/// `retry_after` and a jitter sample `unit` in `[0, 1)`:
/// `max(step · (1 - jitter · unit), min(retry_after, max_delay))` with
/// `step = min(max_delay, base_delay · 2^(failed_attempt - 1))`.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::model::{backoff_delay, RetryConfig};
/// let config = RetryConfig::default();
/// assert_eq!(backoff_delay(&config, 1, None, 0.0), Duration::from_millis(500));
/// assert_eq!(backoff_delay(&config, 2, None, 0.0), Duration::from_millis(1000));
/// // Retry-After is clamped to the max delay (20 s)...
/// assert_eq!(backoff_delay(&config, 1, Some(Duration::from_secs(3600)), 0.5), Duration::from_secs(20));
/// // ...and jitter never shortens it.
/// assert_eq!(backoff_delay(&config, 1, Some(Duration::from_secs(3)), 0.99), Duration::from_secs(3));
/// ```
pub fn backoff_delay(
    config: &RetryConfig,
    failed_attempt: u32,
    retry_after: Option<Duration>,
    unit: f64,
) -> Duration {
    config.backoff().delay(failed_attempt, retry_after, unit)
}
