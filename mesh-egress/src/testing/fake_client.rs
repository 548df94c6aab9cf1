//! [`FakeApi::serving`] and [`FakeApi::client`]: a fake started for a conversation's address,
//! and the surface client that talks to it, so a demo or a test wires a bot to the fake in one
//! line.

use std::sync::Arc;

use super::FakeApi;
use super::chat_state::Api;
use crate::address::Address;
use crate::channel::{DiscordClient, SlackClient, SurfaceClient, TelegramClient};

/// The bot token every fake started by [`FakeApi::serving`] accepts.
const SERVING_TOKEN: &str = "fake-bot-token";

impl FakeApi {
    /// Starts a fake of the surface `address` lives on (Slack, Discord or Telegram; another
    /// surface is an [`InvalidInput`](std::io::ErrorKind::InvalidInput) error), accepting the
    /// token its [`client`](Self::client) sends.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    ///
    /// ```
    /// use mesh_egress::testing::FakeApi;
    /// use mesh_egress::{Address, Surface};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
    /// let api = FakeApi::serving(&Address::slack("C0123456789")).await?;
    /// assert_eq!(api.surface(), Surface::Slack);
    /// assert_eq!(api.client().surface(), Surface::Slack);
    /// # Ok(()) }
    /// ```
    pub async fn serving(address: &Address) -> std::io::Result<Self> {
        Self::start(address.surface(), SERVING_TOKEN).await
    }

    /// A client of this fake's surface, sending to it with the token it accepts (the surface's
    /// default renderer and send policy).
    pub fn client(&self) -> Arc<dyn SurfaceClient> {
        let token = self.shared.token.clone();
        match self.shared.surface {
            Api::Slack => Arc::new(SlackClient::new(token).base_url(self.base_url())),
            Api::Discord => Arc::new(DiscordClient::new(token).base_url(self.base_url())),
            Api::Telegram => Arc::new(TelegramClient::new(token).base_url(self.base_url())),
        }
    }
}
