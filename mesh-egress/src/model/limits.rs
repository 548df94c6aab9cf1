//! Which limit a 4xx hit: a rate limit (wait), an exhausted quota or per-day cap (leave the
//! route), a request too large for the route (leave the route), or the context window (leave
//! for a larger one). Structured fields first, message phrases only as a last resort, never
//! text inside a URL.
//!
//! Every phrase list below is matched against the provider's message lowercased with its URLs
//! removed; each names the providers whose wording it covers, with a sample in
//! `tests/tests/data/provider_errors.json`.

use super::error::{ModelError, QuotaWindow};
use crate::failure::FailureReason;

/// Error codes and types that mean "no quota or credit left", whatever the status.
const QUOTA_CODES: &[&str] = &[
    "insufficient_quota",         // OpenAI, gateways
    "insufficient_credits",       // gateways (Gitlawb/openclaude#1528)
    "billing_hard_limit_reached", // OpenAI
    "billing_not_active",         // OpenAI
];

/// Wordings of a context overflow, by provider.
const OVERFLOW_PHRASES: &[&str] = &[
    "context_length_exceeded", // OpenAI, Azure, Groq (as code or in gateway text)
    "contextwindowexceedederror", // LiteLLM's exception name inside proxied text
    "maximum context length",  // OpenAI, Azure, vLLM, DeepSeek, OpenRouter
    "exceed context limit",    // Anthropic: "input length and `max_tokens` exceed context limit"
    "prompt is too long",      // Anthropic
    "exceeds the maximum number of tokens", // Gemini: "The input token count (..) exceeds ..."
    "`inputs` tokens + `max_new_tokens` must be", // TGI, Together, Hugging Face
    "`inputs` must have less than", // TGI
    "exceeds the context length", // Ollama
    "prompt too long; exceeded", // Ollama
    "too large for model with", // Mistral
    "input is too long for requested model", // Bedrock (through gateways)
    "input tokens exceed the configured limit", // OpenAI Responses, through LiteLLM
    "reduce the length of the messages", // Groq, Cerebras, OpenAI
    "exceeds the available context size", // llama.cpp server
    "greater than the context length", // LM Studio
];

/// A per-day (or longer) window named in prose.
const DAY_PHRASES: &[&str] = &["per day", "per-day", "(rpd)", "(tpd)", "daily limit"];

/// A per-second or per-minute window named in prose.
const SHORT_WINDOW_PHRASES: &[&str] = &[
    "per minute",
    "per min",
    "per-min",
    "(tpm)",
    "(rpm)",
    "per second",
    "per-second",
    "(tps)",
    "(rps)",
];

/// Phrases that mean an exhausted quota or balance.
const QUOTA_PHRASES: &[&str] = &[
    "exceeded your current quota", // OpenAI, Gemini
    "insufficient quota",
    "insufficient credits",      // OpenRouter
    "insufficient balance",      // DeepSeek
    "credit balance is too low", // Anthropic
    "requires more credits",     // OpenRouter
];

/// The limit `error` hit, if its status and fields say which; `None` leaves the decision to
/// the status code.
pub(super) fn limit_reason(status: u16, error: &ModelError) -> Option<FailureReason> {
    let code = error.code().map(str::to_ascii_lowercase);
    let kind = error.error_type().map(str::to_ascii_lowercase);
    let has_code = |wanted: &[&str]| {
        [code.as_deref(), kind.as_deref()]
            .into_iter()
            .flatten()
            .any(|c| wanted.contains(&c))
    };
    let text = error.provider_message().map(prose).unwrap_or_default();
    let says = |phrases: &[&str]| phrases.iter().any(|p| text.contains(p));

    if has_code(&["context_length_exceeded"])
        || (matches!(status, 400 | 413 | 422) && says(OVERFLOW_PHRASES))
    {
        return Some(FailureReason::ContextOverflow);
    }
    if status == 402 || has_code(QUOTA_CODES) {
        return Some(FailureReason::QuotaExhausted);
    }
    if let Some(quota) = error.quota_failure() {
        if quota.limit == Some(0) || quota.window >= Some(QuotaWindow::PerDay) {
            return Some(FailureReason::QuotaExhausted);
        }
        if quota.window.is_some() {
            return Some(FailureReason::RateLimited);
        }
    }
    if status == 413 || text.contains("request too large") || requested_over_limit(&text) {
        return Some(FailureReason::RequestTooLarge);
    }
    if status == 403 {
        return None;
    }
    if status == 429 {
        if says(DAY_PHRASES) {
            return Some(FailureReason::QuotaExhausted);
        }
        if says(SHORT_WINDOW_PHRASES) {
            return Some(FailureReason::RateLimited);
        }
    }
    if says(QUOTA_PHRASES) {
        return Some(FailureReason::QuotaExhausted);
    }
    // Together sends `credit_limit` with its free tier's per-minute limit (togethercomputer/MoA#27),
    // which the window phrases above already caught; alone it means the credit is gone.
    if status == 429 && (has_code(&["credit_limit"]) || text.contains("billing")) {
        return Some(FailureReason::QuotaExhausted);
    }
    None
}

/// `message` lowercased, with every URL removed (a link to a quota page is not a reason).
fn prose(message: &str) -> String {
    let lower = message.to_ascii_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut rest = lower.as_str();
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()
    {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | ']'))
            .unwrap_or(tail.len());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Whether the text reports a request larger than the limit it hit, as OpenAI and Groq write
/// it: "Limit 7000, Used 0, Requested ~12903" (danielmiessler/Fabric#364). A request within the
/// limit ("Limit 6000, Used 5034, Requested 1443") is an ordinary rate limit.
fn requested_over_limit(text: &str) -> bool {
    let mut from = 0;
    while let Some(at) = text[from..].find("limit ") {
        let start = from + at + "limit ".len();
        from = start;
        let Some(limit) = leading_number(&text[start..]) else {
            continue;
        };
        let after = &text[start..];
        let window = &after[..after.len().min(80)];
        if let Some(r) = window.find("requested ") {
            let requested =
                leading_number(window[r + "requested ".len()..].trim_start_matches('~'));
            return requested.is_some_and(|requested| requested > limit);
        }
    }
    false
}

/// The integer at the start of `text` (commas allowed: "30,000"), saturating.
fn leading_number(text: &str) -> Option<u64> {
    let digits: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .take(20)
        .collect();
    if digits.is_empty() {
        None
    } else {
        Some(digits.parse().unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_not_prose() {
        assert_eq!(
            prose("Go here: https://aka.ms/oai/quotaincrease if (https://x.y/billing) ok"),
            "go here:  if () ok"
        );
    }

    #[test]
    fn a_request_is_too_large_only_when_it_exceeds_the_limit() {
        assert!(requested_over_limit(
            "limit 7000, used 0, requested ~12903. please"
        ));
        assert!(requested_over_limit(
            "limit 30000, requested 36278. the input"
        ));
        assert!(!requested_over_limit(
            "limit 6000, used 5034, requested 1443. please"
        ));
        assert!(!requested_over_limit("rate limit reached for requests"));
        assert!(!requested_over_limit(
            "limit 99999999999999999999999, requested 1"
        ));
    }
}
