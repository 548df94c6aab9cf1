//! [`FailureReason`]: why one model attempt failed, as Layer A classifies it and the ledger
//! records it. A leaf value, so the ledger names a failure without knowing the classifier (as
//! `engagement` is for the ingress classifier's decisions).

/// Why a model attempt failed, as a stable label for logs and the ledger (never provider text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// The serde names are the `as_str` labels (the ledger's tests check every one).
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
// Named as `model::FailureReason`; without the `model` feature no attempt is ever recorded, so the
// ledger's `AttemptOutcome::Failed` that shows it is never built.
#[cfg_attr(not(feature = "model"), allow(unnameable_types))]
pub enum FailureReason {
    /// HTTP 5xx.
    ServerError,
    /// HTTP 429 meaning "slow down".
    RateLimited,
    /// HTTP 408 or a transport timeout.
    RequestTimeout,
    /// The Router's per-attempt bound (attempt timeout or route share) ran out.
    AttemptTimeout,
    /// A stream sent no content within the first-token timeout (or the attempt timeout,
    /// which for a stream bounds the time to the first token): the route is stalled.
    FirstTokenTimeout,
    /// A stream fell silent between two content chunks for longer than the idle timeout: the
    /// route is stalled.
    StreamIdleTimeout,
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
    /// An exhausted quota, credit balance or per-day cap (402, `insufficient_quota`, a Google
    /// per-day `QuotaFailure`, ...): waiting will not help on this route; another provider may
    /// still have quota.
    QuotaExhausted,
    /// The request alone is larger than the route's per-request or per-minute token limit (413,
    /// OpenAI's and Groq's "Request too large ... Limit 30000, Requested 36278"): it can never
    /// succeed on this route, however long one waits.
    RequestTooLarge,
    /// The response body was larger than the connector's cap.
    ResponseTooLarge,
    /// HTTP 404: the model does not exist on this provider.
    UnknownModel,
    /// Another 4xx (409 conflicts are retryable, the rest terminal).
    ClientError,
    /// The provider refused or filtered the answer (Anthropic's `refusal` stop, a Responses
    /// `content_filter`, Gemini's blocked prompt or `SAFETY`/`RECITATION` finish): terminal for
    /// the route; another model may answer.
    Refused,
    /// The answer was cut by the output limit (`max_tokens`, `length`, `MAX_TOKENS`,
    /// `max_output_tokens`): terminal for the route; what was shown of it stays.
    Truncated,
}

impl FailureReason {
    /// A stable snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ServerError => "server_error",
            Self::RateLimited => "rate_limited",
            Self::RequestTimeout => "request_timeout",
            Self::AttemptTimeout => "attempt_timeout",
            Self::FirstTokenTimeout => "first_token_timeout",
            Self::StreamIdleTimeout => "stream_idle_timeout",
            Self::Connection => "connection",
            Self::EmptyCompletion => "empty_completion",
            Self::MalformedToolCall => "malformed_tool_call",
            Self::InvalidResponse => "invalid_response",
            Self::InvalidRequest => "invalid_request",
            Self::Auth => "auth",
            Self::ContextOverflow => "context_overflow",
            Self::QuotaExhausted => "quota_exhausted",
            Self::RequestTooLarge => "request_too_large",
            Self::ResponseTooLarge => "response_too_large",
            Self::UnknownModel => "unknown_model",
            Self::ClientError => "client_error",
            Self::Refused => "refused",
            Self::Truncated => "truncated",
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
