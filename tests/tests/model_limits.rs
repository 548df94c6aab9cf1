//! Issue 15's symptoms, one test each, through `OpenAiCompatible` + `Router` against the
//! loopback fake provider (real time, short deadlines). Each failed on the code before the
//! change: the body text or wording is exactly the one the issue quotes.

mod support;

use std::time::Duration;

use mesh_egress::ledger::{LedgerRecord, RecoveryReport};
use mesh_egress::model::{
    ChatMessage, ChatRequest, Jitter, OpenAiCompatible, RetryConfig, Route, Router,
};
use mesh_egress::testing::{FakeProvider, FakeResponse};
use mesh_egress::{Attribution, Turn};

const MAX_WAIT: Duration = Duration::from_millis(300);

fn config() -> RetryConfig {
    RetryConfig::default()
        .with_attempt_timeout(Some(Duration::from_secs(2)))
        .with_total_deadline(Duration::from_secs(10))
        .with_base_delay(Duration::from_millis(20))
        .with_max_delay(MAX_WAIT)
}

/// Routes `primary` (8k window) then `fallback` (200k window).
fn router(provider: &FakeProvider) -> Router<OpenAiCompatible> {
    let connector = OpenAiCompatible::with_timeouts(
        provider.base_url(),
        Duration::from_secs(5),
        Duration::from_millis(500),
    )
    .expect("valid base url");
    Router::with_routes(
        connector,
        Route::new("primary").with_context_window(8_192),
        [Route::new("fallback").with_context_window(200_000)],
        config(),
    )
    .with_jitter(Jitter::fixed(0.0))
}

/// Plays `first`, then answers; returns the models asked and the recovery report.
async fn run(first: FakeResponse) -> (Vec<String>, RecoveryReport) {
    let provider = FakeProvider::start([first])
        .await
        .expect("fake provider")
        .otherwise(FakeResponse::completion("answered"));
    let turn = Turn::new(Attribution::new("agent", "conv", "run"));
    let request = ChatRequest::new(vec![ChatMessage::user("status?")]);
    let completion = router(&provider)
        .complete(&turn, &request)
        .await
        .expect("recovered");
    assert_eq!(completion.content.as_deref(), Some("answered"));
    let models = provider
        .received()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or("?").to_owned())
        .collect();
    let report = turn
        .ledger()
        .entries()
        .into_iter()
        .find_map(|e| match e.into_record() {
            LedgerRecord::Recovery(r) => Some(r),
            _ => None,
        })
        .expect("a recovery row");
    (models, report)
}

fn first_outcome(report: &RecoveryReport) -> (String, Option<Duration>) {
    let first = report.attempts().iter().next().expect("an attempt");
    (first.outcome.to_string(), first.wait)
}

#[tokio::test]
async fn an_azure_per_minute_429_with_a_quota_increase_link_is_retried_on_the_same_route() {
    let body = r#"{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 60 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}"#;
    let (models, report) = run(FakeResponse::raw(429, body)).await;
    assert_eq!(models, ["primary", "primary"]);
    // The 60 s in the message is honoured, clamped to the max wait.
    assert_eq!(
        first_outcome(&report),
        ("rate_limited".to_owned(), Some(MAX_WAIT))
    );
}

#[tokio::test]
async fn a_groq_tokens_per_minute_429_with_a_billing_link_waits_its_hint() {
    let body = r#"{"error":{"message":"Rate limit reached for model `llama-3.1-8b-instant` in organization `org_01j5b4pz9jff492fq686vypsx6` service tier `on_demand` on tokens per minute (TPM): Limit 6000, Used 5034, Requested 1443. Please try again in 0.12s. Need more tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing","type":"tokens","code":"rate_limit_exceeded"}}"#;
    let (models, report) = run(FakeResponse::raw(429, body)).await;
    assert_eq!(models, ["primary", "primary"]);
    // "try again in 0.12s" is used (no header was sent): longer than the 20 ms backoff step.
    assert_eq!(
        first_outcome(&report),
        ("rate_limited".to_owned(), Some(Duration::from_millis(120)))
    );
}

#[tokio::test]
async fn a_together_queries_per_minute_429_with_a_billing_link_is_retried() {
    let body = r#"{"error":{"message":"You have been rate limited. Your rate limit is 60 queries per minute. Please navigate to https://api.together.xyz/settings/billing to upgrade to a paid plan.","type":"credit_limit","param":null,"code":null}}"#;
    let (models, report) = run(FakeResponse::raw(429, body)).await;
    assert_eq!(models, ["primary", "primary"]);
    assert_eq!(first_outcome(&report).0, "rate_limited");
}

#[tokio::test]
async fn an_openai_request_too_large_is_never_retried_on_its_route_and_falls_back() {
    let body = r#"{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 36278. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
    let (models, report) = run(FakeResponse::raw(429, body)).await;
    assert_eq!(models, ["primary", "fallback"]);
    assert_eq!(
        first_outcome(&report),
        ("request_too_large".to_owned(), None)
    );
    assert_eq!(report.answered_by, Some(1));
}

#[tokio::test]
async fn an_openrouter_daily_free_model_cap_is_not_retried_and_falls_back() {
    let body = r#"{"error":{"message":"Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day","code":429}}"#;
    let (models, report) = run(FakeResponse::raw(429, body)).await;
    assert_eq!(models, ["primary", "fallback"]);
    assert_eq!(first_outcome(&report).0, "quota_exhausted");
}

#[tokio::test]
async fn quota_fallback_is_a_policy_knob() {
    let provider = FakeProvider::start([FakeResponse::raw(
        402,
        r#"{"error":{"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","code":402}}"#,
    )])
    .await
    .expect("fake provider")
    .otherwise(FakeResponse::completion("must not be asked"));
    let turn = Turn::new(Attribution::new("agent", "conv", "run"));
    let request = ChatRequest::new(vec![ChatMessage::user("status?")]);
    let result = router(&provider)
        .fallback_on_quota(false)
        .complete(&turn, &request)
        .await;
    let error = result.expect_err("quota ends recovery when fallback is off");
    assert!(!error.retryable());
    assert_eq!(provider.received().len(), 1);
}

async fn assert_overflow_falls_back_to_the_larger_window(status: u16, body: &str) {
    let (models, report) = run(FakeResponse::raw(status, body)).await;
    assert_eq!(models, ["primary", "fallback"], "{body}");
    assert_eq!(
        first_outcome(&report),
        ("context_overflow".to_owned(), None)
    );
}

#[tokio::test]
async fn geminis_input_token_count_overflow_moves_to_the_larger_window() {
    assert_overflow_falls_back_to_the_larger_window(
        400,
        r#"{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
    )
    .await;
}

#[tokio::test]
async fn tgi_and_togethers_inputs_plus_max_new_tokens_overflow_moves_to_the_larger_window() {
    assert_overflow_falls_back_to_the_larger_window(
        422,
        r#"{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 500 `max_new_tokens`","error_type":"validation"}"#,
    )
    .await;
}

#[tokio::test]
async fn a_gateway_wrapped_anthropic_overflow_moves_to_the_larger_window() {
    assert_overflow_falls_back_to_the_larger_window(
        400,
        r#"{"error":{"message":"litellm.BadRequestError: AnthropicException - b'{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 179413 + 32768 > 200000, decrease input length or `max_tokens` and try again\"}}'. Received Model Group=anthropic/claude-sonnet-4-20250514\nAvailable Model Group Fallbacks=None","type":null,"param":null,"code":"400"}}"#,
    )
    .await;
}

#[tokio::test]
async fn a_gemini_json_array_body_gives_its_retry_info_delay() {
    let body = r#"[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaValue":"250000"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.15s"}]}}]"#;
    let (models, report) = run(FakeResponse::raw(429, body)).await;
    // A per-minute quota is a rate limit, whatever the message says about billing.
    assert_eq!(models, ["primary", "primary"]);
    assert_eq!(
        first_outcome(&report),
        ("rate_limited".to_owned(), Some(Duration::from_millis(150)))
    );
}

#[tokio::test]
async fn an_openai_try_again_in_minutes_hint_is_clamped() {
    let body = r#"{"error":{"message":"Rate limit reached for gpt-4 in organization org-x on tokens per min (TPM): Limit 10000, Used 9000, Requested 3000. Please try again in 9m38.016s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
    let (models, report) = run(FakeResponse::raw(429, body)).await;
    assert_eq!(models, ["primary", "primary"]);
    assert_eq!(
        first_outcome(&report),
        ("rate_limited".to_owned(), Some(MAX_WAIT))
    );
}

#[tokio::test]
async fn the_failed_attempt_log_and_the_fallback_event_name_the_class() {
    let (logs, _guard) = support::capture();
    let body = r#"{"error":{"message":"Request too large for model `m` in organization `o` service tier `on_demand` on tokens per minute (TPM): Limit 6000, Requested 6284, please reduce your message size and try again.","type":"tokens","code":"rate_limit_exceeded"}}"#;
    let (models, _) = run(FakeResponse::raw(413, body)).await;
    assert_eq!(models, ["primary", "fallback"]);
    let failed = logs.with_message("model attempt failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].field("classification"), Some("request_too_large"));
    assert_eq!(failed[0].field("retryable"), Some("false"));
    let fallback = logs.with_message("model fallback started");
    assert_eq!(fallback.len(), 1);
    assert_eq!(fallback[0].field("reason"), Some("too_large"));
    // The provider's text stays out of the log.
    assert!(
        !logs.with_message("model attempt failed")[0]
            .fields
            .values()
            .any(|v| v.contains("Request too large"))
    );
}
