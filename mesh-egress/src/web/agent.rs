//! [`ChatInput`]: what one turn of a web chat answers, the input of the route a [`WebChat`]
//! serves; and [`ChatAgent`], the agent seam of [`WebChat::new`], which this file makes a route
//! of the chat's [`Bot`], so an agent's turn takes the front door's one path as an
//! `#[egress_boundary]` handler's does.
//!
//! The agent gets a [`ChatTurn`] (the turn, and the [`ChatInput`]: what the person wrote, the
//! chat so far, the page's typed options) and answers with a stream of text through
//! [`ChatTurn::stream`]: the text becomes the route's [`AnswerStream`], which the bot gates,
//! renders, commits to the outbox and sends block by block, Layer C answering for what was not
//! delivered. A worker keeping a promise re-runs the same route, so one agent serves both.
//! [`Answered`] can only come from [`ChatTurn::stream`]: an agent cannot finish a turn without
//! going through it.
//!
//! [`WebChat`]: super::WebChat
//! [`WebChat::new`]: super::WebChat::new

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::answer::{AnswerStream, Driven, Pull, StreamedReply};
use crate::bot::{Bot, Deadlined, Endpoint};
use crate::egress::EgressError;
use crate::future::BoxFuture;
use crate::reply::Mode;
use crate::stream::TextSource;
use crate::turn::Turn;

/// The application's chat agent: answers one turn of a web chat.
///
/// ```
/// use mesh_egress::web::{Answered, ChatAgent, ChatTurn, NoOptions};
/// use mesh_egress::stream::ChunkSource;
/// use mesh_egress::BoxFuture;
/// use mesh_egress::EgressError;
///
/// struct Echo;
///
/// impl ChatAgent for Echo {
///     type Options = NoOptions;
///     fn answer<'a>(&'a self, chat: ChatTurn<'a, NoOptions>) -> BoxFuture<'a, Answered> {
///         Box::pin(async move {
///             let text = format!("You said: {}", chat.input().text());
///             chat.stream(ChunkSource::<EgressError>::new([text])).await
///         })
///     }
/// }
/// ```
///
/// A real agent streams its model's answer, the request built from [`ChatInput::history`]
/// and [`ChatInput::text`]:
///
/// ```ignore
/// let turn = chat.turn();
/// chat.stream(router.stream(turn, &request)).await
/// ```
pub trait ChatAgent: Send + Sync + 'static {
    /// What the page sends beside the messages (the AI SDK's `body` option: a model choice,
    /// a mode), typed. [`NoOptions`] when it sends nothing. Stored with a promise, so a
    /// follow-up runs with the same options.
    type Options: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Answers `chat`: builds the model request from its input and hands the text stream to
    /// [`ChatTurn::stream`].
    fn answer<'a>(&'a self, chat: ChatTurn<'a, Self::Options>) -> BoxFuture<'a, Answered>;
}

/// The options of a page that sends none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoOptions {}

/// Who said a line of the chat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRole {
    /// The person.
    User,
    /// The agent (what was delivered, as the page showed it).
    Assistant,
}

/// One line of the chat so far, from the store (never from the request: a page's copy of the
/// history is the page's to forge).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatLine {
    role: ChatRole,
    text: String,
}

impl ChatLine {
    pub(super) fn new(role: ChatRole, text: String) -> Self {
        Self { role, text }
    }

    /// Who said it.
    pub fn role(&self) -> ChatRole {
        self.role
    }

    /// What was said.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// What one turn of a web chat answers: the person's message, the chat before it, and the
/// page's options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatInput<O> {
    chat: String,
    text: String,
    history: Vec<ChatLine>,
    options: O,
}

impl<O> ChatInput<O> {
    pub(super) fn new(chat: String, text: String, history: Vec<ChatLine>, options: O) -> Self {
        Self {
            chat,
            text,
            history,
            options,
        }
    }

    /// The chat's id.
    pub fn chat(&self) -> &str {
        &self.chat
    }

    /// What the person wrote (its text parts, joined).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The chat before this message, oldest first, bounded to its recent end.
    pub fn history(&self) -> &[ChatLine] {
        &self.history
    }

    /// The page's options.
    pub fn options(&self) -> &O {
        &self.options
    }
}

/// One turn handed to a [`ChatAgent`]: the [`Turn`] to run the model under, the input, and
/// the one way to answer ([`stream`](Self::stream)).
pub struct ChatTurn<'a, O> {
    turn: &'a Turn,
    input: &'a ChatInput<O>,
    pump: Pump,
}

/// The agent's side of the route's [`AnswerStream`]: the stream's pulls come in, one item goes
/// back for each (see [`Driven`]).
struct Pump {
    pulls: mpsc::UnboundedReceiver<Pull>,
    items: mpsc::UnboundedSender<crate::answer::Pulled>,
}

impl<'a, O> ChatTurn<'a, O> {
    /// The turn: pass it to the model. It outlives `self`, so take it before
    /// [`stream`](Self::stream) consumes the `ChatTurn`: `let turn = chat.turn();`.
    pub fn turn(&self) -> &'a Turn {
        self.turn
    }

    /// The input.
    pub fn input(&self) -> &'a ChatInput<O> {
        self.input
    }

    /// Whether this run keeps a promise (a worker's follow-up) rather than answering a
    /// request. An agent needs it only to tell the two apart in its own logs.
    pub fn is_follow_up(&self) -> bool {
        self.turn.is_follow_up()
    }

    /// Answers with `source`'s text (a [`RoutedStream`](crate::model::RoutedStream), or any
    /// [`TextSource`] with the turn's errors), as the stream of an `#[egress_boundary]`
    /// handler: on a request it goes to the page block by block, each block through the gate's
    /// block check, rendered, committed to the outbox, then streamed; a failure goes to Layer
    /// C, whose holding line or handoff arrives as ordinary text, and a holding line's promise
    /// is stored before it goes. On a follow-up the worker reads it whole. Either way it ends
    /// at the turn's deadline if it has not ended by then.
    pub async fn stream<S>(self, source: S) -> Answered
    where
        S: TextSource<Error = EgressError> + 'a,
    {
        let mut source = Deadlined::new(source, self.turn.deadline(), self.turn.attribution());
        let Pump { mut pulls, items } = self.pump;
        // As the Router's own answer stream does: report what was delivered, then read on.
        while let Some(pull) = pulls.recv().await {
            let (delivered, next) = match pull {
                Pull::Next { delivered } => (delivered, true),
                Pull::Close { delivered } => (delivered, false),
            };
            if !delivered.is_empty() {
                source.mark_delivered(&delivered);
            }
            if !next {
                break;
            }
            let item = source.next().await;
            let restarted = source.restarted();
            if items
                .send(crate::answer::Pulled { item, restarted })
                .is_err()
            {
                break;
            }
        }
        Answered(())
    }
}

/// `agent` as a route of `bot` registered under `name`: each run gives an interactive
/// [`StreamedReply`] whose stream is the agent's answer (the agent runs as the stream is read,
/// in the reader's task).
pub(super) fn agent_route<A: ChatAgent>(
    bot: &Bot,
    name: &str,
    agent: A,
) -> Endpoint<ChatInput<A::Options>> {
    let agent = Arc::new(agent);
    bot.route(name, move |turn: Turn, input: ChatInput<A::Options>| {
        let reply = answered_by(Arc::clone(&agent), turn, input);
        async move { reply }
    })
}

/// The stream of `agent`'s answer to `input` on `turn`.
fn answered_by<A: ChatAgent>(
    agent: Arc<A>,
    turn: Turn,
    input: ChatInput<A::Options>,
) -> StreamedReply {
    let (pulls_tx, pulls) = mpsc::unbounded_channel();
    let (items, items_rx) = mpsc::unbounded_channel();
    let attribution = turn.attribution().clone();
    let driver: BoxFuture<'static, ()> = Box::pin(async move {
        let chat = ChatTurn {
            turn: &turn,
            input: &input,
            pump: Pump { pulls, items },
        };
        let _answered = agent.answer(chat).await;
    });
    let stream = AnswerStream::driven(attribution, Driven::new(driver, pulls_tx, items_rx));
    StreamedReply::stream(stream, Mode::Interactive)
}

/// A turn that went through [`ChatTurn::stream`]; only that call makes one.
#[must_use = "return it from `ChatAgent::answer`"]
pub struct Answered(());

impl std::fmt::Debug for Answered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answered")
    }
}

impl<O> std::fmt::Debug for ChatTurn<'_, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTurn")
            .field("chat", &self.input.chat)
            .field("follow_up", &self.is_follow_up())
            .finish_non_exhaustive()
    }
}
