//! [`SlackChannel`]: Slack's `chat.postMessage` with a bot token.

use std::fmt;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::address::Surface;
use crate::address::{Address, SlackAddress};
use crate::channel::http::answer::{
    BodyError, CallEnd, read_capped, retry_after_header, server_error, unexpected_body,
};
use crate::channel::http::budgets::{Budgets, DEFAULT_BUDGET_CAPACITY};
use crate::channel::http::exchange::Repeat;
use crate::channel::http::retry::Request;
use crate::channel::http::stream_settings::{StreamSettings, slack_budget};
use crate::channel::http::transport::Transport;
use crate::channel::http::{ChannelErrorKind, SendPolicy, Token, trim_base};
use crate::channel::stream::RateBudget;
use crate::channel::{
    BoxedChannel, Channel, PartLookup, PartReceipt, Render, SendError, SlackMrkdwn, SurfaceClient,
    UnservedAddress,
};
use crate::outbound::{CommittedPart, DeliveryId};

/// The metadata `event_type` every part carries, and a lookup matches.
const EVENT_TYPE: &str = "mesh_egress_part";
/// How many messages one lookup reads at most (one page): a lookup is a bounded question, not
/// a crawl of the channel's history.
const LOOKUP_LIMIT: u32 = 50;
/// The cap on a lookup's answer: a page of long messages is bigger than a send's answer.
const LOOKUP_MAX_BYTES: usize = 2 * 1024 * 1024;
/// How far before the first try a lookup starts: Slack's `ts` is Slack's clock, not ours.
const CLOCK_SKEW: Duration = Duration::from_secs(60);

const DEFAULT_BASE_URL: &str = "https://slack.com/api";

/// Slack error codes its docs say may follow a partial success ("it's possible some aspect of
/// the operation succeeded before the error was raised"): the message may be posted.
const MAYBE_APPLIED: &[&str] = &["internal_error", "fatal_error"];
/// Slack error codes its docs call transient and that applied nothing (the service was down,
/// the request's data did not arrive): sending again may work and cannot duplicate.
const TRANSIENT: &[&str] = &["service_unavailable", "request_timeout"];

/// One Slack bot (a bot token, `xoxb-…`) and everything its conversations share: the Web API
/// base, the HTTP client, the [`SendPolicy`], the bot-wide rate-limit pause and one rate
/// budget per channel. [`channel`](Self::channel) gives the [`SlackChannel`] to one
/// conversation; as a [`SurfaceClient`] it gives one for any stored Slack [`Address`].
///
/// ```
/// use mesh_egress::address::SlackAddress;
/// use mesh_egress::channel::{SlackClient, SlackMrkdwn};
///
/// let bot = SlackClient::new("xoxb-…").with_renderer(SlackMrkdwn::new().with_limit(1000));
/// let ops = bot.channel(SlackAddress::new("C0123456789"));
/// let thread = bot.channel(SlackAddress::new("C0123456789").in_thread("1700000000.000100"));
/// assert!(!format!("{bot:?}").contains("xoxb"));
/// # let _ = (ops, thread);
/// ```
#[derive(Clone)]
pub struct SlackClient<R = SlackMrkdwn> {
    pub(super) renderer: R,
    pub(super) transport: Transport,
    pub(super) base_url: String,
    /// How replies are streamed (the `*_stream.rs` module beside this one).
    pub(super) stream: StreamSettings,
    pub(super) budgets: Budgets,
}

impl SlackClient {
    /// A client for bot `token`, rendering Slack mrkdwn ([`SlackMrkdwn`]);
    /// [`with_renderer`](Self::with_renderer) changes that.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            renderer: SlackMrkdwn::new(),
            transport: Transport::new(Surface::Slack, Token::new(token)),
            base_url: DEFAULT_BASE_URL.to_owned(),
            stream: StreamSettings::default(),
            budgets: Budgets::new(DEFAULT_BUDGET_CAPACITY),
        }
    }
}

impl<R: Render> SlackClient<R> {
    /// The same client rendering with `renderer` (whose output must be Slack mrkdwn, plain
    /// text, or standard Markdown for `markdown_text`).
    pub fn with_renderer<R2: Render>(self, renderer: R2) -> SlackClient<R2> {
        SlackClient {
            renderer,
            transport: self.transport,
            base_url: self.base_url,
            stream: self.stream,
            budgets: self.budgets,
        }
    }

    /// Remembers at most `capacity` channels' rate budgets (default
    /// 10,000), forgetting the least recently used first.
    pub fn with_budget_capacity(mut self, capacity: usize) -> Self {
        self.budgets = Budgets::new(capacity);
        self
    }

    /// The channel to the conversation at `address`: this client's token, policy and pause,
    /// and the budget of `address`'s channel (shared with every other channel this client
    /// made for it, threads included: Slack's limit is per channel).
    pub fn channel(&self, address: SlackAddress) -> SlackChannel<R>
    where
        R: Clone,
    {
        SlackChannel::open(self.clone(), address)
    }

    crate::channel::http::transport_builders!(
        "the Web API at `url` instead of Slack's (`…/api`; a loopback fake in tests)"
    );
}

impl<R> fmt::Debug for SlackClient<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackClient")
            .field("base_url", &self.base_url)
            .field("token", &self.transport.token)
            .field("policy", &self.transport.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Render + Clone + 'static> SurfaceClient for SlackClient<R> {
    fn surface(&self) -> Surface {
        Surface::Slack
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match address {
            Address::Slack(slack) => Ok(BoxedChannel::streaming(self.channel(slack.clone()))),
            other => Err(UnservedAddress::new(Surface::Slack, other.clone())),
        }
    }
}

/// A Slack channel (or DM, or thread), posted to with `chat.postMessage` and a bot token
/// (`xoxb-…`): a [`SlackClient`] and the [`SlackAddress`] of one conversation.
///
/// Each part is one message, in order, all in the thread given by
/// [`in_thread`](Self::in_thread) if any. Every message carries the delivery id and part index
/// as message `metadata` (`event_type` `mesh_egress_part`), so a duplicate after a lost response
/// can be recognised; Slack itself has no idempotency key. A `429` is retried after its
/// `Retry-After` header, within the [`SendPolicy`]; `ok: false` answers become a
/// [`ChannelError`](crate::channel::ChannelError) carrying Slack's error code.
///
/// Every try spends the conversation's rate budget (set with
/// [`with_stream_budget`](Self::with_stream_budget)), the one its streams spend: it waits for a
/// pause a `429` (of a send or of a stream call) put on it, is recorded so a stream's next append
/// is spaced after it, and its own `429` pauses the streams too. It does not wait for the budget's
/// spacing (one call a second): Slack allows short bursts of `chat.postMessage` ("special" rate
/// limit: about one message per second per channel, with bursts allowed), so a ten-part reply goes
/// at once. A wait longer than what is left of [`SendPolicy::max_wait`] hands the part back at
/// once, rate limited.
///
/// # Reconciliation
///
/// A try that may have posted the part (a timeout, a connection cut mid-answer, a 5xx,
/// `internal_error` or `fatal_error`, a 2xx it cannot read) is never repeated blindly. Before
/// trying again, the connector looks the part up
/// ([`Channel::look_up`]): `conversations.replies` for a thread, `conversations.history`
/// otherwise, with `include_all_metadata=true`, one page of at most 50 messages from a minute
/// before the first try. Found: the part counts as sent with that message's `ts`. Not found:
/// it is sent again. When the lookup cannot tell (the token lacks the history scope —
/// `channels:history`, `groups:history`, `im:history` or `mpim:history` — and Slack answers
/// `missing_scope`; the lookup failed; the page was full without the part), the part is not
/// sent blindly again: the send fails with a retryable [`SendError`], and a durable outbox
/// marks it `uncertain`. (<https://api.slack.com/methods/conversations.history>,
/// <https://api.slack.com/methods/conversations.replies>.)
///
/// ```
/// use mesh_egress::channel::{SlackChannel, SlackMrkdwn};
///
/// let slack = SlackChannel::new("xoxb-…", "C0123456789").in_thread("1700000000.000100");
/// assert!(!format!("{slack:?}").contains("xoxb"));
/// // Another renderer (here: mrkdwn cut to 1000 characters a message).
/// let short = SlackChannel::new("xoxb-…", "C0123456789")
///     .with_renderer(SlackMrkdwn::new().with_limit(1000));
/// # let _ = short;
/// ```
#[derive(Clone)]
pub struct SlackChannel<R = SlackMrkdwn> {
    pub(super) client: SlackClient<R>,
    pub(super) address: SlackAddress,
    /// The channel's share of Slack's limit, from the client's budgets.
    pub(super) budget: RateBudget,
}

impl SlackChannel {
    /// Posts to `channel` (a channel, DM or group id such as `C0123456789`) with bot `token`,
    /// rendering Slack mrkdwn ([`SlackMrkdwn`]); [`with_renderer`](Self::with_renderer)
    /// changes that. The shorthand for a [`SlackClient`] of its own and one address.
    pub fn new(token: impl Into<String>, channel: impl Into<String>) -> Self {
        Self::open(SlackClient::new(token), SlackAddress::new(channel))
    }
}

impl<R: Render> SlackChannel<R> {
    fn open(client: SlackClient<R>, address: SlackAddress) -> Self {
        let budget = client
            .budgets
            .get_or_make(address.channel(), || client.stream.budget_or(slack_budget));
        Self {
            client,
            address,
            budget,
        }
    }

    /// What the client's budgets are keyed by: Slack's limit is per channel.
    pub(super) fn budget_key(&self) -> &str {
        self.address.channel()
    }

    /// The same connector rendering with `renderer` (whose output must be Slack mrkdwn, or
    /// plain text).
    pub fn with_renderer<R2: Render>(self, renderer: R2) -> SlackChannel<R2> {
        SlackChannel {
            client: self.client.with_renderer(renderer),
            address: self.address,
            budget: self.budget,
        }
    }

    /// The same bot posting to another channel: shares this connector's client, token, policy
    /// and bot-wide rate-limit pause (not the thread, nor the stream's recipient).
    pub fn for_channel(&self, channel: impl Into<String>) -> Self
    where
        R: Clone,
    {
        self.client.channel(SlackAddress::new(channel))
    }

    /// Posts every part as a reply in the thread whose parent message has timestamp `ts`.
    pub fn in_thread(mut self, ts: impl Into<String>) -> Self {
        self.address = self.address.in_thread(ts);
        self
    }

    crate::channel::http::transport_builders!(
        "the Web API at `url` instead of Slack's (`…/api`; a loopback fake in tests)",
        client
    );
}

impl<R> fmt::Debug for SlackChannel<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackChannel")
            .field("channel", &self.address.channel())
            .field("thread_ts", &self.address.thread_ts())
            .field("base_url", &self.client.base_url)
            .field("token", &self.client.transport.token)
            .field("policy", &self.client.transport.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Render> Channel for SlackChannel<R> {
    type Renderer = R;

    fn renderer(&self) -> &R {
        &self.client.renderer
    }

    fn address(&self) -> Address {
        Address::Slack(self.address.clone())
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        // Standard Markdown goes in `markdown_text`, which Slack renders itself and which
        // replaces `text` (chat.postMessage: "should not be used in conjunction with blocks or
        // text"); mrkdwn and plain text go in `text`.
        let field = if self.client.renderer.is_standard_markdown() {
            "markdown_text"
        } else {
            "text"
        };
        let mut body = json!({
            "channel": self.address.channel(),
            "metadata": {
                "event_type": EVENT_TYPE,
                "event_payload": {
                    "delivery": part.delivery_id().to_string(),
                    "part": part.index(),
                    "total": part.total(),
                },
            },
        });
        body[field] = Value::from(part.text());
        if let Some(ts) = self.address.thread_ts() {
            body["thread_ts"] = Value::from(ts);
        }
        let request = Request {
            url: format!("{}/chat.postMessage", self.client.base_url),
            authorization: Some(format!("Bearer {}", self.client.transport.token.expose())),
            body,
        };
        self.send_reconciled(part, request)
    }

    fn look_up(
        &self,
        part: &CommittedPart,
        since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        self.find(
            part.delivery_id(),
            part.index(),
            since,
            self.client.transport.policy.timeout,
        )
    }
}

impl<R: Render> SlackChannel<R> {
    /// The send loop with a lookup before every try that follows a try of unknown outcome.
    async fn send_reconciled(
        &self,
        part: CommittedPart,
        request: Request,
    ) -> Result<PartReceipt, SendError> {
        let started = SystemTime::now();
        // Copied, not formatted: only a lookup after a try of unknown outcome needs its text.
        let delivery = part.delivery_id();
        let index = part.index();
        // The failure of the last try whose outcome is unknown, until a lookup settles it.
        let unsettled: Mutex<Option<ChannelErrorKind>> = Mutex::new(None);
        let unsettled = &unsettled;
        let request = &request;
        // A post that may have been applied is repeated only after a lookup found it absent.
        self.client.transport
            .retry(&self.budget, part, Repeat::Safe, |timeout| async move {
                let last = unsettled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(kind) = last {
                    match self.find(delivery, index, started, timeout).await {
                        PartLookup::Found(receipt) => {
                            tracing::info!(target: "mesh_egress::channel", surface = "Slack", delivery = %delivery, part = index, "an earlier try had posted the part; not sent again");
                            return CallEnd::Sent(receipt.id().to_owned());
                        }
                        PartLookup::NotFound => {}
                        PartLookup::Unknown { reason } => {
                            tracing::warn!(target: "mesh_egress::channel", surface = "Slack", delivery = %delivery, part = index, reason = %reason, "cannot tell whether an earlier try posted the part; not sending it again");
                            return CallEnd::Unknown(kind);
                        }
                    }
                }
                let outcome = self
                    .client
                    .transport
                    .exchange(request.wire(), classify, timeout, None)
                    .await;
                if let CallEnd::MaybeApplied(kind) = &outcome {
                    *unsettled.lock().unwrap_or_else(PoisonError::into_inner) = Some(kind.clone());
                }
                outcome
            })
            .await
    }

    /// Looks for the message carrying part `index` of `delivery`, posted no earlier than a
    /// minute before `since`.
    async fn find(
        &self,
        delivery: DeliveryId,
        index: usize,
        since: SystemTime,
        timeout: Duration,
    ) -> PartLookup {
        let delivery = delivery.to_string();
        let (method, mut query) = match self.address.thread_ts() {
            Some(ts) => ("conversations.replies", vec![("ts", ts.to_owned())]),
            None => ("conversations.history", Vec::new()),
        };
        query.extend([
            ("channel", self.address.channel().to_owned()),
            (
                "oldest",
                slack_ts(since.checked_sub(CLOCK_SKEW).unwrap_or(UNIX_EPOCH)),
            ),
            ("inclusive", "true".to_owned()),
            ("limit", LOOKUP_LIMIT.to_string()),
            ("include_all_metadata", "true".to_owned()),
        ]);
        let response = self
            .client
            .transport
            .client
            .get(format!("{}/{method}", self.client.base_url))
            .query(&query)
            .timeout(timeout)
            .bearer_auth(self.client.transport.token.expose())
            .send()
            .await;
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                return PartLookup::unknown(format!(
                    "{method}: {}",
                    self.client.transport.transport_failure(error)
                ));
            }
        };
        let status = response.status();
        let body = match read_capped(response, LOOKUP_MAX_BYTES).await {
            Ok(body) => body,
            Err(BodyError::TooLarge) => {
                return PartLookup::unknown(format!(
                    "{method}: the answer passed {LOOKUP_MAX_BYTES} bytes"
                ));
            }
            Err(BodyError::Transport(error)) => {
                return PartLookup::unknown(format!(
                    "{method}: {}",
                    self.client.transport.transport_failure(error)
                ));
            }
        };
        read_lookup(
            method,
            status,
            &body,
            &delivery,
            index,
            &self.client.transport.token,
        )
    }
}

/// A Slack `ts` ("seconds.microseconds") for `time`.
fn slack_ts(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:06}", since.as_secs(), since.subsec_micros())
}

/// Reads a `conversations.history`/`conversations.replies` answer: whether one of its messages
/// carries part `index` of `delivery` in its metadata.
fn read_lookup(
    method: &str,
    status: StatusCode,
    body: &[u8],
    delivery: &str,
    index: usize,
    token: &Token,
) -> PartLookup {
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return PartLookup::unknown(format!(
            "{method}: HTTP {status}, not the JSON Slack documents"
        ));
    };
    if answer.get("ok").and_then(Value::as_bool) != Some(true) || !status.is_success() {
        let code = answer
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error");
        return PartLookup::unknown(format!("{method}: HTTP {status}, {}", token.scrub(code)));
    }
    let Some(messages) = answer.get("messages").and_then(Value::as_array) else {
        return PartLookup::unknown(format!("{method}: no messages in the answer"));
    };
    let found = messages.iter().find(|message| {
        let Some(metadata) = message.get("metadata") else {
            return false;
        };
        let payload = metadata.get("event_payload");
        metadata.get("event_type").and_then(Value::as_str) == Some(EVENT_TYPE)
            && payload
                .and_then(|p| p.get("delivery"))
                .and_then(Value::as_str)
                == Some(delivery)
            && payload.and_then(|p| p.get("part")).and_then(Value::as_u64)
                == u64::try_from(index).ok()
    });
    match found.and_then(|m| m.get("ts")).and_then(Value::as_str) {
        Some(ts) => PartLookup::Found(PartReceipt::new(ts)),
        None if found.is_some() => {
            PartLookup::unknown(format!("{method}: the part's message has no ts"))
        }
        // A full page may have left the part out: only a page that ends the window proves absence.
        None if answer.get("has_more").and_then(Value::as_bool) == Some(true) => {
            PartLookup::unknown(format!(
                "{method}: more than {LOOKUP_LIMIT} messages since the first try"
            ))
        }
        None => PartLookup::NotFound,
    }
}

pub(crate) fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    token: &Token,
) -> CallEnd {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return CallEnd::RateLimited {
            wait: retry_after_header(headers),
            global: false,
        };
    }
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return unexpected_body(status);
    };
    if status.is_server_error() {
        return server_error(status);
    }
    match answer.get("ok").and_then(Value::as_bool) {
        Some(true) if status.is_success() => CallEnd::Sent(
            answer
                .get("ts")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        ),
        Some(_) => {
            let code = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown_error");
            if code == "ratelimited" {
                return CallEnd::RateLimited {
                    wait: retry_after_header(headers),
                    global: false,
                };
            }
            let kind = ChannelErrorKind::Refused {
                status: status.as_u16(),
                detail: token.scrub(code),
            };
            if MAYBE_APPLIED.contains(&code) {
                CallEnd::MaybeApplied(kind)
            } else if TRANSIENT.contains(&code) {
                CallEnd::Retry(kind)
            } else {
                CallEnd::Fail {
                    kind,
                    retryable: false,
                }
            }
        }
        None => unexpected_body(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(status: u16, body: &str) -> CallEnd {
        classify(
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            body.as_bytes(),
            &Token::new("xoxb-secret"),
        )
    }

    #[test]
    fn ok_false_with_a_permanent_code_is_refused_and_not_retryable() {
        match read(200, r#"{"ok":false,"error":"channel_not_found"}"#) {
            CallEnd::Fail {
                kind: ChannelErrorKind::Refused { status, detail },
                retryable,
            } => {
                assert_eq!(
                    (status, detail.as_str(), retryable),
                    (200, "channel_not_found", false)
                );
            }
            _ => panic!("expected a refusal"),
        }
    }

    #[test]
    fn ok_false_with_internal_error_may_have_posted_and_a_transient_code_did_not() {
        assert!(matches!(
            read(200, r#"{"ok":false,"error":"internal_error"}"#),
            CallEnd::MaybeApplied(ChannelErrorKind::Refused { .. })
        ));
        assert!(matches!(
            read(200, r#"{"ok":false,"error":"service_unavailable"}"#),
            CallEnd::Retry(ChannelErrorKind::Refused { .. })
        ));
    }

    fn look(body: &str) -> PartLookup {
        read_lookup(
            "conversations.history",
            StatusCode::OK,
            body.as_bytes(),
            "d1",
            1,
            &Token::new("xoxb-secret"),
        )
    }

    fn message(ts: &str, delivery: &str, part: u64) -> Value {
        json!({
            "type": "message",
            "ts": ts,
            "text": "x",
            "metadata": {
                "event_type": EVENT_TYPE,
                "event_payload": { "delivery": delivery, "part": part, "total": 3 },
            },
        })
    }

    #[test]
    fn a_lookup_finds_the_message_whose_metadata_names_the_delivery_and_part() {
        let body = json!({
            "ok": true,
            "has_more": false,
            "messages": [
                message("1.3", "d1", 2),
                message("1.2", "d1", 1),
                message("1.1", "d0", 1),
                { "type": "message", "ts": "1.0", "text": "no metadata" },
            ],
        });
        assert_eq!(
            look(&body.to_string()),
            PartLookup::Found(PartReceipt::new("1.2"))
        );
    }

    #[test]
    fn a_lookup_without_the_part_is_not_found_only_when_the_page_ends_the_window() {
        let page = |has_more: bool| {
            json!({ "ok": true, "has_more": has_more, "messages": [message("1.3", "d1", 2)] })
                .to_string()
        };
        assert_eq!(look(&page(false)), PartLookup::NotFound);
        assert!(matches!(look(&page(true)), PartLookup::Unknown { .. }));
    }

    #[test]
    fn a_lookup_ignores_messages_of_other_event_types() {
        let mut other = message("1.2", "d1", 1);
        other["metadata"]["event_type"] = json!("someone_else");
        let body = json!({ "ok": true, "messages": [other] }).to_string();
        assert_eq!(look(&body), PartLookup::NotFound);
    }

    #[test]
    fn a_lookup_refused_or_unreadable_cannot_tell_and_says_why_without_the_token() {
        let PartLookup::Unknown { reason } =
            look(r#"{"ok":false,"error":"missing_scope","needed":"channels:history"}"#)
        else {
            panic!("expected unknown");
        };
        assert!(reason.contains("missing_scope"), "{reason}");
        let PartLookup::Unknown { reason } = look(r#"{"ok":false,"error":"xoxb-secret"}"#) else {
            panic!("expected unknown");
        };
        assert!(!reason.contains("xoxb-secret"), "{reason}");
        assert!(matches!(look("<html>"), PartLookup::Unknown { .. }));
        assert!(matches!(look(r#"{"ok":true}"#), PartLookup::Unknown { .. }));
    }

    #[test]
    fn a_slack_ts_is_seconds_and_six_digits_of_microseconds() {
        let time = UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_042);
        assert_eq!(slack_ts(time), "1700000000.000042");
        assert_eq!(slack_ts(UNIX_EPOCH), "0.000000");
    }

    #[test]
    fn ok_true_yields_the_message_ts() {
        assert!(matches!(read(200, r#"{"ok":true,"ts":"1.2"}"#), CallEnd::Sent(ts) if ts == "1.2"));
    }
}
