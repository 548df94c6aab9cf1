//! [`LiveTurn`]: a request's turn on its way to the page, the one thing an agent's
//! [`ChatTurn`](super::ChatTurn) streams into, and what a streamed or collected answer comes to.
//! Apart from `turn.rs`, which runs the turn and calls the agent, so the agent's side
//! (`agent.rs`) and the runner do not import each other.

use std::sync::atomic::{AtomicBool, Ordering};

use super::client::WebChannel;
use crate::boundary::{StreamPlan, StreamedTurnReceipt};
use crate::channel::DeliveryError;
use crate::egress::{AgentMessage, EgressError};
use crate::store::Durable;
use crate::stream::TextSource;
use crate::turn::Turn;

/// What a streamed answer came to on a request.
pub(super) type Streamed = Result<StreamedTurnReceipt, DeliveryError>;
/// What a collected answer came to on a follow-up.
pub(super) type Collected = Result<AgentMessage, EgressError>;

/// A request's turn as the agent's [`ChatTurn::stream`](super::ChatTurn::stream) runs it.
pub(crate) struct LiveTurn<'a> {
    turn: &'a Turn,
    plan: StreamPlan<'a>,
    channel: Durable<WebChannel>,
    /// Whether the agent began to answer: past the deadline, the turn's runner ends a turn
    /// that has not.
    began: AtomicBool,
}

impl<'a> LiveTurn<'a> {
    /// `turn` on the way to the page: `plan` streamed through `channel`, not begun.
    pub(super) fn new(turn: &'a Turn, plan: StreamPlan<'a>, channel: Durable<WebChannel>) -> Self {
        Self {
            turn,
            plan,
            channel,
            began: AtomicBool::new(false),
        }
    }

    /// The boundary for the web: `boundary::stream` into the outbox-backed channel.
    pub(super) async fn stream<S>(&self, source: S) -> Streamed
    where
        S: TextSource<Error = EgressError>,
    {
        self.began.store(true, Ordering::Release);
        crate::boundary::stream(self.turn, &self.plan, &self.channel, source).await
    }

    pub(super) fn began(&self) -> bool {
        self.began.load(Ordering::Acquire)
    }
}
