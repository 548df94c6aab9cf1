//! The state a [`FakeApi`](super::FakeApi) keeps between requests, and the values it is
//! scripted with and reports: shared by the send endpoints (`chat_api.rs`), the streaming APIs
//! (`chat_stream.rs`) and Slack's history reads (`slack_history.rs`), so none of them imports
//! another for its types.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::FakeResponse;
use crate::address::{Address, Surface};

/// The surfaces a [`FakeApi`](super::FakeApi) can fake: those with a chat API the crate connects to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Api {
    Slack,
    Discord,
    Telegram,
}

impl Api {
    pub(super) fn of(surface: Surface) -> Option<Self> {
        match surface {
            Surface::Slack => Some(Self::Slack),
            Surface::Discord => Some(Self::Discord),
            Surface::Telegram => Some(Self::Telegram),
            _ => None,
        }
    }

    pub(super) fn surface(self) -> Surface {
        match self {
            Self::Slack => Surface::Slack,
            Self::Discord => Surface::Discord,
            Self::Telegram => Surface::Telegram,
        }
    }
}

/// What a [`FakeApi`](super::FakeApi) does with one request.
///
/// A [`FakeResponse`] converts into [`Answer`](Self::Answer), so a script of HTTP answers alone
/// reads `api.script([FakeResponse::status(503)])`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ChatStep {
    /// Posts the message and answers as the surface does (to script a success between
    /// failures).
    Accept,
    /// Posts the message, then answers with this instead of the surface's success: with
    /// [`FakeResponse::close_mid_response`] the sender cannot know the message went; with
    /// [`FakeResponse::after`] on [`FakeResponse::chat_success`] it is a slow success.
    AcceptThen(FakeResponse),
    /// Posts nothing and answers with this (a rate limit, a 5xx, a refusal, a proxy's page, a
    /// connection closed mid-answer, no answer at all).
    Answer(FakeResponse),
}

impl ChatStep {
    /// Posts the message, then cuts the connection before the answer: the sender cannot know
    /// the message went (the response was lost).
    pub fn lost_response() -> Self {
        Self::AcceptThen(FakeResponse::close_mid_response())
    }

    /// Posts the message and never answers: the sender times out not knowing it went.
    pub fn accept_then_stall() -> Self {
        Self::AcceptThen(FakeResponse::never_answer())
    }
}

impl From<FakeResponse> for ChatStep {
    fn from(response: FakeResponse) -> Self {
        Self::Answer(response)
    }
}

/// One message the fake accepted (posted).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ReceivedMessage {
    /// The channel, or chat, it was posted to.
    pub target: String,
    /// Where it was posted: the channel or chat, and the thread (Slack `thread_ts`) or forum
    /// topic (Telegram `message_thread_id`) it named.
    pub address: Address,
    /// The message text, exactly as sent.
    pub text: String,
    /// The whole JSON request body.
    pub body: Value,
    /// The id the fake answered with.
    pub id: String,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) script: VecDeque<ChatStep>,
    pub(super) received: Vec<ReceivedMessage>,
    pub(super) attempts: usize,
    pub(super) nonces: HashMap<String, String>,
    pub(super) next_id: u64,
    /// The streaming APIs' state (answered by `chat_stream.rs`).
    pub(super) stream: StreamState,
    /// The last Slack `ts` handed out, in microseconds: each is later than the one before.
    pub(super) last_ts_micros: u128,
    /// Answers to Slack's history reads, taken before reading the posted messages.
    pub(super) lookup_script: VecDeque<FakeResponse>,
    /// Whether Slack's history reads answer `missing_scope`.
    pub(super) history_denied: bool,
    pub(super) lookups: usize,
}

pub(super) struct Shared {
    pub(super) surface: Api,
    pub(super) token: String,
    state: Mutex<State>,
}

impl Shared {
    pub(super) fn new(surface: Api, token: String) -> Self {
        Self {
            surface,
            token,
            state: Mutex::new(State::default()),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One request the fake received, any method, failed ones included.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ReceivedCall {
    /// The API method: Slack's and Telegram's method name (`chat.appendStream`,
    /// `sendMessageDraft`), Discord's `createMessage` or `editMessage`.
    pub method: String,
    /// The JSON request body.
    pub body: Value,
    /// When it arrived, from the fake's start.
    pub at: Duration,
    /// Where it was for, as the surface reads it (Slack's `channel` and `thread_ts`, Discord's
    /// channel in the path, Telegram's `chat_id` and `message_thread_id`; a Slack stream's
    /// recipient is not part of it); `None` when the request named none.
    pub address: Option<Address>,
}

/// A Slack stream the fake holds: the message it grows into.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FakeStream {
    /// The message's `ts`.
    pub ts: String,
    /// The thread it streams into.
    pub thread_ts: Option<String>,
    /// The text confirmed so far: the start's, each append's and the stop's `markdown_text`.
    pub text: String,
    /// Whether it still takes appends (not stopped, not expired).
    pub open: bool,
    /// How many appends it accepted.
    pub appends: usize,
}

/// One draft the fake showed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReceivedDraft {
    /// The draft id.
    pub draft_id: i64,
    /// The draft's text.
    pub text: String,
}

#[derive(Default)]
pub(super) struct StreamState {
    pub(super) started: Option<Instant>,
    pub(super) calls: Vec<ReceivedCall>,
    pub(super) scripts: HashMap<String, VecDeque<ChatStep>>,
    pub(super) streams: Vec<(FakeStream, Instant)>,
    pub(super) lifetime: Option<Duration>,
    pub(super) drafts: Vec<ReceivedDraft>,
    pub(super) flood_until: Option<Instant>,
    pub(super) headers: VecDeque<Vec<(String, String)>>,
}

impl StreamState {
    /// The next scripted step for `method`, if its own script has one.
    pub(super) fn next_step(&mut self, method: &str) -> Option<ChatStep> {
        self.scripts.get_mut(method)?.pop_front()
    }
}

/// Whether a stream started at `started` has outlived `lifetime` (Slack closes streams after a
/// few minutes).
pub(super) fn expired(started: Instant, lifetime: Option<Duration>) -> bool {
    lifetime.is_some_and(|l| started.elapsed() >= l)
}

/// Each surface's refusal of a wrong bot token.
pub(super) fn refuse_auth(surface: Api) -> FakeResponse {
    let (status, body) = match surface {
        Api::Discord => (401, json!({ "message": "401: Unauthorized", "code": 0 })),
        Api::Telegram => (
            404,
            json!({ "ok": false, "error_code": 404, "description": "Not Found" }),
        ),
        Api::Slack => (200, json!({ "ok": false, "error": "invalid_auth" })),
    };
    FakeResponse::raw(status, body.to_string())
}
