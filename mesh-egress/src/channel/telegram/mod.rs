//! Telegram: its HTML dialect ([`TelegramHtml`]), the client (one per bot token) and the
//! one-conversation channel (`sendMessage`), and the stream (drafts in private chats).

#[cfg(feature = "http")]
mod client;
mod html;
#[cfg(feature = "http")]
mod stream;

#[cfg(all(test, feature = "http"))]
pub(crate) use client::classify;
#[cfg(feature = "http")]
pub use client::{TelegramChannel, TelegramClient};
#[cfg(test)]
pub(crate) use html::Telegram;
pub use html::TelegramHtml;
