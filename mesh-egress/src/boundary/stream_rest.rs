//! What a streamed turn's follow-up delivers after a failure mid-stream ([`rest_after`]: only
//! what follows the prefix the person saw), and the [`TextSource`] seam for Layer A's
//! [`RoutedStream`].

use std::future::Future;

use crate::answer::AnswerStream;
use crate::egress::{AgentMessage, EgressError};
use crate::model::{JoinMode, Joined, Joiner, RoutedStream};
use crate::stream::TextSource;

/// [`RoutedStream::next`] is cancel-safe (see its docs), which is what the block reader's idle
/// flush needs: a read it abandons for a flush loses no text.
impl TextSource for RoutedStream<'_> {
    type Error = EgressError;

    fn next(&mut self) -> impl Future<Output = Option<Result<String, EgressError>>> + Send {
        RoutedStream::next(self)
    }

    fn mark_delivered(&mut self, text: &str) {
        RoutedStream::mark_delivered(self, text);
    }

    fn restarted(&mut self) -> bool {
        RoutedStream::restarted(self)
    }
}

/// An [`AnswerStream`] is cancel-safe too: a chunk list and a Tokio channel lose nothing to a
/// dropped read, and a driven stream keeps its pull outstanding (and its driver where it was)
/// until the next read takes the item.
impl TextSource for AnswerStream {
    type Error = EgressError;

    fn next(&mut self) -> impl Future<Output = Option<Result<String, EgressError>>> + Send {
        AnswerStream::next(self)
    }

    fn mark_delivered(&mut self, text: &str) {
        AnswerStream::mark_delivered(self, text);
    }

    fn restarted(&mut self) -> bool {
        AnswerStream::restarted(self)
    }
}

/// Why a follow-up's answer could not be joined to the delivered prefix (it is then a failed
/// try like any other, and the next try asks again).
#[derive(Debug, thiserror::Error)]
#[error("the follow-up answer does not continue the delivered text")]
pub(crate) struct Unjoinable;

/// What `answer` (a whole, fresh answer to the same request) adds after `delivered`, as a
/// message of its own: the part of it that overlaps the delivered text is dropped, as a
/// continuation on a fallback route is joined. An empty prefix keeps the answer whole. An
/// answer that does not contain the end of the delivered text, or adds nothing visible after
/// it, is a semantic, retryable [`EgressError`] (its cause: the follow-up answer does not
/// continue the delivered text).
///
/// Crate-private: the [`Bot`](crate::Bot)'s keepers (in memory, and the worker it builds) cut
/// every follow-up of a mid-stream promise with it.
pub(crate) fn rest_after(
    delivered: &str,
    answer: AgentMessage,
) -> Result<AgentMessage, EgressError> {
    if delivered.is_empty() {
        return Ok(answer);
    }
    let ownership = answer.ownership().cloned();
    let (body, attribution) = answer.into_parts();
    // Whitespace at the cut is not part of what the person read (the blocks were rendered
    // apart), so the join anchors on the last visible text.
    let mut joiner = Joiner::new(delivered.trim_end(), JoinMode::Afresh);
    let joined = match (joiner.push(body.as_str()), joiner.finish()) {
        (Joined::Text(rest), Joined::Text(tail)) => rest + &tail,
        // Not found before the answer ended, or not within the join bound.
        _ => return Err(EgressError::semantic(Unjoinable, attribution)),
    };
    let rest = joined.trim_start();
    if rest.trim().is_empty() {
        return Err(EgressError::semantic(Unjoinable, attribution));
    }
    let message = AgentMessage::new(rest, attribution);
    Ok(match ownership {
        Some(ownership) => message.with_ownership(ownership),
        None => message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::Attribution;

    fn answer(text: &str) -> AgentMessage {
        AgentMessage::new(text, Attribution::new("a", "c", "r"))
    }

    #[test]
    fn the_rest_of_a_fresh_answer_is_what_follows_the_blocks_already_shown() {
        let fresh = answer("The build is green.\n\nDeploying to staging now.");
        let rest = rest_after("The build is green.\n\n", fresh).expect("joins");
        assert_eq!(rest.body().as_str(), "Deploying to staging now.");
    }

    #[test]
    fn the_rest_drops_what_overlaps_the_delivered_prefix() {
        let delivered = "Step one: open the settings page and find the billing tab.\n\n";
        let fresh = answer(
            "Step one: open the settings page and find the billing tab.\n\nStep two: press Export.",
        );
        let rest = rest_after(delivered, fresh).expect("joins");
        assert_eq!(rest.body().as_str(), "Step two: press Export.");
    }

    #[test]
    fn an_answer_that_does_not_continue_the_prefix_is_a_retryable_failure() {
        let delivered = "Step one: open the settings page and find the billing tab.\n\n";
        let error = rest_after(delivered, answer("Something else entirely.")).unwrap_err();
        assert!(error.retryable());
        let nothing_new = rest_after(delivered, answer(delivered)).unwrap_err();
        assert!(nothing_new.retryable());
    }

    #[test]
    fn an_empty_prefix_keeps_the_answer_whole() {
        let rest = rest_after("", answer("All of it.")).expect("whole");
        assert_eq!(rest.body().as_str(), "All of it.");
    }
}
