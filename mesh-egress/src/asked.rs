//! What the person's own message makes an answer: text that looks like machinery is theirs when
//! they quoted it (a reply that repeats what they pasted) or asked how it is written (a
//! question about tool calling shown an example). A leaf, the one notion Layer A and the gate
//! share: Layer A does not fail an attempt whose bare-JSON or marked-up call the person quoted
//! or asked for, and the gate lowers a tool-markup or trace finding the same way. Inside code,
//! the other half of "not machinery here", is [`code_region`](crate::code_region)'s.

/// The most of a reply compared with the person's message (a quoted call is short; a long
/// reply that merely contains one is not a quote).
const MAX_QUOTE: usize = 16 * 1024;

/// Words that make a question about how tool calling (or its JSON) is written.
pub(crate) const TOOL_CALL_TOPICS: &[&str] = &[
    "tool call",
    "tool-call",
    "tool_call",
    "function call",
    "function-call",
    "function_call",
    "tool use",
    "chat template",
    "tool parser",
    "json schema",
    "json format",
    "json example",
    "example json",
];

/// Whether the (lowercased) `user_lower` asks a question naming one of `topics`: a `?`, or a
/// message opening with `what`, `why`, `how`, `explain` or `show`.
pub(crate) fn asks(user_lower: &str, topics: &[&str]) -> bool {
    let question = user_lower.contains('?')
        || ["what", "why", "how", "explain", "show"]
            .iter()
            .any(|w| user_lower.trim_start().starts_with(w));
    question && topics.iter().any(|t| user_lower.contains(t))
}

/// Whether `user` holds `text` (blanks aside, case as written): the reply repeats what the
/// person pasted.
pub(crate) fn quotes(user: &str, text: &str) -> bool {
    let text = text.trim();
    if text.is_empty() || text.len() > MAX_QUOTE || user.len() < text.len() / 2 {
        return false;
    }
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let text = squeeze(text);
    !text.is_empty() && squeeze(user).contains(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_about_the_format_asks_and_a_request_does_not() {
        assert!(asks(
            "what json does a function call send?",
            TOOL_CALL_TOPICS
        ));
        assert!(asks("show me an example json for it", TOOL_CALL_TOPICS));
        assert!(!asks("what's the weather in paris?", TOOL_CALL_TOPICS));
        assert!(
            !asks("book the tool call room.", TOOL_CALL_TOPICS),
            "not a question"
        );
    }

    #[test]
    fn a_reply_is_quoted_when_the_message_holds_it_blanks_aside() {
        let call = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
        let user = r#"Echo this back exactly: {"name":"get_weather",
            "arguments":{"city":"Paris"}}"#;
        assert!(quotes(user, call));
        assert!(!quotes("What's the weather?", call));
        assert!(!quotes(user, "   "));
    }
}
