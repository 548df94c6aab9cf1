//! Retry primitives shared by every layer that waits before trying again: one [`Backoff`]
//! (Layer A's model retries, the chat connectors' per-part retries, the follow-up runner) and one
//! `Retry-After` reader (`parse_retry_after`, feature `model`, used by the model and chat
//! connectors).
//!
//! A leaf module: it imports nothing of ours, so each layer can depend on it without depending
//! on the others.

use std::time::Duration;
#[cfg(feature = "model")]
use std::time::SystemTime;

/// The longest wait anyone asked us for that is honoured (one day): a provider's or a chat
/// surface's `Retry-After` of years, or one that would overflow a caller's `Instant +
/// Duration`, reads as this. Layer A's errors and the chat connectors' send errors both clamp
/// to it (the Router clamps further, to its max delay).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

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
        let keep = 1.0 - self.jitter * unit_interval(unit);
        // `Duration::mul_f64` panics when the product rounds past `Duration::MAX` (it does for
        // `Duration::MAX · 1.0`): a factor of 1 keeps the step, and any other product that does
        // not fit saturates to the step (the factor is never above 1).
        let jittered = if keep >= 1.0 {
            step
        } else {
            Duration::try_from_secs_f64(step.as_secs_f64() * keep).unwrap_or(step)
        };
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
#[cfg(feature = "model")]
pub(crate) fn parse_retry_after<'a>(
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

/// Reads a duration written the way rate-limit headers and bodies write them: Go's
/// `time.Duration` text (`6m0s`, `2m59.56s`, `7.66s`, `6ms`, `1h2m`), protobuf's JSON `Duration`
/// (`26s`, `1.5s`), or a number of seconds followed by a word (`9 seconds`, `1 second`).
///
/// Each part saturates; a value that overflows a `Duration` or is not finite reads as `None`,
/// as does anything unparseable. The value is not clamped.
#[cfg(feature = "model")]
pub(crate) fn parse_duration_text(text: &str) -> Option<Duration> {
    let mut rest = text.trim().trim_start_matches('~').trim_start();
    let mut total = Duration::ZERO;
    let mut parts = 0;
    while !rest.is_empty() {
        // Go never writes more than h, m, s, ms, us, ns: more parts is not a duration.
        if parts == 6 {
            return None;
        }
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let number = &rest[..digits];
        rest = rest[digits..].trim_start();
        let letters = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let (unit_nanos, is_word) = unit_nanos(&rest[..letters])?;
        total = total.checked_add(decimal(number, unit_nanos)?)?;
        parts += 1;
        rest = rest[letters..].trim_start();
        // A word unit (`9 seconds`) ends the value; Go's compact units chain (`6m0s`).
        if is_word && !rest.is_empty() {
            return None;
        }
    }
    (parts > 0).then_some(total)
}

/// Nanoseconds in one `unit`, and whether it is an English word.
#[cfg(feature = "model")]
fn unit_nanos(unit: &str) -> Option<(u128, bool)> {
    let nanos = match unit.to_ascii_lowercase().as_str() {
        "ns" => (1, false),
        "us" => (1_000, false),
        "ms" => (1_000_000, false),
        "s" => (1_000_000_000, false),
        "m" => (60_000_000_000, false),
        "h" => (3_600_000_000_000, false),
        "millisecond" | "milliseconds" => (1_000_000, true),
        "sec" | "secs" | "second" | "seconds" => (1_000_000_000, true),
        "minute" | "minutes" => (60_000_000_000, true),
        "hour" | "hours" => (3_600_000_000_000, true),
        _ => return None,
    };
    Some(nanos)
}

/// `number` (digits with at most one dot) times `unit_nanos`, exactly (no float rounding:
/// "4.77s" is 4770 ms, not 4769.999 ms), saturating into `None` on overflow.
#[cfg(feature = "model")]
fn decimal(number: &str, unit_nanos: u128) -> Option<Duration> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let parse = |digits: &str| -> Option<u128> {
        if digits.is_empty() {
            Some(0)
        } else {
            digits.parse().ok()
        }
    };
    // Digits past the 18th are below a nanosecond for every unit here.
    let fraction = &fraction[..fraction.len().min(18)];
    let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    let nanos = parse(whole)?
        .checked_mul(unit_nanos)?
        .checked_add(parse(fraction)?.checked_mul(unit_nanos)? / scale)?;
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    let subsec = u32::try_from(nanos % 1_000_000_000).ok()?;
    Some(Duration::new(secs, subsec))
}

/// Finds the wait a provider wrote into an error message: "try again in 4.77s", "Please try
/// again in 9m38.016s", "Please retry after 9 seconds", "Please retry in 26.4s". The first such
/// phrase wins; `None` when there is none. Not clamped.
#[cfg(feature = "model")]
pub(crate) fn parse_wait_in_text(text: &str) -> Option<Duration> {
    let lower = text.to_ascii_lowercase();
    for phrase in ["try again in ", "retry in ", "retry after ", "retrying in "] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(phrase) {
            let start = from + at + phrase.len();
            // The duration runs to the next sentence end or clause break.
            let end = lower[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == ' '))
                .map_or(lower.len(), |e| start + e);
            let candidate = lower[start..end].trim().trim_end_matches('.');
            let candidate = candidate.split(". ").next().unwrap_or(candidate);
            if let Some(wait) = parse_leading_duration(candidate) {
                return Some(wait);
            }
            from = start;
        }
    }
    None
}

/// The longest prefix of `text` that reads as a duration (so "4.77s need more" reads as 4.77 s).
#[cfg(feature = "model")]
fn parse_leading_duration(text: &str) -> Option<Duration> {
    let words: Vec<&str> = text.split_whitespace().collect();
    (1..=words.len().min(2))
        .rev()
        .find_map(|n| parse_duration_text(&words[..n].join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples these readers' docs gave when they were public.
    #[cfg(feature = "model")]
    #[test]
    fn the_documented_examples_hold() {
        assert_eq!(parse_duration_text("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(
            parse_duration_text("9m38.016s"),
            Some(Duration::from_millis(578_016))
        );
        assert_eq!(parse_duration_text("26s"), Some(Duration::from_secs(26)));
        assert_eq!(parse_duration_text("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(
            parse_duration_text("54 seconds"),
            Some(Duration::from_secs(54))
        );
        assert_eq!(parse_duration_text("soon"), None);
        let groq =
            "Limit 6000, Used 5034, Requested 1443. Please try again in 4.77s. Need more tokens?";
        assert_eq!(parse_wait_in_text(groq), Some(Duration::from_millis(4770)));
        let azure = "... S0 pricing tier. Please retry after 9 seconds. Please go here: ...";
        assert_eq!(parse_wait_in_text(azure), Some(Duration::from_secs(9)));
        assert_eq!(parse_wait_in_text("try again later"), None);
    }

    #[cfg(feature = "model")]
    #[test]
    fn the_documented_header_examples_hold() {
        let headers = |name: &str| (name == "retry-after").then_some("1.5");
        assert_eq!(
            parse_retry_after(headers, SystemTime::now()),
            Some(Duration::from_millis(1500))
        );
        let ms = |name: &str| (name == "x-ms-retry-after-ms").then_some("250");
        assert_eq!(
            parse_retry_after(ms, SystemTime::now()),
            Some(Duration::from_millis(250))
        );
        let bad = |name: &str| (name == "retry-after").then_some("-3");
        assert_eq!(parse_retry_after(bad, SystemTime::now()), None);
    }

    #[cfg(feature = "model")]
    /// Hostile text: any short string, alone or after a wait phrase, reads without a panic.
    mod hostile {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn duration_text_never_panics(text in ".{0,40}") {
                let _ = parse_duration_text(&text);
                let _ = parse_wait_in_text(&text);
                let _ = parse_wait_in_text(&format!("try again in {text}"));
            }
        }
    }

    #[cfg(feature = "model")]
    #[test]
    fn a_huge_duration_saturates_into_a_duration_not_an_overflow() {
        assert_eq!(
            parse_duration_text("1000000h"),
            Some(Duration::from_secs(3_600_000_000))
        );
    }

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

    #[cfg(feature = "model")]
    #[test]
    fn duration_text_in_every_form_providers_write_it() {
        let ms = |n| Some(Duration::from_millis(n));
        for (text, want) in [
            ("6m0s", ms(360_000)),
            ("2m59.56s", ms(179_560)),
            ("7.66s", ms(7_660)),
            ("6ms", ms(6)),
            ("1h2m", ms(3_720_000)),
            ("26s", ms(26_000)),
            ("4.77s", ms(4_770)),
            ("9m38.016s", ms(578_016)),
            ("~12s", ms(12_000)),
            ("54 seconds", ms(54_000)),
            ("1 second", ms(1_000)),
            ("", None),
            ("s", None),
            ("-3s", None),
            ("1e400s", None),
            ("3 parsecs", None),
            ("9 seconds please", None),
            ("1.2.3s", None),
            ("99999999999999999999999999h", None),
        ] {
            assert_eq!(parse_duration_text(text), want, "{text:?}");
        }
    }

    #[cfg(feature = "model")]
    #[test]
    fn waits_written_in_messages() {
        let ms = |n| Some(Duration::from_millis(n));
        for (text, want) in [
            (
                "Used 5034, Requested 1443. Please try again in 4.77s. Need more tokens?",
                ms(4_770),
            ),
            (
                "Please try again in 9m38.016s. Visit https://x",
                ms(578_016),
            ),
            (
                "pricing tier. Please retry after 86400 seconds. Please go here: https://aka.ms/x",
                ms(86_400_000),
            ),
            ("limit: 0\nPlease retry in 5.237548564s.", ms(5_237)),
            ("Please try again later.", None),
            ("try again in a few minutes", None),
            ("", None),
        ] {
            assert_eq!(
                parse_wait_in_text(text).map(|d| Duration::from_millis(
                    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
                )),
                want,
                "{text:?}"
            );
        }
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
