//! [`Address`] and [`Surface`]: where one conversation's messages go. Leaf values: they import
//! nothing of ours, so a turn can carry one, the outbox can store one and a surface client can
//! send to one without knowing each other.
//!
//! A conversation's destination is typed per surface: a Slack channel (optionally a thread,
//! and the recipient a stream outside a DM is for), a Discord channel or thread (a thread is a
//! channel on Discord), a Telegram chat (optionally a forum topic, `message_thread_id`), a web
//! chat's id, or the plain channels (stdout, a recorder) that have one destination only.
//!
//! Addresses an application writes itself (configuration, its own ids) are built with the
//! infallible constructors. Addresses read from untrusted input (a surface's event, a web
//! request) go through the `parse` constructors, and a deserialised one (a stored row) through
//! [`Address::validate`]: every field bounded, control characters and spaces refused, a typed
//! [`AddressError`] otherwise. An address serialises as a flat object whose `surface` names the
//! variant: `{"surface":"slack","channel":"C0123456789","thread_ts":"1700000000.000100"}`.
//!
//! ```
//! use mesh_egress::{Address, Surface};
//! use mesh_egress::address::{SlackAddress, TelegramAddress};
//!
//! let thread = Address::from(SlackAddress::new("C0123456789").in_thread("1700000000.000100"));
//! assert_eq!(thread.surface(), Surface::Slack);
//! assert_eq!(thread.to_string(), "slack:C0123456789/1700000000.000100");
//!
//! let topic = Address::from(TelegramAddress::new("-1001234567890").in_topic(42));
//! assert_eq!(topic.to_string(), "telegram:-1001234567890/42");
//! assert!(SlackAddress::parse("C01\n23").is_err());
//! ```

use serde::{Deserialize, Serialize};

// `Address` and `Surface` are public at the crate root only (one path each).
pub(crate) mod destination;
pub(crate) mod surface;
pub(crate) use destination::Address;
pub(crate) use surface::Surface;

/// The longest id any field of an address may hold, in bytes. Slack, Discord and Telegram ids
/// are a few dozen bytes; a web chat id is the application's (the AI SDK's are 16 characters).
pub(crate) const MAX_ADDRESS_FIELD: usize = 256;

/// Why a value cannot be an address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// A required field is empty.
    #[error("the address's {field} is empty")]
    Empty {
        /// Which field.
        field: &'static str,
    },
    /// A field is longer than 256 bytes.
    #[error("the address's {field} is longer than {MAX_ADDRESS_FIELD} bytes")]
    TooLong {
        /// Which field.
        field: &'static str,
    },
    /// A field holds whitespace, a control character or another character ids never hold.
    #[error("the address's {field} holds a character no {surface} id holds")]
    BadCharacter {
        /// Which field.
        field: &'static str,
        /// The surface whose ids it was checked against.
        surface: Surface,
    },
    /// A stored or received address could not be read as one (its reader says why).
    #[error("not an address: {0}")]
    Malformed(String),
}

/// Checks one id field: non-empty, bounded, and only the characters `allowed` accepts.
fn checked(
    value: String,
    field: &'static str,
    surface: Surface,
    allowed: fn(char) -> bool,
) -> Result<String, AddressError> {
    if value.is_empty() {
        return Err(AddressError::Empty { field });
    }
    if value.len() > MAX_ADDRESS_FIELD {
        return Err(AddressError::TooLong { field });
    }
    if !value.chars().all(allowed) {
        return Err(AddressError::BadCharacter { field, surface });
    }
    Ok(value)
}

/// Printable ASCII without spaces: every id the surfaces document.
fn id_char(c: char) -> bool {
    c.is_ascii_graphic()
}

fn digit_or_dot(c: char) -> bool {
    c.is_ascii_digit() || c == '.'
}

/// A Slack destination: a channel, DM or group id (`C…`, `D…`, `G…`), optionally a thread
/// (the parent message's `ts`), and the user and team a native stream outside a DM is for
/// (`chat.startStream`'s `recipient_user_id`/`recipient_team_id`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlackAddress {
    channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thread_ts: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recipient_user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recipient_team: Option<String>,
}

impl SlackAddress {
    /// The channel (or DM, or group) `channel`, from the application's own configuration.
    pub fn new(channel: impl Into<String>) -> Self {
        Self {
            channel: channel.into(),
            thread_ts: None,
            recipient_user: None,
            recipient_team: None,
        }
    }

    /// [`new`](Self::new) for an id from untrusted input: checked and bounded.
    ///
    /// # Errors
    ///
    /// [`AddressError::Empty`] for an empty id, [`AddressError::TooLong`] past 256 bytes, and
    /// [`AddressError::BadCharacter`] for a blank, a control or a non-ASCII character.
    pub fn parse(channel: impl Into<String>) -> Result<Self, AddressError> {
        Ok(Self::new(checked(
            channel.into(),
            "channel",
            Surface::Slack,
            id_char,
        )?))
    }

    /// The thread whose parent message has timestamp `ts`.
    pub fn in_thread(mut self, ts: impl Into<String>) -> Self {
        self.thread_ts = Some(ts.into());
        self
    }

    /// The user and team a native stream outside a DM is for.
    pub fn for_recipient(mut self, user: impl Into<String>, team: impl Into<String>) -> Self {
        self.recipient_user = Some(user.into());
        self.recipient_team = Some(team.into());
        self
    }

    /// The channel id.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The thread's parent `ts`, if the conversation is a thread.
    pub fn thread_ts(&self) -> Option<&str> {
        self.thread_ts.as_deref()
    }

    /// The stream recipient's user and team ids, if set.
    pub fn recipient(&self) -> Option<(&str, &str)> {
        self.recipient_user
            .as_deref()
            .zip(self.recipient_team.as_deref())
    }

    fn validate(&self) -> Result<(), AddressError> {
        checked(self.channel.clone(), "channel", Surface::Slack, id_char)?;
        if let Some(ts) = &self.thread_ts {
            checked(ts.clone(), "thread_ts", Surface::Slack, digit_or_dot)?;
        }
        for (field, value) in [
            ("recipient_user", &self.recipient_user),
            ("recipient_team", &self.recipient_team),
        ] {
            if let Some(value) = value {
                checked(value.clone(), field, Surface::Slack, id_char)?;
            }
        }
        Ok(())
    }
}

/// A Discord destination: a channel or thread id (a snowflake; Discord threads are channels).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DiscordAddress {
    channel: String,
}

impl DiscordAddress {
    /// The channel or thread `channel_id`, from the application's own configuration.
    pub fn new(channel_id: impl Into<String>) -> Self {
        Self {
            channel: channel_id.into(),
        }
    }

    /// [`new`](Self::new) for an id from untrusted input: a snowflake (digits only), bounded.
    ///
    /// # Errors
    ///
    /// [`AddressError::Empty`] for an empty id, [`AddressError::TooLong`] past 256 bytes, and
    /// [`AddressError::BadCharacter`] for anything but ASCII digits.
    pub fn parse(channel_id: impl Into<String>) -> Result<Self, AddressError> {
        let address = Self::new(channel_id);
        address.validate()?;
        Ok(address)
    }

    /// The channel (or thread) id.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    fn validate(&self) -> Result<(), AddressError> {
        checked(self.channel.clone(), "channel", Surface::Discord, |c| {
            c.is_ascii_digit()
        })
        .map(drop)
    }
}

/// A Telegram destination: a chat (a numeric id such as `-1001234567890`, or
/// `@channelusername`) and optionally a forum topic (`message_thread_id`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TelegramAddress {
    chat: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic: Option<i64>,
}

impl TelegramAddress {
    /// The chat `chat_id`, from the application's own configuration.
    pub fn new(chat_id: impl Into<String>) -> Self {
        Self {
            chat: chat_id.into(),
            topic: None,
        }
    }

    /// [`new`](Self::new) for an id from untrusted input: a number or an `@username`, bounded.
    ///
    /// # Errors
    ///
    /// [`AddressError::Empty`] for an empty id, [`AddressError::TooLong`] past 256 bytes, and
    /// [`AddressError::BadCharacter`] for an id that is neither a number nor `@` followed by
    /// letters, digits and `_`.
    pub fn parse(chat_id: impl Into<String>) -> Result<Self, AddressError> {
        let address = Self::new(chat_id);
        address.validate()?;
        Ok(address)
    }

    /// The forum topic `message_thread_id`.
    pub fn in_topic(mut self, message_thread_id: i64) -> Self {
        self.topic = Some(message_thread_id);
        self
    }

    /// The chat id as given (a number or `@username`).
    pub fn chat(&self) -> &str {
        &self.chat
    }

    /// The forum topic, if any.
    pub fn topic(&self) -> Option<i64> {
        self.topic
    }

    /// Whether the chat is a private chat with one person: Telegram gives users positive ids,
    /// groups and channels negative ones (and `@names` are public channels or groups).
    pub fn is_private(&self) -> bool {
        self.chat.parse::<i64>().is_ok_and(|id| id > 0)
    }

    fn validate(&self) -> Result<(), AddressError> {
        let chat = checked(self.chat.clone(), "chat", Surface::Telegram, |c| {
            c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '@'
        })?;
        let numeric = chat.parse::<i64>().is_ok();
        let username = chat.strip_prefix('@').is_some_and(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if !numeric && !username {
            return Err(AddressError::BadCharacter {
                field: "chat",
                surface: Surface::Telegram,
            });
        }
        if self.topic.is_some_and(|topic| topic <= 0) {
            return Err(AddressError::BadCharacter {
                field: "topic",
                surface: Surface::Telegram,
            });
        }
        Ok(())
    }
}

/// A web chat: the chat's id, chosen by the page (the AI SDK's `useChat` id) or the server.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WebAddress {
    chat: String,
}

impl WebAddress {
    /// The chat `chat_id`, from the application's own code.
    pub fn new(chat_id: impl Into<String>) -> Self {
        Self {
            chat: chat_id.into(),
        }
    }

    /// [`new`](Self::new) for an id from a request: letters, digits, `-` and `_`, bounded.
    ///
    /// # Errors
    ///
    /// [`AddressError::Empty`] for an empty id, [`AddressError::TooLong`] past 256 bytes, and
    /// [`AddressError::BadCharacter`] for anything but ASCII letters, digits, `-` and `_`.
    pub fn parse(chat_id: impl Into<String>) -> Result<Self, AddressError> {
        let address = Self::new(chat_id);
        address.validate()?;
        Ok(address)
    }

    /// The chat id.
    pub fn chat(&self) -> &str {
        &self.chat
    }

    fn validate(&self) -> Result<(), AddressError> {
        checked(self.chat.clone(), "chat", Surface::Web, |c| {
            c.is_ascii_alphanumeric() || c == '-' || c == '_'
        })
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_shape() -> Vec<Address> {
        vec![
            SlackAddress::new("C024BE91L").into(),
            SlackAddress::new("C024BE91L")
                .in_thread("1700000000.000100")
                .for_recipient("U1", "T1")
                .into(),
            DiscordAddress::new("1100000000000000001").into(),
            TelegramAddress::new("-1001234567890").into(),
            TelegramAddress::new("@news").in_topic(7).into(),
            WebAddress::new("chat_01-a").into(),
            Address::Plain,
        ]
    }

    #[test]
    fn every_shape_validates() {
        for address in every_shape() {
            assert_eq!(address.validate(), Ok(()), "{address}");
        }
    }

    #[test]
    fn untrusted_ids_are_checked_and_bounded() {
        assert!(SlackAddress::parse("C1 2").is_err());
        assert!(SlackAddress::parse("").is_err());
        assert!(SlackAddress::parse("C".repeat(MAX_ADDRESS_FIELD + 1)).is_err());
        assert!(DiscordAddress::parse("12a").is_err());
        assert!(TelegramAddress::parse("@").is_err());
        assert!(TelegramAddress::parse("12-3").is_err());
        assert!(TelegramAddress::parse("-100123").is_ok());
        assert!(WebAddress::parse("a/b").is_err());
        assert!(WebAddress::parse("chat\u{202e}").is_err());
    }

    #[test]
    fn a_forged_field_fails_validation() {
        let forged = Address::Telegram(TelegramAddress::new("1").in_topic(-4));
        assert!(forged.validate().is_err());
        let forged = Address::Slack(SlackAddress::new("C1").in_thread("1.2; DROP"));
        assert!(forged.validate().is_err());
    }

    #[test]
    fn a_telegram_chat_is_private_only_for_a_positive_id() {
        assert!(TelegramAddress::new("123456789").is_private());
        assert!(!TelegramAddress::new("-1001234567890").is_private());
        assert!(!TelegramAddress::new("@news").is_private());
    }

    #[test]
    fn surfaces_parse_their_stored_names() {
        for surface in Surface::ALL {
            assert_eq!(Surface::parse(surface.as_str()), Some(surface));
        }
        assert_eq!(Surface::parse("Slack"), None);
    }
}
