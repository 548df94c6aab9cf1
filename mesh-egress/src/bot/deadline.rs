//! The turn's time bound, kept whatever the handler's text source does.
//!
//! `boundary::stream` leaves a passed deadline to the source (a `RoutedStream` caps its own
//! deadline by the turn's and reports it as a failure), so a source that ignores the turn
//! (an application's own stream, a tool that hangs) would keep a reply a reader waits on open
//! for ever. [`Deadlined`] makes the deadline the source's failure at its instant, and
//! [`expired`] is the failure of a handler that had not returned by then. Either way Layer C
//! answers for what was not delivered (a holding line and its promise, or the handoff).

use std::error::Error;
use std::fmt;

#[cfg(feature = "markdown")]
use tokio::time::Instant;

use super::sendable::Outgoing;
use crate::boundary::resolve_in;
use crate::egress::{Attribution, EgressError};
use crate::future::BoxFuture;
#[cfg(feature = "markdown")]
use crate::stream::TextSource;
use crate::turn::Turn;

/// The cause a passed deadline is reported with (for logs only, as every cause).
#[derive(Debug)]
struct TurnDeadline;

impl fmt::Display for TurnDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the turn reached its deadline")
    }
}

impl Error for TurnDeadline {}

/// The failure a passed deadline is: transport-like and retryable, so a promise may keep it.
fn expired(attribution: &Attribution) -> EgressError {
    EgressError::transport(TurnDeadline, attribution.clone())
}

/// `source`, ended by a failure at `deadline` if it has not ended by then.
#[cfg(feature = "markdown")]
pub(crate) struct Deadlined<S> {
    source: S,
    deadline: Option<Instant>,
    attribution: Attribution,
    over: bool,
}

#[cfg(feature = "markdown")]
impl<S> Deadlined<S> {
    pub(crate) fn new(source: S, deadline: Option<Instant>, attribution: &Attribution) -> Self {
        Self {
            source,
            deadline,
            attribution: attribution.clone(),
            over: false,
        }
    }
}

#[cfg(feature = "markdown")]
impl<S> TextSource for Deadlined<S>
where
    S: TextSource<Error = EgressError>,
{
    type Error = EgressError;

    async fn next(&mut self) -> Option<Result<String, EgressError>> {
        if self.over {
            return None;
        }
        let Some(deadline) = self.deadline else {
            return self.source.next().await;
        };
        // Cancel-safe: the deadline is an instant, so a call the block reader's idle flush
        // cancels waits for the same instant next time; the source's own call is its own.
        tokio::select! {
            biased;
            next = self.source.next() => next,
            () = tokio::time::sleep_until(deadline) => {
                self.over = true;
                Some(Err(expired(&self.attribution)))
            }
        }
    }

    fn mark_delivered(&mut self, text: &str) {
        self.source.mark_delivered(text);
    }

    fn restarted(&mut self) -> bool {
        self.source.restarted()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stream::ChunkSource;

    fn attribution() -> Attribution {
        Attribution::new("ci-bot", "conv-1", "run-1")
    }

    /// A source that yields its first chunk and then never another.
    struct Stalls(Option<String>);

    impl TextSource for Stalls {
        type Error = EgressError;
        async fn next(&mut self) -> Option<Result<String, EgressError>> {
            match self.0.take() {
                Some(text) => Some(Ok(text)),
                None => std::future::pending().await,
            }
        }
        fn mark_delivered(&mut self, _text: &str) {}
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_source_fails_at_the_deadline_exactly() {
        let start = Instant::now();
        let deadline = start + Duration::from_millis(750);
        let mut source =
            Deadlined::new(Stalls(Some("first".into())), Some(deadline), &attribution());
        assert_eq!(source.next().await.unwrap().ok().as_deref(), Some("first"));
        let failure = source.next().await.expect("a failure, not an end");
        assert_eq!(Instant::now(), deadline);
        let failure = failure.expect_err("the deadline is a failure");
        assert!(failure.retryable());
        assert_eq!(
            failure.internal_cause().to_string(),
            "the turn reached its deadline"
        );
        assert!(source.next().await.is_none(), "nothing after the failure");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_read_keeps_the_same_deadline() {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(1);
        let mut source = Deadlined::new(Stalls(None), Some(deadline), &attribution());
        for _ in 0..3 {
            let cancelled = tokio::time::timeout(Duration::from_millis(300), source.next()).await;
            assert!(cancelled.is_err(), "still waiting");
        }
        assert!(source.next().await.expect("the failure").is_err());
        assert_eq!(Instant::now(), deadline);
    }

    #[tokio::test(start_paused = true)]
    async fn a_source_that_ends_in_time_is_untouched() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let inner = ChunkSource::<EgressError>::delayed([
            (Duration::from_millis(100), "a"),
            (Duration::from_millis(100), "b"),
        ]);
        let mut source = Deadlined::new(inner, Some(deadline), &attribution());
        let mut text = String::new();
        while let Some(delta) = source.next().await {
            text.push_str(&delta.expect("no failure"));
        }
        assert_eq!(text, "ab");
        let mut none = Deadlined::new(Stalls(Some("x".into())), None, &attribution());
        assert!(none.next().await.expect("a chunk").is_ok());
    }
}

/// A route's handler, bounded by the turn's deadline: one that has not answered by then is
/// answered by Layer C in the mode it declared when it started (its turn carries it).
pub(super) async fn within_deadline(
    turn: &Turn,
    handler: BoxFuture<'static, Outgoing>,
) -> Outgoing {
    let Some(deadline) = turn.deadline() else {
        return handler.await;
    };
    tokio::select! {
        outgoing = handler => outgoing,
        () = tokio::time::sleep_until(deadline) => {
            tracing::warn!(target: "mesh_egress::bot", conversation = turn.attribution().conversation(), "the handler had not answered at the turn's deadline");
            let mode = turn.mode();
            let failure = Err(expired(turn.attribution()));
            Outgoing::from(resolve_in(turn, mode, turn.policy_for(mode), failure))
        }
    }
}

#[cfg(test)]
mod run_to_tests {
    use std::time::Duration;

    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use crate::AnswerStream;
    use crate::address::Address;
    use crate::answer::StreamedReply;
    use crate::bot::{Bot, Outcome};
    use crate::channel::Recorder;
    use crate::egress::Attribution;
    use crate::reply::{Mode, Reply};
    use crate::turn::Turn;

    const TIMEOUT: Duration = Duration::from_secs(2);
    /// How long a test waits for a turn that should end at its deadline (paused time).
    const BOUND: Duration = Duration::from_secs(60);
    /// Past the cutter's minimum block, so it goes on its own before the stall.
    const FIRST: &str =
        "The first paragraph went out before the provider stalled for good, as a block of its own.";

    fn turn(bot: &Bot) -> Turn {
        bot.turn(
            Address::Plain,
            Attribution::new("web-chat", "chat-1", "run-1"),
        )
        .with_timeout(TIMEOUT)
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_that_has_not_answered_is_held_at_the_deadline_exactly() {
        let bot = Bot::new();
        let hangs = bot.route("hangs", |_turn: Turn, (): ()| async move {
            std::future::pending::<Reply>().await
        });
        let page = Recorder::new();
        let start = Instant::now();
        let turn = turn(&bot);
        let delivery = tokio::time::timeout(BOUND, bot.run_to(&turn, &page, &hangs, ()))
            .await
            .expect("the turn ended at its deadline")
            .expect("delivered");
        assert_eq!(Instant::now(), start + TIMEOUT);
        assert_eq!(delivery.outcome(), Outcome::Holding);
        assert!(
            matches!(delivery.promise(), Some(crate::bot::Promise::Bot(_))),
            "the route's promise went to the keeper"
        );
        let sent = page.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(
            !sent[0].is_empty() && !sent[0].contains("deadline"),
            "{sent:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_stalls_fails_at_the_deadline_after_what_it_delivered() {
        let bot = Bot::new();
        // The sender outlives the turn: the stream neither ends nor fails on its own.
        let (senders_tx, mut senders) = mpsc::unbounded_channel();
        let stalls = bot.route("stalls", move |turn: Turn, (): ()| {
            let (tx, rx) = mpsc::channel(4);
            tx.try_send(Ok(format!("{FIRST}\n\n"))).expect("room");
            senders_tx.send(tx).expect("the test holds the receiver");
            let stream = AnswerStream::from_receiver(&turn, rx);
            async move { StreamedReply::stream(stream, Mode::Interactive) }
        });
        let page = Recorder::new();
        let start = Instant::now();
        let turn = turn(&bot);
        let delivery = tokio::time::timeout(BOUND, bot.run_to(&turn, &page, &stalls, ()))
            .await
            .expect("the turn ended at its deadline")
            .expect("delivered");
        assert_eq!(Instant::now(), start + TIMEOUT);
        assert_eq!(delivery.outcome(), Outcome::Holding);
        assert!(matches!(
            delivery.promise(),
            Some(crate::bot::Promise::Bot(_))
        ));
        assert_eq!(
            delivery.delivered().trim_end(),
            FIRST,
            "the prefix the promise follows"
        );
        let sent = page.sent();
        assert_eq!(sent.len(), 2, "the block, then Layer C's line: {sent:?}");
        assert_eq!(sent[0], FIRST);
        assert!(!sent[1].contains("deadline"), "{sent:?}");
        assert!(senders.try_recv().is_ok(), "the sender was alive all along");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_without_a_deadline_is_delivered_block_by_block() {
        let bot = Bot::new();
        let answers = bot.route("answers", |turn: Turn, (): ()| async move {
            let chunks = [Ok(format!("{FIRST}\n\n")), Ok("Then the rest.".to_owned())];
            StreamedReply::stream(AnswerStream::from_chunks(&turn, chunks), Mode::Interactive)
        });
        let page = Recorder::new();
        let turn = bot.turn(
            Address::Plain,
            Attribution::new("web-chat", "chat-1", "run-2"),
        );
        let delivery = bot
            .run_to(&turn, &page, &answers, ())
            .await
            .expect("delivered");
        assert_eq!(delivery.outcome(), Outcome::Answered);
        assert_eq!(page.sent(), [FIRST, "Then the rest."]);
        assert_eq!(
            delivery.receipts().len(),
            2,
            "each block a delivery of its own"
        );
    }
}
