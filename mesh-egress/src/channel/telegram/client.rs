//! [`TelegramChannel`]: the Bot API's `sendMessage` in HTML parse mode.

use std::fmt;
use std::future::Future;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::address::Surface;
use crate::address::{Address, TelegramAddress};
use crate::channel::http::answer::{CallEnd, retry_after_header, seconds_field, unexpected_body};
use crate::channel::http::budgets::{Budgets, DEFAULT_BUDGET_CAPACITY};
use crate::channel::http::retry::Request;
use crate::channel::http::stream_settings::{StreamSettings, telegram_budget};
use crate::channel::http::transport::Transport;
use crate::channel::http::{ChannelErrorKind, SendPolicy, Token, trim_base};
use crate::channel::stream::RateBudget;
use crate::channel::{
    BoxedChannel, Channel, PartReceipt, Render, SendError, SurfaceClient, TelegramHtml,
    UnservedAddress,
};
use crate::outbound::CommittedPart;

const DEFAULT_BASE_URL: &str = "https://api.telegram.org";

/// One Telegram bot (a bot token) and everything its chats share: the Bot API base, the HTTP
/// client, the [`SendPolicy`], the bot-wide rate-limit pause and one rate budget per chat.
/// [`channel`](Self::channel) gives the [`TelegramChannel`] to one conversation; as a
/// [`SurfaceClient`] it gives one for any stored Telegram [`Address`].
///
/// The bot token is part of every request path (`/bot<token>/…`): it is kept out of every
/// error, `Debug` output and log line.
///
/// ```
/// use mesh_egress::address::TelegramAddress;
/// use mesh_egress::channel::TelegramClient;
///
/// let bot = TelegramClient::new("123456:ABC-DEF");
/// let topic = bot.channel(TelegramAddress::new("-1001234567890").in_topic(42));
/// assert!(!format!("{bot:?}").contains("ABC-DEF"));
/// # let _ = topic;
/// ```
#[derive(Clone)]
pub struct TelegramClient<R = TelegramHtml> {
    pub(super) renderer: R,
    pub(super) transport: Transport,
    pub(super) base_url: String,
    /// How replies are streamed (the `*_stream.rs` module beside this one).
    pub(super) stream: StreamSettings,
    pub(super) budgets: Budgets,
}

impl TelegramClient {
    /// A client for bot `token`, rendering Telegram HTML ([`TelegramHtml`]);
    /// [`with_renderer`](Self::with_renderer) changes that.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            renderer: TelegramHtml::new(),
            transport: Transport::new(Surface::Telegram, Token::new(token)),
            base_url: DEFAULT_BASE_URL.to_owned(),
            stream: StreamSettings::default(),
            budgets: Budgets::new(DEFAULT_BUDGET_CAPACITY),
        }
    }
}

impl<R: Render> TelegramClient<R> {
    /// The same client rendering with `renderer`, whose output must be Telegram HTML (or plain
    /// text without `<`, `>` and `&`): it is sent with `parse_mode: "HTML"`.
    pub fn with_renderer<R2: Render>(self, renderer: R2) -> TelegramClient<R2> {
        TelegramClient {
            renderer,
            transport: self.transport,
            base_url: self.base_url,
            stream: self.stream,
            budgets: self.budgets,
        }
    }

    /// Remembers at most `capacity` chats' rate budgets (default
    /// 10,000), forgetting the least recently used first.
    pub fn with_budget_capacity(mut self, capacity: usize) -> Self {
        self.budgets = Budgets::new(capacity);
        self
    }

    /// The channel to the conversation at `address`: this client's token, policy and pause,
    /// and the budget of `address`'s chat (shared with every other channel this client made
    /// for it, topics included: Telegram's limits are per chat). A private chat's budget has
    /// the spacing only; a group's also the window (see [`TelegramChannel`]).
    pub fn channel(&self, address: TelegramAddress) -> TelegramChannel<R>
    where
        R: Clone,
    {
        TelegramChannel::open(self.clone(), address)
    }

    crate::channel::http::transport_builders!(
        "the Bot API at `url` instead of Telegram's (a loopback fake in tests)"
    );
}

impl<R> fmt::Debug for TelegramClient<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramClient")
            .field("base_url", &self.base_url)
            .field("token", &self.transport.token)
            .field("policy", &self.transport.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Render + Clone + 'static> SurfaceClient for TelegramClient<R> {
    fn surface(&self) -> Surface {
        Surface::Telegram
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match address {
            Address::Telegram(telegram) => {
                Ok(BoxedChannel::streaming(self.channel(telegram.clone())))
            }
            other => Err(UnservedAddress::new(Surface::Telegram, other.clone())),
        }
    }
}

/// A Telegram chat, posted to with the Bot API's `sendMessage` (`parse_mode: "HTML"`): a
/// [`TelegramClient`] and the [`TelegramAddress`] of one conversation.
///
/// The bot token is part of the request path (`/bot<token>/sendMessage`): it is kept out of
/// every error, `Debug` output and log line. Each part is one message, in order, in the forum
/// topic given by [`in_topic`](Self::in_topic) if any. A `429` is retried after the answer's
/// `parameters.retry_after`, within the [`SendPolicy`], and so are connections that never
/// opened. The Bot API has no idempotency key, and a timed-out `sendMessage` is often
/// delivered anyway (python-telegram-bot#1045): a try that may have posted (its answer lost,
/// a 5xx, a 2xx that cannot be read) is never repeated within the send. The part comes back
/// retryable, without a wait and [maybe delivered](SendError::maybe_delivered) (an unknown
/// outcome: the durable outbox marks it `uncertain` by default); sending it again is the
/// caller's choice, and may show it twice.
///
/// Every try spends the chat's rate budget (set with
/// [`with_stream_budget`](Self::with_stream_budget)), the one its streams spend, as a final
/// message: it waits for a flood wait (of a send or of a draft) and for the window (in a group, by
/// default twenty calls a minute, of which the five a stream's drafts leave alone are always there
/// for messages), is recorded so a stream's next draft is spaced after it and the window counts it,
/// and its own flood wait pauses the streams too. It does not wait for the budget's spacing (one
/// call a second): the Bot FAQ's "avoid sending more than one message per second" allows short
/// bursts, and a ten-part reply must not take nine seconds. A wait longer than what is left of
/// [`SendPolicy::max_wait`] hands the part back at once, rate limited with that wait as its
/// `retry_after`.
///
/// ```
/// use mesh_egress::channel::{TelegramChannel, TelegramHtml};
///
/// let telegram = TelegramChannel::new("123456:ABC-DEF", "-1001234567890");
/// assert!(!format!("{telegram:?}").contains("ABC-DEF"));
/// let short = telegram.with_renderer(TelegramHtml::new().with_limit(1000));
/// # let _ = short;
/// ```
#[derive(Clone)]
pub struct TelegramChannel<R = TelegramHtml> {
    pub(super) client: TelegramClient<R>,
    pub(super) address: TelegramAddress,
    /// The chat id as it goes on the wire (a number, or `@channelusername`).
    pub(super) chat: Value,
    /// The chat's share of Telegram's limits, from the client's budgets.
    pub(super) budget: RateBudget,
}

impl TelegramChannel {
    /// Posts to `chat_id` (a numeric chat id, or `@channelusername`) with bot `token`,
    /// rendering Telegram HTML ([`TelegramHtml`]); [`with_renderer`](Self::with_renderer)
    /// changes that. The shorthand for a [`TelegramClient`] of its own and one address.
    pub fn new(token: impl Into<String>, chat_id: impl Into<String>) -> Self {
        Self::open(TelegramClient::new(token), TelegramAddress::new(chat_id))
    }
}

impl<R: Render> TelegramChannel<R> {
    fn open(client: TelegramClient<R>, address: TelegramAddress) -> Self {
        let private = address.is_private();
        let budget = client.budgets.get_or_make(address.chat(), || {
            client.stream.budget_or(|| telegram_budget(private))
        });
        Self {
            chat: chat_value(address.chat()),
            client,
            address,
            budget,
        }
    }

    /// What the client's budgets are keyed by: Telegram's limits are per chat.
    pub(super) fn budget_key(&self) -> &str {
        self.address.chat()
    }

    /// The same connector rendering with `renderer`, whose output must be Telegram HTML (or
    /// plain text without `<`, `>` and `&`): it is sent with `parse_mode: "HTML"`.
    pub fn with_renderer<R2: Render>(self, renderer: R2) -> TelegramChannel<R2> {
        TelegramChannel {
            client: self.client.with_renderer(renderer),
            address: self.address,
            chat: self.chat,
            budget: self.budget,
        }
    }

    /// The same bot posting to another chat: shares this connector's client, token, policy and
    /// bot-wide rate-limit pause (not the topic).
    pub fn for_chat(&self, chat_id: impl Into<String>) -> Self
    where
        R: Clone,
    {
        self.client.channel(TelegramAddress::new(chat_id))
    }

    /// Posts into the forum topic `message_thread_id`.
    pub fn in_topic(mut self, message_thread_id: i64) -> Self {
        self.address = self.address.in_topic(message_thread_id);
        self
    }

    crate::channel::http::transport_builders!(
        "the Bot API at `url` instead of Telegram's (a loopback fake in tests)",
        client
    );
}

impl<R> fmt::Debug for TelegramChannel<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("chat", &self.chat)
            .field("topic", &self.address.topic())
            .field("base_url", &self.client.base_url)
            .field("token", &self.client.transport.token)
            .field("policy", &self.client.transport.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Render> Channel for TelegramChannel<R> {
    type Renderer = R;

    fn renderer(&self) -> &R {
        &self.client.renderer
    }

    fn address(&self) -> Address {
        Address::Telegram(self.address.clone())
    }

    /// Sends the part with `parse_mode: "HTML"`; if Telegram refuses its formatting (400
    /// "Bad Request: can't parse entities: …"), sends it once more as the plain text a person
    /// reads, without `parse_mode` ([`PartReceipt::is_plain_text_fallback`] says so).
    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let request = self.send_message(part.text(), true);
        async move {
            let transport = &self.client.transport;
            let mut refused = match transport.send(&self.budget, part, request, classify).await {
                Err(error) if send_refused_formatting(&error) => error,
                other => return other,
            };
            let Some(part) = refused.take_part() else {
                return Err(refused);
            };
            let plain = plain_text(part.text());
            tracing::warn!(target: "mesh_egress::channel", surface = "Telegram", delivery = %part.delivery_id(), part = part.index(), "Telegram could not parse the formatting; sending the part once more as plain text");
            let request = self.send_message(&plain, false);
            transport
                .send(&self.budget, part, request, classify)
                .await
                .map(PartReceipt::with_plain_text_fallback)
        }
    }
}

impl<R> TelegramChannel<R> {
    /// A `sendMessage` request for `text`, in HTML parse mode or as plain text.
    fn send_message(&self, text: &str, html: bool) -> Request {
        Request {
            url: format!(
                "{}/bot{}/sendMessage",
                self.client.base_url,
                self.client.transport.token.expose()
            ),
            authorization: None,
            body: message_body(&self.chat, self.address.topic(), text, html),
        }
    }
}

/// A `sendMessage` (or `sendMessageDraft`) body: `text` to `chat` (in forum topic `topic`), with
/// `parse_mode: "HTML"` when `html`, and none otherwise (plain text: nothing is read as markup).
pub(super) fn message_body(chat: &Value, topic: Option<i64>, text: &str, html: bool) -> Value {
    let mut body = json!({ "chat_id": chat, "text": text });
    if html {
        body["parse_mode"] = Value::from("HTML");
    }
    if let Some(topic) = topic {
        body["message_thread_id"] = Value::from(topic);
    }
    body
}

/// Whether Telegram refused a message because its parser rejected the formatted text: the Bot
/// API's 400 "Bad Request: can't parse entities: …" (an unclosed or unsupported tag, a bad
/// entity; <https://core.telegram.org/bots/api#formatting-options>). Such a reply is not lost
/// for a quirk of the parser: it goes once more as plain text (the failure that made
/// microsoft/agent-framework#6956 drop whole replies).
pub(super) fn refuses_formatting(kind: &ChannelErrorKind) -> bool {
    matches!(
        kind,
        ChannelErrorKind::Refused { status: 400, detail }
            if detail.to_ascii_lowercase().contains("can't parse entities")
    )
}

fn send_refused_formatting(error: &SendError) -> bool {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<crate::channel::ChannelError>())
        .is_some_and(|channel| refuses_formatting(channel.kind()))
}

/// The text a person reads in a Telegram HTML message, within Telegram's length limit.
pub(super) fn plain_text(html: &str) -> String {
    super::html::plain_text(html, crate::channel::TelegramHtml::LIMIT)
}

/// A numeric chat id goes on the wire as a number, `@channelusername` as a string.
fn chat_value(chat_id: &str) -> Value {
    chat_id
        .parse::<i64>()
        .map_or_else(|_| Value::from(chat_id), Value::from)
}

pub(crate) fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    token: &Token,
) -> CallEnd {
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return match status {
            StatusCode::TOO_MANY_REQUESTS => CallEnd::RateLimited {
                wait: retry_after_header(headers),
                global: false,
            },
            _ => unexpected_body(status),
        };
    };
    if answer.get("ok").and_then(Value::as_bool) == Some(true) && status.is_success() {
        return match answer.pointer("/result/message_id").and_then(Value::as_i64) {
            Some(id) => CallEnd::Sent(id.to_string()),
            None => unexpected_body(status),
        };
    }
    let code = answer
        .get("error_code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(status.as_u16());
    if code == 429 || status == StatusCode::TOO_MANY_REQUESTS {
        let wait = seconds_field(answer.pointer("/parameters/retry_after"))
            .or_else(|| retry_after_header(headers));
        return CallEnd::RateLimited {
            wait,
            global: false,
        };
    }
    if status.is_server_error() || code >= 500 {
        // It may have posted: a `sendMessage` is never repeated after it.
        return CallEnd::MaybeApplied(ChannelErrorKind::Server {
            status: status.as_u16().max(code),
        });
    }
    let description = answer
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("unknown error");
    CallEnd::Fail {
        kind: ChannelErrorKind::Refused {
            status: status.as_u16(),
            detail: token.scrub(description),
        },
        retryable: false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_429_reads_parameters_retry_after() {
        let outcome = classify(
            StatusCode::TOO_MANY_REQUESTS,
            &HeaderMap::new(),
            br#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}"#,
            &Token::new("t"),
        );
        assert!(matches!(
            outcome,
            CallEnd::RateLimited { wait: Some(w), global: false } if w == Duration::from_secs(3)
        ));
    }

    #[test]
    fn only_the_parse_entities_refusal_is_a_formatting_refusal() {
        let refused = |status: u16, description: &str| {
            let body = json!({"ok": false, "error_code": status, "description": description});
            match classify(
                StatusCode::from_u16(status).unwrap(),
                &HeaderMap::new(),
                body.to_string().as_bytes(),
                // A bot token's shape: a one-letter token would scrub every `t` from the description.
                &Token::new("123456:bot-token"),
            ) {
                CallEnd::Fail { kind, .. } => refuses_formatting(&kind),
                _ => false,
            }
        };
        assert!(refused(
            400,
            "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 12"
        ));
        assert!(refused(
            400,
            "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 0"
        ));
        assert!(!refused(400, "Bad Request: chat not found"));
        assert!(!refused(400, "Bad Request: message is too long"));
        assert!(!refused(403, "Forbidden: can't parse entities"));
    }

    #[test]
    fn the_plain_text_is_what_a_person_reads() {
        assert_eq!(
            plain_text(
                "<b>Deploy</b> &lt;v2&gt; &amp; <i>roll</i> to <a href=\"https://example.com/?a=1&amp;b=2\">prod</a>"
            ),
            "Deploy <v2> & roll to prod (https://example.com/?a=1&b=2)"
        );
        assert_eq!(
            plain_text("<pre><code class=\"language-rust\">let x = 1 &lt; 2;</code></pre>"),
            "let x = 1 < 2;"
        );
        assert_eq!(
            plain_text("<a href=\"https://x.io\">https://x.io</a> &#65;&#x42; &quot;q&quot;"),
            "https://x.io AB \"q\""
        );
        // What is not markup stays as written: a lone `<`, an unknown entity, a control
        // character as a number.
        assert_eq!(
            plain_text("1 < 2 &nbsp; &#0; &#x202E;"),
            "1 < 2 &nbsp; &#0; &#x202E;"
        );
        // Unclosed tags (what made Telegram refuse) are dropped like the others.
        assert_eq!(plain_text("<b>bold <i>both</b>"), "bold both");
    }

    #[test]
    fn a_plain_text_too_long_with_link_targets_keeps_the_labels_only() {
        let label = "x".repeat(TelegramHtml::LIMIT - 2);
        let html = format!("<a href=\"https://example.com/long\">{label}</a>");
        let plain = plain_text(&html);
        assert_eq!(plain, label);
    }

    #[test]
    fn a_refusal_echoing_the_token_is_scrubbed() {
        let outcome = classify(
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            br#"{"ok":false,"error_code":404,"description":"Not Found: /bot42:secret/sendMessage"}"#,
            &Token::new("42:secret"),
        );
        assert!(matches!(
            outcome,
            CallEnd::Fail { kind: ChannelErrorKind::Refused { detail, .. }, .. }
                if detail == "Not Found: /bot[redacted]/sendMessage"
        ));
    }
}
