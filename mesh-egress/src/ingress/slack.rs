//! Slack: an Events API envelope (`{"type": "event_callback", "event_id": …, "event": …}`) or
//! its inner `message` / `app_mention` event
//! (<https://docs.slack.dev/reference/events/message>,
//! <https://docs.slack.dev/reference/events/app_mention>).
//!
//! - A thread reply carries `thread_ts` (the thread's first message) different from its own
//!   `ts`, and `parent_user_id`, the author of that first message (not of the message replied
//!   to: Slack threads have one parent; typeclaw/typeclaw#67 is the bug of reading it otherwise).
//! - An edit arrives as `subtype: message_changed` with the new message in `message`; our own
//!   streamed replies produce these by the dozen.
//! - `app_mention` carries no `channel_type` (preset-io/agor#826): a DM is recognised by its
//!   `D…` channel id when the type is missing. DMs never arrive as `app_mention`.
//! - An app subscribed to both `app_mention` and `message` receives one mention twice, with the
//!   same `channel`/`ts` and `client_msg_id` but different `event_id`s (agno-agi/agno#10183,
//!   openclaw/openclaw#34834); a retry repeats the `event_id`.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::address::{Address, SlackAddress, Surface};
use crate::ingress::identity::Identity;
use crate::ingress::inbound::{
    Author, ChatKind, Inbound, InboundError, InboundId, Mention, Mentions, Parts, ReplyTo,
};

/// The fields of an envelope and of a message event in one shape: the document may be either,
/// and the envelope's `event` and an edit's `message` are the same shape again.
/// Type names are borrowed from the document (never escaped in practice; `Cow` copes).
#[derive(Deserialize)]
struct SlackObject<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    subtype: Option<Cow<'a, str>>,
    #[serde(borrow)]
    event: Option<Box<SlackObject<'a>>>,
    event_id: Option<String>,
    #[serde(borrow)]
    message: Option<Box<SlackObject<'a>>>,
    channel: Option<String>,
    #[serde(borrow)]
    channel_type: Option<Cow<'a, str>>,
    user: Option<String>,
    bot_id: Option<String>,
    username: Option<String>,
    text: Option<String>,
    ts: Option<String>,
    thread_ts: Option<String>,
    parent_user_id: Option<String>,
    client_msg_id: Option<String>,
    edited: Option<IgnoredAny>,
    files: Option<Vec<IgnoredAny>>,
}

/// Subtypes that are a message someone wrote (the rest are joins, topic changes, deletions,
/// reply counters: not messages to answer).
const WRITTEN: &[&str] = &[
    "bot_message",
    "thread_broadcast",
    "file_share",
    "me_message",
];

pub(crate) fn parse(text: &str, us: &Identity) -> Result<Inbound, InboundError> {
    let bad = |reason: &str| InboundError::malformed(Surface::Slack, reason);
    let doc: SlackObject<'_> =
        serde_json::from_str(text).map_err(|e| InboundError::json(Surface::Slack, &e))?;
    let (event_id, event) = match doc.kind.as_deref() {
        Some("event_callback") => {
            let event = doc
                .event
                .ok_or_else(|| bad("an event_callback without an event"))?;
            (doc.event_id, *event)
        }
        Some("message" | "app_mention") => (None, doc),
        Some(other) => return Err(InboundError::not_a_message(Surface::Slack, other)),
        None => return Err(bad("no type")),
    };
    if !matches!(event.kind.as_deref(), Some("message" | "app_mention")) {
        let kind = event.kind.as_deref().unwrap_or("event without a type");
        return Err(InboundError::not_a_message(Surface::Slack, kind));
    }
    let channel = event.channel.clone().ok_or_else(|| bad("no channel"))?;
    let channel_type = event.channel_type.clone();
    let (edited, message) = match event.subtype.as_deref() {
        None => (event.edited.is_some(), event),
        Some("message_changed") => {
            let message = event
                .message
                .ok_or_else(|| bad("message_changed without a message"))?;
            (true, *message)
        }
        Some(subtype) if WRITTEN.contains(&subtype) => (event.edited.is_some(), event),
        Some(subtype) => return Err(InboundError::not_a_message(Surface::Slack, subtype)),
    };
    let ts = message.ts.ok_or_else(|| bad("no ts"))?;
    let at_ms = ts_millis(&ts).ok_or_else(|| bad("a ts that is not seconds.micros"))?;
    let bot = message.bot_id.is_some() || message.subtype.as_deref() == Some("bot_message");
    let id = message
        .user
        .clone()
        .or_else(|| message.bot_id.clone())
        .ok_or_else(|| bad("no user or bot_id"))?;
    let author_is_us = message.user.as_deref().is_some_and(|u| us.is_slack(u))
        || message.bot_id.as_deref().is_some_and(|b| us.is_slack(b));
    let body = message.text.unwrap_or_default();
    let (mentions, links) = scan_text(&body)?;

    let thread = message.thread_ts.filter(|t| *t != ts);
    let reply_to = thread.as_ref().map(|root| ReplyTo {
        message: root.clone(),
        us: message
            .parent_user_id
            .as_deref()
            .is_some_and(|p| us.is_slack(p)),
        author: message.parent_user_id,
    });
    let direct = match channel_type.as_deref() {
        Some(kind) => kind == "im",
        None => channel.starts_with('D'),
    };
    let mut address = SlackAddress::new(channel.as_str());
    if let Some(root) = &thread {
        address = address.in_thread(root.as_str());
    }
    // One check of every field (the channel's and the thread's characters and lengths).
    let address = Address::from(address);
    address.validate()?;

    let mut deliveries = Vec::with_capacity(3);
    if let Some(event_id) = event_id {
        deliveries.push(InboundId::Event(event_id));
    }
    deliveries.push(InboundId::Message(format!("{channel}/{ts}")));
    if let Some(client) = message.client_msg_id {
        deliveries.push(InboundId::Client(client));
    }
    let parts = Parts {
        surface: Surface::Slack,
        address,
        message_id: ts,
        author: Author {
            id,
            name: message.username,
            bot,
            us: author_is_us,
        },
        text: body,
        mentions,
        command: None,
        reply_to,
        thread,
        chat: if direct {
            ChatKind::Direct
        } else {
            ChatKind::Group
        },
        edited,
        deliveries,
        at_ms,
        attachments: message.files.map_or(0, |f| f.len()),
        links,
    };
    Ok(parts.into_inbound(|m| match m {
        Mention::User(id) => us.is_slack(id),
        _ => false,
    }))
}

/// Slack's `ts` (`"1355517523.000005"`: seconds and microseconds) in milliseconds; `None` for
/// anything else, or a time past what a `u64` of milliseconds holds.
pub(crate) fn ts_millis(ts: &str) -> Option<u64> {
    let (secs, micros) = ts.split_once('.').unwrap_or((ts, ""));
    if secs.is_empty() || secs.len() > 12 || micros.len() > 6 {
        return None;
    }
    if !secs
        .bytes()
        .chain(micros.bytes())
        .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let millis: u64 = micros.get(..3).unwrap_or(micros).parse().unwrap_or(0);
    let scale = 10u64.pow(3u32.saturating_sub(micros.len().min(3) as u32));
    secs.checked_mul(1000)?.checked_add(millis * scale)
}

/// The mentions and links in Slack's mrkdwn: `<@U…>`, `<@U…|name>`, `<!here>`, `<!channel>`,
/// `<!everyone>`, `<!subteam^S…|@team>`, `<http…>`. A literal `<` a person types arrives as
/// `&lt;`, so every `<` opens a token; one without a closing `>` ends the scan.
fn scan_text(text: &str) -> Result<(Vec<Mention>, usize), InboundError> {
    let mut mentions = Mentions::default();
    let mut links = 0usize;
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else { break };
        let token = &after[..close];
        let target = token.split_once('|').map_or(token, |(t, _)| t);
        if let Some(user) = target.strip_prefix('@') {
            if !user.is_empty() {
                mentions.push(Mention::User(user.to_owned()))?;
            }
        } else if let Some(special) = target.strip_prefix('!') {
            if let Some(group) = special.strip_prefix("subteam^") {
                mentions.push(Mention::Role(group.to_owned()))?;
            } else if matches!(special, "here" | "channel" | "everyone") {
                mentions.push(Mention::Everyone)?;
            }
        } else if target.starts_with("http://")
            || target.starts_with("https://")
            || target.starts_with("mailto:")
        {
            links += 1;
        }
        rest = &after[close + 1..];
    }
    Ok((mentions.into_vec(), links))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_reads_as_milliseconds_and_refuses_what_is_not_a_ts() {
        assert_eq!(ts_millis("1355517523.000005"), Some(1_355_517_523_000));
        assert_eq!(ts_millis("1515449522.123456"), Some(1_515_449_522_123));
        assert_eq!(ts_millis("1515449522.5"), Some(1_515_449_522_500));
        assert_eq!(ts_millis("1515449522"), Some(1_515_449_522_000));
        for bad in [
            "",
            ".5",
            "1e9",
            "-1.0",
            "1.2.3",
            "99999999999999999999.0",
            "1.1234567",
        ] {
            assert_eq!(ts_millis(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_mrkdwn_mention_form_is_read() {
        let (mentions, links) = scan_text(
            "<@U1> <@U2|bob> <!here> <!channel|channel> <!subteam^S9|@ops> <#C1|general> \
             <https://example.com|site> &lt;@U3&gt; <@U1>",
        )
        .expect("bounded");
        assert_eq!(
            mentions,
            [
                Mention::User("U1".into()),
                Mention::User("U2".into()),
                Mention::Everyone,
                Mention::Role("S9".into()),
            ]
        );
        assert_eq!(links, 1);
    }
}
