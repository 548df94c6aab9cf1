//! [`WebClient`] and [`WebChannel`]: the web chat as a surface. "Sending" a part to a web chat
//! records it as delivered for that chat: the outbox marks it `sent` (what
//! `GET /api/chat/{id}/messages` lists), and the chat's live stream, if a page is reading it,
//! shows it at once.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use super::live::{LiveReply, Replies};
use crate::address::{Address, Surface, WebAddress};
use crate::channel::{
    BoxedChannel, Channel, PartLookup, PartReceipt, SendError, SurfaceClient, UnservedAddress,
    WebMarkdown,
};
use crate::outbound::CommittedPart;
use crate::store::Store;

/// The web chat's [`SurfaceClient`]: what a [`Worker`](crate::worker::Worker) holds to deliver
/// a kept promise (or a part left behind by a restart) to a chat's [`WebAddress`]. Made by
/// [`WebChat::client`](super::WebChat::client); clones share the live streams of the router
/// they came from, so a follow-up the worker delivers reaches a page that is reading.
#[derive(Clone)]
pub struct WebClient {
    replies: Arc<Replies>,
    store: Store,
    renderer: WebMarkdown,
}

impl WebClient {
    pub(super) fn new(replies: Arc<Replies>, store: Store, renderer: WebMarkdown) -> Self {
        Self {
            replies,
            store,
            renderer,
        }
    }

    /// The channel a turn streams its reply into: its parts go into `reply`.
    pub(super) fn turn_channel(&self, chat: WebAddress, reply: Arc<LiveReply>) -> WebChannel {
        WebChannel {
            client: self.clone(),
            chat,
            reply: Some(reply),
        }
    }
}

impl SurfaceClient for WebClient {
    fn surface(&self) -> Surface {
        Surface::Web
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match address {
            Address::Web(chat) => Ok(BoxedChannel::new(WebChannel {
                client: self.clone(),
                chat: chat.clone(),
                reply: None,
            })),
            other => Err(UnservedAddress::new(Surface::Web, other.clone())),
        }
    }
}

impl fmt::Debug for WebClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebClient")
            .field("renderer", &self.renderer)
            .finish_non_exhaustive()
    }
}

/// One web chat as a [`Channel`]: renders with [`WebMarkdown`], sends into the chat's live
/// reply. Wrapped in the store's [`Durable`](crate::store::Durable) channel, every part is
/// committed to the outbox before it is sent, and marked `sent` once it is.
pub struct WebChannel {
    client: WebClient,
    chat: WebAddress,
    /// The reply a turn is writing; `None` for a follow-up, which opens its own.
    reply: Option<Arc<LiveReply>>,
}

impl WebChannel {
    /// The live reply `part` goes into.
    async fn reply_for(&self, part: &CommittedPart) -> Arc<LiveReply> {
        if let Some(reply) = &self.reply {
            return Arc::clone(reply);
        }
        // A kept promise is a message of its own (listed under its delivery id); any other
        // part belongs to its turn's message (listed under its run).
        let delivery = part.delivery_id().to_string();
        let follow_up = match self.client.store.is_follow_up_delivery(&delivery).await {
            Ok(follow_up) => follow_up,
            Err(error) => {
                tracing::warn!(target: "mesh_egress::web", chat = self.chat.chat(), error = %error, "could not tell whether a part keeps a promise; shown as its turn's");
                false
            }
        };
        let message_id = if follow_up {
            delivery
        } else {
            part.attribution().run().to_owned()
        };
        self.client.replies.detached(self.chat.chat(), &message_id)
    }
}

impl Channel for WebChannel {
    type Renderer = WebMarkdown;

    fn renderer(&self) -> &WebMarkdown {
        &self.client.renderer
    }

    fn address(&self) -> Address {
        Address::Web(self.chat.clone())
    }

    async fn send(&self, part: CommittedPart) -> Result<PartReceipt, SendError> {
        let reply = self.reply_for(&part).await;
        reply.append(&part);
        Ok(PartReceipt::new(part.idempotency_key()))
    }

    /// The web chat is read from the outbox itself: a part whose send was cut short (a crash
    /// between the claim and the mark) was never listed, so sending it again cannot show it
    /// twice.
    fn look_up(
        &self,
        part: &CommittedPart,
        since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        let _ = (part, since);
        std::future::ready(PartLookup::NotFound)
    }
}

impl fmt::Debug for WebChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebChannel")
            .field("chat", &self.chat)
            .field("turn", &self.reply.is_some())
            .finish_non_exhaustive()
    }
}
