//! What a finish reason says about an answer: a normal end, or a failed attempt the provider
//! reported as a finish (a refusal or filter, a cut by the output limit), in every API's words.
//!
//! The four APIs report the end of an answer in their own vocabulary: chat completions'
//! `finish_reason` (`stop`, `length`, `tool_calls`, `content_filter`), Anthropic's
//! `stop_reason` (`end_turn`, `max_tokens`, `stop_sequence`, `tool_use`, `pause_turn`,
//! `refusal`; docs.anthropic.com/en/api/handling-stop-reasons), the Responses API's
//! `incomplete_details.reason` (`max_output_tokens`, `content_filter`) and Gemini's
//! `finishReason` (`STOP`, `MAX_TOKENS`, `SAFETY`, `RECITATION`, `LANGUAGE`, `OTHER`,
//! `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `MALFORMED_FUNCTION_CALL`, `IMAGE_SAFETY`;
//! ai.google.dev/api/generate-content#FinishReason). Peers have shipped these as successes
//! (a filtered answer as an empty reply, a cut answer as a whole one); here each is a failed
//! attempt of its own kind, decided once for every connector: [`usable`](super::wire) for a
//! whole completion, [`ModelStream`](super::ModelStream) for a stream.

use super::error::{ModelError, ModelErrorKind};

/// The failure a finish reason reports, if it reports one. `OTHER` (Gemini) is a failure only
/// when nothing usable came with it, which the caller decides (`empty`).
pub(crate) fn verdict(reason: &str, empty: bool) -> Option<ModelErrorKind> {
    match reason {
        // The healthy ends, asked first.
        "stop" | "end_turn" | "STOP" | "tool_calls" | "tool_use" | "stop_sequence" => None,
        "length" | "max_tokens" | "MAX_TOKENS" | "max_output_tokens" => {
            Some(ModelErrorKind::Truncated)
        }
        "content_filter" | "refusal" | "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT"
        | "BLOCKLIST" | "SPII" | "IMAGE_SAFETY" | "LANGUAGE" => Some(ModelErrorKind::Refused),
        "OTHER" if empty => Some(ModelErrorKind::Refused),
        _ => None,
    }
}

/// The error a failing finish becomes: its kind, with the provider's word as the code (for
/// the operator's cause; classification reads the kind).
pub(crate) fn error(kind: ModelErrorKind, reason: &str) -> ModelError {
    ModelError::new(kind).with_code(reason)
}

/// `reason`'s verdict as an error, if it reports a failure.
pub(crate) fn failure(reason: Option<&str>, empty: bool) -> Option<ModelError> {
    let reason = reason?;
    verdict(reason, empty).map(|kind| error(kind, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_s_cut_and_refusal_words_fail_and_their_normal_ends_pass() {
        for word in ["length", "max_tokens", "MAX_TOKENS", "max_output_tokens"] {
            assert_eq!(
                verdict(word, false),
                Some(ModelErrorKind::Truncated),
                "{word}"
            );
        }
        for word in [
            "content_filter",
            "refusal",
            "SAFETY",
            "RECITATION",
            "SPII",
            "BLOCKLIST",
        ] {
            assert_eq!(
                verdict(word, false),
                Some(ModelErrorKind::Refused),
                "{word}"
            );
        }
        for word in [
            "stop",
            "end_turn",
            "STOP",
            "tool_calls",
            "tool_use",
            "pause_turn",
        ] {
            assert_eq!(verdict(word, true), None, "{word}");
        }
        assert_eq!(verdict("OTHER", true), Some(ModelErrorKind::Refused));
        assert_eq!(verdict("OTHER", false), None);
        let error = failure(Some("max_tokens"), false).expect("a failure");
        assert_eq!(error.code(), Some("max_tokens"));
    }
}
