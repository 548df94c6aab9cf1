//! What a streamed turn owes after a failure ([`RestOwed`]: a promise and the delivered prefix),
//! and the [`TextSource`] seam for Layer A's [`RoutedStream`].

use std::future::Future;

use super::follow_up::{FollowUpOutcome, FollowUpRunner};
use crate::answer::AnswerStream;
use crate::channel::{Channel, DeliveryError};
use crate::egress::{AgentMessage, EgressError};
use crate::model::{JoinMode, Joined, Joiner, RoutedStream};
use crate::reply::Commitment;
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
}

/// The promise of a holding line sent in a streamed turn, with the answer's Markdown that had
/// reached the person before it: the follow-up delivers only what follows that prefix.
#[derive(Debug)]
#[must_use = "a promise to a person: keep it with `RestOwed::keep`"]
pub struct RestOwed {
    commitment: Commitment,
    delivered: String,
}

/// Why a follow-up's answer could not be joined to the delivered prefix (it is then a failed
/// try like any other, and the next try asks again).
#[derive(Debug, thiserror::Error)]
#[error("the follow-up answer does not continue the delivered text")]
pub struct Unjoinable;

impl RestOwed {
    pub(super) fn new(commitment: Commitment, delivered: String) -> Self {
        Self {
            commitment,
            delivered,
        }
    }

    /// The promise.
    pub fn commitment(&self) -> &Commitment {
        &self.commitment
    }

    /// The Markdown delivered before the holding line (empty when nothing was).
    pub fn delivered(&self) -> &str {
        &self.delivered
    }

    /// The promise and the prefix, apart.
    pub fn into_parts(self) -> (Commitment, String) {
        (self.commitment, self.delivered)
    }

    /// Keeps the promise with `runner`: re-runs `turn` (the un-annotated, non-streamed turn) and
    /// delivers only what its answer adds after the delivered prefix ([`rest_after`]); an
    /// answer that cannot be joined to it is a failed try.
    pub async fn keep<C, F, Fut>(
        self,
        runner: &FollowUpRunner,
        channel: &C,
        mut turn: F,
    ) -> Result<FollowUpOutcome, DeliveryError>
    where
        C: Channel + ?Sized,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<AgentMessage, EgressError>>,
    {
        let Self {
            commitment,
            delivered,
        } = self;
        let delivered = delivered.as_str();
        runner
            .run(commitment, channel, || {
                let answer = turn();
                async move { rest_after(delivered, answer.await?) }
            })
            .await
    }
}

/// What `answer` (a whole, fresh answer to the same request) adds after `delivered`, as a
/// message of its own: the part of it that overlaps the delivered text is dropped, as a
/// continuation on a fallback route is joined. An empty prefix keeps the answer whole. An
/// answer that does not contain the end of the delivered text, or adds nothing visible after
/// it, is a semantic, retryable [`EgressError`] (cause: [`Unjoinable`]).
///
/// ```
/// use mesh_egress::boundary::rest_after;
/// use mesh_egress::{AgentMessage, Attribution};
/// let attr = Attribution::new("a", "c", "r");
/// let fresh = AgentMessage::new("The build is green.\n\nDeploying to staging now.", attr);
/// let rest = rest_after("The build is green.\n\n", fresh).expect("joins");
/// assert_eq!(rest.body().as_str(), "Deploying to staging now.");
/// ```
pub fn rest_after(delivered: &str, answer: AgentMessage) -> Result<AgentMessage, EgressError> {
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
