//! Property: provider error responses are hostile input. Whatever the status, headers and body,
//! `ModelError::from_http_response` and `classify` never panic, keep at most 2 KiB of provider
//! text, and hand on a wait of at most `MAX_RETRY_AFTER`.

use std::time::SystemTime;

use mesh_egress::model::{ModelError, classify};
use mesh_egress::retry::MAX_RETRY_AFTER;
use proptest::prelude::*;

/// Bodies shaped like provider errors, with hostile values in every slot.
fn body() -> impl Strategy<Value = String> {
    let text = prop_oneof![
        ".{0,200}",
        Just("Please try again in 99999999999999999999999h.".to_owned()),
        Just("retry after 1e999 seconds".to_owned()),
        Just("Limit 1, Used 0, Requested ~999999999999999999999999".to_owned()),
        Just("https://quota.example/billing per day".to_owned()),
    ];
    let value = prop_oneof![
        text.clone().prop_map(serde_json::Value::String),
        any::<i64>().prop_map(serde_json::Value::from),
        Just(serde_json::Value::Null),
        Just(serde_json::json!({"nested": [[[[1]]]]})),
    ];
    prop_oneof![
        text.clone(),
        (value.clone(), value.clone(), value.clone()).prop_map(|(m, c, t)| {
            serde_json::json!({"error": {"message": m, "code": c, "type": t}}).to_string()
        }),
        (value.clone(), text.clone()).prop_map(|(m, delay)| {
            serde_json::json!([{"error": {"message": m, "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": delay, "quotaValue": m}]}
            ]}}])
            .to_string()
        }),
        (1usize..3000).prop_map(|depth| format!("{}{}", "[".repeat(depth), "]".repeat(depth))),
        (value, text).prop_map(|(e, m)| serde_json::json!({"error": e, "message": m}).to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_error_response_reads_without_panic_and_within_bounds(
        status in 100u16..1000,
        retry_after in prop_oneof![".{0,20}", Just("1e400".to_owned()), Just("18446744073709551616".to_owned())],
        reset in ".{0,20}",
        body in body(),
    ) {
        let headers = [
            ("retry-after", retry_after.as_str()),
            ("retry-after-ms", retry_after.as_str()),
            ("x-ratelimit-reset-tokens", reset.as_str()),
            ("x-ratelimit-remaining-tokens", "0"),
        ];
        let error = ModelError::from_http_response(
            status,
            |name| headers.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            body.as_bytes(),
            SystemTime::now(),
        );
        let c = classify(&error);
        prop_assert!(c.retry_after.is_none_or(|d| d <= MAX_RETRY_AFTER));
        prop_assert!(error.provider_message().is_none_or(|m| m.len() <= 2048));
        let _ = c.reason.as_str();
    }

}

#[test]
fn a_huge_wait_in_a_message_is_clamped_not_overflowed() {
    let error = ModelError::from_http_response(
        429,
        |_| None,
        br#"{"error":{"message":"Please try again in 99999999h."}}"#,
        SystemTime::now(),
    );
    assert_eq!(error.retry_after(), Some(MAX_RETRY_AFTER));
}
