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

use tokio::time::Instant;

use crate::egress::{Attribution, EgressError};
use crate::stream::TextSource;

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
pub(super) fn expired(attribution: &Attribution) -> EgressError {
    EgressError::transport(TurnDeadline, attribution.clone())
}

/// `source`, ended by a failure at `deadline` if it has not ended by then.
pub(crate) struct Deadlined<S> {
    source: S,
    deadline: Option<Instant>,
    attribution: Attribution,
    over: bool,
}

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
