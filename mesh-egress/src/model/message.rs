//! [`Completion::into_message`]: a completion as the message a channel delivers, or the
//! semantic error Layer C decides on. A tool-only or empty completion never becomes an empty
//! body that fails later at delivery.

use super::wire::Completion;
use crate::egress::{AgentMessage, EgressError};
use crate::turn::Turn;

/// Why a completion cannot become a message (the internal cause of the [`EgressError`]
/// [`Completion::into_message`] returns).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnusableCompletion {
    /// The model answered with tool calls and no text: the caller has tools to run (and a
    /// follow-up model call to make) before there is anything to say.
    #[error("the model answered with {calls} tool call(s) and no text")]
    ToolCallsOnly {
        /// How many tool calls it made.
        calls: usize,
    },
    /// No text (or only whitespace) and no tool call.
    #[error("the model answered with no text")]
    Empty,
}

impl Completion {
    /// The completion's text as a message of `turn` (attributed to it and tied to its
    /// ownership, so a channel refuses it once the conversation is no longer owned), or, for a
    /// completion with no text, a **semantic, retryable** [`EgressError`] attributed to the turn
    /// whose cause is an [`UnusableCompletion`]: Layer C decides (a holding line or a handoff
    /// interactively, silence and a retry proactively), instead of an empty body failing at
    /// delivery. A completion with text and tool calls gives its text; run the tools first if
    /// they matter to the answer.
    ///
    /// # Errors
    ///
    /// A semantic, retryable [`EgressError`] attributed to the turn when the completion has no
    /// text (cause: [`UnusableCompletion::Empty`], or [`UnusableCompletion::ToolCallsOnly`] when it
    /// carries only tool calls).
    ///
    /// ```
    /// use mesh_egress::model::{Completion, ToolCall};
    /// use mesh_egress::{Attribution, FailureClass, Turn};
    ///
    /// let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
    /// let message = Completion::text("m", "All green.").into_message(&turn).expect("text");
    /// assert_eq!(message.body().as_str(), "All green.");
    /// assert!(message.is_owned());
    ///
    /// let tool_only = Completion::tool_calls("m", vec![ToolCall::function("c1", "lookup", "{}")]);
    /// let error = tool_only.into_message(&turn).expect_err("nothing to say yet");
    /// assert_eq!(error.class(), FailureClass::Semantic);
    /// assert!(error.retryable());
    /// assert_eq!(error.attribution(), turn.attribution());
    /// ```
    pub fn into_message(self, turn: &Turn) -> Result<AgentMessage, EgressError> {
        if self.has_text() {
            return Ok(turn.message(self.content.unwrap_or_default()));
        }
        let problem = if self.tool_calls.is_empty() {
            UnusableCompletion::Empty
        } else {
            UnusableCompletion::ToolCallsOnly {
                calls: self.tool_calls.len(),
            }
        };
        Err(EgressError::semantic(problem, turn.attribution().clone()).with_retryable(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attribution;
    use crate::model::ToolCall;

    fn turn() -> Turn {
        Turn::new(Attribution::new("a", "c", "r"))
    }

    #[test]
    fn text_becomes_the_turns_message_and_nothing_else_does() {
        let turn = turn();
        let with_tools = Completion {
            tool_calls: vec![ToolCall::function("c", "f", "{}")],
            ..Completion::text("m", "Checking now.")
        };
        let message = with_tools.into_message(&turn).expect("has text");
        assert_eq!(message.body().as_str(), "Checking now.");
        for (completion, cause) in [
            (
                Completion::tool_calls("m", vec![ToolCall::function("c", "f", "{}")]),
                UnusableCompletion::ToolCallsOnly { calls: 1 },
            ),
            (Completion::text("m", " \n\t"), UnusableCompletion::Empty),
        ] {
            let error = completion.into_message(&turn).expect_err("no text");
            assert!(error.retryable());
            let got = error
                .internal_cause()
                .downcast_ref::<UnusableCompletion>()
                .expect("typed cause");
            assert_eq!(got, &cause);
        }
    }
}
