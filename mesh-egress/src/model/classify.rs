//! [`classify`]: retryable or terminal, decided from what the connector already knows, and the
//! provider's `Retry-After` parsed without ever panicking.

use std::time::Duration;

use super::error::{ModelError, ModelErrorKind};
use super::limits::limit_reason;
use crate::failure::FailureReason;

/// The verdict on one failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    /// Whether another attempt could succeed without changing the request.
    pub retryable: bool,
    /// Why it failed.
    pub reason: FailureReason,
    /// The wait the provider asked for, at most [`MAX_RETRY_AFTER`](crate::retry::MAX_RETRY_AFTER)
    /// (the Router clamps it further, to its max delay).
    pub retry_after: Option<Duration>,
}

/// Classifies a failed model call. Pure: the same error always gets the same verdict.
///
/// | failure | verdict |
/// |---|---|
/// | 5xx (529 included), 408, 409 | retryable |
/// | 429 per-second / per-minute rate limit | retryable, with the provider's wait |
/// | 402, exhausted quota or credits, per-day cap (any 4xx) | terminal for the route, `quota_exhausted` (the Router may fall back) |
/// | 413, or a request larger than the limit it hit ("Limit 30000, Requested 36278") | terminal for the route, `request_too_large` (falls back) |
/// | 400/413/422 context overflow, in any major provider's wording | terminal for the route, `context_overflow` (falls back to a larger window) |
/// | connection refused/reset/closed, transport timeout | retryable |
/// | empty completion, tool call unparseable after the repair, undecodable body | retryable |
/// | response body over the connector's cap | terminal for the route, `response_too_large` (falls back) |
/// | a refusal, content filter, blocked prompt, safety or recitation finish | terminal for the route, `refused` (falls back) |
/// | an answer cut by the output limit | terminal for the route, `truncated` (falls back) |
/// | other 400, 422, a request that could not be built | terminal |
/// | 401, 403 | terminal |
/// | 404 | terminal (unknown model) |
/// | other 4xx | terminal |
///
/// Rate limit or exhausted quota is decided from structured fields first: the error `code` and
/// `type` (`insufficient_quota`, `insufficient_credits`, `billing_hard_limit_reached`), HTTP
/// 402, and Google's `QuotaFailure` / `ErrorInfo` windows (`...PerDay...` is a cap,
/// `...PerMinute...` a rate limit, a limit of `0` no quota at all). Only when those say nothing
/// do message phrases decide ("per day", "tokens per minute (TPM)", "exceeded your current
/// quota", "credit balance is too low"), and never text inside a URL: Azure's and Groq's
/// ordinary per-minute 429s carry `quotaincrease` and `settings/billing` links. A provider's
/// error document carried as the text of a gateway's message (Gemini's OpenAI-compatible
/// endpoint) is read first, so its structured fields decide, not the prose around them.
///
/// A provider's `x-should-retry` header, when present, overrides the retry verdict for HTTP
/// failures, except for a request too large or a context overflow: the same request can never
/// fit, whatever the header says. The provider's wait is passed through as the error holds it (at most
/// [`MAX_RETRY_AFTER`](crate::retry::MAX_RETRY_AFTER)); the Router clamps it to its max delay.
///
/// ```
/// use mesh_egress::model::{classify, FailureReason, ModelError};
/// let c = classify(&ModelError::status(429).with_code("insufficient_quota"));
/// assert!(!c.retryable);
/// assert_eq!(c.reason, FailureReason::QuotaExhausted);
/// // A link is not a reason: this is Azure's ordinary per-minute rate limit.
/// let azure = ModelError::status(429).with_code("429").with_provider_message(
///     "... exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry \
///      after 9 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like ...",
/// );
/// assert_eq!(classify(&azure).reason, FailureReason::RateLimited);
/// assert!(classify(&ModelError::status(503)).retryable);
/// ```
pub fn classify(error: &ModelError) -> Classification {
    let (retryable, reason) = match error.kind() {
        ModelErrorKind::Status(status) => {
            let (retryable, reason) = classify_status(status, error);
            // The same request can never fit: no header makes resending it useful.
            let intrinsic = matches!(
                reason,
                FailureReason::RequestTooLarge | FailureReason::ContextOverflow
            );
            match error.should_retry() {
                Some(should_retry) if !intrinsic => (should_retry, reason),
                _ => (retryable, reason),
            }
        }
        ModelErrorKind::Connection => (true, FailureReason::Connection),
        ModelErrorKind::Timeout => (true, FailureReason::RequestTimeout),
        ModelErrorKind::EmptyCompletion => (true, FailureReason::EmptyCompletion),
        ModelErrorKind::MalformedToolCall => (true, FailureReason::MalformedToolCall),
        ModelErrorKind::InvalidResponse => (true, FailureReason::InvalidResponse),
        ModelErrorKind::InvalidRequest => (false, FailureReason::InvalidRequest),
        ModelErrorKind::ResponseTooLarge => (false, FailureReason::ResponseTooLarge),
        ModelErrorKind::Refused => (false, FailureReason::Refused),
        ModelErrorKind::Truncated => (false, FailureReason::Truncated),
    };
    Classification {
        retryable,
        reason,
        retry_after: error.retry_after(),
    }
}

fn classify_status(status: u16, error: &ModelError) -> (bool, FailureReason) {
    match status {
        400 | 402 | 403 | 413 | 422 | 429 => {
            if let Some(reason) = limit_reason(status, error) {
                return (reason == FailureReason::RateLimited, reason);
            }
            match status {
                429 => (true, FailureReason::RateLimited),
                413 => (false, FailureReason::RequestTooLarge),
                403 => (false, FailureReason::Auth),
                _ => (false, FailureReason::InvalidRequest),
            }
        }
        401 => (false, FailureReason::Auth),
        404 => (false, FailureReason::UnknownModel),
        408 => (true, FailureReason::RequestTimeout),
        409 => (true, FailureReason::ClientError),
        500..=599 => (true, FailureReason::ServerError),
        _ => (false, FailureReason::ClientError),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(status: u16) -> ModelError {
        ModelError::status(status)
    }

    #[test]
    fn every_row_of_the_classification_table() {
        use FailureReason as R;
        let rows: Vec<(&str, ModelError, bool, FailureReason)> = vec![
            ("500", err(500), true, R::ServerError),
            ("502", err(502), true, R::ServerError),
            ("503", err(503), true, R::ServerError),
            ("504", err(504), true, R::ServerError),
            (
                "429 rate limit",
                err(429).with_code("rate_limit_exceeded"),
                true,
                R::RateLimited,
            ),
            ("429 bare", err(429), true, R::RateLimited),
            (
                "429 insufficient_quota",
                err(429).with_code("insufficient_quota"),
                false,
                R::QuotaExhausted,
            ),
            (
                "429 billing text",
                err(429).with_provider_message("Your billing details are missing"),
                false,
                R::QuotaExhausted,
            ),
            ("408", err(408), true, R::RequestTimeout),
            (
                "connection reset",
                ModelError::connection("reset by peer"),
                true,
                R::Connection,
            ),
            (
                "transport timeout",
                ModelError::timeout(),
                true,
                R::RequestTimeout,
            ),
            (
                "empty completion",
                ModelError::empty_completion(),
                true,
                R::EmptyCompletion,
            ),
            (
                "tool call after repair",
                ModelError::malformed_tool_call(),
                true,
                R::MalformedToolCall,
            ),
            (
                "undecodable body",
                ModelError::invalid_response("eof"),
                true,
                R::InvalidResponse,
            ),
            (
                "400 validation",
                err(400).with_code("invalid_request_error"),
                false,
                R::InvalidRequest,
            ),
            (
                "400 context_length_exceeded",
                err(400).with_code("context_length_exceeded"),
                false,
                R::ContextOverflow,
            ),
            (
                "400 overflow in text",
                err(400)
                    .with_provider_message("This model's maximum context length is 8192 tokens"),
                false,
                R::ContextOverflow,
            ),
            ("401", err(401), false, R::Auth),
            ("403", err(403), false, R::Auth),
            (
                "404 unknown model",
                err(404).with_code("model_not_found"),
                false,
                R::UnknownModel,
            ),
            ("418 other 4xx", err(418), false, R::ClientError),
            (
                "unbuildable request",
                ModelError::invalid_request("bad url"),
                false,
                R::InvalidRequest,
            ),
            (
                "x-should-retry true on 400",
                err(400).with_should_retry(true),
                true,
                R::InvalidRequest,
            ),
            (
                "x-should-retry true cannot revive an overflow",
                err(400)
                    .with_code("context_length_exceeded")
                    .with_should_retry(true),
                false,
                R::ContextOverflow,
            ),
            (
                "x-should-retry false on 503",
                err(503).with_should_retry(false),
                false,
                R::ServerError,
            ),
        ];
        for (name, error, retryable, reason) in rows {
            let c = classify(&error);
            assert_eq!((c.retryable, c.reason), (retryable, reason), "row {name}");
        }
    }

    #[test]
    fn classify_passes_the_providers_retry_after_through_up_to_a_day() {
        let c = classify(&err(429).with_retry_after(Duration::from_secs(3600)));
        assert_eq!(c.retry_after, Some(Duration::from_secs(3600)));
        let c = classify(&err(429).with_retry_after(Duration::MAX));
        assert_eq!(c.retry_after, Some(crate::retry::MAX_RETRY_AFTER));
    }
}
