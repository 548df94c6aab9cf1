//! Running one web chat turn: the one place a request's turn leaves for the page, through
//! the chat's [`Bot`](crate::Bot).
//!
//! [`run`] is what a `POST /api/chat` does once it was accepted (the chat is the identity's,
//! the conversation's lease is held, the live reply begun): it builds the [`Turn`] (the bot's,
//! with the lease's ownership, the turn timeout and the person's message for the gate), runs
//! the chat's route into the outbox-backed web channel with
//! [`Bot::run_to`](crate::Bot::run_to) (resolve, gate, render first, keep the promise, commit,
//! send each block), and ends the live reply. A promise is the bot's to keep: its worker
//! ([`WebChat::worker`](super::WebChat::worker)) re-runs the same route.

use std::sync::Arc;

use super::agent::ChatInput;
use super::live::LiveReply;
use super::protocol::{Interruption, MessageMetadata};
use super::{Inner, PageOptions};
use crate::address::{Address, WebAddress};
use crate::bot::Outcome;
use crate::egress::Attribution;
use crate::store::{Lease, Renewal};

/// The name [`WebChat::new`](super::WebChat::new) registers its [`ChatAgent`](super::ChatAgent)'s
/// route under: the name a web chat's promises are stored under and its worker re-runs.
pub const FOLLOW_UP_HANDLER: &str = "mesh-egress.web.answer";

/// The conversation a chat's rows are stored under: prefixed, so a chat id never collides with
/// another surface's conversation in the same store.
pub(super) fn conversation_of(chat: &WebAddress) -> String {
    format!("web:{}", chat.chat())
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
pub(super) async fn run<O: PageOptions>(inner: Arc<Inner<O>>, accepted: Accepted<O>) {
    let Accepted {
        chat,
        run,
        input,
        lease,
        renewal,
        reply,
    } = accepted;
    let guard = EndOnDrop(Arc::clone(&reply));
    let attribution = Attribution::new(
        inner.agent_name.as_str(),
        conversation_of(&chat),
        run.as_str(),
    );
    let turn = inner
        .bot
        .turn(Address::Web(chat.clone()), attribution)
        .with_ownership(lease.ownership())
        .with_timeout(inner.turn_timeout)
        .with_input(input.text());
    let channel = inner
        .store
        .channel(inner.client.turn_channel(chat.clone(), Arc::clone(&reply)))
        .with_ledger(turn.ledger().clone());
    match inner.bot.run_to(&turn, &channel, &inner.route, input).await {
        Ok(delivery) => {
            let promised = matches!(delivery.promise(), Some(crate::bot::Promise::Bot(_)));
            tracing::info!(target: "mesh_egress::web", chat = chat.chat(), outcome = ?delivery.outcome(), messages = delivery.receipts().len(), promised, "web turn ended");
            if let Outcome::Stopped(reason) = delivery.outcome() {
                tracing::warn!(target: "mesh_egress::web", chat = chat.chat(), reason = reason.as_str(), "web turn stopped before its end");
            }
            reply.finish(promised.then_some(MessageMetadata { follow_up: true }));
        }
        Err(error) => {
            // The outbox refused a block or a line (the store failed, the lease moved on):
            // what was committed stays for a worker; the page gets the fixed sentence.
            tracing::error!(target: "mesh_egress::web", chat = chat.chat(), error = %error, "a web reply could not be delivered");
            reply.fail(Interruption::Interrupted);
        }
    }
    drop(guard);
    drop(channel);
    drop(renewal);
    if let Err(error) = inner.store.release(lease).await {
        tracing::warn!(target: "mesh_egress::web", chat = chat.chat(), error = %error, "lease release failed; it runs out at its expiry");
    }
}
