//! [`AnswerStream`]: a streamed answer as a handler returns it, and [`StreamedReply`]: what
//! leaves an `#[egress_boundary]` handler that streams, deliverable only through the front door.
//!
//! A handler that streams returns `Result<AnswerStream, EgressError>`; the boundary turns that
//! into a [`StreamedReply`]: the stream and the handler's mode, or, when the handler failed
//! before the first word, the [`Reply`] Layer C chose. The stream's text never reaches a
//! surface as it is: the front door ([`Bot::send`](crate::Bot::send)) cuts it into blocks,
//! checks each (`Block<Unchecked> → Block<Checked>`), renders, commits and sends it. There is
//! no other way out: `StreamedReply` is not [`Deliverable`](crate::channel::Deliverable), and
//! neither is an `AnswerStream` or a delta.
#![cfg_attr(
    not(feature = "model"),
    allow(
        dead_code,
        reason = "the Router's stream drives a `Driven`; absent without Layer A"
    )
)]

use std::collections::VecDeque;
use std::fmt;
use std::task::{Context, Waker};

use tokio::sync::mpsc;

use crate::egress::{Attribution, EgressError};
use crate::future::BoxFuture;
use crate::reply::{Mode, Reply};
use crate::turn::Turn;

/// A streamed answer: text deltas in order, owned (`'static`), so a handler can return it.
///
/// Made from the [`Router`](crate::model::Router)'s stream
/// ([`Router::answer_stream`](crate::model::Router::answer_stream)), from a fixed list of
/// chunks ([`from_chunks`](Self::from_chunks)), or from any producer feeding a Tokio channel
/// ([`from_receiver`](Self::from_receiver)). It carries the turn's attribution, for the blocks
/// it becomes and the failures it ends in.
///
/// ```
/// use mesh_egress::{AnswerStream, Attribution, Turn};
/// let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
/// let stream = AnswerStream::from_chunks(&turn, [Ok("The build ".into()), Ok("is green.".into())]);
/// assert_eq!(stream.attribution().conversation(), "conv-1");
/// ```
#[must_use = "a stream does nothing until a front door delivers it"]
pub struct AnswerStream {
    source: Source,
    attribution: Attribution,
}

enum Source {
    Chunks(VecDeque<Result<String, EgressError>>),
    Receiver(mpsc::Receiver<Result<String, EgressError>>),
    Driven(Box<Driven>),
}

impl AnswerStream {
    /// A stream that yields `chunks` in order and nothing after the first `Err`: for tests, and
    /// for an answer that is already complete.
    pub fn from_chunks(
        turn: &Turn,
        chunks: impl IntoIterator<Item = Result<String, EgressError>>,
    ) -> Self {
        Self {
            source: Source::Chunks(chunks.into_iter().collect()),
            attribution: turn.attribution().clone(),
        }
    }

    /// A stream fed by whatever holds the sender: each `Ok` a text delta, an `Err` the failure
    /// that ends it (nothing after it is read); the stream ends when every sender is dropped.
    /// The producer runs wherever its owner runs it (the front door starts no task).
    ///
    /// ```
    /// use mesh_egress::{AnswerStream, Attribution, Turn};
    /// let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
    /// let (tx, rx) = tokio::sync::mpsc::channel(16);
    /// tx.try_send(Ok("All green.".to_owned())).unwrap();
    /// drop(tx);
    /// let stream = AnswerStream::from_receiver(&turn, rx);
    /// # let _ = stream;
    /// ```
    pub fn from_receiver(
        turn: &Turn,
        receiver: mpsc::Receiver<Result<String, EgressError>>,
    ) -> Self {
        Self {
            source: Source::Receiver(receiver),
            attribution: turn.attribution().clone(),
        }
    }

    /// A stream driven by `driver` (see [`Driven`]).
    pub(crate) fn driven(attribution: Attribution, driver: Driven) -> Self {
        Self {
            source: Source::Driven(Box::new(driver)),
            attribution,
        }
    }

    /// Who is speaking.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// The next text delta, the failure that ends the stream, or `None` at a clean end.
    /// Cancel-safe: dropping the future loses no text.
    pub(crate) async fn next(&mut self) -> Option<Result<String, EgressError>> {
        match &mut self.source {
            Source::Chunks(chunks) => {
                let item = chunks.pop_front();
                if matches!(item, Some(Err(_))) {
                    chunks.clear();
                }
                item
            }
            Source::Receiver(receiver) => {
                let item = receiver.recv().await;
                if matches!(item, Some(Err(_))) {
                    receiver.close();
                    while receiver.try_recv().is_ok() {}
                }
                item
            }
            Source::Driven(driven) => driven.next().await,
        }
    }

    /// Whether the answer began again before the last item (see
    /// [`TextSource::restarted`](crate::stream::TextSource::restarted)); asking clears it.
    pub(crate) fn restarted(&mut self) -> bool {
        match &mut self.source {
            Source::Driven(driven) => std::mem::take(&mut driven.restarted),
            _ => false,
        }
    }

    /// Reports that `text` (yielded before) reached the person.
    pub(crate) fn mark_delivered(&mut self, text: &str) {
        if let Source::Driven(driven) = &mut self.source {
            driven.mark_delivered(text);
        }
    }
}

impl fmt::Debug for AnswerStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerStream")
            .field("attribution", &self.attribution)
            .finish_non_exhaustive()
    }
}

/// What a [`Driven`] stream's driver sends back for a [`Pull::Next`]: its source's next item,
/// and whether the source began its answer again before it.
pub(crate) struct Pulled {
    pub(crate) item: Option<Result<String, EgressError>>,
    pub(crate) restarted: bool,
}

/// What a [`Driven`] stream's driver is asked to do.
pub(crate) enum Pull {
    /// Report `delivered` (may be empty), then yield the next item.
    Next { delivered: String },
    /// Report `delivered`; the consumer is gone, so finish.
    Close { delivered: String },
}

/// A stream whose source borrows what its driver owns (the [`Router`](crate::model::Router),
/// the turn, the request): the driver is one future that owns all three and the borrowing
/// stream, and answers [`Pull`]s over a channel. The consumer polls that future itself inside
/// [`next`](Self::next), so no task is spawned and dropping the stream drops everything.
pub(crate) struct Driven {
    driver: Option<BoxFuture<'static, ()>>,
    pulls: Option<mpsc::UnboundedSender<Pull>>,
    items: mpsc::UnboundedReceiver<Pulled>,
    /// A pull is outstanding: its item has not come back yet.
    waiting: bool,
    /// Delivered text not reported yet (it goes with the next pull).
    delivered: String,
    ended: bool,
    /// The last item began the answer again.
    restarted: bool,
}

impl Driven {
    /// A stream driven by `driver`, which reads `Pull`s from the other end of `pulls` and sends
    /// one item on `items` for each `Pull::Next`.
    pub(crate) fn new(
        driver: BoxFuture<'static, ()>,
        pulls: mpsc::UnboundedSender<Pull>,
        items: mpsc::UnboundedReceiver<Pulled>,
    ) -> Self {
        Self {
            driver: Some(driver),
            pulls: Some(pulls),
            items,
            waiting: false,
            delivered: String::new(),
            ended: false,
            restarted: false,
        }
    }

    async fn next(&mut self) -> Option<Result<String, EgressError>> {
        if self.ended {
            return None;
        }
        if !self.waiting {
            let delivered = std::mem::take(&mut self.delivered);
            let sent = self
                .pulls
                .as_ref()
                .is_some_and(|pulls| pulls.send(Pull::Next { delivered }).is_ok());
            if !sent {
                self.ended = true;
                return None;
            }
            self.waiting = true;
        }
        let item = loop {
            let driver = self.driver.as_mut();
            tokio::select! {
                biased;
                pulled = self.items.recv() => {
                    let Some(pulled) = pulled else { break None };
                    self.restarted = pulled.restarted;
                    break pulled.item;
                }
                // The driver makes progress only while it is polled here; it ends after its
                // stream does (or when the pulls channel closes).
                () = async {
                    match driver {
                        Some(driver) => driver.await,
                        None => std::future::pending().await,
                    }
                } => self.driver = None,
            }
        };
        self.waiting = false;
        if !matches!(item, Some(Ok(_))) {
            self.ended = true;
        }
        item
    }

    fn mark_delivered(&mut self, text: &str) {
        self.delivered.push_str(text);
    }
}

impl Drop for Driven {
    fn drop(&mut self) {
        // Idle between pulls: let the driver report the last delivered text and finish (its
        // stream writes its ledger row when it is dropped), without waiting on anything: a
        // driver asked to close does only synchronous work before it returns.
        let (Some(pulls), Some(mut driver)) = (self.pulls.take(), self.driver.take()) else {
            return;
        };
        if self.waiting {
            return;
        }
        let delivered = std::mem::take(&mut self.delivered);
        if pulls.send(Pull::Close { delivered }).is_ok() {
            drop(pulls);
            let mut cx = Context::from_waker(Waker::noop());
            let _ = driver.as_mut().poll(&mut cx);
        }
    }
}

/// What leaves an `#[egress_boundary]` handler that returns `Result<AnswerStream, EgressError>`:
/// the stream and the handler's mode, or the [`Reply`] Layer C chose when the handler failed
/// before its first word. Only a front door delivers it ([`Bot::send`](crate::Bot::send)):
/// its text is cut into blocks and each block checked before it can reach a surface.
///
/// There is no public constructor; [`Deliver::deliver`](crate::channel::Deliver::deliver)
/// refuses it at compile time.
#[must_use = "a streamed reply does nothing until the front door sends it: `bot.send(&turn, reply)`"]
pub struct StreamedReply {
    inner: Streamed,
}

/// The two shapes of a [`StreamedReply`].
pub(crate) enum Streamed {
    /// The handler's stream, and its mode (it decides a failure after the first block).
    Stream { stream: AnswerStream, mode: Mode },
    /// Layer C's reply for a handler that failed before its first word.
    Resolved(Reply),
}

impl StreamedReply {
    /// The handler's stream.
    pub(crate) fn stream(stream: AnswerStream, mode: Mode) -> Self {
        Self {
            inner: Streamed::Stream { stream, mode },
        }
    }

    /// Layer C's reply instead of a stream.
    pub(crate) fn resolved(reply: Reply) -> Self {
        Self {
            inner: Streamed::Resolved(reply),
        }
    }

    /// Whether the handler gave a stream (`false`: it failed first, and Layer C answered).
    pub fn is_stream(&self) -> bool {
        matches!(self.inner, Streamed::Stream { .. })
    }

    /// What it holds.
    pub(crate) fn into_inner(self) -> Streamed {
        self.inner
    }
}

impl fmt::Debug for StreamedReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Streamed::Stream { mode, .. } => f
                .debug_struct("StreamedReply")
                .field("mode", mode)
                .finish_non_exhaustive(),
            Streamed::Resolved(reply) => f.debug_tuple("StreamedReply").field(reply).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn() -> Turn {
        Turn::new(Attribution::new("a", "c", "r"))
    }

    #[tokio::test]
    async fn chunks_end_at_the_first_failure() {
        let turn = turn();
        let mut stream = AnswerStream::from_chunks(
            &turn,
            [
                Ok("a".into()),
                Err(EgressError::transport("x", turn.attribution().clone())),
                Ok("never".into()),
            ],
        );
        assert_eq!(stream.next().await.unwrap().unwrap(), "a");
        assert!(stream.next().await.unwrap().is_err());
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_receiver_stream_ends_when_its_senders_are_gone_or_after_a_failure() {
        let turn = turn();
        let (tx, rx) = mpsc::channel(4);
        let mut stream = AnswerStream::from_receiver(&turn, rx);
        tx.send(Ok("one".into())).await.unwrap();
        tx.send(Err(EgressError::transport("x", turn.attribution().clone())))
            .await
            .unwrap();
        tx.send(Ok("never".into())).await.unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap(), "one");
        assert!(stream.next().await.unwrap().is_err());
        assert!(stream.next().await.is_none());
        assert!(
            tx.send(Ok("late".into())).await.is_err(),
            "closed after a failure"
        );
    }

    #[tokio::test]
    async fn a_driven_stream_reports_what_was_delivered_before_each_pull_and_at_the_end() {
        let turn = turn();
        let (pulls_tx, mut pulls) = mpsc::unbounded_channel();
        let (items, items_rx) = mpsc::unbounded_channel();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let record = seen.clone();
        let driver = Box::pin(async move {
            let mut left = vec!["b".to_owned(), "a".to_owned()];
            while let Some(pull) = pulls.recv().await {
                match pull {
                    Pull::Next { delivered } => {
                        record.lock().unwrap().push(delivered);
                        let item = left.pop().map(Ok);
                        let end = item.is_none();
                        let _ = items.send(Pulled {
                            item,
                            restarted: false,
                        });
                        if end {
                            // Waits for the close, as a routed stream's driver does.
                        }
                    }
                    Pull::Close { delivered } => {
                        record.lock().unwrap().push(format!("close:{delivered}"));
                        break;
                    }
                }
            }
        });
        let mut stream = AnswerStream::driven(
            turn.attribution().clone(),
            Driven::new(driver, pulls_tx, items_rx),
        );
        assert_eq!(stream.next().await.unwrap().unwrap(), "a");
        stream.mark_delivered("a");
        assert_eq!(stream.next().await.unwrap().unwrap(), "b");
        stream.mark_delivered("b");
        assert!(stream.next().await.is_none());
        drop(stream);
        assert_eq!(*seen.lock().unwrap(), ["", "a", "b", "close:"]);
    }
}
