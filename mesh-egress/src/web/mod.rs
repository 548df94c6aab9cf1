//! The web chat surface (feature `web`, with a store): an axum router that speaks the AI SDK's
//! UI message stream (protocol v1) to a page using `useChat`, with the whole boundary behind
//! it.
//!
//! [`WebChat`] is built once from a [`Bot`] with a [`Store`] and the [`Endpoint`] it serves
//! ([`WebChat::from_bot`]), or from a store and a [`ChatAgent`] ([`WebChat::new`]); its
//! [`router`](WebChat::router) serves
//!
//! - `POST /api/chat`: the AI SDK's chat request (`id`, `messages`, `trigger`, `messageId`,
//!   and the page's typed options, the `O` of the route's [`ChatInput`]). The reply streams as
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
//! # One front door
//!
//! A web turn takes the [`Bot`]'s one path, as a turn of any other surface does: the chat
//! serves an [`Endpoint`] of the bot (an `#[egress_boundary]` handler taking a [`ChatInput`]
//! and returning `Result<AnswerStream, EgressError>`, registered with [`Bot::route`], or one
//! made of a [`ChatAgent`] by [`WebChat::new`]), and each request runs it with [`Bot::run_to`] into the chat's live
//! reply: resolve, gate, render first, keep the promise, commit, send each block. The bot
//! holds the chat's [`client`](WebChat::client), so its [`worker`](WebChat::worker) delivers
//! to any chat's address.
//!
//! # Durable and resumable
//!
//! Each part is committed to the outbox, with the chat's [`WebAddress`], before it streams
//! (the channel is the store's [`Durable`](crate::store::Durable) one), and a turn holds the
//! conversation's lease while it runs. A holding line's promise is stored (by the bot's store)
//! before the line goes; the bot's [`Worker`] ([`WebChat::worker`] builds one) keeps it: it
//! re-runs the same route on the stored input and delivers what follows the delivered prefix
//! to the chat's address, where it is listed by `GET /api/chat/{id}/messages` and, if a page
//! is reading, streamed live.
//!
//! # Whose chat is it
//!
//! A chat belongs to the [`Owner`] that created it: another identity gets `404 Not Found`
//! on every endpoint, never a word of it. The application says who is asking with its own
//! axum extractor (`router::<MyOwner>()`). Bodies are bounded ([`RequestLimits`]), and only
//! the last message's text is read: the history the agent sees comes from the store.
//!
//! ```no_run
//! use std::sync::Arc;
//! use mesh_egress::web::{ChatInput, Owner, NoOptions, WebChat};
//! use mesh_egress::store::Store;
//! use mesh_egress::{egress_boundary, AnswerStream, Bot, Cancellation, EgressError, Turn};
//! use axum::extract::FromRequestParts;
//! use axum::http::request::Parts;
//!
//! #[egress_boundary(interactive)]
//! async fn echo(turn: &Turn, input: ChatInput<NoOptions>) -> Result<AnswerStream, EgressError> {
//!     let text = format!("You said: {}", input.text());
//!     Ok(AnswerStream::from_chunks(turn, [Ok(text)]))
//! }
//!
//! /// The application's own idea of who is asking (here: a header its proxy sets).
//! struct User(Owner);
//! impl<S: Send + Sync> FromRequestParts<S> for User {
//!     type Rejection = ();
//!     async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ()> {
//!         let id = parts.headers.get("x-user").and_then(|v| v.to_str().ok()).ok_or(())?;
//!         Owner::new(id).map(User).map_err(drop)
//!     }
//! }
//! impl From<User> for Owner {
//!     fn from(user: User) -> Owner { user.0 }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bot = Bot::new().with_store(Store::open("sqlite:/var/lib/mesh/chat.db").await?);
//! let route = bot.route("echo", |turn: Turn, input: ChatInput<NoOptions>| async move {
//!     echo(&turn, input).await
//! });
//! let chat = WebChat::from_bot(bot, route).ok_or("the bot has no store")?;
//! let worker = chat.worker("web-worker-1");
//! let shutdown = Cancellation::new();
//! tokio::spawn(async move { worker.run(&shutdown).await });
//! let app = axum::Router::new().merge(chat.router::<User>());
//! # let _ = app; Ok(()) }
//! ```

mod agent;
mod client;
mod live;
mod messages;
mod owner;
mod protocol;
mod request;
mod routes;
mod turn;

use std::time::Duration;

use axum::extract::FromRequestParts;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use agent::{Answered, ChatAgent, ChatInput, ChatLine, ChatRole, ChatTurn, NoOptions};
pub use client::WebClient;
pub use owner::{MAX_OWNER, Owner, OwnerError};
pub use protocol::{DONE, Interruption, MessageMetadata, UiChunk};
pub use request::{Refusal, RequestLimits};
pub use turn::FOLLOW_UP_HANDLER;

use std::sync::Arc;

#[cfg(doc)]
use crate::address::WebAddress;
use crate::bot::{Bot, Endpoint};
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

/// A web chat surface: the bot and the route it serves, the bot's store, the bounds, and the
/// live replies its router and its client share (see the [module docs](self)). `O` is the
/// page's options (the route's [`ChatInput`]'s).
pub struct WebChat<O> {
    bot: Bot,
    route: Endpoint<ChatInput<O>>,
    store: Store,
    limits: RequestLimits,
    renderer: WebMarkdown,
    agent_name: String,
    turn_timeout: Duration,
    lease_ttl: Duration,
    holder: String,
    replies: Arc<Replies>,
}

/// What the router and its turns share.
pub(crate) struct Inner<O> {
    /// The chat's bot, holding the chat's client.
    bot: Bot,
    route: Endpoint<ChatInput<O>>,
    store: Store,
    limits: RequestLimits,
    agent_name: String,
    turn_timeout: Duration,
    lease_ttl: Duration,
    holder: String,
    replies: Arc<Replies>,
    client: WebClient,
}

impl<O> Inner<O> {
    /// A new run id: one turn, one assistant message.
    fn new_run(&self) -> String {
        format!("msg-{:032x}", crate::id::unique_u128())
    }
}

/// What a page's options must be to travel with a turn: read from its request, stored with
/// its promise, re-read by the worker (the bounds of [`WebChat`]'s methods, named once for the
/// crate's own functions).
pub(crate) trait PageOptions: Serialize + DeserializeOwned + Send + Sync + 'static {}

impl<O: Serialize + DeserializeOwned + Send + Sync + 'static> PageOptions for O {}

impl<O> WebChat<O>
where
    O: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// A web chat on `store` answered by `agent`: a bot on `store` (the default policy, no
    /// gate) serving `agent` as its route [`FOLLOW_UP_HANDLER`], with the default
    /// [`RequestLimits`], [`WebMarkdown`] and the lease length of `MESH_WORKER_LEASE_MS`.
    pub fn new<A: ChatAgent<Options = O>>(store: Store, agent: A) -> Self {
        let bot = Bot::new().with_store(store.clone());
        let route = agent::agent_route(&bot, FOLLOW_UP_HANDLER, agent);
        Self::serving(bot, route, store)
    }

    /// A web chat serving `route` of `bot`, in the bot's store: each request's turn runs the
    /// route ([`Bot::run_to`]) with the bot's policies and gate, and its promise is the bot's.
    /// `None` when the bot has no store (a web chat's chats, turns and leases live there).
    pub fn from_bot(bot: Bot, route: Endpoint<ChatInput<O>>) -> Option<Self> {
        let store = bot.store()?.clone();
        Some(Self::serving(bot, route, store))
    }

    fn serving(bot: Bot, route: Endpoint<ChatInput<O>>, store: Store) -> Self {
        Self {
            bot,
            route,
            store,
            limits: RequestLimits::default(),
            renderer: WebMarkdown::new(),
            agent_name: "web-chat".to_owned(),
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            lease_ttl: crate::store::Lease::ttl_from_env().0,
            holder: format!("web-{:x}", crate::id::unique_u128()),
            replies: Arc::new(Replies::default()),
        }
    }

    /// Layer C's policy, for the chat's bot: holding lines, handoff, follow-up plan, silence
    /// tokens.
    pub fn with_policy(mut self, policy: DegradationPolicy) -> Self {
        self.bot = self.bot.with_policy(policy);
        self
    }

    /// The quality gate every block is checked by before it streams (and every follow-up,
    /// by the [`worker`](Self::worker)), for the chat's bot.
    pub fn with_gate(mut self, gate: QualityGate) -> Self {
        self.bot = self.bot.with_gate(gate);
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

    /// The chat's bot, with the chat's [`client`](Self::client) among its clients.
    fn served_bot(&self) -> Bot {
        self.bot.clone().with_client(self.client())
    }

    fn inner(&self) -> Arc<Inner<O>> {
        Arc::new(Inner {
            bot: self.served_bot(),
            route: self.route.clone(),
            store: self.store.clone(),
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
    /// into an [`Owner`]); when it rejects a request, the request gets
    /// [`Refusal::Unidentified`].
    pub fn router<I>(&self) -> axum::Router
    where
        I: FromRequestParts<()> + Into<Owner> + Send + 'static,
    {
        routes::router::<O, I>(self.inner())
    }

    /// The web surface's client: it delivers to any chat's address, and a page reading that
    /// chat sees the delivery live. The chat's bot holds it.
    pub fn client(&self) -> WebClient {
        WebClient::new(Arc::clone(&self.replies), self.store.clone(), self.renderer)
    }

    /// The bot's [`Worker`] on the same store (see [`Bot::worker`]), with the chat's
    /// [`client`](Self::client) among its clients: it keeps this chat's promises by re-running
    /// the same route, gated by the bot's gate, and sends what a restart left in its outbox;
    /// it holds claims as `holder`. Build it after every route is registered.
    pub fn worker(&self, holder: impl Into<String>) -> Worker {
        Worker::new(self.served_bot(), self.store.clone(), holder.into())
    }
}

impl<O> std::fmt::Debug for WebChat<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebChat")
            .field("bot", &self.bot)
            .field("route", &self.route)
            .field("agent_name", &self.agent_name)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}
