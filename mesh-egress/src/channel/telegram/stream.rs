//! [`TelegramChannel`] as a [`StreamingChannel`]: `sendMessageDraft` previews in private chats,
//! then one permanent `sendMessage` per message; one `sendMessage` per block elsewhere.

use std::future::Future;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::time::Instant;

use super::client::{TelegramChannel, TelegramClient};
use crate::address::Surface;
use crate::channel::Render;
use crate::channel::http::Token;
use crate::channel::http::answer::CallEnd;
use crate::channel::http::stream_call::{CallFailure, Caller, StreamCall, ok_without_id};
use crate::channel::http::stream_settings::{channel_stream_builders, client_stream_builders};
use crate::channel::http::transport::Classify;
use crate::channel::stream::{
    CallKind, Driver, DriverError, MaybeShown, Parts, ReplyStream, StreamMode, StreamOpenError,
    StreamedMessage, StreamingChannel, SurfaceStreamReceipt, opening_mode, pack,
};
use crate::egress::Attribution;

/// Telegram's limit on a message's text: 4,096 characters after entity parsing. The raw HTML
/// is measured in UTF-16 units, never less than the parsed text, so a packed message can only
/// be shorter than allowed.
const MESSAGE_LIMIT: usize = 4_096;

impl<R: Render> TelegramClient<R> {
    client_stream_builders!();

    /// Shows a waiting draft again after `every` (default 20 s; Telegram keeps a draft for
    /// 30 s).
    pub fn with_draft_refresh(mut self, every: Duration) -> Self {
        self.stream.draft_refresh = every;
        self
    }
}

impl<R: Render> TelegramChannel<R> {
    channel_stream_builders!();

    /// Shows a waiting draft again after `every` (default 20 s; Telegram keeps a draft for
    /// 30 s).
    pub fn with_draft_refresh(mut self, every: Duration) -> Self {
        self.client.stream.draft_refresh = every;
        self
    }

    /// Whether the chat is a private chat with one user (a positive numeric id): the only
    /// chats `sendMessageDraft` serves.
    pub fn is_private_chat(&self) -> bool {
        self.address.is_private()
    }
}

/// Streams with drafts in a private chat: `sendMessageDraft` shows the message growing (one
/// draft id per message, the whole text each time, shown again before Telegram drops it after
/// 30 s), and each message is made permanent with one `sendMessage` once it is full (4,096
/// characters) or the reply is complete. Only `sendMessage` confirms text. In groups and
/// channels, and when the bot may not send drafts (the Bot API first offered them only to bots
/// with forum topic mode enabled, and answers others with a 400), each block is a
/// `sendMessage` of its own. The default mode is [`StreamMode::Stream`] in private chats,
/// [`StreamMode::Blocks`] elsewhere.
///
/// Every call spends the chat's budget (default: one call a second, twenty a minute with five
/// held for permanent messages). A draft answered with a flood wait (`retry_after`) is not
/// retried: the wait pauses the whole budget, the next draft carries everything that arrived
/// meanwhile, and the permanent message waits out the flood wait within the
/// [`SendPolicy`](crate::channel::SendPolicy). No message is edited, so a failed draft never turns into
/// a burst of `editMessageText` calls inside the same flood window.
impl<R: Render> StreamingChannel for TelegramChannel<R> {
    fn stream_mode(&self) -> StreamMode {
        self.client
            .stream
            .mode
            .unwrap_or(if self.is_private_chat() {
                StreamMode::Stream
            } else {
                StreamMode::Blocks
            })
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        let (mode, fell_back) = opening_mode(self.stream_mode(), self.is_private_chat());
        let driver = TelegramDriver {
            caller: Caller::new(
                self.client.transport.clone(),
                self.budget.clone(),
                super::client::classify,
                None,
            ),
            api: format!(
                "{}/bot{}",
                self.client.base_url,
                self.client.transport.token.expose()
            ),
            chat: self.chat.clone(),
            topic: self.address.topic(),
            mode,
            fell_back,
            draft_id: 1,
            draft: None,
            refresh: self.client.stream.draft_refresh,
            previews: 0,
            confirmed: 0,
            messages: Vec::new(),
            retry_at: None,
            maybe: MaybeShown::default(),
        };
        ReplyStream::spawn(driver, mode, attribution)
    }
}

/// The draft on screen: its text and when it was shown.
struct Draft {
    text: String,
    shown: Instant,
}

struct TelegramDriver {
    caller: Caller,
    /// `<base>/bot<token>`: never logged, never in an error.
    api: String,
    chat: Value,
    topic: Option<i64>,
    mode: StreamMode,
    fell_back: bool,
    /// The current message's draft id (non-zero; a new id for each message).
    draft_id: i64,
    draft: Option<Draft>,
    refresh: Duration,
    previews: usize,
    confirmed: usize,
    messages: Vec<StreamedMessage>,
    /// When a draft failed (a flood wait): show the latest text then, even without a block;
    /// after a refused draft, at once: the messages of the fallback go then.
    retry_at: Option<Instant>,
    /// Parts of a `sendMessage` that got no answer (maybe posted).
    maybe: MaybeShown,
}

/// `sendMessageDraft` answers `{"ok": true, "result": true}`; anything else is read as the
/// connector reads a `sendMessage` answer.
fn classify_draft(status: StatusCode, headers: &HeaderMap, body: &[u8], token: &Token) -> CallEnd {
    ok_without_id(status, body)
        .unwrap_or_else(|| super::client::classify(status, headers, body, token))
}

const CLASSIFY_DRAFT: Classify = classify_draft;

impl TelegramDriver {
    /// Whether the growing message is shown as a draft: in [`StreamMode::Stream`] until a
    /// draft is refused (then the reply falls back to [`StreamMode::Blocks`]).
    fn drafting(&self) -> bool {
        self.mode == StreamMode::Stream
    }

    fn body(&self, text: &str) -> Value {
        super::client::message_body(&self.chat, self.topic, text, true)
    }

    /// A permanent message's `sendMessage`: in HTML parse mode, or as plain text.
    fn final_call(&self, text: &str, html: bool) -> StreamCall {
        StreamCall {
            method: Method::POST,
            url: format!("{}/sendMessage", self.api),
            authorization: None,
            body: super::client::message_body(&self.chat, self.topic, text, html),
            // A `sendMessage` that got no answer may have posted (python-telegram-bot#1045):
            // it is not repeated, and its parts are reported uncertain, never sent again.
            repeat_safe: false,
        }
    }

    /// The driver's error for a final message's `sendMessage` that failed, carrying the next
    /// `count` parts: when it may have posted, they are noted maybe shown (never sent again).
    fn final_failed(&mut self, failure: CallFailure, count: usize) -> DriverError {
        if failure.unknown {
            self.maybe
                .note(self.confirmed, self.confirmed + count, false);
        }
        failure.into_driver_error(Surface::Telegram)
    }

    fn fits(text: &str) -> bool {
        text.encode_utf16().count() <= MESSAGE_LIMIT
    }

    async fn send_messages(&mut self, groups: Vec<(usize, String)>) -> Result<(), DriverError> {
        for (count, text) in groups {
            let call = self.final_call(&text, true);
            let message = match self.caller.call(CallKind::Final, &call).await {
                Ok(id) => StreamedMessage::new(id, text),
                // Telegram's parser refused the formatting (a refusal: nothing was posted):
                // the same message once more, as the plain text a person reads (never a
                // dropped reply).
                Err(failure)
                    if failure
                        .kind()
                        .is_some_and(super::client::refuses_formatting) =>
                {
                    tracing::warn!(target: "mesh_egress::channel", surface = "Telegram", "Telegram could not parse the formatting; sending the message once more as plain text");
                    let call = self.final_call(&super::client::plain_text(&text), false);
                    match self.caller.call(CallKind::Final, &call).await {
                        Ok(id) => StreamedMessage::new(id, text).with_plain_text(),
                        Err(failure) => return Err(self.final_failed(failure, count)),
                    }
                }
                Err(failure) => return Err(self.final_failed(failure, count)),
            };
            self.messages.push(message);
            self.confirmed += count;
            // The next message gets a draft of its own.
            self.draft = None;
            self.draft_id = self.draft_id.saturating_add(1);
        }
        Ok(())
    }

    async fn show_draft(&mut self, text: String) -> Result<(), CallFailure> {
        let mut body = self.body(&text);
        body["draft_id"] = Value::from(self.draft_id);
        let call = StreamCall {
            method: Method::POST,
            url: format!("{}/sendMessageDraft", self.api),
            authorization: None,
            body,
            // A draft carries the whole text: shown twice, it shows once.
            repeat_safe: true,
        };
        self.previews += 1;
        self.caller
            .call_with(CallKind::Preview, &call, CLASSIFY_DRAFT)
            .await?;
        self.draft = Some(Draft {
            text,
            shown: Instant::now(),
        });
        Ok(())
    }

    /// Shows `text` as the current draft; a refused draft turns the rest into blocks.
    async fn preview(&mut self, text: String) -> Result<(), DriverError> {
        match self.show_draft(text).await {
            Ok(()) => Ok(()),
            Err(failure) if failure.is_refused() => {
                // The messages go at once, in a call of their own (a refresh), so the
                // observers hear of them before it as of any message: this flush only showed
                // previews.
                tracing::info!(target: "mesh_egress::channel", surface = "Telegram", "draft refused; sending blocks");
                self.fell_back = true;
                self.mode = StreamMode::Blocks;
                self.draft = None;
                self.retry_at = Some(Instant::now());
                Ok(())
            }
            Err(failure) if failure.kind().is_none() => {
                Err(failure.into_driver_error(Surface::Telegram))
            }
            // A flood wait paused the budget; a transport failure loses only a preview. The
            // next draft (or the permanent message) carries this text, once the budget allows.
            Err(_) => {
                self.retry_at = Some(self.caller.budget.next_slot(CallKind::Preview));
                if let Some(draft) = &mut self.draft {
                    draft.shown = Instant::now();
                }
                Ok(())
            }
        }
    }

    async fn stream(&mut self, parts: &Parts, done: bool, force: bool) -> Result<(), DriverError> {
        let mut groups = pack(parts.texts_from(self.confirmed), Self::fits);
        let open = if done { None } else { groups.pop() };
        // Every message but the one still growing is full: make it permanent.
        self.send_messages(groups).await?;
        if let Some((_, text)) = open
            && (force || self.draft.as_ref().is_none_or(|d| d.text != text))
        {
            self.preview(text).await?;
        }
        Ok(())
    }
}

impl Driver for TelegramDriver {
    fn ready(&self, done: bool) -> impl Future<Output = ()> + Send + '_ {
        let kind = if done || !self.drafting() {
            CallKind::Final
        } else {
            CallKind::Preview
        };
        self.caller.ready(kind)
    }

    fn mode(&self) -> StreamMode {
        self.mode
    }

    fn before_flush(&mut self, parts: &Parts) -> Result<(), DriverError> {
        self.retry_at = None;
        self.caller.own(parts, self.confirmed)
    }

    async fn grow(&mut self, parts: &mut Parts, done: bool) -> Result<(), DriverError> {
        self.stream(parts, done, false).await
    }

    // Together, a group's twenty messages a minute are not spent on a reply that outpaces
    // them.
    async fn post_queued(&mut self, parts: &mut Parts) -> Result<(), DriverError> {
        let groups = pack(parts.texts_from(self.confirmed), Self::fits);
        self.send_messages(groups).await
    }

    fn confirmed(&self) -> usize {
        self.confirmed
    }

    /// Drafts are not messages: the parts of the message still growing are shown only as a
    /// draft until it is made permanent, so the observers (the durable outbox) hear of them
    /// only before the `sendMessage` that may post them. A process that dies while they are
    /// drafts leaves them `pending`, to be sent as messages.
    fn showing(&self, parts: &Parts, done: bool) -> usize {
        let all = parts.len().saturating_sub(self.confirmed);
        if done || !self.drafting() {
            return all;
        }
        let groups = pack(parts.texts_from(self.confirmed), Self::fits);
        all - groups.last().map_or(0, |(count, _)| *count)
    }

    fn maybe_shown(&self) -> MaybeShown {
        self.maybe
    }

    fn messages(&self) -> &[StreamedMessage] {
        &self.messages
    }

    fn preview(&self) -> Option<&str> {
        self.draft.as_ref().map(|draft| draft.text.as_str())
    }

    fn deadline(&self) -> Option<Instant> {
        if !self.drafting() {
            // After a refused draft: the fallback's messages.
            return self.retry_at;
        }
        let lapse = self.draft.as_ref().map(|d| d.shown + self.refresh);
        match (lapse, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn refresh(&mut self, parts: &mut Parts) -> Result<(), DriverError> {
        self.before_flush(parts)?;
        if !self.drafting() {
            // After a refused draft: the fallback's messages.
            self.caller.ready(CallKind::Final).await;
            return self.post_queued(parts).await;
        }
        self.caller.ready(CallKind::Preview).await;
        // Shown again even if unchanged: the draft lapses after 30 s without a call.
        self.stream(parts, false, true).await
    }

    fn receipt(&mut self, _mode: StreamMode) -> SurfaceStreamReceipt {
        SurfaceStreamReceipt::new(
            self.mode,
            std::mem::take(&mut self.messages),
            self.caller.calls,
        )
        .with_previews(self.previews)
        .with_fallback(self.fell_back)
    }
}
