//! [`Inbound::parse`]: one raw event, bounded by [`check_document`], read by its surface's
//! reader. Apart from `inbound.rs`, whose vocabulary the readers (`slack.rs`, `discord.rs`,
//! `telegram.rs`) fill in, so the readers and the vocabulary do not import each other.

use crate::address::Surface;
use crate::ingress::identity::Identity;
use crate::ingress::inbound::{Inbound, InboundError, check_document};
use crate::ingress::{discord, slack, telegram};

impl Inbound {
    /// Reads one event of `surface` (Slack: the Events API envelope or its inner `message` /
    /// `app_mention` event; Discord: a `MESSAGE_CREATE`/`MESSAGE_UPDATE` gateway dispatch or
    /// the message object; Telegram: an `Update`), bounded by [`check_document`].
    ///
    /// # Errors
    ///
    /// What [`check_document`] refuses; [`InboundError::Unsupported`] for a surface other than
    /// Slack, Discord or Telegram; otherwise the surface's reader's [`InboundError`]: not the
    /// surface's shape (`Malformed`), not a message (`NotAMessage`), too many mentions
    /// (`TooManyMentions`) or a conversation that is not an address (`Address`).
    pub fn parse(surface: Surface, event: &[u8], us: &Identity) -> Result<Self, InboundError> {
        let text = check_document(event)?;
        match surface {
            Surface::Slack => slack::parse(text, us),
            Surface::Discord => discord::parse(text, us),
            Surface::Telegram => telegram::parse(text, us),
            other => Err(InboundError::Unsupported(other)),
        }
    }
}
