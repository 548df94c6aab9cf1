//! Delivery to user channels: [`Channel`] (one per chat surface), [`Deliver`] (the typed
//! pre-render boundary every channel gets), renderers, and the in-memory and stdout channels.
//!
//! ```
//! use mesh_egress::{AgentMessage, Attribution};
//! use mesh_egress::channel::{Deliver, Recorder};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = Recorder::new();
//! let receipt = channel
//!     .deliver(AgentMessage::new("Deployed **v2**.", Attribution::new("ops", "c1", "r1")))
//!     .await?;
//! assert_eq!(receipt.len(), 1);
//! assert_eq!(channel.sent(), ["Deployed v2."]);
//! # Ok(()) }
//! ```
//!
//! # Renderers
//!
//! [`PlainText`], [`SlackMrkdwn`], [`DiscordMarkdown`] and [`TelegramHtml`] (the last three
//! with the `markdown` feature, on by default) parse the canonical Markdown once and write a
//! stream of unsplittable atoms: grapheme runs, escapes, line prefixes, breaks, and paired
//! style and fence markers. One chunker, shared by every channel, packs the atoms into parts
//! measured in the channel's own unit (code points; Telegram: UTF-16 units after entity
//! parsing, and at most 100 entities). It ends a part at the strongest break that leaves it at
//! least half full (paragraph, line, sentence, word), hard-cuts at a grapheme boundary only when
//! nothing else fits, and closes the fences and styles a cut goes through at the end of the part
//! and reopens them at the start of the next, counting those markers against the limit. A limit
//! too small for one piece is [`RenderError::LimitTooSmall`]; a body that renders to nothing
//! visible (blank, an empty code fence, a lone `>`, only a link reference definition) is
//! [`RenderError::Empty`] on every renderer.
//!
//! The parts concatenate to the rendered text (whitespace dropped at a cut and reopened
//! markers aside) **except at a part budget cut**: every built-in renderer sends at most
//! `max_parts` parts per reply ([`DEFAULT_MAX_PARTS`], ten; `with_max_parts` changes it). A
//! longer reply is cut at a clean boundary and its last part ends in "… (reply shortened)";
//! [`Render::render_parts`] returns the parts with the [`PartBudgetCut`] (parts kept, the
//! budget, bytes left out) so the boundary can record it. For genuinely long output (a log, a
//! report, a listing) send a file or a link to it instead, or raise the budget.
//!
//! Model text is treated as hostile. Rendering never recurses on the input's nesting, so any
//! reply renders on a small stack in time, memory and output linear in its size; nesting past
//! 16 levels (quotes, lists, emphasis, links, images) keeps its words but not its structure.
//! Links are live only for [`DEFAULT_LINK_SCHEMES`] (`http`, `https`, `mailto`;
//! `with_link_schemes` changes the list); `javascript:`, `data:`, `file:`, `tg://`, relative,
//! fragment-only and empty targets are shown as text, links never nest, and a label that reads
//! as another address shows its real target beside it. C0 and C1 control characters (but
//! newline and tab) and the bidi embedding, override and isolate characters are removed by
//! every renderer, [`PlainText`] included. What each surface does with `@name`, `@everyone`,
//! `<@123>` or `<!channel>` written by a model is on [`SlackMrkdwn`], [`DiscordMarkdown`] and
//! [`TelegramHtml`]: nothing notifies.
//!
//! A renderer can be chosen at run time as a `Box<dyn Render>`:
//!
//! ```
//! # #[cfg(feature = "markdown")] {
//! use mesh_egress::Markdown;
//! use mesh_egress::channel::{DiscordMarkdown, Render, TelegramHtml};
//! let renderer: Box<dyn Render> = if true { Box::new(DiscordMarkdown::new().with_limit(40)) }
//!     else { Box::new(TelegramHtml::new()) };
//! let parts = renderer.render(&Markdown::new("**A bold claim that runs on past forty code points.**")).unwrap();
//! assert_eq!(parts, ["**A bold claim that runs on past forty**", "**code points.**"]);
//! # }
//! ```
//!
//! # Connectors over HTTP
//!
//! With the feature `http`: [`SlackChannel`], [`DiscordChannel`] and
//! [`TelegramChannel`], and the clients they are made from, [`SlackClient`], [`DiscordClient`]
//! and [`TelegramClient`].
//!
//! ## Clients and channels
//!
//! A client is one bot token on one surface, and holds what every conversation of that bot
//! shares: the API base, the HTTP client (its connection pool), the [`SendPolicy`], the token
//! (redacted everywhere), the bot-wide rate-limit pause (Discord's `global` limit), and one
//! rate budget per chat ([`BudgetConfig`](crate::channel::stream::BudgetConfig)). A channel
//! is one conversation: the client and an [`Address`] of its surface, made with
//! `client.channel(address)`. Two channels made for the same chat share its budget (Slack's
//! and Telegram's limits are per channel or chat, so the threads and topics of one chat share
//! it too); the client remembers at most 10,000 chats' budgets (see
//! `with_budget_capacity`), forgetting the least recently used first, so a bot in a million
//! chats does not grow without bound. `SlackChannel::new(token, channel)` and its siblings are
//! the shorthand for a client of their own and one address; `for_channel`/`for_chat` give the
//! same client's channel to another conversation.
//!
//! Every client is a [`SurfaceClient`], so a worker (or any
//! code that reads a conversation's address at run time) holds clients, not channels, and
//! makes the channel for each stored address:
//!
//! ```
//! use mesh_egress::address::SlackAddress;
//! use mesh_egress::channel::{Channel, SlackClient, SurfaceClient};
//! use mesh_egress::{Address, Surface};
//!
//! let slack = SlackClient::new("xoxb-…");
//! let ops = slack.channel(SlackAddress::new("C0123456789"));
//! let thread = slack.channel(SlackAddress::new("C0123456789").in_thread("1700000000.000100"));
//! // Two places in one chat: they share its rate budget (Slack's limit is per channel).
//! assert_ne!(ops.address(), thread.address());
//! let stored = Address::from(SlackAddress::new("C0987654321"));
//! assert_eq!(slack.channel_for(&stored).unwrap().address(), stored);
//! assert_eq!(SurfaceClient::surface(&slack), Surface::Slack);
//! ```
//!
//! Each is a [`Channel`], generic over its renderer, so [`Deliver`]
//! renders, commits and sends every part in order. One part is one API call; a call that fails is
//! retried within a [`SendPolicy`] (a bounded number of tries and a bounded total wait per part),
//! honouring each surface's own rate-limit answer. A part that still fails comes back inside a
//! [`SendError`], so the [`DeliveryError`] names the parts
//! that went and carries the ones that did not; delivering its
//! [`Undelivered`] sends only those, in order.
//!
//! ## Mentions
//!
//! Model text is untrusted, so no connector lets a reply notify people unless the application
//! opted in. What each surface does with mention-like text:
//!
//! - **Discord** notifies only for `<@id>`, `<@&role>`, `@everyone` and `@here`; every message
//!   carries `allowed_mentions: {"parse": []}`, so none of them pings anyone unless its user or
//!   role is on the [`AllowedMentions`] list given to
//!   [`DiscordChannel::with_allowed_mentions`]. A plain `@name` is plain text.
//! - **Slack** notifies only for `<@U…>`, `<!here>`, `<!channel>`, `<!everyone>` and
//!   `<!subteam^…>`. A plain `@name` (or `@here`) is not turned into a mention, because the
//!   connector never sets `link_names`; the Slack renderer escapes `<`, `>` and `&`, so model
//!   text cannot write those forms.
//! - **Telegram** itself recognises a plain `@username` as a mention of that public username,
//!   and notifies that user if they are in the chat; the Bot API has no switch to turn this off
//!   for text the bot sends. Mentions by id (`tg://user?id=…` links) are the renderer's to
//!   keep from being live.
//!
//! Tokens never appear in an error's text, a `Debug` output or a log line: they are held in a
//! redacting wrapper, transport errors are stripped of their URL (a Telegram token lives in the
//! URL path), and any text a surface sends back is scrubbed of the token before it is kept.
//!
//! ```no_run
//! use mesh_egress::channel::{Deliver, SlackChannel};
//! use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Reply, Turn};
//!
//! #[egress_boundary(interactive)]
//! async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
//!     Ok(AgentMessage::new("The build is **green**.", turn.attribution().clone()))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let slack = SlackChannel::new(std::env::var("SLACK_BOT_TOKEN")?, "C0123456789");
//! let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
//! let reply: Reply = answer(&turn).await;
//! slack.deliver(reply).await?;
//! # Ok(()) }
//! ```

#[cfg(feature = "markdown")]
mod atom;
mod boxed;
#[cfg(feature = "markdown")]
mod chunk;
mod client;
mod deliver;
#[cfg(feature = "markdown")]
mod discord;
#[cfg(feature = "markdown")]
mod format;
#[cfg(feature = "http")]
mod http;
mod lookup;
mod plain;
mod recorder;
#[cfg(feature = "markdown")]
mod slack;
mod stdout;
pub mod stream;
#[cfg(feature = "markdown")]
mod telegram;
#[cfg(all(test, feature = "markdown"))]
mod tests;
mod unserved;

use std::future::Future;
use std::time::SystemTime;

pub use crate::render::{DEFAULT_MAX_PARTS, PartBudgetCut, Render, RenderError, RenderedParts};
pub use boxed::{BoxedChannel, BoxedRenderer, DynChannel};
pub use client::SurfaceClient;
pub(crate) use deliver::deliver_rendered;
#[cfg(feature = "markdown")]
pub(crate) use deliver::send_committed_parts;
pub use deliver::{
    Deliver, Deliverable, Delivering, DeliveryError, PartReceipt, Receipt, SendError, Undelivered,
};
#[cfg(feature = "markdown")]
pub use format::{DEFAULT_LINK_SCHEMES, WebMarkdown};
pub use lookup::PartLookup;
pub use plain::PlainText;
pub use recorder::Recorder;
pub use stdout::Stdout;
pub use unserved::UnservedAddress;
#[cfg(feature = "markdown")]
pub use {
    discord::DiscordMarkdown, slack::SlackMarkdown, slack::SlackMrkdwn, telegram::TelegramHtml,
};

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use http::{
    AllowedMentions, ChannelError, ChannelErrorKind, DEFAULT_MAX_RESPONSE_BYTES, SendPolicy,
};
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use {
    discord::{DiscordChannel, DiscordClient},
    slack::{SlackChannel, SlackClient},
    telegram::{TelegramChannel, TelegramClient},
};

use crate::address::Address;
use crate::outbound::{CommitBoundary, CommitError, CommitRecord, CommittedPart};

/// A chat surface a person reads: Slack, Discord, Telegram, a web chat, a test recorder.
///
/// Implement it once per surface: name the renderer (its format and limits) and how one part is
/// sent. Every `Channel` gets [`Deliver`], which renders, commits and sends each part in order;
/// `send` itself only ever receives a [`CommittedPart`], so an `EgressError` or unrendered
/// Markdown has no way in.
///
/// ```
/// use std::future::Future;
/// use mesh_egress::CommittedPart;
/// use mesh_egress::channel::{Channel, PartReceipt, PlainText, SendError};
///
/// struct Log { renderer: PlainText }
///
/// impl Channel for Log {
///     type Renderer = PlainText;
///     fn renderer(&self) -> &PlainText { &self.renderer }
///     fn send(&self, part: CommittedPart) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
///         async move {
///             println!("{}", part.text());
///             Ok(PartReceipt::new(part.idempotency_key()))
///         }
///     }
/// }
/// ```
pub trait Channel: Send + Sync {
    /// The renderer for this surface's format and limits.
    type Renderer: Render;

    /// The renderer [`Deliver`] uses.
    fn renderer(&self) -> &Self::Renderer;

    /// Where this channel sends: the conversation's [`Address`] on its surface. A durable
    /// outbox (`mesh_egress::store`, features `sqlite`/`postgres`) stores it with every part it
    /// commits through the channel, so whoever sends the part later sends it there, and the
    /// surface's duplicate rules are chosen by it.
    ///
    /// The default is [`Address::Plain`]: a channel with one destination and no dedupe
    /// (stdout, a recorder, a log). `SlackChannel`, `DiscordChannel` and `TelegramChannel`
    /// (feature `http`) answer with the chat they post to. A channel that wraps another must
    /// forward it, as [`BoxedChannel`] does.
    fn address(&self) -> Address {
        Address::Plain
    }

    /// Crosses the commit boundary for one message (ownership check, durable record). The
    /// default accepts in memory.
    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        let _ = record;
        std::future::ready(Ok(()))
    }

    /// Sends one committed part. On failure, hand the part back inside the [`SendError`] so the
    /// delivery can be resumed.
    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send;

    /// Looks `part` up on the surface: whether an earlier send whose outcome is unknown (a
    /// timeout, a lost response, a crash mid-send) did post it. `since` is no later than that
    /// send's first try; a lookup reads only messages from around then on, and a bounded
    /// number of them.
    ///
    /// The default cannot tell ([`PartLookup::Unknown`]): a durable sender then relies on the
    /// surface's own dedupe, or marks the part `uncertain` (the duplicate rules of
    /// `mesh_egress::store`, features `sqlite`/`postgres`). `SlackChannel` (feature `http`)
    /// looks the part up by its message metadata.
    fn look_up(
        &self,
        part: &CommittedPart,
        since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        let _ = (part, since);
        std::future::ready(PartLookup::unknown(
            "this channel cannot look up a sent part",
        ))
    }
}

impl<C: Channel + ?Sized> CommitBoundary for C {
    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        Channel::commit(self, record)
    }
}
