//! Discord: its Markdown dialect ([`DiscordMarkdown`]), the client (one per bot token) and the
//! one-conversation channel (`POST /channels/{id}/messages`), and the stream (one message grown
//! by edits).

#[cfg(feature = "http")]
mod client;
mod markdown;
#[cfg(feature = "http")]
mod stream;

#[cfg(feature = "http")]
pub use client::{DiscordChannel, DiscordClient};
// The Discord dialect is CommonMark with mention openers escaped: `SlackMarkdown` writes
// Slack's `markdown_text` with it.
pub(crate) use markdown::Discord;
pub use markdown::DiscordMarkdown;
