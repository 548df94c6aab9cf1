//! Running one web chat turn: the one place a request's turn goes through the boundary, and
//! the worker's re-run of the same agent to keep its promise.
//!
//! [`run`] is what a `POST /api/chat` does once it was accepted (the chat is the identity's,
//! the conversation's lease is held, the live reply begun): it builds the [`Turn`] and the
//! [`StreamPlan`] (interactive, the chat's gate, the store as promise keeper), lets the agent
//! answer through [`LiveTurn::stream`] (`boundary::stream` into the outbox-backed web
//! channel), and ends the live reply. [`FollowUp`] is the worker's side: the same agent, its
//! text collected, only what follows the delivered prefix sent.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::Inner;
use super::agent::{ChatAgent, ChatInput, ChatTurn, Outcome};
use super::deadline::Expired;
use super::live::LiveReply;
use super::live_turn::LiveTurn;
use super::protocol::{Interruption, MessageMetadata};
use crate::address::{Address, WebAddress};
use crate::boundary::{Promise, PromiseKeeper, StreamEnd, StreamPlan};
use crate::degrade::Mode;
use crate::egress::{AgentMessage, Attribution, EgressError};
use crate::future::BoxFuture;
use crate::store::{FollowUpPlan, FollowUpTask, Lease, Renewal, Store};
use crate::turn::Turn;
use crate::worker::Handler;

/// The name a web chat's promises are stored under, and the worker's follow-up handler is
/// registered as ([`WebChat::worker`](super::WebChat::worker) does it).
pub const FOLLOW_UP_HANDLER: &str = "mesh-egress.web.answer";

/// The longest wait between two follow-ups of one promise.
const MAX_FOLLOW_UP_DELAY: Duration = Duration::from_secs(600);

/// The conversation a chat's rows are stored under: prefixed, so a chat id never collides with
/// another surface's conversation in the same store.
pub(super) fn conversation_of(chat: &WebAddress) -> String {
    format!("web:{}", chat.chat())
}

/// Runs the agent on a request's turn, bounded by the turn's deadline: an agent that has not
/// begun to answer by then (a hung tool, a lost connection of its own) is dropped, and the
/// boundary answers for it with a failure, so Layer C's holding line (and its promise) or
/// handoff reaches the page. Once it has begun, its source ends at the deadline
/// ([`Deadlined`](super::deadline::Deadlined)), so the answer ends too.
async fn answer_in_time<A: ChatAgent>(
    agent: &A,
    turn: &Turn,
    input: &ChatInput<A::Options>,
    live: &LiveTurn<'_>,
) -> Outcome {
    let mut answering = agent.answer(ChatTurn::live(turn, input, live));
    let Some(deadline) = turn.deadline() else {
        return answering.await.0;
    };
    tokio::select! {
        answered = &mut answering => return answered.0,
        () = tokio::time::sleep_until(deadline) => {}
    }
    if live.began() {
        return answering.await.0;
    }
    drop(answering);
    tracing::warn!(target: "mesh_egress::web", conversation = turn.attribution().conversation(), "the agent had not begun to answer at the turn's deadline");
    Outcome::Streamed(Box::new(
        live.stream(Expired::new(turn.attribution())).await,
    ))
}

/// A request that was accepted: everything [`run`] needs.
pub(super) struct Accepted<O> {
    pub(super) chat: WebAddress,
    pub(super) run: String,
    pub(super) input: ChatInput<O>,
    pub(super) lease: Lease,
    pub(super) renewal: Renewal,
    pub(super) reply: Arc<LiveReply>,
}

/// Ends the live reply with the fixed sentence if the turn stops without ending it (a panic in
/// the agent, a dropped task): a page never waits on a reply nobody writes.
struct EndOnDrop(Arc<LiveReply>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if !self.0.is_finished() {
            tracing::error!(target: "mesh_egress::web", message = self.0.message_id(), "a web turn stopped without ending its reply");
            self.0.fail(Interruption::Interrupted);
        }
    }
}

/// Runs an accepted request's turn to its end (see the [module docs](self)).
pub(super) async fn run<A: ChatAgent>(inner: Arc<Inner<A>>, accepted: Accepted<A::Options>) {
    let Accepted {
        chat,
        run,
        input,
        lease,
        renewal,
        reply,
    } = accepted;
    let guard = EndOnDrop(Arc::clone(&reply));
    let address = Address::Web(chat.clone());
    let turn = Turn::new(Attribution::new(
        inner.agent_name.as_str(),
        conversation_of(&chat),
        run.as_str(),
    ))
    .with_address(address.clone())
    .with_ownership(lease.ownership())
    .with_timeout(inner.turn_timeout);
    let keeper = Arc::new(WebKeeper {
        store: inner.store.clone(),
        address,
        task: follow_up_task(&input, inner.gate_on),
    });
    let plan = StreamPlan::new(Mode::Interactive, &inner.policy)
        .with_gate(&inner.gate, input.text())
        .with_promise_keeper(keeper);
    let channel = inner
        .store
        .channel(inner.client.turn_channel(chat.clone(), Arc::clone(&reply)))
        .with_ledger(turn.ledger().clone());
    let live = LiveTurn::new(&turn, plan, channel);
    let outcome = match answer_in_time(inner.agent.as_ref(), &turn, &input, &live).await {
        Outcome::Streamed(streamed) => Some(*streamed),
        Outcome::Collected(_) => None,
    };
    match outcome {
        Some(Ok(mut receipt)) => {
            let promised = receipt.take_rest().is_some();
            tracing::info!(target: "mesh_egress::web", chat = chat.chat(), end = ?receipt.end(), blocks = receipt.blocks().len(), promised, "web turn ended");
            if let StreamEnd::Stopped(reason) = receipt.end() {
                tracing::warn!(target: "mesh_egress::web", chat = chat.chat(), reason = reason.as_str(), "web turn stopped before its end");
            }
            reply.finish(promised.then_some(MessageMetadata { follow_up: true }));
        }
        Some(Err(error)) => {
            // The outbox refused a block or a line (the store failed, the lease moved on):
            // what was committed stays for a worker; the page gets the fixed sentence.
            tracing::error!(target: "mesh_egress::web", chat = chat.chat(), error = %error, "a web reply could not be delivered");
            reply.fail(Interruption::Interrupted);
        }
        // Only a follow-up's `ChatTurn` collects; a request's cannot.
        None => {
            tracing::error!(target: "mesh_egress::web", chat = chat.chat(), "a web turn was answered as a follow-up");
            reply.fail(Interruption::Interrupted);
        }
    }
    drop(guard);
    drop(live);
    drop(renewal);
    if let Err(error) = inner.store.release(lease).await {
        tracing::warn!(target: "mesh_egress::web", chat = chat.chat(), error = %error, "lease release failed; it runs out at its expiry");
    }
}

/// The task stored with a web turn's promise: the input (so the follow-up re-runs the same
/// agent with the same options), the person's text under `prompt` (what the worker's gate
/// reads), and, filled in by [`WebKeeper`], the Markdown already delivered.
fn follow_up_task<O: serde::Serialize>(input: &ChatInput<O>, gate: bool) -> FollowUpTask {
    let stored = json!({
        "prompt": input.text(),
        "input": input,
    });
    let task = FollowUpTask::new(FOLLOW_UP_HANDLER, stored, Mode::Interactive);
    if gate {
        task.with_gate(json!({"gate": "on"}))
    } else {
        task
    }
}

/// Stores a web turn's promise before its holding line goes out, for the chat's address, with
/// what was delivered before it.
struct WebKeeper {
    store: Store,
    address: Address,
    task: FollowUpTask,
}

impl PromiseKeeper for WebKeeper {
    fn keep<'a>(
        &'a self,
        promise: Promise<'a>,
    ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
        let (commitment, delivered) = (promise.commitment(), promise.delivered());
        Box::pin(async move {
            let mut task = self.task.clone();
            if let Some(input) = task.input.as_object_mut() {
                input.insert("delivered".to_owned(), delivered.into());
            }
            let plan = FollowUpPlan::for_commitment(commitment, MAX_FOLLOW_UP_DELAY);
            self.store
                .keep_commitment(commitment, &self.address, &task, plan)
                .await
                .map_err(|error| {
                    tracing::error!(target: "mesh_egress::web", error = %error, "the promise could not be stored; the holding line is not sent");
                    Box::new(error) as Box<dyn std::error::Error + Send + Sync>
                })
        })
    }
}

/// The worker's handler for web chat promises: re-runs the same [`ChatAgent`] on the stored
/// input, collects its answer, and returns what follows the delivered prefix. Registered under
/// [`FOLLOW_UP_HANDLER`] by [`WebChat::worker`](super::WebChat::worker).
pub struct FollowUp<A> {
    inner: Arc<Inner<A>>,
}

impl<A> FollowUp<A> {
    pub(super) fn new(inner: Arc<Inner<A>>) -> Self {
        Self { inner }
    }
}

/// A stored task that is not a web chat's.
#[derive(Debug, thiserror::Error)]
#[error("the stored follow-up is not a web chat turn")]
struct NotAWebTask;

impl<A: ChatAgent> Handler for FollowUp<A> {
    fn call<'a>(
        &'a self,
        task: &'a FollowUpTask,
        turn: &'a Turn,
    ) -> BoxFuture<'a, Result<AgentMessage, EgressError>> {
        Box::pin(async move {
            let stored = &task.input;
            let input: ChatInput<A::Options> = match stored.get("input").cloned() {
                Some(input) => serde_json::from_value(input).map_err(|_| {
                    EgressError::semantic(NotAWebTask, turn.attribution().clone())
                        .with_retryable(false)
                })?,
                None => {
                    return Err(
                        EgressError::semantic(NotAWebTask, turn.attribution().clone())
                            .with_retryable(false),
                    );
                }
            };
            let delivered = stored
                .get("delivered")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let answered = self
                .inner
                .agent
                .answer(ChatTurn::collect(turn, &input))
                .await;
            let answer = match answered.0 {
                Outcome::Collected(answer) => answer?,
                Outcome::Streamed(_) => {
                    return Err(
                        EgressError::semantic(NotAWebTask, turn.attribution().clone())
                            .with_retryable(false),
                    );
                }
            };
            crate::boundary::rest_after(delivered, answer)
        })
    }
}

impl<A> std::fmt::Debug for FollowUp<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FollowUp")
    }
}
