//! Retry primitives shared by every layer that waits before trying again: one [`Backoff`]
//! (Layer A's model retries, the chat connectors' per-part retries, the follow-up runner) and one
//! `Retry-After` reader ([`parse_retry_after`], feature `model`).
//!
//! A leaf module: it imports nothing of ours, so each layer can depend on it without depending
//! on the others.

use std::time::Duration;
#[cfg(feature = "model")]
use std::time::SystemTime;

/// Exponential backoff with optional jitter that never waits less than the (clamped) wait a
/// server asked for.
///
/// The wait after the `n`-th failure (from 1), given the server's `retry_after` and a jitter
/// sample `unit` in `[0, 1]`:
///
/// `max(step · (1 − jitter · unit), min(retry_after, max))` with
/// `step = min(max, base · 2^(n − 1))`.
///
/// Every step saturates: no input, however large, panics or overflows.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::retry::Backoff;
/// let backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(20));
/// assert_eq!(backoff.delay(1, None, 0.0), Duration::from_millis(500));
/// assert_eq!(backoff.delay(3, None, 0.0), Duration::from_secs(2));
/// assert_eq!(backoff.delay(u32::MAX, None, 0.0), Duration::from_secs(20));
/// // A server's wait is honoured, but never beyond the cap.
/// assert_eq!(backoff.delay(1, Some(Duration::from_secs(3)), 0.0), Duration::from_secs(3));
/// assert_eq!(backoff.delay(1, Some(Duration::MAX), 0.0), Duration::from_secs(20));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    jitter: f64,
}

impl Backoff {
    /// Doubling from `base`, capped at `max`, without jitter.
    pub const fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            jitter: 0.0,
        }
    }

    /// Lets jitter take up to `share` (clamped into `[0, 1]`; `NaN` reads as 0) off each step.
    pub fn with_jitter(mut self, share: f64) -> Self {
        self.jitter = unit_interval(share);
        self
    }

    /// The first step.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The cap on every wait, the server's included.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The jitter share.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// The step after the `failed`-th failure (from 1), before jitter: `min(max, base · 2^(failed − 1))`.
    pub fn step(&self, failed: u32) -> Duration {
        let doublings = failed.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << doublings)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// The wait after the `failed`-th failure (formula in the type's docs).
    pub fn delay(&self, failed: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        let step = self.step(failed);
        let factor = 1.0 - self.jitter * unit_interval(unit);
        // `Duration::mul_f64` panics when the product does not fit; the factor is at most 1, so
        // only float rounding near `Duration::MAX` can get there, and the step itself is then
        // the right answer.
        let jittered =
            Duration::try_from_secs_f64(step.as_secs_f64() * factor).map_or(step, |d| d.min(step));
        let asked = retry_after.map_or(Duration::ZERO, |wait| wait.min(self.max));
        jittered.max(asked)
    }
}

fn unit_interval(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// Reads the wait a server asked for from its response headers, first of: `retry-after-ms`,
/// `x-ms-retry-after-ms` (milliseconds, fractional allowed), `Retry-After` (delta-seconds,
/// fractional allowed, or an HTTP-date, measured from `now`).
///
/// Absent, malformed, non-finite, negative or past values are ignored (the next header is
/// tried); nothing here panics. `header` looks a header up by lowercase name. The value is not
/// clamped: callers clamp it to their own bound (a [`Backoff`] does).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use mesh_egress::retry::parse_retry_after;
/// let headers = |name: &str| (name == "retry-after").then_some("1.5");
/// assert_eq!(parse_retry_after(headers, SystemTime::now()), Some(Duration::from_millis(1500)));
/// let ms = |name: &str| (name == "x-ms-retry-after-ms").then_some("250");
/// assert_eq!(parse_retry_after(ms, SystemTime::now()), Some(Duration::from_millis(250)));
/// let bad = |name: &str| (name == "retry-after").then_some("-3");
/// assert_eq!(parse_retry_after(bad, SystemTime::now()), None);
/// ```
#[cfg(feature = "model")]
pub fn parse_retry_after<'a>(
    header: impl Fn(&str) -> Option<&'a str>,
    now: SystemTime,
) -> Option<Duration> {
    let millis = |name| {
        header(name)
            .and_then(|v| non_negative(v.trim()))
            .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
    };
    millis("retry-after-ms")
        .or_else(|| millis("x-ms-retry-after-ms"))
        .or_else(|| {
            let value = header("retry-after")?.trim();
            match non_negative(value) {
                Some(secs) => Duration::try_from_secs_f64(secs).ok(),
                None => httpdate::parse_http_date(value)
                    .ok()?
                    .duration_since(now)
                    .ok(),
            }
        })
}

#[cfg(feature = "model")]
fn non_negative(value: &str) -> Option<f64> {
    value
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_double_up_to_the_cap_and_saturate() {
        let b = Backoff::new(Duration::from_millis(500), Duration::from_secs(20));
        let waits: Vec<u128> = (1..=8).map(|n| b.delay(n, None, 0.0).as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 16000, 20000, 20000]);
        let huge = Backoff::new(Duration::MAX, Duration::MAX);
        assert_eq!(
            huge.delay(u32::MAX, Some(Duration::MAX), 1.0),
            Duration::MAX
        );
    }

    #[test]
    fn jitter_takes_at_most_its_share_and_never_cuts_a_servers_wait() {
        let b = Backoff::new(Duration::from_millis(500), Duration::from_secs(20)).with_jitter(0.5);
        assert_eq!(b.delay(2, None, 1.0), Duration::from_millis(500));
        assert_eq!(b.delay(2, None, 0.5), Duration::from_millis(750));
        assert_eq!(b.delay(2, None, f64::NAN), Duration::from_secs(1));
        assert_eq!(
            b.delay(1, Some(Duration::from_secs(4)), 0.99),
            Duration::from_secs(4)
        );
    }

    #[cfg(feature = "model")]
    fn parse(pairs: &[(&'static str, &'static str)], now: SystemTime) -> Option<Duration> {
        parse_retry_after(
            |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            now,
        )
    }

    #[cfg(feature = "model")]
    #[test]
    fn every_header_form_in_order_of_precedence() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        let date: &'static str = Box::leak(date.into_boxed_str());
        assert_eq!(
            parse(&[("retry-after", date)], now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse(&[("retry-after", "2"), ("x-ms-retry-after-ms", "900")], now),
            Some(Duration::from_millis(900))
        );
        assert_eq!(
            parse(
                &[("retry-after-ms", "12.5"), ("x-ms-retry-after-ms", "900")],
                now
            ),
            Some(Duration::from_micros(12_500))
        );
        assert_eq!(
            parse(&[("retry-after-ms", "NaN"), ("retry-after", "3")], now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(parse(&[("retry-after", "1e400")], now), None);
        let past: &'static str =
            Box::leak(httpdate::fmt_http_date(now - Duration::from_secs(5)).into_boxed_str());
        assert_eq!(parse(&[("retry-after", past)], now), None);
    }
}
