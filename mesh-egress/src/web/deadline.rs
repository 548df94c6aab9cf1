//! The turn's time bound, kept whatever the agent's text source does.
//!
//! `boundary::stream` leaves a passed deadline to the source (a `RoutedStream` caps its own
//! deadline by the turn's and reports it as a failure), so a source that ignores the turn
//! (an application's own stream, a tool that hangs) would keep a web reply open for ever.
//! [`Deadlined`] makes the deadline the source's failure at its instant; [`Expired`] is the
//! source of an agent that had not begun to answer when the deadline passed. Either way Layer
//! C answers for what was not delivered (a holding line and its promise, or the handoff).

use std::error::Error;
use std::fmt;

use tokio::time::Instant;

use crate::egress::{Attribution, EgressError};
use crate::stream::TextSource;

/// The cause a passed deadline is reported with (for logs only, as every cause).
#[derive(Debug)]
pub(super) struct TurnDeadline;

impl fmt::Display for TurnDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the web turn reached its deadline")
    }
}

impl Error for TurnDeadline {}

/// The failure a passed deadline is: transport-like and retryable, so a promise may keep it.
fn expired(attribution: &Attribution) -> EgressError {
    EgressError::transport(TurnDeadline, attribution.clone())
}

/// `source`, ended by a failure at `deadline` if it has not ended by then.
pub(super) struct Deadlined<S> {
    source: S,
    deadline: Option<Instant>,
    attribution: Attribution,
    over: bool,
}

impl<S> Deadlined<S> {
    pub(super) fn new(source: S, deadline: Option<Instant>, attribution: &Attribution) -> Self {
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

/// The source of an agent that had not begun to answer at the deadline: one failure.
pub(super) struct Expired {
    failure: Option<EgressError>,
}

impl Expired {
    pub(super) fn new(attribution: &Attribution) -> Self {
        Self {
            failure: Some(expired(attribution)),
        }
    }
}

impl TextSource for Expired {
    type Error = EgressError;

    async fn next(&mut self) -> Option<Result<String, EgressError>> {
        self.failure.take().map(Err)
    }

    fn mark_delivered(&mut self, _text: &str) {}
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stream::ChunkSource;

    fn attribution() -> Attribution {
        Attribution::new("web-chat", "web:c", "r")
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
            "the web turn reached its deadline"
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

    #[tokio::test]
    async fn an_expired_turn_is_one_failure() {
        let mut source = Expired::new(&attribution());
        assert!(source.next().await.expect("the failure").is_err());
        assert!(source.next().await.is_none());
    }
}
