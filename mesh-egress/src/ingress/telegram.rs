//! Telegram: an `Update` (<https://core.telegram.org/bots/api#update>) with a `message`,
//! `edited_message`, `channel_post` or `edited_channel_post`
//! (<https://core.telegram.org/bots/api#message>).
//!
//! - Mentions are entities, with offsets and lengths in UTF-16 code units: `mention`
//!   (`@username`), `text_mention` (a user without a username, carried as `user`) and
//!   `bot_command` (`/command` or `/command@bot`; only a command at the start counts).
//! - A private chat (`chat.type` `private`) is a DM.
//! - In a forum supergroup every message of a topic carries the topic's `message_thread_id`
//!   and, unless it replies to something else, a `reply_to_message` that is the topic's
//!   creation message: that is the topic, not a reply. Topics are conversations (the address
//!   carries them); a `message_thread_id` outside a topic is a reply thread.
//! - A bot in privacy mode (the default) sees only commands, replies to it and messages that
//!   mention it in groups, so ambient traffic never reaches it: the rules below still hold, they
//!   just never see most group messages. Telegram never delivers a bot's own messages back.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::address::{Address, Surface, TelegramAddress};
use crate::ingress::identity::Identity;
use crate::ingress::inbound::{
    Author, ChatKind, Command, Inbound, InboundError, InboundId, MAX_MENTIONS, Mention, Mentions,
    Parts, ReplyTo, count_links,
};

// The messages are boxed so the update stays small on the stack (one of four is present), and
// type names are borrowed from the document (they are never escaped in practice; `Cow` copes
// when they are).
#[derive(Deserialize)]
struct Update<'a> {
    update_id: Option<i64>,
    #[serde(borrow)]
    message: Option<Box<TgMessage<'a>>>,
    #[serde(borrow)]
    edited_message: Option<Box<TgMessage<'a>>>,
    #[serde(borrow)]
    channel_post: Option<Box<TgMessage<'a>>>,
    #[serde(borrow)]
    edited_channel_post: Option<Box<TgMessage<'a>>>,
}

#[derive(Deserialize)]
struct TgMessage<'a> {
    message_id: i64,
    message_thread_id: Option<i64>,
    from: Option<TgUser>,
    #[serde(borrow)]
    sender_chat: Option<TgChat<'a>>,
    #[serde(borrow)]
    chat: TgChat<'a>,
    date: i64,
    edit_date: Option<i64>,
    text: Option<String>,
    caption: Option<String>,
    #[serde(borrow)]
    entities: Option<Vec<TgEntity<'a>>>,
    #[serde(borrow)]
    caption_entities: Option<Vec<TgEntity<'a>>>,
    #[serde(borrow)]
    reply_to_message: Option<Box<TgMessage<'a>>>,
    is_topic_message: Option<bool>,
    forum_topic_created: Option<IgnoredAny>,
    photo: Option<IgnoredAny>,
    document: Option<IgnoredAny>,
    video: Option<IgnoredAny>,
    audio: Option<IgnoredAny>,
    voice: Option<IgnoredAny>,
    sticker: Option<IgnoredAny>,
    animation: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct TgUser {
    id: i64,
    is_bot: bool,
    username: Option<String>,
}

#[derive(Deserialize)]
struct TgChat<'a> {
    id: i64,
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct TgEntity<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    offset: u64,
    length: u64,
    user: Option<TgUser>,
}

pub(crate) fn parse(text: &str, us: &Identity) -> Result<Inbound, InboundError> {
    let bad = |reason: &str| InboundError::malformed(Surface::Telegram, reason);
    let update: Update<'_> =
        serde_json::from_str(text).map_err(|e| InboundError::json(Surface::Telegram, &e))?;
    let (edited, message) = match update {
        Update {
            message: Some(m), ..
        }
        | Update {
            channel_post: Some(m),
            ..
        } => (false, m),
        Update {
            edited_message: Some(m),
            ..
        }
        | Update {
            edited_channel_post: Some(m),
            ..
        } => (true, m),
        _ => {
            return Err(InboundError::not_a_message(
                Surface::Telegram,
                "update without a message",
            ));
        }
    };
    let media = message.photo.is_some()
        || message.document.is_some()
        || message.video.is_some()
        || message.audio.is_some()
        || message.voice.is_some()
        || message.sticker.is_some()
        || message.animation.is_some();
    let (body, entities) = match (message.text, message.caption) {
        (Some(text), _) => (text, message.entities),
        (None, Some(caption)) => (caption, message.caption_entities),
        (None, None) if media => (String::new(), None),
        (None, None) => {
            return Err(InboundError::not_a_message(
                Surface::Telegram,
                "service message",
            ));
        }
    };
    let (mentions, command) = read_entities(&body, entities.as_deref().unwrap_or_default())?;
    let author = match (&message.from, &message.sender_chat) {
        (Some(from), _) => Author {
            id: from.id.to_string(),
            name: from.username.clone(),
            bot: from.is_bot,
            us: us.is_telegram(from.id, from.username.as_deref()),
        },
        (None, Some(chat)) => Author {
            id: chat.id.to_string(),
            name: None,
            bot: false,
            us: false,
        },
        (None, None) => return Err(bad("a message without from or sender_chat")),
    };
    let topic = message
        .message_thread_id
        .filter(|_| message.is_topic_message == Some(true));
    let reply_to = message
        .reply_to_message
        .filter(|replied| {
            // In a forum topic, a message that replies to nothing replies to the topic's
            // creation message.
            replied.forum_topic_created.is_none() && Some(replied.message_id) != topic
        })
        .map(|replied| ReplyTo {
            message: replied.message_id.to_string(),
            us: replied
                .from
                .as_ref()
                .is_some_and(|f| us.is_telegram(f.id, f.username.as_deref())),
            author: replied.from.map(|f| f.id.to_string()),
        });
    let mut address = TelegramAddress::new(message.chat.id.to_string());
    if let Some(topic) = topic {
        address = address.in_topic(topic);
    }
    // One check of every field (the chat id and the topic).
    let address = Address::from(address);
    address.validate()?;
    let seconds = message.edit_date.filter(|_| edited).unwrap_or(message.date);
    let at_ms = u64::try_from(seconds)
        .ok()
        .and_then(|s| s.checked_mul(1000))
        .ok_or_else(|| bad("a date before 1970 or past what milliseconds hold"))?;
    let mut deliveries = Vec::with_capacity(2);
    if let Some(update_id) = update.update_id {
        deliveries.push(InboundId::Event(update_id.to_string()));
    }
    deliveries.push(InboundId::Message(format!(
        "{}/{}",
        message.chat.id, message.message_id
    )));
    let parts = Parts {
        surface: Surface::Telegram,
        address,
        message_id: message.message_id.to_string(),
        author,
        links: count_links(&body),
        text: body,
        mentions,
        command,
        reply_to,
        thread: message
            .message_thread_id
            .filter(|_| topic.is_none())
            .map(|t| t.to_string()),
        chat: if message.chat.kind == "private" {
            ChatKind::Direct
        } else {
            ChatKind::Group
        },
        edited: edited || message.edit_date.is_some(),
        deliveries,
        at_ms,
        attachments: usize::from(media),
    };
    Ok(parts.into_inbound(|m| match m {
        Mention::Username(name) => us.is_telegram_username(name),
        Mention::User(id) => id.parse().is_ok_and(|id| us.is_telegram(id, None)),
        _ => false,
    }))
}

/// The mentions and the leading command the entities mark, sliced from `text` by their UTF-16
/// offsets in one forward walk over the text.
fn read_entities(
    text: &str,
    entities: &[TgEntity<'_>],
) -> Result<(Vec<Mention>, Option<Command>), InboundError> {
    let mut marked: Vec<&TgEntity<'_>> = entities
        .iter()
        .filter(|e| matches!(&*e.kind, "mention" | "text_mention" | "bot_command"))
        .collect();
    if marked.len() > MAX_MENTIONS + 1 {
        return Err(InboundError::TooManyMentions {
            limit: MAX_MENTIONS,
        });
    }
    marked.sort_by_key(|e| e.offset);
    let mut mentions = Mentions::default();
    let mut command = None;
    let mut walk = Utf16Walk::new(text);
    for entity in marked {
        let slice = walk.slice(entity.offset, entity.length).ok_or_else(|| {
            InboundError::malformed(Surface::Telegram, "an entity outside the text")
        })?;
        match &*entity.kind {
            "mention" => {
                let name = slice.strip_prefix('@').unwrap_or(slice);
                if !name.is_empty() {
                    mentions.push(Mention::Username(name.to_owned()))?;
                }
            }
            "text_mention" => {
                if let Some(user) = &entity.user {
                    mentions.push(Mention::User(user.id.to_string()))?;
                }
            }
            _ if entity.offset == 0 => {
                let call = slice.strip_prefix('/').unwrap_or(slice);
                let (name, bot) = match call.split_once('@') {
                    Some((name, bot)) => (name, Some(bot.to_owned())),
                    None => (call, None),
                };
                command = Some(Command {
                    name: name.to_owned(),
                    bot,
                });
            }
            _ => {}
        }
    }
    Ok((mentions.into_vec(), command))
}

/// Converts UTF-16 positions to byte positions walking forward only: entities are visited in
/// offset order, so the whole text is walked once however many there are.
struct Utf16Walk<'a> {
    text: &'a str,
    /// The UTF-16 position and byte position reached.
    units: u64,
    byte: usize,
}

impl<'a> Utf16Walk<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            units: 0,
            byte: 0,
        }
    }

    /// Walks to UTF-16 position `target` (never back); `None` past the end or inside a
    /// surrogate pair.
    fn advance_to(&mut self, target: u64) -> Option<usize> {
        if target < self.units {
            // An entity overlapping an earlier one: walk again from the start.
            self.units = 0;
            self.byte = 0;
        }
        let mut chars = self.text[self.byte..].chars();
        while self.units < target {
            let c = chars.next()?;
            self.units += c.len_utf16() as u64;
            self.byte += c.len_utf8();
        }
        (self.units == target).then_some(self.byte)
    }

    fn slice(&mut self, offset: u64, length: u64) -> Option<&'a str> {
        let start = self.advance_to(offset)?;
        let end = self.advance_to(offset.checked_add(length)?)?;
        let slice = self.text.get(start..end);
        // The next entity starts at or after this one's start.
        self.units = offset;
        self.byte = start;
        slice
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(kind: &str, offset: u64, length: u64) -> TgEntity<'_> {
        TgEntity {
            kind: Cow::Borrowed(kind),
            offset,
            length,
            user: None,
        }
    }

    #[test]
    fn entity_offsets_count_utf16_units_not_bytes() {
        // "😀" is two UTF-16 units and four bytes; "é" one unit and two bytes.
        let text = "😀 é /start@atlas_bot hi @bob";
        let (mentions, command) = read_entities(
            text,
            &[entity("mention", 25, 4), entity("bot_command", 5, 16)],
        )
        .expect("in range");
        assert_eq!(mentions, [Mention::Username("bob".into())]);
        assert_eq!(
            command, None,
            "a command not at the start is not the message's command"
        );
        let (_, command) =
            read_entities("/help@atlas_bot now", &[entity("bot_command", 0, 15)]).expect("ok");
        let command = command.expect("a leading command");
        assert_eq!(command.name(), "help");
        assert_eq!(command.bot(), Some("atlas_bot"));
    }

    #[test]
    fn an_entity_outside_the_text_or_inside_a_surrogate_pair_is_malformed() {
        for bad in [
            entity("mention", 0, 99),
            entity("mention", 1, 2),
            entity("mention", u64::MAX, 1),
        ] {
            assert!(matches!(
                read_entities("😀@bob", &[bad]),
                Err(InboundError::Malformed { .. })
            ));
        }
    }
}
