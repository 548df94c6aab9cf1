//! Slack: the mrkdwn dialect ([`SlackMrkdwn`]) and the `markdown_text` one its native stream
//! writes ([`SlackMarkdown`]), the client (one per bot token) and the one-conversation channel
//! (`chat.postMessage`), and the native stream (`chat.startStream` / `appendStream` /
//! `stopStream`).

#[cfg(feature = "http")]
mod client;
mod markdown;
mod mrkdwn;
#[cfg(feature = "http")]
mod stream;

#[cfg(feature = "http")]
pub use client::{SlackChannel, SlackClient};
pub use markdown::SlackMarkdown;
#[cfg(test)]
pub(crate) use mrkdwn::Slack;
pub use mrkdwn::SlackMrkdwn;
