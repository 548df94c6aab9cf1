//! [`ChatAgent`]: what the application writes, the one place a web chat's turn is answered.
//!
//! The agent gets a [`ChatTurn`] (the turn, and the [`ChatInput`]: what the person wrote, the
//! chat so far, the page's typed options) and answers with a stream of text through
//! [`ChatTurn::stream`]. That call is the whole boundary for the web: gate, Layer C, render,
//! commit to the outbox, send, keep the promise. A [`ChatTurn`] is also how a worker re-runs
//! the same agent to keep a promise (its text is then collected, not streamed), so one agent
//! serves both. [`Answered`] can only come from [`ChatTurn::stream`]: an agent cannot finish a
//! turn without going through it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::deadline::Deadlined;
use super::live_turn::{Collected, LiveTurn, Streamed};
use crate::egress::{AgentMessage, EgressError};
use crate::future::BoxFuture;
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
    how: How<'a>,
}

/// Where the answer goes.
enum How<'a> {
    /// Streamed to the page through the boundary (a request).
    Live(&'a LiveTurn<'a>),
    /// Collected into one message (a worker keeping a promise).
    Collect,
}

impl<'a, O> ChatTurn<'a, O> {
    pub(super) fn live(turn: &'a Turn, input: &'a ChatInput<O>, live: &'a LiveTurn<'a>) -> Self {
        Self {
            turn,
            input,
            how: How::Live(live),
        }
    }

    pub(super) fn collect(turn: &'a Turn, input: &'a ChatInput<O>) -> Self {
        Self {
            turn,
            input,
            how: How::Collect,
        }
    }

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
        matches!(self.how, How::Collect)
    }

    /// Answers with `source`'s text (a [`RoutedStream`](crate::model::RoutedStream), or any
    /// [`TextSource`] with the turn's errors). On a request it goes to the page block by
    /// block: each block through the gate's block check, rendered, committed to the outbox,
    /// then streamed; a failure goes to Layer C, whose holding line or handoff arrives as
    /// ordinary text, and a holding line's promise is stored before it goes. On a follow-up
    /// the text is collected into one message for the worker.
    pub async fn stream<S>(self, source: S) -> Answered
    where
        S: TextSource<Error = EgressError> + 'a,
    {
        // The turn's deadline holds whatever the source does (see `deadline`).
        let source = Deadlined::new(source, self.turn.deadline(), self.turn.attribution());
        match self.how {
            How::Live(live) => Answered(Outcome::Streamed(Box::new(live.stream(source).await))),
            How::Collect => Answered(Outcome::Collected(collect(self.turn, source).await)),
        }
    }
}

/// Reads `source` to its end into one message.
async fn collect<S>(turn: &Turn, mut source: S) -> Collected
where
    S: TextSource<Error = EgressError>,
{
    let mut text = String::new();
    while let Some(delta) = source.next().await {
        let delta = delta?;
        source.mark_delivered(&delta);
        text.push_str(&delta);
    }
    Ok(AgentMessage::new(text, turn.attribution().clone()))
}

/// A turn that went through [`ChatTurn::stream`]; only that call makes one.
#[must_use = "return it from `ChatAgent::answer`"]
pub struct Answered(pub(super) Outcome);

/// What [`ChatTurn::stream`] came to.
pub(super) enum Outcome {
    /// Boxed: a stream's receipt is large, and an `Answered` moves through every agent.
    Streamed(Box<Streamed>),
    Collected(Collected),
}

impl std::fmt::Debug for Answered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Outcome::Streamed(_) => "Answered(streamed)",
            Outcome::Collected(_) => "Answered(collected)",
        })
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
