//! [`SlackChannel`] as a [`StreamingChannel`]: Slack's native chat streams
//! (`chat.startStream`, `chat.appendStream`, `chat.stopStream`), rolled over before Slack
//! expires them, with `chat.postMessage` per block as the fallback.

use std::future::Future;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::SlackMarkdown;
use super::client::{SlackChannel, SlackClient};
use crate::address::Surface;
use crate::channel::Render;
use crate::channel::http::Token;
use crate::channel::http::answer::{CallEnd, read_capped, unexpected_body};
use crate::channel::http::stream_call::{CallFailure, Caller, StreamCall};
use crate::channel::http::stream_settings::{channel_stream_builders, client_stream_builders};
use crate::channel::stream::{
    BLOCK_SEPARATOR, CallKind, Driver, DriverError, MaybeShown, Parts, ReplyStream, StreamMode,
    StreamOpenError, StreamedMessage, StreamingChannel, SurfaceStreamReceipt, flush, opening_mode,
    pack,
};
use crate::egress::Attribution;

/// What Slack answers an append to a stream it has closed (slackapi/python-slack-sdk#1859,
/// vercel/chat#637): the stream expired a few minutes after it started.
const NOT_STREAMING: &str = "message_not_in_streaming_state";

/// `chat.startStream` answers that mean streaming is unavailable here (a token without the
/// scope, a surface or workspace without the feature): the reply goes as blocks instead.
const UNAVAILABLE: &[&str] = &[
    "missing_scope",
    "not_allowed_token_type",
    "method_not_supported_for_channel_type",
    "feature_not_enabled",
    "not_in_thread",
    "invalid_thread_ts",
    "thread_not_found",
];

/// The cap on a `chat.stopStream` answer read for the message's text: the stopped message
/// comes back whole (text and blocks), far more than a send's answer.
const STOPPED_MAX_BYTES: usize = 1024 * 1024;

impl<R: Render> SlackClient<R> {
    client_stream_builders!();

    /// Closes a stream and starts a fresh one for the rest after `after` (default 4 minutes,
    /// inside Slack's own expiry).
    pub fn with_stream_rollover(mut self, after: Duration) -> Self {
        self.stream.rollover_after = after;
        self
    }
}

impl<R: Render> SlackChannel<R> {
    channel_stream_builders!();

    /// The user (`U…`) and team (`T…`) a stream is for: Slack requires both when streaming
    /// into a channel rather than a DM. Part of the conversation's address
    /// ([`SlackAddress::for_recipient`](crate::address::SlackAddress::for_recipient)).
    pub fn with_stream_recipient(
        mut self,
        user_id: impl Into<String>,
        team_id: impl Into<String>,
    ) -> Self {
        self.address = self.address.for_recipient(user_id, team_id);
        self
    }

    /// Closes a stream and starts a fresh one for the rest after `after` (default 4 minutes,
    /// inside Slack's own expiry).
    pub fn with_stream_rollover(mut self, after: Duration) -> Self {
        self.client.stream.rollover_after = after;
        self
    }
}

/// Streams with Slack's native streams when the renderer writes standard Markdown
/// ([`SlackMarkdown`]) and the channel posts in a thread ([`in_thread`](SlackChannel::in_thread));
/// otherwise each block goes as a `chat.postMessage` ([`StreamMode::Blocks`]; blocks that
/// queued behind the budget go together). The default mode
/// is [`StreamMode::Stream`] for a renderer that writes standard Markdown
/// ([`Render::is_standard_markdown`]), [`StreamMode::Blocks`] for mrkdwn or plain text.
///
/// A stream starts with the first block (`chat.startStream` with `markdown_text`, the
/// thread's `thread_ts` and the [recipient](SlackChannel::with_stream_recipient)), grows by
/// `chat.appendStream` (coalesced blocks, at most 12,000 characters a call), and ends with
/// `chat.stopStream`. Slack closes a stream a few minutes after it started; the session closes
/// it first ([`with_stream_rollover`](SlackChannel::with_stream_rollover)) and starts a fresh
/// one, and when Slack closed it anyway (an append answered `message_not_in_streaming_state`)
/// it starts a fresh one with the text that append carried: each block is confirmed by exactly
/// one successful call, so nothing is lost or doubled. When `chat.startStream` is refused for
/// want of a scope or a thread, the reply falls back to `chat.postMessage`s of whole blocks.
/// A post or start that gets no answer is not repeated (Slack cannot dedupe it): its parts
/// come back uncertain.
///
/// `chat.appendStream` has no idempotency: sent twice, the text shows twice. So an append whose
/// outcome is unknown (no answer, a 5xx, `internal_error`) is never sent again into the same
/// stream. The session stops that stream (`chat.stopStream`, no text) and reads the stopped
/// message's text from the answer: if it holds the append, the append is confirmed; if it does
/// not, the text goes into a fresh stream. Nothing is lost or doubled. When Slack had closed the
/// stream already (the stop answers `message_not_in_streaming_state`), the message is read back
/// from its thread (`conversations.replies`, with a history scope) and judged the same way. In
/// the rare case that the stop fails otherwise, or neither answer has readable text, the
/// append's parts may be shown and nothing can tell: the stream stops with them
/// [uncertain](crate::channel::stream::SurfaceStreamError::uncertain) (never sent again; the
/// durable outbox reports them), and the rest goes as messages.
///
/// Every call spends the conversation's budget, the one plain sends spend too, and waits for
/// it at most the [`SendPolicy`](crate::channel::SendPolicy)'s `max_wait`; a slot further away fails
/// the call at once, rate limited.
impl<R: Render> StreamingChannel for SlackChannel<R> {
    fn stream_mode(&self) -> StreamMode {
        self.client
            .stream
            .mode
            .unwrap_or(if self.client.renderer.is_standard_markdown() {
                StreamMode::Stream
            } else {
                StreamMode::Blocks
            })
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        let asked = self.stream_mode();
        let markdown = self.client.renderer.is_standard_markdown();
        let native = markdown && self.address.thread_ts().is_some();
        let (mode, fell_back) = opening_mode(asked, native);
        let driver = SlackDriver {
            caller: Caller::new(
                self.client.transport.clone(),
                self.budget.clone(),
                super::client::classify,
                None,
            ),
            base_url: self.client.base_url.clone(),
            authorization: format!("Bearer {}", self.client.transport.token.expose()),
            channel: self.address.channel().to_owned(),
            thread_ts: self.address.thread_ts().map(str::to_owned),
            recipient: self
                .address
                .recipient()
                .map(|(user, team)| (user.to_owned(), team.to_owned())),
            markdown,
            mode,
            fell_back,
            live: None,
            rollover_after: self.client.stream.rollover_after,
            confirmed: 0,
            messages: Vec::new(),
            rollovers: 0,
            retry_at: None,
            maybe: MaybeShown::default(),
        };
        ReplyStream::spawn(driver, mode, attribution)
    }
}

/// The stream being appended to.
struct Live {
    ts: String,
    started: Instant,
}

struct SlackDriver {
    caller: Caller,
    base_url: String,
    authorization: String,
    channel: String,
    thread_ts: Option<String>,
    recipient: Option<(String, String)>,
    markdown: bool,
    mode: StreamMode,
    fell_back: bool,
    live: Option<Live>,
    rollover_after: Duration,
    confirmed: usize,
    messages: Vec<StreamedMessage>,
    rollovers: usize,
    /// When a preview append was rate limited: try again then, even without a new block.
    retry_at: Option<Instant>,
    /// Parts of a post, start or append that may have been applied, with no way to tell.
    maybe: MaybeShown,
}

/// What a stopped stream's message says about an append whose answer was lost.
enum Settled {
    /// It holds the append: confirmed.
    Applied,
    /// It holds the text before the append only: the append goes into a fresh stream.
    NotApplied,
    /// It cannot be read, or holds neither: the append's parts may be shown.
    CannotTell,
}

impl SlackDriver {
    /// A call of `method`. Posts, starts and appends add text and carry nothing Slack could
    /// dedupe them by, so none is sent again after no answer; a stop adds none.
    fn call(&self, method: &str, body: Value) -> StreamCall {
        StreamCall {
            method: Method::POST,
            url: format!("{}/{method}", self.base_url),
            authorization: Some(self.authorization.clone()),
            body,
            repeat_safe: method == "chat.stopStream",
        }
    }

    fn fail(failure: CallFailure) -> DriverError {
        failure.into_driver_error(Surface::Slack)
    }

    /// The parts not confirmed yet, packed into as few `chat.postMessage`s as fit.
    fn queued(&self, parts: &Parts) -> Vec<(usize, String)> {
        let limit = if self.markdown {
            SlackMarkdown::LIMIT
        } else {
            // chat.postMessage truncates `text` past 40,000 characters.
            40_000
        };
        pack(parts.texts_from(self.confirmed), |t| {
            t.chars().count() <= limit
        })
    }

    /// One `chat.postMessage` per message of `groups`.
    async fn post(&mut self, groups: Vec<(usize, String)>) -> Result<(), DriverError> {
        for (count, text) in groups {
            let field = if self.markdown {
                "markdown_text"
            } else {
                "text"
            };
            let mut body = json!({ "channel": self.channel, field: text });
            if let Some(ts) = &self.thread_ts {
                body["thread_ts"] = Value::from(ts.as_str());
            }
            let call = self.call("chat.postMessage", body);
            let ts = match self.caller.call(CallKind::Final, &call).await {
                Ok(ts) => ts,
                Err(failure) => return Err(self.unanswered(failure, count)),
            };
            self.messages.push(StreamedMessage::new(ts, text));
            self.confirmed += count;
        }
        Ok(())
    }

    /// The driver's error for a failed call that carried the next `count` parts: when it may
    /// have been applied they may be shown (a post or start carries nothing a lookup or a
    /// dedupe could find), so they are reported uncertain, never sent again.
    fn unanswered(&mut self, failure: CallFailure, count: usize) -> DriverError {
        if failure.unknown {
            self.maybe
                .note(self.confirmed, self.confirmed + count, false);
        }
        Self::fail(failure)
    }

    async fn start(&mut self, text: &str) -> Result<String, CallFailure> {
        let mut body = json!({ "channel": self.channel, "markdown_text": text });
        if let Some(ts) = &self.thread_ts {
            body["thread_ts"] = Value::from(ts.as_str());
        }
        if let Some((user, team)) = &self.recipient {
            body["recipient_user_id"] = Value::from(user.as_str());
            body["recipient_team_id"] = Value::from(team.as_str());
        }
        let call = self.call("chat.startStream", body);
        // The first block is a message the person keeps.
        self.caller.call(CallKind::Final, &call).await
    }

    /// Closes the live stream. Its text stays confirmed whatever Slack answers: a stream that
    /// cannot be stopped is closed by Slack at its expiry.
    async fn stop(&mut self) {
        let Some(live) = self.live.take() else {
            return;
        };
        let call = self.call(
            "chat.stopStream",
            json!({ "channel": self.channel, "ts": live.ts }),
        );
        if let Err(failure) = self.caller.call(CallKind::Final, &call).await
            && failure.code() != Some(NOT_STREAMING)
        {
            tracing::warn!(target: "mesh_egress::channel", surface = "Slack", failure = %failure.describe(), "could not stop a stream; Slack closes it at its expiry");
        }
    }

    /// After an append of `text` whose outcome is unknown: stops the live stream and reads
    /// whether the stopped message holds the append ([`Settled`]). When that cannot be read
    /// (the stop failed, its answer has no text, the text is neither the message before nor
    /// after the append), the append's parts may be shown: the caller reports them uncertain
    /// rather than sending them again.
    ///
    /// The stop's answer carries the message (`{ok, channel, ts, message: {text, ts,
    /// streaming_state, …}}`: `ChatStopStreamResponse` in slackapi/node-slack-sdk,
    /// `packages/web-api/src/types/response/ChatStopStreamResponse.ts`).
    async fn settle(&mut self, text: &str) -> Settled {
        let Some(live) = self.live.take() else {
            return Settled::CannotTell;
        };
        let before = self
            .messages
            .last()
            .map_or_else(String::new, |m| m.text().to_owned());
        let after = format!("{before}{BLOCK_SEPARATOR}{text}");
        let call = self.call(
            "chat.stopStream",
            json!({ "channel": self.channel, "ts": live.ts }),
        );
        let policy = self.caller.transport.policy;
        self.caller.transport.policy =
            policy.max_response_bytes(policy.response_limit().max(STOPPED_MAX_BYTES));
        let shown = self
            .caller
            .call_with(CallKind::Final, &call, classify_stopped)
            .await;
        self.caller.transport.policy = policy;
        let shown = match shown {
            // Slack had closed the stream already (its expiry): the message is read back.
            Err(failure) if failure.code() == Some(NOT_STREAMING) => {
                self.read_back(&live.ts).await.ok_or(failure)
            }
            other => other,
        };
        match shown {
            Ok(shown) if shown.trim() == after.trim() => Settled::Applied,
            Ok(shown) if shown.trim() == before.trim() => Settled::NotApplied,
            Ok(_) => {
                tracing::warn!(target: "mesh_egress::channel", surface = "Slack", "an append's answer was lost and the stopped message's text matches neither before nor after it; its parts may be shown and are not sent again");
                Settled::CannotTell
            }
            Err(failure) => {
                tracing::warn!(target: "mesh_egress::channel", surface = "Slack", failure = %failure.describe(), "an append's answer was lost and the stream could not be read back; its parts may be shown and are not sent again");
                Settled::CannotTell
            }
        }
    }

    /// The text of the stream message `ts`, read back from its thread
    /// (`conversations.replies`, the one message at `ts`; it needs a history scope):
    /// `None` when it cannot be read.
    async fn read_back(&self, ts: &str) -> Option<String> {
        let thread = self.thread_ts.as_deref()?;
        let query = [
            ("channel", self.channel.as_str()),
            ("ts", thread),
            ("oldest", ts),
            ("latest", ts),
            ("inclusive", "true"),
            ("limit", "2"),
        ];
        let transport = &self.caller.transport;
        let response = transport
            .client
            .get(format!("{}/conversations.replies", self.base_url))
            .query(&query)
            .timeout(transport.policy.timeout)
            .header(reqwest::header::AUTHORIZATION, &self.authorization)
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body = read_capped(response, STOPPED_MAX_BYTES).await.ok()?;
        let answer: Value = serde_json::from_slice(&body).ok()?;
        if answer.get("ok").and_then(Value::as_bool) != Some(true) {
            return None;
        }
        answer
            .get("messages")?
            .as_array()?
            .iter()
            .find(|m| m.get("ts").and_then(Value::as_str) == Some(ts))?
            .get("text")?
            .as_str()
            .map(str::to_owned)
    }

    async fn stream(&mut self, parts: &Parts, done: bool) -> Result<(), DriverError> {
        let limit = SlackMarkdown::LIMIT - BLOCK_SEPARATOR.len();
        let groups = pack(parts.texts_from(self.confirmed), |t| {
            t.chars().count() <= limit
        });
        // Proactively, before Slack's own expiry, and only when there is text for the fresh
        // stream: with nothing left to send, the closing stop ends the old one (a rollover
        // without a new stream was counted under load when the last call came late).
        if !groups.is_empty()
            && self
                .live
                .as_ref()
                .is_some_and(|live| live.started.elapsed() >= self.rollover_after)
        {
            self.stop().await;
            self.rollovers += 1;
        }
        for (count, text) in groups {
            loop {
                let Some(live) = &self.live else {
                    match self.start(&text).await {
                        Ok(ts) => {
                            self.live = Some(Live {
                                ts: ts.clone(),
                                started: Instant::now(),
                            });
                            self.messages.push(StreamedMessage::new(ts, text));
                            self.confirmed += count;
                            break;
                        }
                        Err(failure)
                            if failure.code().is_some_and(|c| UNAVAILABLE.contains(&c)) =>
                        {
                            tracing::info!(target: "mesh_egress::channel", surface = "Slack", code = failure.code(), "streaming unavailable; posting blocks");
                            self.fell_back = true;
                            self.mode = StreamMode::Blocks;
                            let groups = self.queued(parts);
                            return self.post(groups).await;
                        }
                        Err(failure) => return Err(self.unanswered(failure, count)),
                    }
                };
                let call = self.call(
                    "chat.appendStream",
                    json!({
                        "channel": self.channel,
                        "ts": live.ts,
                        "markdown_text": format!("{BLOCK_SEPARATOR}{text}"),
                    }),
                );
                let kind = if done {
                    CallKind::Final
                } else {
                    CallKind::Preview
                };
                match self.caller.call(kind, &call).await {
                    Ok(_) => {
                        if let Some(message) = self.messages.last_mut() {
                            message.push_block(&text);
                        }
                        self.confirmed += count;
                        break;
                    }
                    Err(failure) if failure.unknown => {
                        // The append may have been applied: never sent into this stream again.
                        self.rollovers += 1;
                        match self.settle(&text).await {
                            Settled::Applied => {
                                if let Some(message) = self.messages.last_mut() {
                                    message.push_block(&text);
                                }
                                self.confirmed += count;
                                break;
                            }
                            // Not applied: into a fresh stream.
                            Settled::NotApplied => {}
                            Settled::CannotTell => return Err(self.unanswered(failure, count)),
                        }
                    }
                    Err(failure) if failure.code() == Some(NOT_STREAMING) => {
                        // Slack closed the stream: what it confirmed stays; this text goes
                        // into a fresh stream.
                        tracing::info!(target: "mesh_egress::channel", surface = "Slack", "stream expired; rolling over");
                        self.live = None;
                        self.rollovers += 1;
                    }
                    Err(failure) if failure.is_transient() && !done => {
                        // Coalesced into the next call once the budget allows it.
                        self.retry_at = Some(self.caller.budget.next_slot(CallKind::Preview));
                        return Ok(());
                    }
                    Err(failure) => return Err(Self::fail(failure)),
                }
            }
        }
        Ok(())
    }
}

/// Reads a `chat.stopStream` answer as the stopped message's text (`message.text`); an
/// answer without it is unexpected.
fn classify_stopped(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    token: &Token,
) -> CallEnd {
    match super::client::classify(status, headers, body, token) {
        CallEnd::Sent(_) => {
            let text = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|answer| {
                    answer
                        .pointer("/message/text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
            text.map_or_else(|| unexpected_body(status), CallEnd::Sent)
        }
        other => other,
    }
}

impl Driver for SlackDriver {
    fn ready(&self, done: bool) -> impl Future<Output = ()> + Send + '_ {
        let kind = if done || self.live.is_none() {
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
        self.stream(parts, done).await
    }

    async fn post_queued(&mut self, parts: &mut Parts) -> Result<(), DriverError> {
        let groups = self.queued(parts);
        self.post(groups).await
    }

    fn confirmed(&self) -> usize {
        self.confirmed
    }

    fn maybe_shown(&self) -> MaybeShown {
        self.maybe
    }

    fn messages(&self) -> &[StreamedMessage] {
        &self.messages
    }

    /// The stream is stopped only after the last text was reported: `chat.stopStream` waits
    /// its turn in the budget, and confirms nothing.
    async fn close(&mut self) {
        self.stop().await;
    }

    fn deadline(&self) -> Option<Instant> {
        self.retry_at
    }

    fn refresh<'a>(
        &'a mut self,
        parts: &'a mut Parts,
    ) -> impl Future<Output = Result<(), DriverError>> + Send + 'a {
        // A retry after the surface's Retry-After: the same flush, with nothing new.
        flush(self, parts, false)
    }

    fn receipt(&mut self, _mode: StreamMode) -> SurfaceStreamReceipt {
        SurfaceStreamReceipt::new(
            self.mode,
            std::mem::take(&mut self.messages),
            self.caller.calls,
        )
        .with_rollovers(self.rollovers)
        .with_fallback(self.fell_back)
    }
}
