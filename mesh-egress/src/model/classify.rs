//! [`classify`]: retryable or terminal, decided from what the connector already knows, and the
//! provider's `Retry-After` parsed without ever panicking.

use std::time::Duration;

use super::error::{ModelError, ModelErrorKind};

/// Why a model attempt failed, as a stable label for logs and the ledger (never provider text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureReason {
    /// HTTP 5xx.
    ServerError,
    /// HTTP 429 meaning "slow down".
    RateLimited,
    /// HTTP 408 or a transport timeout.
    RequestTimeout,
    /// The Router's per-attempt bound (attempt timeout or route share) ran out.
    AttemptTimeout,
    /// Refused, reset or closed mid-response.
    Connection,
    /// No text and no tool call.
    EmptyCompletion,
    /// A tool call that still failed to parse after the connector's one repair.
    MalformedToolCall,
    /// A body that is not a chat completion.
    InvalidResponse,
    /// HTTP 400 with a real validation error, or a request that could not be built.
    InvalidRequest,
    /// HTTP 401/403.
    Auth,
    /// The request does not fit the model's context window.
    ContextOverflow,
    /// HTTP 429 meaning exhausted quota or billing: waiting will not help.
    QuotaExhausted,
    /// HTTP 404: the model does not exist on this provider.
    UnknownModel,
    /// Another 4xx (409 conflicts are retryable, the rest terminal).
    ClientError,
}

impl FailureReason {
    /// A stable snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ServerError => "server_error",
            Self::RateLimited => "rate_limited",
            Self::RequestTimeout => "request_timeout",
            Self::AttemptTimeout => "attempt_timeout",
            Self::Connection => "connection",
            Self::EmptyCompletion => "empty_completion",
            Self::MalformedToolCall => "malformed_tool_call",
            Self::InvalidResponse => "invalid_response",
            Self::InvalidRequest => "invalid_request",
            Self::Auth => "auth",
            Self::ContextOverflow => "context_overflow",
            Self::QuotaExhausted => "quota_exhausted",
            Self::UnknownModel => "unknown_model",
            Self::ClientError => "client_error",
        }
    }
}

/// The verdict on one failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    /// Whether another attempt could succeed without changing the request.
    pub retryable: bool,
    /// Why it failed.
    pub reason: FailureReason,
    /// The wait the provider asked for, unclamped (the Router clamps it).
    pub retry_after: Option<Duration>,
}

/// Classifies a failed model call. Pure: the same error always gets the same verdict.
///
/// | failure | verdict |
/// |---|---|
/// | 5xx, 408, 409 | retryable |
/// | 429 | retryable, unless the code or text says quota/billing (`insufficient_quota`): terminal |
/// | connection refused/reset/closed, transport timeout | retryable |
/// | empty completion, tool call unparseable after the repair, undecodable body | retryable |
/// | 400 (or 413) whose code or text is a context overflow (`context_length_exceeded`) | terminal, `context_overflow` |
/// | other 400, 422, a request that could not be built | terminal |
/// | 401, 403 | terminal |
/// | 404 | terminal (unknown model) |
/// | other 4xx | terminal |
///
/// A provider's `x-should-retry` header, when present, overrides the status-code rule for HTTP
/// failures. The provider's `Retry-After` is passed through unclamped.
///
/// ```
/// use mesh_egress::model::{classify, FailureReason, ModelError};
/// let c = classify(&ModelError::status(429).with_code("insufficient_quota"));
/// assert!(!c.retryable);
/// assert_eq!(c.reason, FailureReason::QuotaExhausted);
/// assert!(classify(&ModelError::status(503)).retryable);
/// ```
pub fn classify(error: &ModelError) -> Classification {
    let (retryable, reason) = match error.kind() {
        ModelErrorKind::Status(status) => {
            let (retryable, reason) = classify_status(status, error);
            (error.should_retry().unwrap_or(retryable), reason)
        }
        ModelErrorKind::Connection => (true, FailureReason::Connection),
        ModelErrorKind::Timeout => (true, FailureReason::RequestTimeout),
        ModelErrorKind::EmptyCompletion => (true, FailureReason::EmptyCompletion),
        ModelErrorKind::MalformedToolCall => (true, FailureReason::MalformedToolCall),
        ModelErrorKind::InvalidResponse => (true, FailureReason::InvalidResponse),
        ModelErrorKind::InvalidRequest => (false, FailureReason::InvalidRequest),
    };
    Classification {
        retryable,
        reason,
        retry_after: error.retry_after(),
    }
}

fn classify_status(status: u16, error: &ModelError) -> (bool, FailureReason) {
    match status {
        429 if mentions(error, QUOTA_MARKERS) => (false, FailureReason::QuotaExhausted),
        429 => (true, FailureReason::RateLimited),
        400 | 413 | 422 if mentions(error, OVERFLOW_MARKERS) => {
            (false, FailureReason::ContextOverflow)
        }
        400 | 422 => (false, FailureReason::InvalidRequest),
        401 | 403 => (false, FailureReason::Auth),
        404 => (false, FailureReason::UnknownModel),
        408 => (true, FailureReason::RequestTimeout),
        409 => (true, FailureReason::ClientError),
        500..=599 => (true, FailureReason::ServerError),
        _ => (false, FailureReason::ClientError),
    }
}

const QUOTA_MARKERS: &[&str] = &[
    "insufficient_quota",
    "quota",
    "billing",
    "insufficient credits",
    "insufficient_credits",
];

const OVERFLOW_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
];

/// Whether the provider's code or text contains one of `markers` (ASCII case-insensitive).
fn mentions(error: &ModelError, markers: &[&str]) -> bool {
    [error.code(), error.provider_message()]
        .into_iter()
        .flatten()
        .any(|text| {
            let text = text.to_ascii_lowercase();
            markers.iter().any(|m| text.contains(m))
        })
}

pub use crate::retry::parse_retry_after;

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
    fn classify_passes_the_providers_retry_after_through_unclamped() {
        let c = classify(&err(429).with_retry_after(Duration::from_secs(3600)));
        assert_eq!(c.retry_after, Some(Duration::from_secs(3600)));
    }
}
