//! Reading a surface's answer: what one request ended with, the body under its size cap, and
//! the waits a surface asks for.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::ChannelErrorKind;
use super::policy::MAX_RETRY_AFTER;
use crate::retry::parse_retry_after;

/// What one request ended with, as a connector reads its surface's answer.
pub(crate) enum Outcome {
    /// Posted; the surface's id for it.
    Sent(String),
    /// Rate limited, with the surface's requested wait.
    RateLimited {
        wait: Option<Duration>,
        global: bool,
    },
    /// A failure that sending again may fix (5xx, a transient API error).
    Retry(ChannelErrorKind),
    /// No answer to a try that may have reached the surface, where repeating it could post
    /// twice (Telegram): not repeated here, and reported as an unknown outcome.
    Unknown(ChannelErrorKind),
    /// A failure not retried here; `retryable` says whether delivering again later could work.
    Fail {
        kind: ChannelErrorKind,
        retryable: bool,
    },
}

/// Why an answer's body could not be read.
pub(crate) enum BodyError {
    /// It is longer than the cap.
    TooLarge,
    /// The connection failed mid-body.
    Transport(reqwest::Error),
}

/// Reads `response`'s body chunk by chunk, stopping as soon as it would pass `limit` bytes (or
/// at once, when the declared length already does): an answer is never buffered whole.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let declared = response
        .content_length()
        .map(|len| usize::try_from(len).unwrap_or(usize::MAX));
    if declared.is_some_and(|len| len > limit) {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if chunk.len() > limit.saturating_sub(body.len()) {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What an answer longer than the cap means for `status`: the same as an unreadable body (a 2xx
/// may have posted the part, so it is not sent again), with the surface's header wait for a 429.
pub(crate) fn too_large(status: StatusCode, headers: &HeaderMap, limit: usize) -> Outcome {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Outcome::RateLimited {
            wait: retry_after_header(headers),
            global: false,
        };
    }
    let kind = ChannelErrorKind::ResponseTooLarge {
        status: status.as_u16(),
        limit,
    };
    if status.is_server_error() {
        Outcome::Retry(kind)
    } else {
        Outcome::Fail {
            kind,
            retryable: status.is_success(),
        }
    }
}

/// The wait a surface asked for in its headers (`retry-after-ms`, `x-ms-retry-after-ms`, or
/// `Retry-After` in seconds or as an HTTP-date), if present and sane.
pub(crate) fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    parse_retry_after(
        |name| headers.get(name).and_then(|v| v.to_str().ok()),
        SystemTime::now(),
    )
}

/// A wait in seconds from a JSON body field (Discord's `retry_after`, Telegram's
/// `parameters.retry_after`): any finite, non-negative number, clamped to [`MAX_RETRY_AFTER`];
/// anything else (a string, a negative number) is no wait at all.
pub(crate) fn seconds_field(value: Option<&serde_json::Value>) -> Option<Duration> {
    let secs = value?.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs_f64(
        secs.min(MAX_RETRY_AFTER.as_secs_f64()),
    ))
}

/// What a non-JSON or unexpected body means for `status`: a 5xx is a server failure worth
/// retrying; anything else is ambiguous or a refusal.
pub(crate) fn unexpected_body(status: StatusCode) -> Outcome {
    if status.is_server_error() {
        Outcome::Retry(ChannelErrorKind::Server {
            status: status.as_u16(),
        })
    } else if status == StatusCode::TOO_MANY_REQUESTS {
        Outcome::RateLimited {
            wait: None,
            global: false,
        }
    } else if status.is_success() {
        // The part may have been posted: sending it again could duplicate it.
        Outcome::Fail {
            kind: ChannelErrorKind::Malformed {
                status: status.as_u16(),
            },
            retryable: true,
        }
    } else {
        Outcome::Fail {
            kind: ChannelErrorKind::Malformed {
                status: status.as_u16(),
            },
            retryable: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_http_dates_and_the_ms_headers_and_refuses_nonsense() {
        let header = |name: &'static str, value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(name, value.parse().unwrap());
            retry_after_header(&headers)
        };
        assert_eq!(header("retry-after", "2"), Some(Duration::from_secs(2)));
        assert_eq!(
            header("retry-after", "0.25"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            header("retry-after-ms", "40"),
            Some(Duration::from_millis(40))
        );
        assert_eq!(
            header("x-ms-retry-after-ms", "7"),
            Some(Duration::from_millis(7))
        );
        let in_a_minute = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let wait = header("retry-after", &in_a_minute).expect("an HTTP-date is read");
        assert!(wait > Duration::from_secs(55) && wait <= Duration::from_secs(60));
        assert_eq!(header("retry-after", "-1"), None);
        assert_eq!(header("retry-after", "soon"), None);
    }

    #[test]
    fn a_body_wait_is_read_from_any_number_and_clamped() {
        let secs = |v: serde_json::Value| seconds_field(Some(&v));
        assert_eq!(
            secs(serde_json::json!(0.125)),
            Some(Duration::from_millis(125))
        );
        assert_eq!(secs(serde_json::json!(3)), Some(Duration::from_secs(3)));
        assert_eq!(secs(serde_json::json!(1e300)), Some(MAX_RETRY_AFTER));
        assert_eq!(secs(serde_json::json!(u64::MAX)), Some(MAX_RETRY_AFTER));
        assert_eq!(secs(serde_json::json!(-1)), None);
        assert_eq!(secs(serde_json::json!("3")), None);
        assert_eq!(seconds_field(None), None);
    }
}
