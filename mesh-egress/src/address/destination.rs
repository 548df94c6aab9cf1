//! [`Address`]: where one conversation's messages go. Declared apart so that its one public
//! path is the crate root's (`mesh_egress::Address`).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{AddressError, DiscordAddress, SlackAddress, Surface, TelegramAddress, WebAddress};

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
    ///
    /// # Errors
    ///
    /// The [`AddressError`] of the first field that fails its surface's check (`Empty`,
    /// `TooLong` or `BadCharacter`). [`Address::Plain`] never fails.
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
