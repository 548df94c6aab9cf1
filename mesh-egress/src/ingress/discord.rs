//! Discord: a gateway dispatch (`{"op": 0, "t": "MESSAGE_CREATE", "s": …, "d": <message>}`)
//! or the message object itself
//! (<https://discord.com/developers/docs/topics/gateway-events#message-create>,
//! <https://discord.com/developers/docs/resources/message#message-object>).
//!
//! - A DM has no `guild_id`.
//! - Mentions are read from `content` (`<@id>`, `<@!id>`, `<@&role>`, `@everyone`, `@here`) and
//!   checked against the structured `mentions`, `mention_roles` and `mention_everyone` when the
//!   event carries them: a mention inside a code block, or an `@everyone` from someone without
//!   the permission, is text, not a mention, and Discord leaves it out of those fields.
//! - A reply (`type` 19) carries `message_reference` and, on the gateway, the
//!   `referenced_message` with its author.
//! - A message in a thread carries `position` (threads are channels on Discord, so the thread
//!   is the channel id); a thread's starter message has `type` 21.
//! - Time is the message id's: a snowflake holds its creation time in milliseconds since
//!   2015-01-01 in its top 42 bits.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::address::{Address, DiscordAddress, Surface};
use crate::ingress::identity::Identity;
use crate::ingress::inbound::{
    Author, ChatKind, Inbound, InboundError, InboundId, Mention, Mentions, Parts, ReplyTo,
    count_links,
};

/// Discord's epoch, 2015-01-01T00:00:00Z, in Unix milliseconds.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// The message types that are something a person or bot wrote: default, reply, a slash or
/// context-menu command's response, a thread's starter message.
const WRITTEN: &[u8] = &[0, 19, 20, 21, 23];

/// A dispatch's fields and a message's in one shape: the document may be either.
#[derive(Deserialize)]
struct DiscordObject<'a> {
    op: Option<u8>,
    #[serde(borrow)]
    t: Option<Cow<'a, str>>,
    #[serde(borrow)]
    d: Option<Box<DiscordObject<'a>>>,
    id: Option<String>,
    channel_id: Option<String>,
    guild_id: Option<String>,
    author: Option<DiscordUser>,
    content: Option<String>,
    edited_timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: Option<u8>,
    webhook_id: Option<String>,
    mentions: Option<Vec<DiscordUser>>,
    mention_roles: Option<Vec<String>>,
    mention_everyone: Option<bool>,
    #[serde(borrow)]
    referenced_message: Option<Box<DiscordObject<'a>>>,
    message_reference: Option<DiscordReference>,
    attachments: Option<Vec<IgnoredAny>>,
    position: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct DiscordUser {
    id: String,
    username: Option<String>,
    bot: Option<bool>,
}

#[derive(Deserialize)]
struct DiscordReference {
    message_id: Option<String>,
}

pub(crate) fn parse(text: &str, us: &Identity) -> Result<Inbound, InboundError> {
    let bad = |reason: &str| InboundError::malformed(Surface::Discord, reason);
    let doc: DiscordObject<'_> =
        serde_json::from_str(text).map_err(|e| InboundError::json(Surface::Discord, &e))?;
    let (update, message) = if doc.op.is_some() || doc.t.is_some() {
        if doc.op != Some(0) {
            let op = doc
                .op
                .map_or_else(|| "dispatch".to_owned(), |op| format!("op {op}"));
            return Err(InboundError::not_a_message(Surface::Discord, op));
        }
        let update = match doc.t.as_deref() {
            Some("MESSAGE_CREATE") => false,
            Some("MESSAGE_UPDATE") => true,
            other => {
                let kind = other.unwrap_or("dispatch without t");
                return Err(InboundError::not_a_message(Surface::Discord, kind));
            }
        };
        let message = doc.d.ok_or_else(|| bad("a dispatch without d"))?;
        (update, *message)
    } else {
        (false, doc)
    };
    let kind = message.kind.unwrap_or(0);
    if !WRITTEN.contains(&kind) {
        return Err(InboundError::not_a_message(
            Surface::Discord,
            format!("message type {kind}"),
        ));
    }
    let id = message.id.ok_or_else(|| bad("no id"))?;
    let at_ms = snowflake_millis(&id).ok_or_else(|| bad("an id that is not a snowflake"))?;
    let channel = message.channel_id.ok_or_else(|| bad("no channel_id"))?;
    let author = message.author.ok_or_else(|| bad("no author"))?;
    let content = message.content.unwrap_or_default();
    let links = count_links(&content);
    let mut mentions = scan_content(&content)?;
    if let Some(users) = &message.mentions {
        mentions.retain(|m| match m {
            Mention::User(id) => users.iter().any(|u| u.id == *id),
            _ => true,
        });
    }
    if let Some(roles) = &message.mention_roles {
        mentions.retain(|m| match m {
            Mention::Role(id) => roles.contains(id),
            _ => true,
        });
    }
    if let Some(everyone) = message.mention_everyone {
        let present = mentions.contains(&Mention::Everyone);
        if !everyone && present {
            mentions.retain(|m| *m != Mention::Everyone);
        } else if everyone && !present {
            mentions.push(Mention::Everyone)?;
        }
    }
    let reply_to = if kind == 19 {
        match (message.referenced_message, message.message_reference) {
            (Some(replied), _) => Some(ReplyTo {
                message: replied.id.unwrap_or_default(),
                us: replied
                    .author
                    .as_ref()
                    .is_some_and(|a| us.is_discord_user(&a.id)),
                author: replied.author.map(|a| a.id),
            }),
            (None, Some(reference)) => reference.message_id.map(|message| ReplyTo {
                message,
                author: None,
                us: false,
            }),
            (None, None) => None,
        }
    } else {
        None
    };
    let in_thread = message.position.is_some() || kind == 21;
    let address = Address::from(DiscordAddress::parse(channel.as_str())?);
    let parts = Parts {
        surface: Surface::Discord,
        address,
        deliveries: vec![InboundId::Message(id.clone())],
        message_id: id,
        author: Author {
            us: us.is_discord_user(&author.id),
            bot: author.bot.unwrap_or(false) || message.webhook_id.is_some(),
            name: author.username,
            id: author.id,
        },
        text: content,
        mentions: mentions.into_vec(),
        command: None,
        reply_to,
        thread: in_thread.then_some(channel),
        chat: if message.guild_id.is_some() {
            ChatKind::Group
        } else {
            ChatKind::Direct
        },
        edited: update || message.edited_timestamp.is_some(),
        at_ms,
        attachments: message.attachments.map_or(0, |a| a.len()),
        links,
    };
    Ok(parts.into_inbound(|m| match m {
        Mention::User(id) => us.is_discord_user(id),
        Mention::Role(id) => us.is_discord_role(id),
        _ => false,
    }))
}

/// The creation time a snowflake holds, in Unix milliseconds.
pub(crate) fn snowflake_millis(id: &str) -> Option<u64> {
    if id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id: u64 = id.parse().ok()?;
    (id >> 22).checked_add(DISCORD_EPOCH_MS)
}

/// The mentions in Discord's content: `<@id>`, `<@!id>`, `<@&id>`, `@everyone`, `@here`.
fn scan_content(content: &str) -> Result<Mentions, InboundError> {
    let mut mentions = Mentions::default();
    let mut rest = content;
    while let Some(at) = rest.find(['<', '@']) {
        let tail = &rest[at..];
        if let Some(token) = tail.strip_prefix("<@") {
            let (role, token) = match token.strip_prefix('&') {
                Some(role) => (true, role),
                None => (false, token.strip_prefix('!').unwrap_or(token)),
            };
            let digits = token.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && token.as_bytes().get(digits) == Some(&b'>') {
                let id = token[..digits].to_owned();
                mentions.push(if role {
                    Mention::Role(id)
                } else {
                    Mention::User(id)
                })?;
            }
        } else if tail.starts_with("@everyone") || tail.starts_with("@here") {
            mentions.push(Mention::Everyone)?;
        }
        rest = &tail[1..];
    }
    Ok(mentions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snowflake_holds_its_creation_time() {
        // Discord's documented example: 175928847299117063 was created 2016-04-30 11:18:25.796 UTC.
        assert_eq!(
            snowflake_millis("175928847299117063"),
            Some(1_462_015_105_796)
        );
        for bad in ["", "12a", "-1", "123456789012345678901"] {
            assert_eq!(snowflake_millis(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_content_mention_form_is_read() {
        let mentions = scan_content("<@1> <@!2> <@&3> @everyone @here <@x> <@4 <#5> @someone")
            .expect("bounded")
            .into_vec();
        assert_eq!(
            mentions,
            [
                Mention::User("1".into()),
                Mention::User("2".into()),
                Mention::Role("3".into()),
                Mention::Everyone,
            ]
        );
    }
}
