//! The web chat surface (feature `web`, with a store): an axum router that speaks the AI SDK's
//! UI message stream (protocol v1) to a page using `useChat`, with the whole boundary behind
//! it.
//!
//! [`WebChat`] is built once from the [`Store`] and the application's [`ChatAgent`]; its
//! [`router`](WebChat::router) serves
//!
//! - `POST /api/chat`: the AI SDK's chat request (`id`, `messages`, `trigger`, `messageId`,
//!   and the page's typed [`options`](ChatAgent::Options)). The reply streams as
//!   `text/event-stream`, one `data: {json}` event per chunk (`start`, then per delivered part
//!   `text-start`/`text-delta`/`text-end` with paired ids, then `finish`), ending with
//!   `data: [DONE]`, with the headers the AI SDK's own server sends
//!   (`STREAM_HEADERS`);
//! - `GET /api/chat/{id}/stream`: the AI SDK's resume. It replays the reply being written, or
//!   the last one no page read to its end, from `start` (the SDK's `DefaultChatTransport`
//!   resets the message on `start`); `204 No Content` when there is none;
//! - `GET /api/chat/{id}/messages`: the chat's delivered messages as `UIMessage`s, a kept
//!   promise's follow-up included (see below). A page asks for it when it loads and when it
//!   regains focus.
//!
//! # Nothing internal reaches the browser
//!
//! Every word on the wire is a delivered part: an answer's blocks (each through the gate's
//! block check before it streams), or Layer C's holding line or handoff, as ordinary text.
//! No chunk carries a cause: the one `error` chunk, sent only when a reply cannot be finished
//! (its outbox failed after it began), holds a fixed sentence ([`Interruption`]). A request
//! refused before it streams gets a status and a fixed sentence ([`Refusal`]); tool calls and
//! their errors are never streamed (only text is).
//!
//! # Durable and resumable
//!
//! Each part is committed to the outbox, with the chat's [`WebAddress`], before it streams
//! (the channel is the store's [`Durable`](crate::store::Durable) one), and a turn holds the
//! conversation's lease while it runs. A holding line's promise is stored before the line
//! goes; a [`Worker`] with this chat's [`client`](WebChat::client) and
//! [`follow_up`](WebChat::follow_up) handler ([`WebChat::worker`] builds one) keeps it: it
//! re-runs the same agent on the stored input and delivers what follows the delivered prefix
//! to the chat's address, where it is listed by `GET /api/chat/{id}/messages` and, if a page
//! is reading, streamed live.
//!
//! # Whose chat is it
//!
//! A chat belongs to the [`Identity`] that created it: another identity gets `404 Not Found`
//! on every endpoint, never a word of it. The application says who is asking with its own
//! axum extractor (`router::<MyIdentity>()`). Bodies are bounded ([`RequestLimits`]), and only
//! the last message's text is read: the history the agent sees comes from the store.
//!
//! ```no_run
//! use mesh_egress::web::{Answered, ChatAgent, ChatTurn, Identity, NoOptions, WebChat};
//! use mesh_egress::BoxFuture;
//! use mesh_egress::store::Store;
//! use mesh_egress::stream::ChunkSource;
//! use mesh_egress::{Cancellation, EgressError};
//! use axum::extract::FromRequestParts;
//! use axum::http::request::Parts;
//!
//! struct Echo;
//! impl ChatAgent for Echo {
//!     type Options = NoOptions;
//!     fn answer<'a>(&'a self, chat: ChatTurn<'a, NoOptions>) -> BoxFuture<'a, Answered> {
//!         Box::pin(async move {
//!             let text = format!("You said: {}", chat.input().text());
//!             chat.stream(ChunkSource::<EgressError>::new([text])).await
//!         })
//!     }
//! }
//!
//! /// The application's own idea of who is asking (here: a header its proxy sets).
//! struct User(Identity);
//! impl<S: Send + Sync> FromRequestParts<S> for User {
//!     type Rejection = ();
//!     async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ()> {
//!         let id = parts.headers.get("x-user").and_then(|v| v.to_str().ok()).ok_or(())?;
//!         Identity::new(id).map(User).map_err(drop)
//!     }
//! }
//! impl From<User> for Identity {
//!     fn from(user: User) -> Identity { user.0 }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::open("sqlite:/var/lib/mesh/chat.db").await?;
//! let chat = WebChat::new(store, Echo);
//! let worker = chat.worker("web-worker-1");
//! let shutdown = Cancellation::new();
//! tokio::spawn(async move { worker.run(&shutdown).await });
//! let app = axum::Router::new().merge(chat.router::<User>());
//! # let _ = app; Ok(()) }
//! ```

mod agent;
mod client;
mod deadline;
mod identity;
mod live;
mod live_turn;
mod messages;
mod protocol;
mod request;
mod routes;
mod turn;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRequestParts;

pub use agent::{Answered, ChatAgent, ChatInput, ChatLine, ChatRole, ChatTurn, NoOptions};
pub use client::WebClient;
pub use identity::{Identity, IdentityError, MAX_IDENTITY};
pub use protocol::{DONE, Interruption, MessageMetadata, UiChunk};
pub use request::{Refusal, RequestLimits};
pub use turn::FOLLOW_UP_HANDLER;
pub use turn::FollowUp;

#[cfg(doc)]
use crate::address::WebAddress;
use crate::channel::WebMarkdown;
use crate::degrade::DegradationPolicy;
use crate::gate::QualityGate;
use crate::store::Store;
use crate::worker::Worker;
use live::Replies;

/// How many turns of a chat are read back: the history an agent sees and the messages a page
/// lists are the chat's recent end.
const MAX_TURNS: u32 = 200;
/// How long a turn may run before it is stopped (Layer C answers for what was not delivered).
const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(180);

/// A web chat surface: the store, the agent, the policies, and the live replies its router and
/// its client share (see the [module docs](self)).
pub struct WebChat<A> {
    store: Store,
    agent: Arc<A>,
    policy: DegradationPolicy,
    gate: QualityGate,
    limits: RequestLimits,
    renderer: WebMarkdown,
    agent_name: String,
    turn_timeout: Duration,
    lease_ttl: Duration,
    holder: String,
    replies: Arc<Replies>,
}

/// What the router, the client and the follow-up handler share.
pub(crate) struct Inner<A> {
    store: Store,
    agent: Arc<A>,
    policy: DegradationPolicy,
    gate: QualityGate,
    gate_on: bool,
    limits: RequestLimits,
    agent_name: String,
    turn_timeout: Duration,
    lease_ttl: Duration,
    holder: String,
    replies: Arc<Replies>,
    client: WebClient,
}

impl<A> Inner<A> {
    /// A new run id: one turn, one assistant message.
    fn new_run(&self) -> String {
        format!("msg-{:032x}", crate::id::unique_u128())
    }
}

impl<A: ChatAgent> WebChat<A> {
    /// A web chat on `store` answered by `agent`, with the default policy, no gate, the
    /// default [`RequestLimits`], [`WebMarkdown`] and the lease length of
    /// `MESH_WORKER_LEASE_MS`.
    pub fn new(store: Store, agent: A) -> Self {
        Self {
            store,
            agent: Arc::new(agent),
            policy: DegradationPolicy::default(),
            gate: QualityGate::off(),
            limits: RequestLimits::default(),
            renderer: WebMarkdown::new(),
            agent_name: "web-chat".to_owned(),
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            lease_ttl: crate::store::Lease::ttl_from_env().0,
            holder: format!("web-{:x}", crate::id::unique_u128()),
            replies: Arc::new(Replies::default()),
        }
    }

    /// Layer C's policy: holding lines, handoff, follow-up plan, silence tokens.
    pub fn with_policy(mut self, policy: DegradationPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The quality gate every block is checked by before it streams (and every follow-up,
    /// by the [`worker`](Self::worker)).
    pub fn with_gate(mut self, gate: QualityGate) -> Self {
        self.gate = gate;
        self
    }

    /// The bounds on a request.
    pub fn with_limits(mut self, limits: RequestLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The renderer (its part cap, part budget and link schemes).
    pub fn with_renderer(mut self, renderer: WebMarkdown) -> Self {
        self.renderer = renderer;
        self
    }

    /// The agent's name in every turn's [`Attribution`](crate::Attribution) (default
    /// `web-chat`).
    pub fn with_agent_name(mut self, name: impl Into<String>) -> Self {
        self.agent_name = name.into();
        self
    }

    /// How long one turn may run (default 3 minutes).
    pub fn with_turn_timeout(mut self, timeout: Duration) -> Self {
        self.turn_timeout = timeout;
        self
    }

    /// How long a turn's lease on its conversation lasts without renewal.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl.max(Duration::from_millis(1));
        self
    }

    fn inner(&self) -> Arc<Inner<A>> {
        Arc::new(Inner {
            store: self.store.clone(),
            agent: Arc::clone(&self.agent),
            policy: self.policy.clone(),
            gate: self.gate.clone(),
            gate_on: self.gate.is_on(),
            limits: self.limits,
            agent_name: self.agent_name.clone(),
            turn_timeout: self.turn_timeout,
            lease_ttl: self.lease_ttl,
            holder: self.holder.clone(),
            replies: Arc::clone(&self.replies),
            client: self.client(),
        })
    }

    /// The router to mount: `POST /api/chat`, `GET /api/chat/{id}/stream`,
    /// `GET /api/chat/{id}/messages`. `I` is the application's extractor of who is asking
    /// (any `FromRequestParts<()>`, such as one generic over every state, whose value converts
    /// into an [`Identity`]); when it rejects a request, the request gets
    /// [`Refusal::Unidentified`].
    pub fn router<I>(&self) -> axum::Router
    where
        I: FromRequestParts<()> + Into<Identity> + Send + 'static,
    {
        routes::router::<A, I>(self.inner())
    }

    /// The web surface's client, for a [`Worker`]: it delivers to any chat's address, and a
    /// page reading that chat sees the delivery live.
    pub fn client(&self) -> WebClient {
        WebClient::new(Arc::clone(&self.replies), self.store.clone(), self.renderer)
    }

    /// The follow-up handler that keeps this chat's promises: the same agent, re-run. Register
    /// it under [`FOLLOW_UP_HANDLER`].
    pub fn follow_up(&self) -> FollowUp<A> {
        FollowUp::new(self.inner())
    }

    /// A [`Worker`] on the same store that keeps this chat's promises and sends what a
    /// restart left in its outbox: the [`client`](Self::client), the
    /// [`follow_up`](Self::follow_up) handler, the policy and the gate, holding claims as
    /// `holder`.
    pub fn worker(&self, holder: impl Into<String>) -> Worker {
        let worker = Worker::new(self.store.clone(), holder)
            .with_client(self.client())
            .with_policy(self.policy.clone())
            .register(FOLLOW_UP_HANDLER, self.follow_up());
        if self.gate.is_on() {
            let gate = self.gate.clone();
            worker.with_gate(move |_| gate.clone())
        } else {
            worker
        }
    }
}

impl<A> std::fmt::Debug for WebChat<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebChat")
            .field("agent_name", &self.agent_name)
            .field("limits", &self.limits)
            .field("gate", &self.gate.is_on())
            .finish_non_exhaustive()
    }
}
