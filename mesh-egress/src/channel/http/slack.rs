//! [`SlackChannel`]: Slack's `chat.postMessage` with a bot token.

use std::fmt;
use std::future::Future;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::answer::{Outcome, retry_after_header, unexpected_body};
use super::retry::{Request, Transport};
use super::stream_settings::StreamSettings;
use super::{ChannelErrorKind, SendPolicy, Surface, Token, trim_base};
use crate::channel::{Channel, PartReceipt, Render, SendError, SlackMrkdwn};
use crate::outbound::CommittedPart;

const DEFAULT_BASE_URL: &str = "https://slack.com/api";

/// Slack error codes its docs call transient: sending again may work.
const TRANSIENT: &[&str] = &[
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];

/// A Slack channel (or DM, or thread), posted to with `chat.postMessage` and a bot token
/// (`xoxb-…`).
///
/// Each part is one message, in order, all in the thread given by
/// [`in_thread`](Self::in_thread) if any. Every message carries the delivery id and part index
/// as message `metadata` (`event_type` `mesh_egress_part`), so a duplicate after a lost response
/// can be recognised; Slack itself has no idempotency key. A `429` is retried after its
/// `Retry-After` header, within the [`SendPolicy`]; `ok: false` answers become a
/// [`ChannelError`](super::ChannelError) carrying Slack's error code.
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
    pub(super) renderer: R,
    pub(super) transport: Transport,
    pub(super) base_url: String,
    pub(super) channel: String,
    pub(super) thread_ts: Option<String>,
    /// How replies are streamed (the `*_stream.rs` module beside this one).
    pub(super) stream: StreamSettings,
}

impl SlackChannel {
    /// Posts to `channel` (a channel, DM or group id such as `C0123456789`) with bot `token`,
    /// rendering Slack mrkdwn ([`SlackMrkdwn`]); [`with_renderer`](Self::with_renderer)
    /// changes that.
    pub fn new(token: impl Into<String>, channel: impl Into<String>) -> Self {
        Self {
            renderer: SlackMrkdwn::new(),
            transport: Transport::new(Surface::Slack, Token::new(token)),
            base_url: DEFAULT_BASE_URL.to_owned(),
            stream: StreamSettings::slack(),
            channel: channel.into(),
            thread_ts: None,
        }
    }
}

impl<R: Render> SlackChannel<R> {
    /// The same connector rendering with `renderer` (whose output must be Slack mrkdwn, or
    /// plain text).
    pub fn with_renderer<R2: Render>(self, renderer: R2) -> SlackChannel<R2> {
        SlackChannel {
            renderer,
            transport: self.transport,
            base_url: self.base_url,
            stream: self.stream,
            channel: self.channel,
            thread_ts: self.thread_ts,
        }
    }

    /// The same bot posting to another channel: shares this connector's client, token, policy
    /// and bot-wide rate-limit pause (not the thread).
    pub fn for_channel(&self, channel: impl Into<String>) -> Self
    where
        R: Clone,
    {
        Self {
            renderer: self.renderer.clone(),
            transport: self.transport.sibling(),
            base_url: self.base_url.clone(),
            stream: self.stream.sibling(),
            channel: channel.into(),
            thread_ts: None,
        }
    }

    /// Posts every part as a reply in the thread whose parent message has timestamp `ts`.
    pub fn in_thread(mut self, ts: impl Into<String>) -> Self {
        self.thread_ts = Some(ts.into());
        self
    }

    super::transport_builders!(
        "the Web API at `url` instead of Slack's (`…/api`; a loopback fake in tests)"
    );
}

impl<R> fmt::Debug for SlackChannel<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackChannel")
            .field("channel", &self.channel)
            .field("thread_ts", &self.thread_ts)
            .field("base_url", &self.base_url)
            .field("token", &self.transport.token)
            .field("policy", &self.transport.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Render> Channel for SlackChannel<R> {
    type Renderer = R;

    fn renderer(&self) -> &R {
        &self.renderer
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let mut body = json!({
            "channel": self.channel,
            "text": part.text(),
            "metadata": {
                "event_type": "mesh_egress_part",
                "event_payload": {
                    "delivery": part.delivery_id().to_string(),
                    "part": part.index(),
                    "total": part.total(),
                },
            },
        });
        if let Some(ts) = &self.thread_ts {
            body["thread_ts"] = Value::from(ts.as_str());
        }
        let request = Request {
            url: format!("{}/chat.postMessage", self.base_url),
            authorization: Some(format!("Bearer {}", self.transport.token.expose())),
            body,
        };
        self.transport.send(part, request, classify)
    }
}

pub(super) fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    token: &Token,
) -> Outcome {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Outcome::RateLimited {
            wait: retry_after_header(headers),
            global: false,
        };
    }
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return unexpected_body(status);
    };
    if status.is_server_error() {
        return Outcome::Retry(ChannelErrorKind::Server {
            status: status.as_u16(),
        });
    }
    match answer.get("ok").and_then(Value::as_bool) {
        Some(true) if status.is_success() => Outcome::Sent(
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
                return Outcome::RateLimited {
                    wait: retry_after_header(headers),
                    global: false,
                };
            }
            let kind = ChannelErrorKind::Refused {
                status: status.as_u16(),
                detail: token.scrub(code),
            };
            if TRANSIENT.contains(&code) {
                Outcome::Retry(kind)
            } else {
                Outcome::Fail {
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

    fn read(status: u16, body: &str) -> Outcome {
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
            Outcome::Fail {
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
    fn ok_false_with_a_transient_code_is_retried() {
        assert!(matches!(
            read(200, r#"{"ok":false,"error":"internal_error"}"#),
            Outcome::Retry(ChannelErrorKind::Refused { .. })
        ));
    }

    #[test]
    fn ok_true_yields_the_message_ts() {
        assert!(matches!(read(200, r#"{"ok":true,"ts":"1.2"}"#), Outcome::Sent(ts) if ts == "1.2"));
    }
}
