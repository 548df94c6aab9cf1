//! Jitter for the Router's backoff. The backoff itself is `crate::retry::Backoff`
//! ([`RetryConfig::backoff`] gives a config's), shared with the chat connectors and the
//! follow-up runner; its tests live there.

use std::fmt;
use std::sync::Arc;

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
