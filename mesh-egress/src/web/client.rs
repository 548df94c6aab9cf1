//! [`WebClient`] and [`WebChannel`]: the web chat as a surface. "Sending" a part to a web chat
//! records it as delivered for that chat: the outbox marks it `sent` (what
//! `GET /api/chat/{id}/messages` lists), and the chat's live stream, if a page is reading it,
//! shows it at once.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::live::{LiveReply, Replies};
use crate::address::{Address, Surface, WebAddress};
use crate::channel::{
    BoxedChannel, Channel, PartLookup, PartReceipt, SendError, SurfaceClient, UnservedAddress,
    WebMarkdown,
};
use crate::outbound::CommittedPart;
use crate::store::{PartState, Store};

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
#[derive(Clone)]
pub(crate) struct WebChannel {
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
        if reply.append(&part) {
            // The outbox marks the part `sent` after this returns, and only `sent` parts are
            // listed: a page that read the follow-up to its end and then listed the chat
            // would miss it. So the reply ends once the mark is in.
            tokio::spawn(finish_once_listed(
                self.client.store.clone(),
                part.attribution().conversation().to_owned(),
                part.delivery_id().to_string(),
                part.index(),
                reply,
            ));
        }
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

/// How long a follow-up's reply waits for its last part's mark before it ends anyway.
const MARK_WAIT: Duration = Duration::from_secs(5);
/// How often it looks meanwhile.
const MARK_POLL: Duration = Duration::from_millis(10);

/// Ends `reply` once its last part (`delivery`, `index`) is no longer `sending` in the outbox
/// (sent, or settled otherwise), or after [`MARK_WAIT`]: a reader never waits unbounded.
async fn finish_once_listed(
    store: Store,
    conversation: String,
    delivery: String,
    index: usize,
    reply: Arc<LiveReply>,
) {
    let deadline = tokio::time::Instant::now() + MARK_WAIT;
    loop {
        let sending = match store.parts(&conversation).await {
            Ok(parts) => parts.iter().any(|p| {
                p.delivery == delivery && p.index == index && p.state == PartState::Sending
            }),
            Err(error) => {
                tracing::warn!(target: "mesh_egress::web", error = %error, "could not read a follow-up's mark; its reply ends now");
                false
            }
        };
        if !sending || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(MARK_POLL).await;
    }
    reply.finish(None);
}

impl fmt::Debug for WebChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebChannel")
            .field("chat", &self.chat)
            .field("turn", &self.reply.is_some())
            .finish_non_exhaustive()
    }
}
