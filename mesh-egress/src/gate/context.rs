//! Context from the user's message: whether a finding is something the user quoted or asked
//! about, which lowers it to low confidence.

use crate::gate::finding::Rule;

/// Whether the user's (lowercased) message holds the error the finding matched: its literal,
/// its status code, or its first line.
pub(crate) fn quoted(user_lower: &str, matched: &str, literal: Option<&str>) -> bool {
    if user_lower.is_empty() {
        return false;
    }
    if let Some(literal) = literal
        && user_lower.contains(literal)
    {
        return true;
    }
    let matched_lower = matched.to_lowercase();
    let first_line = matched_lower.lines().next().unwrap_or_default().trim();
    if first_line.len() >= 8 && user_lower.contains(first_line) {
        return true;
    }
    // The error's head, `KeyError: 'price'`, when the reply goes on to explain it.
    if let Some(head) = error_head(first_line)
        && user_lower.contains(head)
    {
        return true;
    }
    // A status code the user named ("why do I get 429?").
    three_digit_codes(&matched_lower).any(|code| contains_word(user_lower, code))
}

/// Whether the (lowercased) user message is a question naming the kind of failure `rule`
/// finds. Only rules whose names are specific enough: a question about a "failed" order says
/// nothing about failure text, a question about a panic does.
pub(crate) fn asks_about(rule: Rule, user_lower: &str) -> bool {
    let topics: &[&str] = match rule {
        Rule::RustPanic => &["panic", "unwrap", "backtrace"],
        Rule::StackTrace => &[
            "traceback",
            "stack trace",
            "stacktrace",
            "exception",
            "panic",
        ],
        // Someone asking how tool calling is written is shown how it is written.
        Rule::ToolCallMarkup => crate::asked::TOOL_CALL_TOPICS,
        Rule::ToolTrace => &[
            "tool trace",
            "tool progress",
            "action input",
            "react agent",
            "react format",
            "react prompt",
            "react loop",
            "react-style",
        ],
        _ => return false,
    };
    crate::asked::asks(user_lower, topics)
}

/// `Name: first-token` at the start of a line (`keyerror: 'price'`), if it is one.
fn error_head(line: &str) -> Option<&str> {
    let colon = line.find(": ")?;
    if colon == 0 || colon > 60 || line[..colon].contains(char::is_whitespace) {
        return None;
    }
    let rest = &line[colon + 2..];
    let token = rest.split_whitespace().next()?;
    let end = colon + 2 + token.len();
    (end >= 8).then(|| &line[..end])
}

fn three_digit_codes(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter(|w| w.len() == 3 && matches!(w.as_bytes()[0], b'1'..=b'5'))
}

fn contains_word(haystack: &str, word: &str) -> bool {
    haystack.match_indices(word).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_naming_a_panic_or_traceback_is_asking_about_it() {
        assert!(asks_about(
            Rule::RustPanic,
            "why does my rust program panic?"
        ));
        assert!(asks_about(
            Rule::StackTrace,
            "how do i read a python traceback"
        ));
        assert!(
            !asks_about(Rule::RustPanic, "my program panics sometimes."),
            "not a question"
        );
        assert!(
            !asks_about(Rule::LlmRequestFailed, "why did my order fail?"),
            "failure words are too common to count"
        );
    }

    #[test]
    fn an_error_head_the_user_quoted_counts_as_quoted() {
        assert!(quoted(
            "i get keyerror: 'price' in my script, why?",
            "KeyError: 'price' means the dictionary has no `price` key.",
            None
        ));
        assert!(!quoted(
            "what is a keyerror?",
            "KeyError: 'price' means the dictionary has no key.",
            None
        ));
        assert_eq!(
            error_head("keyerror: 'price' means"),
            Some("keyerror: 'price'")
        );
        assert_eq!(error_head("a b: c"), None);
    }
}
