//! [`ModelError`]: why one model call failed, as the connector saw it.

use std::fmt;
use std::time::Duration;

use crate::egress::Cause;

use crate::retry::MAX_RETRY_AFTER;

/// What kind of failure a [`ModelError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The provider answered with a non-success HTTP status.
    Status(u16),
    /// The connection was refused, reset or closed before a whole response arrived.
    Connection,
    /// The request timed out in the transport.
    Timeout,
    /// The model answered with no text and no tool call.
    EmptyCompletion,
    /// A tool-call decision still failed to parse after the connector's one in-attempt repair.
    MalformedToolCall,
    /// The response could not be decoded (not the chat-completions shape).
    InvalidResponse,
    /// The request could not be built or sent (a bad base URL, a bad header value).
    InvalidRequest,
    /// The response body was larger than the connector's cap for it (a completion or an error
    /// body); the read stopped at the cap.
    ResponseTooLarge,
    /// The provider answered but refused or filtered the answer: a refusal stop, a content
    /// filter, a blocked prompt, a safety or recitation finish with nothing usable.
    Refused,
    /// The answer stopped at the output-token limit.
    Truncated,
}

/// How long the provider's exhausted limit lasts, from a structured field (Gemini's
/// `QuotaFailure.violations[].quotaId`, `ErrorInfo.metadata.quota_limit`), never from prose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum QuotaWindow {
    /// A per-second limit: waiting helps.
    PerSecond,
    /// A per-minute limit: waiting helps.
    PerMinute,
    /// A per-hour limit.
    PerHour,
    /// A per-day (or longer) cap: waiting on this route will not help this turn.
    PerDay,
}

/// A structured quota violation the provider reported (Gemini's `QuotaFailure` and `ErrorInfo`
/// details). Several violations fold into one: the longest window and the smallest limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QuotaFailure {
    /// The longest window among the violations, if any names one.
    pub window: Option<QuotaWindow>,
    /// The smallest limit among the violations, if any states one (`0`: no quota at all).
    pub limit: Option<u64>,
}

/// Why one model call failed.
///
/// It carries what [`classify`](super::classify) needs (status, provider error code,
/// `Retry-After`, `x-should-retry`) and, separately, the provider's own text. That text is only
/// ever shown by this error's `Display`, which is reached through the
/// [`EgressError`](crate::EgressError)'s internal cause; logs and the ledger use the
/// classification instead.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::model::{ModelError, ModelErrorKind};
/// let err = ModelError::status(429)
///     .with_code("rate_limit_exceeded")
///     .with_retry_after(Duration::from_secs(2));
/// assert_eq!(err.kind(), ModelErrorKind::Status(429));
/// assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
/// ```
pub struct ModelError {
    kind: ModelErrorKind,
    should_retry: Option<bool>,
    retry_after: Option<Duration>,
    // What the provider's body said, boxed: most failures (resets, timeouts, a bare 503) have
    // none, and the error travels inside every `Result<Completion, ModelError>`.
    details: Option<Box<ProviderDetails>>,
    source: Option<Cause>,
}

/// What a provider's error body said.
#[derive(Default)]
struct ProviderDetails {
    code: Option<String>,
    error_type: Option<String>,
    provider_status: Option<String>,
    quota: Option<QuotaFailure>,
    provider_message: Option<String>,
}

impl ModelError {
    /// A failure of `kind`, with nothing else known.
    pub fn new(kind: ModelErrorKind) -> Self {
        Self {
            kind,
            should_retry: None,
            retry_after: None,
            details: None,
            source: None,
        }
    }

    /// The provider answered HTTP `status`.
    pub fn status(status: u16) -> Self {
        Self::new(ModelErrorKind::Status(status))
    }

    /// The connection failed (refused, reset, closed mid-response).
    pub fn connection(source: impl Into<Cause>) -> Self {
        Self::new(ModelErrorKind::Connection).with_source(source)
    }

    /// The transport timed out.
    pub fn timeout() -> Self {
        Self::new(ModelErrorKind::Timeout)
    }

    /// The model answered with nothing usable.
    pub fn empty_completion() -> Self {
        Self::new(ModelErrorKind::EmptyCompletion)
    }

    /// A tool call that did not parse even after the one repair.
    pub fn malformed_tool_call() -> Self {
        Self::new(ModelErrorKind::MalformedToolCall)
    }

    /// The response could not be decoded.
    pub fn invalid_response(source: impl Into<Cause>) -> Self {
        Self::new(ModelErrorKind::InvalidResponse).with_source(source)
    }

    /// The request could not be built or sent.
    pub fn invalid_request(source: impl Into<Cause>) -> Self {
        Self::new(ModelErrorKind::InvalidRequest).with_source(source)
    }

    /// The provider's error code (e.g. `context_length_exceeded`, `insufficient_quota`).
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.details_mut().code = Some(code.into());
        self
    }

    /// The response body was larger than `cap` bytes, so the connector stopped reading it.
    pub fn response_too_large(cap: usize) -> Self {
        Self::new(ModelErrorKind::ResponseTooLarge)
            .with_source(format!("response body larger than its cap of {cap} bytes"))
    }

    /// The provider's error type (`error.type`: `rate_limit_error`, `insufficient_quota`,
    /// `tokens`, `credit_limit`, ...).
    pub fn with_error_type(mut self, error_type: impl Into<String>) -> Self {
        self.details_mut().error_type = Some(error_type.into());
        self
    }

    /// The provider's status word (Google's `error.status`: `RESOURCE_EXHAUSTED`,
    /// `INVALID_ARGUMENT`, `UNAVAILABLE`, ...).
    pub fn with_provider_status(mut self, status: impl Into<String>) -> Self {
        self.details_mut().provider_status = Some(status.into());
        self
    }

    /// The structured quota violation the provider reported.
    pub fn with_quota_failure(mut self, quota: QuotaFailure) -> Self {
        self.details_mut().quota = Some(quota);
        self
    }

    /// The wait the provider asked for, clamped to [`MAX_RETRY_AFTER`].
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait.min(MAX_RETRY_AFTER));
        self
    }

    /// The provider's `x-should-retry` answer, which overrides the status-code rule.
    pub fn with_should_retry(mut self, should_retry: bool) -> Self {
        self.should_retry = Some(should_retry);
        self
    }

    /// The provider's own error text (kept for the internal cause only).
    pub fn with_provider_message(mut self, message: impl Into<String>) -> Self {
        self.details_mut().provider_message = Some(message.into());
        self
    }

    /// The underlying error.
    pub fn with_source(mut self, source: impl Into<Cause>) -> Self {
        self.source = Some(source.into());
        self
    }

    fn details_mut(&mut self) -> &mut ProviderDetails {
        self.details.get_or_insert_with(Box::default)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// The HTTP status, for a status failure.
    pub fn http_status(&self) -> Option<u16> {
        match self.kind {
            ModelErrorKind::Status(status) => Some(status),
            _ => None,
        }
    }

    /// The provider's error code, if it sent one.
    pub fn code(&self) -> Option<&str> {
        self.details.as_ref()?.code.as_deref()
    }

    /// The provider's error type, if it sent one.
    pub fn error_type(&self) -> Option<&str> {
        self.details.as_ref()?.error_type.as_deref()
    }

    /// The provider's status word, if it sent one.
    pub fn provider_status(&self) -> Option<&str> {
        self.details.as_ref()?.provider_status.as_deref()
    }

    /// The structured quota violation, if the provider reported one.
    pub fn quota_failure(&self) -> Option<QuotaFailure> {
        self.details.as_ref()?.quota
    }

    /// The wait the provider asked for, if it asked (at most [`MAX_RETRY_AFTER`]).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The provider's `x-should-retry` answer, if it sent one.
    pub fn should_retry(&self) -> Option<bool> {
        self.should_retry
    }

    /// The provider's own error text. **Internal**: for the error-tracking event only.
    pub fn provider_message(&self) -> Option<&str> {
        self.details.as_ref()?.provider_message.as_deref()
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ModelErrorKind::Status(status) => write!(f, "model provider answered HTTP {status}")?,
            ModelErrorKind::Connection => f.write_str("model connection failed")?,
            ModelErrorKind::Timeout => f.write_str("model request timed out")?,
            ModelErrorKind::EmptyCompletion => f.write_str("model returned an empty completion")?,
            ModelErrorKind::MalformedToolCall => {
                f.write_str("model tool call did not parse after one repair")?;
            }
            ModelErrorKind::InvalidResponse => {
                f.write_str("model response could not be decoded")?
            }
            ModelErrorKind::InvalidRequest => f.write_str("model request could not be sent")?,
            ModelErrorKind::ResponseTooLarge => {
                f.write_str("model response body was larger than its cap")?;
            }
            ModelErrorKind::Refused => f.write_str("model refused or filtered the answer")?,
            ModelErrorKind::Truncated => f.write_str("model answer stopped at its output limit")?,
        }
        if let Some(code) = self.code() {
            write!(f, " ({code})")?;
        }
        if let Some(message) = self.provider_message() {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ModelError {
    // Like `EgressError`, the provider's text stays out of `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelError")
            .field("kind", &self.kind)
            .field("code", &self.code())
            .field("error_type", &self.error_type())
            .field("provider_status", &self.provider_status())
            .field("quota", &self.quota_failure())
            .field("retry_after", &self.retry_after)
            .field("should_retry", &self.should_retry)
            .finish_non_exhaustive()
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
