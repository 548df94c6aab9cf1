//! [`Bot::run_to`]: a route run for a surface that builds its own channel for each turn (the
//! web chat's live reply, which a page is reading as it is written), on the one path of the
//! [module docs](super): the same gate, render first, keeper and commit as [`Bot::run`], the
//! blocks of a stream each delivered through the channel's own commit and send (the channel
//! has no stream session of its own), and the turn's deadline kept whatever the handler does.

use serde::Serialize;

use super::deadline::{Deadlined, expired};
use super::{Bot, Delivery, Endpoint, Outgoing, Shape, streamed_delivery};
use crate::answer::Streamed;
use crate::boundary::{Rerun, resolve_in};
use crate::channel::{Channel, DeliveryError};
use crate::egress::EgressError;
use crate::future::BoxFuture;
use crate::reply::Mode;
use crate::stream::TextSource;
use crate::turn::Turn;

impl Bot {
    /// Runs `route`'s handler for `turn` with `input` and delivers what it gave to `channel`,
    /// as [`run`](Self::run) delivers to the client of the turn's surface: a promise it makes
    /// names the route and is kept by the bot's keeper (stored before the line goes when the
    /// bot has a store). `channel` is the caller's, used as it is (wrap it in the store's
    /// outbox yourself: [`Store::channel`](crate::store::Store::channel)); a stream's blocks
    /// each go through its commit and send, in order.
    ///
    /// The turn's deadline ([`Turn::with_timeout`]) holds whatever the handler does: one that
    /// has not given its answer by then is dropped and its turn fails, and a stream that has
    /// not ended by then fails there, so Layer C answers for what was not delivered (a holding
    /// line and its promise, or the handoff) and whoever reads the channel is not kept waiting.
    ///
    /// ```
    /// use mesh_egress::channel::Recorder;
    /// use mesh_egress::{egress_boundary, Address, AnswerStream, Attribution, Bot, EgressError, Turn};
    ///
    /// #[egress_boundary(interactive)]
    /// async fn answer(turn: &Turn, question: String) -> Result<AnswerStream, EgressError> {
    ///     Ok(AnswerStream::from_chunks(turn, [Ok(format!("You asked: {question}"))]))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bot = Bot::new();
    /// let ask = bot.route("answer", |turn: Turn, q: String| async move { answer(&turn, q).await });
    /// let page = Recorder::new(); // the surface's own channel for this turn
    /// let turn = bot.turn(Address::Plain, Attribution::new("web-chat", "chat-1", "run-1"));
    /// let delivery = bot.run_to(&turn, &page, &ask, "status?".to_owned()).await?;
    /// assert_eq!(page.sent(), ["You asked: status?"]);
    /// assert_eq!(delivery.delivered(), "You asked: status?");
    /// # Ok(()) }
    /// ```
    pub async fn run_to<C, I>(
        &self,
        turn: &Turn,
        channel: &C,
        route: &Endpoint<I>,
        input: I,
    ) -> Result<Delivery, DeliveryError>
    where
        C: Channel + ?Sized,
        I: Serialize,
    {
        let rerun = route.rerun(&input);
        let reply = within_deadline(turn, route.call(turn, input)).await;
        let rerun = rerun.as_ref();
        match reply.0 {
            Shape::Whole(reply) => self.whole(turn, channel, reply, rerun).await,
            Shape::Streamed(streamed) => match streamed.into_inner() {
                Streamed::Resolved(reply) => self.whole(turn, channel, reply, rerun).await,
                Streamed::Stream { stream, mode } => {
                    let source = Deadlined::new(stream, turn.deadline(), turn.attribution());
                    self.streamed_each(turn, channel, source, mode, rerun).await
                }
            },
        }
    }

    /// A stream, block by block through the gate's block check, each block a delivery of its
    /// own through `channel`.
    async fn streamed_each<C, S>(
        &self,
        turn: &Turn,
        channel: &C,
        source: S,
        mode: Mode,
        rerun: Option<&Rerun>,
    ) -> Result<Delivery, DeliveryError>
    where
        C: Channel + ?Sized,
        S: TextSource<Error = EgressError>,
    {
        let plan = self.stream_plan(turn, mode, rerun);
        let receipt = crate::boundary::stream(turn, &plan, channel, source).await?;
        Ok(streamed_delivery(receipt, rerun))
    }
}

/// What the handler gave, or, when it has not given it by the turn's deadline, the failure
/// Layer C answers for in the turn's mode (the handler is dropped).
async fn within_deadline(turn: &Turn, handler: BoxFuture<'static, Outgoing>) -> Outgoing {
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
mod tests {
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
        assert!(delivery.is_kept(), "the route's promise went to the keeper");
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
        assert!(delivery.is_kept());
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
