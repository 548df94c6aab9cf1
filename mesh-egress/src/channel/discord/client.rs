//! [`DiscordChannel`]: Discord's create-message endpoint with a bot token.

use std::fmt;
use std::future::Future;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::address::Surface;
use crate::address::{Address, DiscordAddress};
use crate::channel::http::answer::{
    CallEnd, retry_after_header, seconds_field, server_error, unexpected_body,
};
use crate::channel::http::budgets::{Budgets, DEFAULT_BUDGET_CAPACITY};
use crate::channel::http::retry::Request;
use crate::channel::http::stream_settings::{StreamSettings, discord_budget};
use crate::channel::http::transport::Transport;
use crate::channel::http::{AllowedMentions, ChannelErrorKind, SendPolicy, Token, trim_base};
use crate::channel::stream::RateBudget;
use crate::channel::{
    BoxedChannel, Channel, DiscordMarkdown, PartReceipt, Render, SendError, SurfaceClient,
    UnservedAddress,
};
use crate::outbound::CommittedPart;

const DEFAULT_BASE_URL: &str = "https://discord.com/api/v10";

/// Discord caps a message nonce at 25 characters.
const NONCE_LIMIT: usize = 25;

/// One Discord bot (a bot token) and everything its conversations share: the REST API base,
/// the HTTP client, the [`SendPolicy`], the allowed mentions, the bot-wide rate-limit pause
/// (Discord's `global: true`) and one rate budget per channel. [`channel`](Self::channel)
/// gives the [`DiscordChannel`] to one conversation; as a [`SurfaceClient`] it gives one for
/// any stored Discord [`Address`].
///
/// ```
/// use mesh_egress::address::DiscordAddress;
/// use mesh_egress::channel::DiscordClient;
///
/// let bot = DiscordClient::new("bot-token");
/// let general = bot.channel(DiscordAddress::new("123456789012345678"));
/// assert!(!format!("{bot:?}").contains("bot-token"));
/// # let _ = general;
/// ```
#[derive(Clone)]
pub struct DiscordClient<R = DiscordMarkdown> {
    pub(super) renderer: R,
    pub(super) transport: Transport,
    pub(super) base_url: String,
    pub(super) mentions: AllowedMentions,
    /// How replies are streamed (the `*_stream.rs` module beside this one).
    pub(super) stream: StreamSettings,
    pub(super) budgets: Budgets,
}

impl DiscordClient {
    /// A client for bot `token`, rendering Discord Markdown ([`DiscordMarkdown`]);
    /// [`with_renderer`](Self::with_renderer) changes that.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            renderer: DiscordMarkdown::new(),
            transport: Transport::new(Surface::Discord, Token::new(token)),
            base_url: DEFAULT_BASE_URL.to_owned(),
            mentions: AllowedMentions::none(),
            stream: StreamSettings::default(),
            budgets: Budgets::new(DEFAULT_BUDGET_CAPACITY),
        }
    }
}

impl<R: Render> DiscordClient<R> {
    /// The same client rendering with `renderer` (whose output must be Discord Markdown, or
    /// plain text).
    pub fn with_renderer<R2: Render>(self, renderer: R2) -> DiscordClient<R2> {
        DiscordClient {
            renderer,
            transport: self.transport,
            base_url: self.base_url,
            mentions: self.mentions,
            stream: self.stream,
            budgets: self.budgets,
        }
    }

    /// Lets messages notify the users and roles `mentions` lists (and no one else); the
    /// default, [`AllowedMentions::none`], notifies no one.
    pub fn with_allowed_mentions(mut self, mentions: AllowedMentions) -> Self {
        self.mentions = mentions;
        self
    }

    /// Remembers at most `capacity` channels' rate budgets (default
    /// 10,000), forgetting the least recently used first.
    pub fn with_budget_capacity(mut self, capacity: usize) -> Self {
        self.budgets = Budgets::new(capacity);
        self
    }

    /// The channel to the conversation at `address`: this client's token, policy, mentions
    /// and global pause, and the budget of `address`'s channel (shared with every other
    /// channel this client made for it).
    pub fn channel(&self, address: DiscordAddress) -> DiscordChannel<R>
    where
        R: Clone,
    {
        DiscordChannel::open(self.clone(), address)
    }

    crate::channel::http::transport_builders!(
        "the REST API at `url` instead of Discord's (`…/api/v10`; a loopback fake in tests)"
    );
}

impl<R> fmt::Debug for DiscordClient<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscordClient")
            .field("base_url", &self.base_url)
            .field("mentions", &self.mentions)
            .field("token", &self.transport.token)
            .field("policy", &self.transport.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Render + Clone + 'static> SurfaceClient for DiscordClient<R> {
    fn surface(&self) -> Surface {
        Surface::Discord
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match address {
            Address::Discord(discord) => Ok(BoxedChannel::streaming(self.channel(discord.clone()))),
            other => Err(UnservedAddress::new(Surface::Discord, other.clone())),
        }
    }
}

/// A Discord channel (or thread), posted to with `POST /channels/{id}/messages` and a bot token:
/// a [`DiscordClient`] and the [`DiscordAddress`] of one conversation.
///
/// Each part is one message, in order. Every request carries the part's idempotency key
/// (`<delivery>-<index>`) as `nonce` with `enforce_nonce: true`, so when a response is lost and
/// the part is sent again, Discord returns the message it already created instead of posting a
/// duplicate: a try that may have posted (no answer, a 5xx, a 2xx it cannot read) is repeated
/// under the same nonce. A `429` is retried after the body's `retry_after` (seconds,
/// fractional; its `global` flag is reported), within the [`SendPolicy`].
///
/// Every try spends the channel's rate budget (set with
/// [`with_stream_budget`](Self::with_stream_budget)), the one its streams spend: it waits for a
/// pause a `429` or an empty rate-limit bucket put on it, is recorded so a stream's next edit is
/// spaced after it, and its own `429` pauses the streams too (a `global` one pauses the whole bot
/// instead, every channel of the same client). It does not wait for the budget's spacing, which is
/// there to keep the edits of a growing message from churning. A wait longer than what is left of
/// [`SendPolicy::max_wait`] hands the part back at once, rate limited.
///
/// Every message carries `allowed_mentions`: by default `{"parse": []}`, so `@everyone`,
/// `@here`, `<@user>` and `<@&role>` in a reply notify no one; list whom a message may notify
/// with [`with_allowed_mentions`](Self::with_allowed_mentions). A plain `@name` is text on
/// Discord, never a mention.
///
/// ```
/// use mesh_egress::channel::{DiscordChannel, DiscordMarkdown};
///
/// let discord = DiscordChannel::new("bot-token", "123456789012345678");
/// assert!(!format!("{discord:?}").contains("bot-token"));
/// let short = discord.with_renderer(DiscordMarkdown::new().with_limit(500));
/// # let _ = short;
/// ```
#[derive(Clone)]
pub struct DiscordChannel<R = DiscordMarkdown> {
    pub(super) client: DiscordClient<R>,
    pub(super) address: DiscordAddress,
    /// The channel's share of Discord's limit, from the client's budgets.
    pub(super) budget: RateBudget,
}

impl DiscordChannel {
    /// Posts to channel (or thread) `channel_id` with bot `token`, rendering Discord Markdown
    /// ([`DiscordMarkdown`]); [`with_renderer`](Self::with_renderer) changes that. The
    /// shorthand for a [`DiscordClient`] of its own and one address.
    pub fn new(token: impl Into<String>, channel_id: impl Into<String>) -> Self {
        Self::open(DiscordClient::new(token), DiscordAddress::new(channel_id))
    }
}

impl<R: Render> DiscordChannel<R> {
    fn open(client: DiscordClient<R>, address: DiscordAddress) -> Self {
        let budget = client.budgets.get_or_make(address.channel(), || {
            client.stream.budget_or(discord_budget)
        });
        Self {
            client,
            address,
            budget,
        }
    }

    /// What the client's budgets are keyed by: a Discord thread is a channel of its own.
    pub(super) fn budget_key(&self) -> &str {
        self.address.channel()
    }

    /// The same connector rendering with `renderer` (whose output must be Discord Markdown, or
    /// plain text).
    pub fn with_renderer<R2: Render>(self, renderer: R2) -> DiscordChannel<R2> {
        DiscordChannel {
            client: self.client.with_renderer(renderer),
            address: self.address,
            budget: self.budget,
        }
    }

    /// Lets messages notify the users and roles `mentions` lists (and no one else); the
    /// default, [`AllowedMentions::none`], notifies no one.
    pub fn with_allowed_mentions(mut self, mentions: AllowedMentions) -> Self {
        self.client.mentions = mentions;
        self
    }

    /// The same bot posting to another channel: shares this connector's client, token, policy,
    /// allowed mentions and the global rate-limit pause, so a `global: true` answer holds back
    /// every channel.
    pub fn for_channel(&self, channel_id: impl Into<String>) -> Self
    where
        R: Clone,
    {
        self.client.channel(DiscordAddress::new(channel_id))
    }

    crate::channel::http::transport_builders!(
        "the REST API at `url` instead of Discord's (`…/api/v10`; a loopback fake in tests)",
        client
    );
}

impl<R> fmt::Debug for DiscordChannel<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscordChannel")
            .field("channel", &self.address.channel())
            .field("base_url", &self.client.base_url)
            .field("mentions", &self.client.mentions)
            .field("token", &self.client.transport.token)
            .field("policy", &self.client.transport.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Render> Channel for DiscordChannel<R> {
    type Renderer = R;

    fn renderer(&self) -> &R {
        &self.client.renderer
    }

    fn address(&self) -> Address {
        Address::Discord(self.address.clone())
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let mut body = json!({
            "content": part.text(),
            "allowed_mentions": self.client.mentions.to_json(),
        });
        let nonce = part.idempotency_key();
        // The key is 16 hex digits, a dash and the index: within Discord's limit for any
        // message of fewer than 10^8 parts.
        if nonce.len() <= NONCE_LIMIT {
            body["nonce"] = Value::from(nonce);
            body["enforce_nonce"] = Value::from(true);
        }
        let request = Request {
            url: format!(
                "{}/channels/{}/messages",
                self.client.base_url,
                self.address.channel()
            ),
            authorization: Some(format!("Bot {}", self.client.transport.token.expose())),
            body,
        };
        self.client
            .transport
            .send(&self.budget, part, request, classify)
    }
}

pub(crate) fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    token: &Token,
) -> CallEnd {
    let answer = serde_json::from_slice::<Value>(body).ok();
    if status == StatusCode::TOO_MANY_REQUESTS {
        let field = |name: &str| answer.as_ref().and_then(|a| a.get(name));
        let wait = seconds_field(field("retry_after")).or_else(|| retry_after_header(headers));
        let global = field("global").and_then(Value::as_bool).unwrap_or(false)
            || headers
                .get("x-ratelimit-global")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        return CallEnd::RateLimited { wait, global };
    }
    if status.is_server_error() {
        return server_error(status);
    }
    let Some(answer) = answer else {
        return unexpected_body(status);
    };
    if status.is_success() {
        return match answer.get("id").and_then(Value::as_str) {
            Some(id) => CallEnd::Sent(id.to_owned()),
            None => unexpected_body(status),
        };
    }
    let code = answer.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = answer
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("unknown error");
    CallEnd::Fail {
        kind: ChannelErrorKind::Refused {
            status: status.as_u16(),
            detail: token.scrub(&format!("{code}: {message}")),
        },
        retryable: false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_429_reads_fractional_retry_after_and_the_global_flag_from_the_body() {
        let outcome = classify(
            StatusCode::TOO_MANY_REQUESTS,
            &HeaderMap::new(),
            br#"{"message":"You are being rate limited.","retry_after":0.125,"global":true}"#,
            &Token::new("t"),
        );
        assert!(matches!(
            outcome,
            CallEnd::RateLimited { wait: Some(w), global: true } if w == Duration::from_millis(125)
        ));
    }

    #[test]
    fn a_4xx_is_refused_with_discords_code_and_message() {
        let outcome = classify(
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            br#"{"message":"Unknown Channel","code":10003}"#,
            &Token::new("t"),
        );
        assert!(matches!(
            outcome,
            CallEnd::Fail { kind: ChannelErrorKind::Refused { status: 404, detail }, retryable: false }
                if detail == "10003: Unknown Channel"
        ));
    }
}
