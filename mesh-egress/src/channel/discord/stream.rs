//! [`DiscordChannel`] as a [`StreamingChannel`]: post the first block, then edit the message as
//! blocks arrive, paced by Discord's own rate-limit headers.

use std::future::Future;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::client::{DiscordChannel, DiscordClient};
use crate::address::Surface;
use crate::channel::http::answer::seconds_field;
use crate::channel::http::stream_call::{CallFailure, Caller, StreamCall};
use crate::channel::http::stream_settings::{channel_stream_builders, client_stream_builders};
use crate::channel::stream::{
    BLOCK_SEPARATOR, CallKind, Driver, DriverError, MaybeShown, Parts, RateBudget, ReplyStream,
    StreamMode, StreamOpenError, StreamedMessage, StreamingChannel, SurfaceStreamReceipt, flush,
    pack,
};
use crate::channel::{DiscordMarkdown, Render};
use crate::egress::Attribution;

/// Discord caps a message nonce at 25 characters.
const NONCE_LIMIT: usize = 25;

impl<R: Render> DiscordClient<R> {
    client_stream_builders!();
}

impl<R: Render> DiscordChannel<R> {
    channel_stream_builders!();
}

/// Streams by editing: the first block is posted (`POST /channels/{id}/messages`, with the
/// part's idempotency key as `nonce` under `enforce_nonce`), and each later batch of blocks
/// edits that message (`PATCH /channels/{id}/messages/{message}` with the whole new content and
/// the same `allowed_mentions` as a send). A block that would take the message past 2,000 code
/// points starts a new message. The default mode is [`StreamMode::Stream`].
///
/// Discord asks clients to read limits from its headers rather than hard-code them
/// (<https://discord.com/developers/docs/topics/rate-limits>): after every answer,
/// `X-RateLimit-Remaining: 0` pauses the conversation's budget for `X-RateLimit-Reset-After`,
/// and a 429 pauses it for the body's `retry_after`. An edit that meets a limit is not retried:
/// the blocks that arrive meanwhile go in the next edit, coalesced. The last edit and every new
/// message are retried within the [`SendPolicy`](crate::channel::SendPolicy).
impl<R: Render> StreamingChannel for DiscordChannel<R> {
    fn stream_mode(&self) -> StreamMode {
        self.client.stream.mode.unwrap_or(StreamMode::Stream)
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        let mode = self.stream_mode();
        let driver = DiscordDriver {
            caller: Caller::new(
                self.client.transport.clone(),
                self.budget.clone(),
                super::client::classify,
                Some(observe_rate_limit_headers),
            ),
            url: format!(
                "{}/channels/{}/messages",
                self.client.base_url,
                self.address.channel()
            ),
            authorization: format!("Bot {}", self.client.transport.token.expose()),
            mentions: self.client.mentions.to_json(),
            mode,
            open: false,
            confirmed: 0,
            messages: Vec::new(),
            retry_at: None,
            maybe: MaybeShown::default(),
        };
        ReplyStream::spawn(driver, mode, attribution)
    }
}

/// Reads `X-RateLimit-Remaining` and `X-RateLimit-Reset-After` (seconds, fractional): no call
/// remains in the bucket until it resets.
pub(crate) fn observe_rate_limit_headers(headers: &HeaderMap, budget: &RateBudget) {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let remaining = header("x-ratelimit-remaining").and_then(|v| v.trim().parse::<u64>().ok());
    if remaining != Some(0) {
        return;
    }
    let reset_after = header("x-ratelimit-reset-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|secs| seconds_field(Some(&Value::from(secs))));
    if let Some(wait) = reset_after {
        budget.exhausted_for(wait);
    }
}

struct DiscordDriver {
    caller: Caller,
    url: String,
    authorization: String,
    mentions: Value,
    mode: StreamMode,
    /// Whether the last message may still grow (edits extend it).
    open: bool,
    confirmed: usize,
    messages: Vec<StreamedMessage>,
    /// When an edit met a rate limit: edit then, even without a new block.
    retry_at: Option<Instant>,
    /// Parts of a create or edit that may have been applied without an answer.
    maybe: MaybeShown,
}

fn fits(text: &str) -> bool {
    text.chars().count() <= DiscordMarkdown::LIMIT
}

impl DiscordDriver {
    fn fail(failure: CallFailure) -> DriverError {
        failure.into_driver_error(Surface::Discord)
    }

    /// Posts `text`, parts `first..first + count`, as a new message. Its nonce is its own: the
    /// part's idempotency key for a message of one part (so a re-send of that part as a
    /// message of its own is deduped too), and a digest of every part's key for a packed one
    /// (so a message repacked with more parts is never taken for an earlier one).
    async fn post(
        &mut self,
        parts: &Parts,
        first: usize,
        count: usize,
        text: String,
    ) -> Result<(), DriverError> {
        let mut body = json!({ "content": text, "allowed_mentions": self.mentions });
        let nonce = if count == 1 {
            parts.idempotency_key(first)
        } else {
            packed_nonce((first..first + count).filter_map(|i| parts.idempotency_key(i)))
        }
        .filter(|n| n.len() <= NONCE_LIMIT);
        // A create carrying an enforced nonce is deduped by Discord: safe to send again.
        let repeat_safe = nonce.is_some();
        if let Some(nonce) = nonce {
            body["nonce"] = Value::from(nonce);
            body["enforce_nonce"] = Value::from(true);
        }
        let call = StreamCall {
            method: Method::POST,
            url: self.url.clone(),
            authorization: Some(self.authorization.clone()),
            body,
            repeat_safe,
        };
        match self.caller.call(CallKind::Final, &call).await {
            Ok(id) => {
                self.messages.push(StreamedMessage::new(id, text));
                Ok(())
            }
            Err(failure) => {
                if failure.unknown {
                    // A one-part message's nonce is the part's own key: sent again as a
                    // message of its own, Discord dedupes it. A packed one's is not.
                    let deduped = count == 1 && repeat_safe;
                    self.maybe.note(first, first + count, deduped);
                }
                Err(Self::fail(failure))
            }
        }
    }

    /// Edits the last message to `text`, which adds `added` parts; `Ok(false)` when a rate
    /// limit left it for later. An edit that may have been applied without an answer leaves
    /// its parts maybe shown: never posted again as a message of their own (a later edit with
    /// the whole text, idempotent, may still confirm them).
    async fn edit(&mut self, text: &str, added: usize, done: bool) -> Result<bool, DriverError> {
        let Some(message) = self.messages.last() else {
            return Ok(false);
        };
        let call = StreamCall {
            method: Method::PATCH,
            url: format!("{}/{}", self.url, message.id()),
            authorization: Some(self.authorization.clone()),
            body: json!({ "content": text, "allowed_mentions": self.mentions }),
            // An edit carries the whole text: applying it twice shows it once.
            repeat_safe: true,
        };
        let kind = if done {
            CallKind::Final
        } else {
            CallKind::Preview
        };
        match self.caller.call(kind, &call).await {
            Ok(_) => Ok(true),
            Err(failure) => {
                if failure.unknown {
                    self.maybe
                        .note(self.confirmed, self.confirmed + added, false);
                }
                if failure.is_transient() && !done {
                    self.retry_at = Some(self.caller.budget.next_slot(CallKind::Preview));
                    return Ok(false);
                }
                Err(Self::fail(failure))
            }
        }
    }

    async fn stream(&mut self, parts: &Parts, done: bool) -> Result<(), DriverError> {
        while self.confirmed < parts.len() {
            let current = self.messages.last().filter(|_| self.open);
            if let Some(message) = current {
                let mut text = message.text().to_owned();
                let mut added = 0;
                for block in parts.texts_from(self.confirmed) {
                    let candidate = format!("{text}{BLOCK_SEPARATOR}{block}");
                    if !fits(&candidate) {
                        break;
                    }
                    text = candidate;
                    added += 1;
                }
                if added == 0 {
                    // Full: the next block starts a new message.
                    self.open = false;
                    continue;
                }
                // Once the reply is complete every edit is retried: none can be left for later.
                if !self.edit(&text, added, done).await? {
                    return Ok(());
                }
                if let Some(message) = self.messages.last_mut() {
                    *message = StreamedMessage::new(message.id(), text);
                }
                self.confirmed += added;
            } else {
                let first = self.confirmed;
                let text = parts.text(first).to_owned();
                self.post(parts, first, 1, text).await?;
                self.confirmed += 1;
                self.open = true;
            }
        }
        Ok(())
    }

    async fn each(
        &mut self,
        parts: &Parts,
        groups: Vec<(usize, String)>,
    ) -> Result<(), DriverError> {
        for (count, text) in groups {
            self.post(parts, self.confirmed, count, text).await?;
            self.confirmed += count;
        }
        Ok(())
    }
}

impl Driver for DiscordDriver {
    fn ready(&self, done: bool) -> impl Future<Output = ()> + Send + '_ {
        let kind = if done || !self.open {
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
        let groups = pack(parts.texts_from(self.confirmed), fits);
        self.each(parts, groups).await
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
    }
}

/// The nonce of a message that packs several parts: `p` and 24 hex digits of two FNV-1a
/// digests of the parts' keys, in order (within Discord's 25 characters). Stable across
/// processes and releases (unlike `std`'s hasher), so a restarted sender's repeat of the same
/// packed message dedupes; `None` for no keys.
fn packed_nonce(keys: impl Iterator<Item = String>) -> Option<String> {
    let mut first = 0xcbf2_9ce4_8422_2325_u64;
    let mut second = 0x6c62_272e_07bb_0142_u64;
    let mut any = false;
    for key in keys {
        any = true;
        for byte in key.bytes().chain(std::iter::once(b',')) {
            first = (first ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            second = (second ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    any.then(|| format!("p{first:016x}{:08x}", second >> 32))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::channel::stream::BudgetConfig;

    #[tokio::test(start_paused = true)]
    async fn an_empty_bucket_pauses_the_budget_until_its_reset() {
        let budget = RateBudget::new(BudgetConfig::new(Duration::ZERO));
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-after", "1.5".parse().unwrap());
        observe_rate_limit_headers(&headers, &budget);
        assert_eq!(budget.pause_left(), Duration::from_millis(1500));
        headers.insert("x-ratelimit-remaining", "3".parse().unwrap());
        headers.insert("x-ratelimit-reset-after", "9".parse().unwrap());
        observe_rate_limit_headers(&headers, &budget);
        assert_eq!(
            budget.pause_left(),
            Duration::from_millis(1500),
            "calls remain: no pause"
        );
    }

    #[test]
    fn a_packed_message_has_a_nonce_of_its_own_within_discords_limit() {
        let keys = |n: usize| (0..n).map(|i| format!("00000000000000ab-{i}"));
        let two = packed_nonce(keys(2)).unwrap();
        let three = packed_nonce(keys(3)).unwrap();
        assert_eq!(two.len(), 25);
        assert!(two.len() <= NONCE_LIMIT);
        assert_ne!(
            two, three,
            "a message repacked with more parts is another message"
        );
        assert_eq!(packed_nonce(keys(2)).unwrap(), two, "stable");
        assert!(
            !two.starts_with("00000000000000ab"),
            "never a part's own key"
        );
        assert_eq!(packed_nonce(std::iter::empty()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn nonsense_headers_pause_nothing() {
        let budget = RateBudget::new(BudgetConfig::new(Duration::ZERO));
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-after", "-4".parse().unwrap());
        observe_rate_limit_headers(&headers, &budget);
        headers.insert("x-ratelimit-reset-after", "NaN".parse().unwrap());
        observe_rate_limit_headers(&headers, &budget);
        assert_eq!(budget.pause_left(), Duration::ZERO);
    }
}
