//! [`ModelError::from_http_response`]: what a provider's error response says, read from every
//! place providers put it.
//!
//! Providers and gateways disagree on the shape of an error body. Seen in the corpus
//! (`tests/tests/data/provider_errors.json`):
//!
//! - OpenAI and most gateways: `{"error": {"message", "type", "code"}}`;
//! - Anthropic: `{"type": "error", "error": {"type", "message"}}`;
//! - Google: `{"error": {"code", "message", "status", "details": [...]}}`, and from some
//!   endpoints the same object inside a one-element JSON array (`[{"error": {...}}]`,
//!   google-gemini/gemini-cli#6678);
//! - vLLM and Mistral: the error object at the top level (`{"object": "error", "message", ...}`,
//!   vllm-project/vllm#20409); OpenRouter through some gateways: a bare `{"message": ...}`;
//! - TGI and Ollama: `{"error": "text"}` (huggingface/llm-vscode#94, nano-step/nano-brain#208);
//! - Mistral's 422: a `message` that is itself an object (editor-code-assistant/eca#231);
//! - HTML from a CDN in front of the provider (n3d1117/chatgpt-telegram-bot#637);
//! - Gemini's OpenAI-compatible endpoint: an OpenAI-shaped body whose `error.message` is the
//!   native Google document, pretty-printed, as a string (RooCodeInc/Roo-Code#3883). The
//!   document inside is read like a body of its own and its fields win over the wrapper's
//!   (the wrapper's `code` and `status` are generic; the document's `details` say which quota).
//!
//! The body is read only as deep as these shapes go: nothing here recurses on the body's
//! nesting, a document inside a message is read only when it is small
//! ([`MAX_NESTED_DOCUMENT`] bytes) and at most [`MAX_NESTED_DEPTH`] levels down, by a loop, and
//! every text kept is truncated.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::error::{ModelError, QuotaFailure, QuotaWindow};
use crate::retry::{parse_duration_text, parse_retry_after, parse_wait_in_text};

/// Provider error text kept for the internal cause, at most (bytes).
pub(crate) const MAX_PROVIDER_TEXT: usize = 2048;

/// The largest error document read from inside a message (bytes): a real one is a few KiB.
pub(crate) const MAX_NESTED_DOCUMENT: usize = 64 * 1024;

/// How many error documents inside messages are read, one inside the next: one gateway
/// wrapping a provider is the shape seen; two leaves room for a proxy in front of it.
pub(crate) const MAX_NESTED_DEPTH: usize = 2;

impl ModelError {
    /// The error a provider's non-success response describes: HTTP `status`, its headers
    /// (`header` looks one up by lowercase name) and its `body` (any of the shapes in this
    /// module's docs, JSON or not), with `now` for HTTP-date `Retry-After` values.
    ///
    /// It keeps what [`classify`](super::classify) decides on: the error `code`, `type` and
    /// Google's `status`, a structured quota violation (`QuotaFailure`, `ErrorInfo`), the
    /// `x-should-retry` header, and the provider's wait, taken from the first of: the
    /// `retry-after-ms` / `x-ms-retry-after-ms` / `Retry-After` headers, Google's
    /// `RetryInfo.retryDelay`, a "try again in 4.77s" / "retry after 9 seconds" in the message,
    /// and, only when nothing else gives one, `x-ratelimit-reset-requests` / `-tokens` (the one
    /// whose `remaining` is `0`, else the longer). The wait is not clamped here; the Router
    /// clamps it.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use mesh_egress::model::{classify, FailureReason, ModelError};
    /// let body = br#"[{"error": {"code": 429, "message": "Resource exhausted.",
    ///     "status": "RESOURCE_EXHAUSTED", "details": [
    ///       {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}]}}]"#;
    /// let error = ModelError::from_http_response(429, |_| None, body, SystemTime::now());
    /// assert_eq!(error.provider_status(), Some("RESOURCE_EXHAUSTED"));
    /// assert_eq!(error.retry_after(), Some(Duration::from_secs(26)));
    /// assert_eq!(classify(&error).reason, FailureReason::RateLimited);
    /// ```
    pub fn from_http_response<'h>(
        status: u16,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
        now: SystemTime,
    ) -> Self {
        let mut error = Self::status(status);
        match header("x-should-retry").map(str::trim) {
            Some("true") => error = error.with_should_retry(true),
            Some("false") => error = error.with_should_retry(false),
            _ => {}
        }
        let parsed = ParsedBody::read(body);
        if let Some(code) = parsed.code {
            error = error.with_code(code);
        }
        if let Some(kind) = parsed.error_type {
            error = error.with_error_type(kind);
        }
        if let Some(word) = parsed.status {
            error = error.with_provider_status(word);
        }
        if let Some(quota) = parsed.quota {
            error = error.with_quota_failure(quota);
        }
        let wait = parse_retry_after(&header, now)
            .or(parsed.retry_delay)
            .or_else(|| parsed.message.as_deref().and_then(parse_wait_in_text))
            .or_else(|| ratelimit_reset(&header));
        if let Some(wait) = wait {
            error = error.with_retry_after(wait);
        }
        if let Some(message) = parsed.message {
            error = error.with_provider_message(truncate(message));
        }
        error
    }
}

/// The parts of an error body classification reads.
#[derive(Default)]
struct ParsedBody {
    message: Option<String>,
    code: Option<String>,
    error_type: Option<String>,
    status: Option<String>,
    quota: Option<QuotaFailure>,
    retry_delay: Option<Duration>,
}

impl ParsedBody {
    fn read(body: &[u8]) -> Self {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            let text = String::from_utf8_lossy(body).trim().to_owned();
            return Self {
                message: (!text.is_empty()).then_some(text),
                ..Self::default()
            };
        };
        let mut parsed = Self::of_document(value);
        // A gateway in front of a provider may put the provider's whole error document, as a
        // string, in its own message. Read inside it, a bounded number of levels, by a loop.
        for _ in 0..MAX_NESTED_DEPTH {
            let Some(inner) = parsed.message.as_deref().and_then(nested_document) else {
                break;
            };
            parsed = Self::of_document(inner).or(parsed);
        }
        parsed
    }

    /// The fields of one parsed error document.
    fn of_document(value: Value) -> Self {
        // Google sometimes wraps the error object in a one-element array.
        let value = match value {
            Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
            other => other,
        };
        let object = match value.get("error") {
            Some(Value::String(text)) => {
                return Self {
                    message: Some(text.clone()),
                    ..Self::default()
                };
            }
            Some(inner @ Value::Object(_)) => inner,
            // vLLM, Mistral and bare gateway bodies put the error fields at the top level.
            _ => &value,
        };
        let mut parsed = Self {
            message: object.get("message").and_then(text_of),
            code: object.get("code").and_then(scalar_text),
            error_type: object.get("type").and_then(scalar_text),
            status: object.get("status").and_then(scalar_text),
            ..Self::default()
        };
        if let Some(Value::Array(details)) = object.get("details") {
            parsed.read_google_details(details);
        }
        parsed
    }

    /// Each field of `self`, else `outer`'s: a document read from inside `outer`'s message is
    /// the more specific of the two.
    fn or(self, outer: Self) -> Self {
        Self {
            message: self.message.or(outer.message),
            code: self.code.or(outer.code),
            error_type: self.error_type.or(outer.error_type),
            status: self.status.or(outer.status),
            quota: self.quota.or(outer.quota),
            retry_delay: self.retry_delay.or(outer.retry_delay),
        }
    }

    /// Google's `details`: `QuotaFailure` violations, `ErrorInfo` quota metadata, `RetryInfo`.
    fn read_google_details(&mut self, details: &[Value]) {
        let mut quota: Option<QuotaFailure> = None;
        let mut add = |window: Option<QuotaWindow>, limit: Option<u64>| {
            let q = quota.get_or_insert_with(QuotaFailure::default);
            q.window = q.window.max(window);
            q.limit = match (q.limit, limit) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        for detail in details.iter().take(32) {
            let kind = detail.get("@type").and_then(Value::as_str).unwrap_or("");
            if kind.ends_with("google.rpc.QuotaFailure") {
                let violations = detail.get("violations").and_then(Value::as_array);
                for violation in violations.into_iter().flatten().take(32) {
                    let id = violation.get("quotaId").and_then(Value::as_str);
                    let limit = violation.get("quotaValue").and_then(number_text);
                    add(id.and_then(window_in_id), limit);
                }
            } else if kind.ends_with("google.rpc.ErrorInfo") {
                let metadata = detail.get("metadata");
                let limit_id = metadata
                    .and_then(|m| m.get("quota_limit"))
                    .and_then(Value::as_str);
                let limit = metadata
                    .and_then(|m| m.get("quota_limit_value"))
                    .and_then(number_text);
                if limit_id.is_some() || limit.is_some() {
                    add(limit_id.and_then(window_in_id), limit);
                }
            } else if kind.ends_with("google.rpc.RetryInfo") {
                self.retry_delay = detail
                    .get("retryDelay")
                    .and_then(Value::as_str)
                    .and_then(parse_duration_text);
            }
        }
        self.quota = quota;
    }
}

/// The error document a message holds as its whole text (`{"error": ...}`, or Google's
/// one-element array of it), if it is small enough to read; any other text, JSON or not, is
/// a message.
fn nested_document(message: &str) -> Option<Value> {
    let text = message.trim();
    if text.len() > MAX_NESTED_DOCUMENT || !(text.starts_with('{') || text.starts_with('[')) {
        return None;
    }
    // serde_json bounds its own nesting (128 levels) and fails past it: then it is text.
    let value: Value = serde_json::from_str(text).ok()?;
    let document = match &value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    matches!(
        document.get("error"),
        Some(Value::Object(_) | Value::String(_))
    )
    .then_some(value)
}

/// The window a Google quota id names (`GenerateRequestsPerDayPerProjectPerModel-FreeTier`,
/// `GenerateContentInputTokensPerModelPerMinute-FreeTier`, `Gemini25ProRequestsPerDay`).
fn window_in_id(id: &str) -> Option<QuotaWindow> {
    // The longest window named wins: "PerDayPerMinute" is not a shape Google uses, but a day cap
    // is the one that decides whether waiting helps.
    [
        ("PerDay", QuotaWindow::PerDay),
        ("PerHour", QuotaWindow::PerHour),
        ("PerMinute", QuotaWindow::PerMinute),
        ("PerSecond", QuotaWindow::PerSecond),
    ]
    .into_iter()
    .find(|(marker, _)| id.contains(marker))
    .map(|(_, window)| window)
}

/// A string field's text; an object or array (Mistral's 422 `message`) as compact JSON.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Null => None,
        other => Some(truncate(other.to_string())),
    }
}

/// A code that may be a string or a number (`"429"`, `429`, `"rate_limit_exceeded"`).
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A count written as a number or a string of digits (`"0"`, `250000`).
fn number_text(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// OpenAI's and Groq's `x-ratelimit-reset-*` headers: the reset of the exhausted limit
/// (`remaining` is `0`), else the longer of the two.
fn ratelimit_reset<'h>(header: &impl Fn(&str) -> Option<&'h str>) -> Option<Duration> {
    let limit = |kind: &str| {
        let reset = header(&format!("x-ratelimit-reset-{kind}")).and_then(parse_duration_text)?;
        let exhausted = header(&format!("x-ratelimit-remaining-{kind}"))
            .is_some_and(|remaining| remaining.trim() == "0");
        Some((exhausted, reset))
    };
    let requests = limit("requests");
    let tokens = limit("tokens");
    match (requests, tokens) {
        (Some((true, reset)), _) | (_, Some((true, reset))) => Some(reset),
        (Some((_, a)), Some((_, b))) => Some(a.max(b)),
        (Some((_, reset)), None) | (None, Some((_, reset))) => Some(reset),
        (None, None) => None,
    }
}

/// `text` cut to at most [`MAX_PROVIDER_TEXT`] bytes, at a char boundary.
pub(crate) fn truncate(mut text: String) -> String {
    if text.len() > MAX_PROVIDER_TEXT {
        let mut cut = MAX_PROVIDER_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(status: u16, headers: &[(&str, &'static str)], body: &str) -> ModelError {
        ModelError::from_http_response(
            status,
            |name| headers.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            body.as_bytes(),
            SystemTime::now(),
        )
    }

    #[test]
    fn every_body_shape_yields_its_message_and_code() {
        let openai = read(
            429,
            &[],
            r#"{"error":{"message":"quota gone","type":"insufficient_quota","code":null}}"#,
        );
        assert_eq!(openai.error_type(), Some("insufficient_quota"));
        assert_eq!(openai.code(), None);
        assert_eq!(openai.provider_message(), Some("quota gone"));
        let tgi = read(
            422,
            &[],
            r#"{"error":"Input validation error","error_type":"validation"}"#,
        );
        assert_eq!(tgi.provider_message(), Some("Input validation error"));
        let vllm = read(
            400,
            &[],
            r#"{"object":"error","message":"too long","code":400}"#,
        );
        assert_eq!(
            (vllm.provider_message(), vllm.code()),
            (Some("too long"), Some("400"))
        );
        let mistral = read(422, &[], r#"{"object":"error","message":{"detail":[1]}}"#);
        assert_eq!(mistral.provider_message(), Some(r#"{"detail":[1]}"#));
        let html = read(502, &[], "<html>502 Bad Gateway</html>");
        assert_eq!(
            html.provider_message(),
            Some("<html>502 Bad Gateway</html>")
        );
        let array = read(
            400,
            &[],
            r#"[{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT"}}]"#,
        );
        assert_eq!(array.provider_status(), Some("INVALID_ARGUMENT"));
    }

    #[test]
    fn quota_violations_fold_to_the_longest_window_and_smallest_limit() {
        let body = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
            {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
              {"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaValue":"15"},
              {"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"0"}]}]}}"#;
        let quota = read(429, &[], body).quota_failure().expect("quota");
        assert_eq!(quota.window, Some(QuotaWindow::PerDay));
        assert_eq!(quota.limit, Some(0));
    }

    #[test]
    fn the_wait_comes_from_headers_then_retry_info_then_text_then_reset_headers() {
        let body = r#"{"error":{"message":"Please try again in 4.77s.","details":[
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#;
        let header = read(429, &[("retry-after", "2")], body);
        assert_eq!(header.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(
            read(429, &[], body).retry_after(),
            Some(Duration::from_secs(26))
        );
        let text = read(
            429,
            &[("x-ratelimit-reset-tokens", "1s")],
            r#"{"error":{"message":"Please try again in 4.77s."}}"#,
        );
        assert_eq!(text.retry_after(), Some(Duration::from_millis(4770)));
        let reset = read(
            429,
            &[
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "1s"),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ],
            "{}",
        );
        assert_eq!(reset.retry_after(), Some(Duration::from_secs(1)));
    }

    /// `document` as the string in an OpenAI-shaped wrapper's `error.message`.
    fn wrapped(document: &str) -> String {
        serde_json::json!({"error": {"message": document, "code": 429, "status": "Too Many Requests"}})
            .to_string()
    }

    #[test]
    fn an_error_document_inside_a_message_is_read_and_wins_over_the_wrapper() {
        let native = r#"{"error":{"code":429,"message":"You exceeded your current quota.",
            "status":"RESOURCE_EXHAUSTED","details":[
            {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
              {"quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaValue":"250000"}]},
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#;
        let error = read(429, &[], &wrapped(&format!("{native}\n")));
        assert_eq!(error.provider_status(), Some("RESOURCE_EXHAUSTED"));
        assert_eq!(
            error.provider_message(),
            Some("You exceeded your current quota.")
        );
        assert_eq!(error.retry_after(), Some(Duration::from_secs(26)));
        let quota = error.quota_failure().expect("quota");
        assert_eq!(quota.window, Some(QuotaWindow::PerMinute));
        // Google's array form inside the message too.
        let array = read(429, &[], &wrapped(&format!("[{native}]")));
        assert_eq!(array.retry_after(), Some(Duration::from_secs(26)));
    }

    #[test]
    fn json_in_a_message_that_is_not_an_error_document_stays_the_message() {
        let error = read(422, &[], &wrapped(r#"{"detail":[{"loc":["body"]}]}"#));
        assert_eq!(
            error.provider_message(),
            Some(r#"{"detail":[{"loc":["body"]}]}"#)
        );
        assert_eq!(error.provider_status(), Some("Too Many Requests"));
    }

    #[test]
    fn nested_documents_are_read_only_to_their_depth_and_size() {
        // Each level wraps the one below as its message; the innermost names a 7 s wait.
        let mut document = r#"{"error":{"message":"innermost","details":[
            {"@type":"google.rpc.RetryInfo","retryDelay":"7s"}]}}"#
            .to_owned();
        for _ in 0..MAX_NESTED_DEPTH {
            document = wrapped(&document);
        }
        assert_eq!(
            read(429, &[], &document).retry_after(),
            Some(Duration::from_secs(7)),
            "{MAX_NESTED_DEPTH} levels are read"
        );
        let deeper = wrapped(&document);
        let error = read(429, &[], &deeper);
        assert_eq!(error.retry_after(), None, "one level more is not");
        assert!(error.provider_message().is_some_and(|m| m.starts_with('{')));
        // A document past the size cap is text, whatever it holds.
        let padding = "x".repeat(MAX_NESTED_DOCUMENT);
        let big = format!(
            r#"{{"error":{{"message":"{padding}","details":[{{"@type":"google.rpc.RetryInfo","retryDelay":"7s"}}]}}}}"#
        );
        assert_eq!(read(429, &[], &wrapped(&big)).retry_after(), None);
        // Attacker nesting inside a message is refused by the parser's own bound, not a panic.
        let hostile = format!(r#"{{"error":{}{}}}"#, "[".repeat(5_000), "]".repeat(5_000));
        let error = read(429, &[], &wrapped(&hostile));
        assert_eq!(
            error.provider_message().map(str::len),
            Some(MAX_PROVIDER_TEXT)
        );
    }

    #[test]
    fn hostile_bodies_are_bounded_and_never_panic() {
        let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(10_000));
        assert_eq!(
            read(500, &[], &long).provider_message().map(str::len),
            Some(MAX_PROVIDER_TEXT)
        );
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        // serde_json refuses nesting past its recursion limit: the body is kept as text.
        let error = read(500, &[], &deep);
        assert_eq!(
            error.provider_message().map(str::len),
            Some(MAX_PROVIDER_TEXT)
        );
        let huge_delay = r#"{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"99999999999999999999999s"}]}}"#;
        assert_eq!(read(429, &[], huge_delay).retry_after(), None);
    }
}
