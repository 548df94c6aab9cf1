//! [`Surface`]: which chat surface a conversation lives on. Declared apart so that its one
//! public path is the crate root's (`mesh_egress::Surface`).

use std::fmt;

use serde::{Deserialize, Serialize};

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
