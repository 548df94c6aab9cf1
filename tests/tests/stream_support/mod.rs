//! Shared helpers for the streaming boundary tests: the four blocks they stream, the bot, turn,
//! request and handlers they stream with, and a channel that records when each part was sent.
//! The paused-time file (`stream_boundary.rs`) and the loopback one (`stream_boundary_http.rs`)
//! state the same rules, so they share one set-up and differ only in the connector. Every
//! streamed turn goes through the front door: an `#[egress_boundary]` handler returns the
//! router's `AnswerStream`, and `Bot::send_to` delivers it to the [`Timed`] channel (boxed, so
//! each block is a message of its own, as on any channel that is its own surface).
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mesh_egress::bot::{Delivery, Outcome};
use mesh_egress::channel::{
    BoxedChannel, Channel, DeliveryError, PartReceipt, PlainText, SendError,
};
use mesh_egress::degrade::{DegradationPolicy, Mode};
use mesh_egress::gate::QualityGate;
use mesh_egress::model::{ChatMessage, ChatRequest, ModelConnector, Router};
use mesh_egress::stream::CutterConfig;
use mesh_egress::{
    Address, AnswerStream, Attribution, Bot, CommittedPart, EgressError, StreamedReply, Turn,
    egress_boundary,
};
use tokio::time::Instant;

pub const MS: fn(u64) -> Duration = Duration::from_millis;

// Each block is over the bot's 20-byte minimum and ends in a blank line, so each one the model
// sends is one part on the channel.
pub const B1: &str = "The build finished and every test passed.\n\n";
pub const B2: &str = "Deploying to staging now, it takes a minute.\n\n";
pub const B3: &str = "Then production follows after the checks.\n\n";
pub const B4: &str = "I will post the link when it is live.\n\n";

/// Blocks of at least 20 bytes, no idle flush (the idle flush has its own test), `policy` in
/// both modes.
pub fn bot(policy: DegradationPolicy) -> Bot {
    Bot::new()
        .with_policy(policy)
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None)
}

/// A turn of `bot`'s, the person's message `status?`.
pub fn turn(bot: &Bot) -> Turn {
    bot.turn(Address::Plain, Attribution::new("agent", "conv", "run"))
        .with_input("status?")
}

pub fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("status?")])
}

/// A person is waiting: the router's streamed answer to [`request`].
#[egress_boundary(interactive)]
pub async fn answer<C: ModelConnector + 'static>(
    turn: &Turn,
    router: &Arc<Router<C>>,
) -> Result<AnswerStream, EgressError> {
    Ok(router.answer_stream(turn, request()))
}

/// Nobody asked: the same answer, proactively.
#[egress_boundary(proactive)]
pub async fn digest<C: ModelConnector + 'static>(
    turn: &Turn,
    router: &Arc<Router<C>>,
) -> Result<AnswerStream, EgressError> {
    Ok(router.answer_stream(turn, request()))
}

/// The handler of `mode`'s streamed reply.
pub async fn streamed<C: ModelConnector + 'static>(
    turn: &Turn,
    mode: Mode,
    router: &Arc<Router<C>>,
) -> StreamedReply {
    match mode {
        Mode::Proactive => digest(turn, router).await,
        _ => answer(turn, router).await,
    }
}

/// The router's answer to [`request`], streamed in `mode` through `bot` onto `channel`.
pub async fn stream_routed<C: ModelConnector + 'static>(
    bot: &Bot,
    turn: &Turn,
    mode: Mode,
    channel: &Timed,
    router: &Arc<Router<C>>,
) -> Result<Delivery, DeliveryError> {
    let reply = streamed(turn, mode, router).await;
    bot.send_to(turn, &BoxedChannel::new(channel.clone()), reply)
        .await
}

/// The common case: a fresh [`turn`] of a fresh [`bot`] streams the router's answer in
/// interactive mode under the default policy onto a fresh [`Timed`] channel. The turn and
/// channel come back for the checks.
pub async fn stream_interactive<C: ModelConnector + 'static>(
    router: &Arc<Router<C>>,
) -> (Turn, Timed, Result<Delivery, DeliveryError>) {
    let bot = bot(DegradationPolicy::default());
    let turn = turn(&bot);
    let channel = Timed::new();
    let result = stream_routed(&bot, &turn, Mode::Interactive, &channel, router).await;
    (turn, channel, result)
}

/// [`stream_interactive`] with every block checked by the default quality gate.
pub async fn stream_gated<C: ModelConnector + 'static>(
    router: &Arc<Router<C>>,
) -> (Turn, Timed, Result<Delivery, DeliveryError>) {
    let gate = QualityGate::builder().build().expect("gate");
    let bot = bot(DegradationPolicy::default()).with_gate(gate);
    let turn = turn(&bot);
    let channel = Timed::new();
    let result = stream_routed(&bot, &turn, Mode::Interactive, &channel, router).await;
    (turn, channel, result)
}

/// The blocks as the channel shows them (the cutter trims the blank line after each).
pub fn trimmed(blocks: &[&str]) -> Vec<String> {
    blocks.iter().map(|b| b.trim().to_owned()).collect()
}

/// Asserts that a holding line stands in for what follows `blocks` delivered blocks: each
/// block a message with its receipt, then the holding line's.
pub fn assert_held_after(delivery: &Delivery, blocks: usize) {
    assert_eq!(delivery.outcome(), Outcome::Holding, "{delivery:?}");
    assert_eq!(
        delivery.receipts().len(),
        blocks + 1,
        "{blocks} blocks, then the holding line: {delivery:?}"
    );
}

/// Asserts that nothing sent shows the blocked block (`leak_marker` is a piece of it) or any
/// block after it (B3 and B4 follow the blocked one in the gate tests).
pub fn assert_nothing_from_the_blocked_block_on(sent: &[String], leak_marker: &str) {
    for text in sent {
        assert!(!text.contains(leak_marker), "{text}");
        assert!(
            !text.contains("production"),
            "a block after the blocked one: {text}"
        );
        assert!(
            !text.contains("post the link"),
            "a block after the blocked one: {text}"
        );
    }
}

/// A plain-text channel that records each part with the instant it was sent, and can run a
/// hook after a given send (to cancel the turn or revoke its ownership mid-stream).
#[derive(Clone)]
pub struct Timed {
    renderer: PlainText,
    start: Instant,
    sent: Arc<Mutex<Vec<(Duration, String)>>>,
    after_first: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Timed {
    pub fn new() -> Self {
        Self {
            renderer: PlainText::new(),
            start: Instant::now(),
            sent: Arc::default(),
            after_first: None,
        }
    }

    pub fn after_first_send(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.after_first = Some(Arc::new(hook));
        self
    }

    /// Time since the channel was made.
    pub fn elapsed(&self) -> Duration {
        Instant::now() - self.start
    }

    pub fn texts(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|(_, t)| t.clone())
            .collect()
    }

    pub fn times(&self) -> Vec<Duration> {
        self.sent.lock().unwrap().iter().map(|(t, _)| *t).collect()
    }
}

impl Channel for Timed {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let mut sent = self.sent.lock().unwrap();
        sent.push((Instant::now() - self.start, part.text().to_owned()));
        if sent.len() == 1
            && let Some(hook) = &self.after_first
        {
            hook();
        }
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}
