//! Reading a surface's answer: what one request ended with, the body under its size cap, and
//! the waits a surface asks for.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::ChannelErrorKind;
use super::policy::MAX_RETRY_AFTER;
use crate::retry::parse_retry_after;

/// What one request ended with, as a connector reads its surface's answer.
///
/// The variants split what the surface did not apply (a rate limit, a refusal, a request that
/// never left) from what it may have applied (no answer to a request that left, a 5xx, an
/// error Slack says may follow a partial success, a 2xx that could not be read): the one rule
/// for an unknown outcome (`exchange.rs`) never repeats the second kind unless the call is
/// idempotent or reconciled first.
pub(crate) enum CallEnd {
    /// Posted; the surface's id for it.
    Sent(String),
    /// Rate limited, with the surface's requested wait: not applied.
    RateLimited {
        wait: Option<Duration>,
        global: bool,
    },
    /// Not applied, and sending again may work (a connection that never opened, an error code
    /// the surface documents as not applied).
    Retry(ChannelErrorKind),
    /// May have been applied: no answer to a request that left, a 5xx, Slack's
    /// `internal_error`, a 2xx whose body could not be read or was over the cap. Repeated only
    /// where the call is idempotent or reconciled before the repeat.
    MaybeApplied(ChannelErrorKind),
    /// May have been applied, and must not be repeated within this send at all (a lookup that
    /// could not tell): the outcome is unknown.
    Unknown(ChannelErrorKind),
    /// Refused: not applied; `retryable` says whether delivering again later could work.
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
/// or a 5xx may have posted the part), with the surface's header wait for a 429.
pub(crate) fn too_large(status: StatusCode, headers: &HeaderMap, limit: usize) -> CallEnd {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return CallEnd::RateLimited {
            wait: retry_after_header(headers),
            global: false,
        };
    }
    let kind = ChannelErrorKind::ResponseTooLarge {
        status: status.as_u16(),
        limit,
    };
    if status.is_server_error() || status.is_success() {
        CallEnd::MaybeApplied(kind)
    } else {
        CallEnd::Fail {
            kind,
            retryable: false,
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

/// What a non-JSON or unexpected body means for `status`: a 5xx or a 2xx may have posted the
/// part (a proxy's page after the surface took the request, an answer we cannot read); a 429 is
/// a rate limit; anything else is a refusal.
pub(crate) fn unexpected_body(status: StatusCode) -> CallEnd {
    if status.is_server_error() {
        server_error(status)
    } else if status == StatusCode::TOO_MANY_REQUESTS {
        CallEnd::RateLimited {
            wait: None,
            global: false,
        }
    } else if status.is_success() {
        // The part may have been posted: sending it again could duplicate it.
        CallEnd::MaybeApplied(ChannelErrorKind::Malformed {
            status: status.as_u16(),
        })
    } else {
        CallEnd::Fail {
            kind: ChannelErrorKind::Malformed {
                status: status.as_u16(),
            },
            retryable: false,
        }
    }
}

/// A 5xx: the surface (or a proxy in front of it) failed, possibly after it applied the request.
pub(crate) fn server_error(status: StatusCode) -> CallEnd {
    CallEnd::MaybeApplied(ChannelErrorKind::Server {
        status: status.as_u16(),
    })
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
