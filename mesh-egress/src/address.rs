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

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest id any field of an address may hold, in bytes. Slack, Discord and Telegram ids
/// are a few dozen bytes; a web chat id is the application's (the AI SDK's are 16 characters).
pub(crate) const MAX_ADDRESS_FIELD: usize = 256;

/// Which chat surface a conversation lives on. One type for the whole crate: the outbox stores
/// it, the connectors report it, the duplicate rules key on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Surface {
    /// Slack's Web API.
    Slack,
    /// Discord's REST API.
    Discord,
    /// Telegram's Bot API.
    Telegram,
    /// A web chat served by the application (the AI SDK's UI message stream).
    Web,
    /// Stdout, a recorder, any channel with a single destination and no dedupe.
    Plain,
}

impl Surface {
    /// Every surface, in a fixed order.
    pub const ALL: [Surface; 5] = [
        Self::Slack,
        Self::Discord,
        Self::Telegram,
        Self::Web,
        Self::Plain,
    ];

    /// The stable lowercase name: what the outbox stores and logs carry.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Slack => "slack",
            Self::Discord => "discord",
            Self::Telegram => "telegram",
            Self::Web => "web",
            Self::Plain => "plain",
        }
    }

    /// The surface's proper name, as error messages show it (`Slack`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Slack => "Slack",
            Self::Discord => "Discord",
            Self::Telegram => "Telegram",
            Self::Web => "web chat",
            Self::Plain => "plain",
        }
    }

    /// The surface whose stored name is `name` (as [`as_str`](Self::as_str) writes it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the surface drops a repeated send of the same part by itself: Discord's
    /// `nonce` with `enforce_nonce`
    /// (<https://discord.com/developers/docs/resources/message#create-message>).
    pub fn dedupes(self) -> bool {
        matches!(self, Self::Discord)
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

/// Where one conversation's messages go: a typed destination per [`Surface`].
///
/// It travels with the [`Turn`](crate::Turn) beside the attribution, and the durable outbox
/// stores it with every part and commitment, so whoever sends a part later (a worker after a
/// restart) sends it to this conversation's chat and nowhere else.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "surface", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Address {
    /// A Slack channel, DM or thread.
    Slack(SlackAddress),
    /// A Discord channel or thread.
    Discord(DiscordAddress),
    /// A Telegram chat or forum topic.
    Telegram(TelegramAddress),
    /// A web chat.
    Web(WebAddress),
    /// Stdout, a recorder: the one destination such a channel has.
    Plain,
}

impl Address {
    /// A Slack channel or DM (see [`SlackAddress::new`]; a thread or stream recipient is set
    /// on the [`SlackAddress`]).
    ///
    /// ```
    /// use mesh_egress::{Address, Surface};
    /// assert_eq!(Address::slack("C0123456789").surface(), Surface::Slack);
    /// assert_eq!(Address::discord("223456789012345678").surface(), Surface::Discord);
    /// assert_eq!(Address::telegram("-1001234567890").surface(), Surface::Telegram);
    /// ```
    pub fn slack(channel: impl Into<String>) -> Self {
        Self::Slack(SlackAddress::new(channel))
    }

    /// A Discord channel or thread (see [`DiscordAddress::new`]).
    pub fn discord(channel_id: impl Into<String>) -> Self {
        Self::Discord(DiscordAddress::new(channel_id))
    }

    /// A Telegram chat (see [`TelegramAddress::new`]; a forum topic is set on the
    /// [`TelegramAddress`]).
    pub fn telegram(chat_id: impl Into<String>) -> Self {
        Self::Telegram(TelegramAddress::new(chat_id))
    }

    /// The surface the address belongs to.
    pub fn surface(&self) -> Surface {
        match self {
            Self::Slack(_) => Surface::Slack,
            Self::Discord(_) => Surface::Discord,
            Self::Telegram(_) => Surface::Telegram,
            Self::Web(_) => Surface::Web,
            Self::Plain => Surface::Plain,
        }
    }

    /// Checks every field as the `parse` constructors do: what a deserialised address (a
    /// stored row, a request) goes through before it is used.
    pub fn validate(&self) -> Result<(), AddressError> {
        match self {
            Self::Slack(a) => a.validate(),
            Self::Discord(a) => a.validate(),
            Self::Telegram(a) => a.validate(),
            Self::Web(a) => a.validate(),
            Self::Plain => Ok(()),
        }
    }

    /// The Slack address, if this is one.
    pub fn as_slack(&self) -> Option<&SlackAddress> {
        match self {
            Self::Slack(a) => Some(a),
            _ => None,
        }
    }

    /// The Discord address, if this is one.
    pub fn as_discord(&self) -> Option<&DiscordAddress> {
        match self {
            Self::Discord(a) => Some(a),
            _ => None,
        }
    }

    /// The Telegram address, if this is one.
    pub fn as_telegram(&self) -> Option<&TelegramAddress> {
        match self {
            Self::Telegram(a) => Some(a),
            _ => None,
        }
    }

    /// The web chat address, if this is one.
    pub fn as_web(&self) -> Option<&WebAddress> {
        match self {
            Self::Web(a) => Some(a),
            _ => None,
        }
    }
}

impl From<SlackAddress> for Address {
    fn from(address: SlackAddress) -> Self {
        Self::Slack(address)
    }
}

impl From<DiscordAddress> for Address {
    fn from(address: DiscordAddress) -> Self {
        Self::Discord(address)
    }
}

impl From<TelegramAddress> for Address {
    fn from(address: TelegramAddress) -> Self {
        Self::Telegram(address)
    }
}

impl From<WebAddress> for Address {
    fn from(address: WebAddress) -> Self {
        Self::Web(address)
    }
}

/// `surface:id[/thread]`, for logs and operators (ids only: an address holds no message text).
impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.surface().as_str())?;
        match self {
            Self::Slack(a) => {
                f.write_str(&a.channel)?;
                if let Some(ts) = &a.thread_ts {
                    write!(f, "/{ts}")?;
                }
                Ok(())
            }
            Self::Discord(a) => f.write_str(&a.channel),
            Self::Telegram(a) => {
                f.write_str(&a.chat)?;
                if let Some(topic) = a.topic {
                    write!(f, "/{topic}")?;
                }
                Ok(())
            }
            Self::Web(a) => f.write_str(&a.chat),
            Self::Plain => f.write_str("-"),
        }
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
