//! How an HTTP client streams replies: the mode, the budget its chats get, and each surface's
//! own knobs. Every client holds one and hands it to each channel it makes.

use std::time::Duration;

use crate::channel::stream::{BudgetConfig, StreamMode};

/// Slack closes a stream a few minutes after it started and then answers appends with
/// `message_not_in_streaming_state` (slackapi/python-slack-sdk#1859, vercel/chat#637), so a
/// session rolls over into a fresh stream well before that.
pub(crate) const SLACK_ROLLOVER_AFTER: Duration = Duration::from_secs(4 * 60);

/// A Telegram draft is "a temporary 30-second preview" (Bot API, `sendMessageDraft`): a
/// session shows it again before it lapses.
pub(crate) const TELEGRAM_DRAFT_REFRESH: Duration = Duration::from_secs(20);

#[derive(Clone, Debug)]
pub(crate) struct StreamSettings {
    /// The mode chosen with `with_stream_mode`; `None` is the surface's default.
    pub(crate) mode: Option<StreamMode>,
    /// The limits set with `with_stream_budget`; `None`: each chat's surface default.
    pub(crate) budget: Option<BudgetConfig>,
    /// Slack: how long a stream is used before a fresh one is started.
    pub(crate) rollover_after: Duration,
    /// Telegram: how often a draft still waiting for text is shown again.
    pub(crate) draft_refresh: Duration,
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self {
            mode: None,
            budget: None,
            rollover_after: SLACK_ROLLOVER_AFTER,
            draft_refresh: TELEGRAM_DRAFT_REFRESH,
        }
    }
}

impl StreamSettings {
    /// The limits a new chat's budget gets: the configured ones, or `default`.
    pub(crate) fn budget_or(&self, default: impl FnOnce() -> BudgetConfig) -> BudgetConfig {
        self.budget.unwrap_or_else(default)
    }
}

/// Slack posts about one message per second per channel ("special" rate limit of
/// `chat.postMessage`); appends to a stream are spaced the same way.
pub(crate) fn slack_budget() -> BudgetConfig {
    BudgetConfig::new(Duration::from_secs(1))
}

/// Discord asks clients not to hard-code limits: its `X-RateLimit-*` headers pace a session;
/// the spacing only keeps edits of a growing message from churning.
pub(crate) fn discord_budget() -> BudgetConfig {
    BudgetConfig::new(Duration::from_millis(500))
}

/// Telegram: "avoid sending more than one message per second in a particular chat", and "not
/// more than 20 messages per minute" in a group (Bot FAQ); five of those twenty are held back
/// for permanent messages. A private chat has the spacing only.
pub(crate) fn telegram_budget(private: bool) -> BudgetConfig {
    let spacing = BudgetConfig::new(Duration::from_secs(1));
    if private {
        spacing
    } else {
        spacing.window(20, Duration::from_secs(60)).final_reserve(5)
    }
}

/// The streaming builders every HTTP client has; each channel has them too, for its own copy
/// of the client's settings.
macro_rules! client_stream_builders {
    () => {
        /// Streams replies in `mode` instead of the surface's default (see
        /// [`StreamingChannel`](crate::channel::stream::StreamingChannel)).
        pub fn with_stream_mode(mut self, mode: $crate::channel::stream::StreamMode) -> Self {
            self.stream.mode = Some(mode);
            self
        }

        /// Paces each chat's calls (previews, edits and messages alike) with `config` instead
        /// of the surface's default, for the chats whose budget is made from now on.
        pub fn with_stream_budget(mut self, config: $crate::channel::stream::BudgetConfig) -> Self {
            self.stream.budget = Some(config);
            self
        }
    };
}
pub(crate) use client_stream_builders;

/// The streaming builders of a channel made from a client (the field `client`), and its
/// budget.
macro_rules! channel_stream_builders {
    () => {
        /// Streams replies in `mode` instead of the surface's default (see
        /// [`StreamingChannel`](crate::channel::stream::StreamingChannel)).
        pub fn with_stream_mode(mut self, mode: $crate::channel::stream::StreamMode) -> Self {
            self.client.stream.mode = Some(mode);
            self
        }

        /// Paces this conversation's calls (previews, edits and messages alike) with
        /// `config` instead of the surface's default: a fresh budget, which clones made
        /// afterwards share, and which channels made afterwards for the same chat (from this
        /// channel's client, or with `for_channel`/`for_chat`) share too.
        pub fn with_stream_budget(mut self, config: $crate::channel::stream::BudgetConfig) -> Self {
            self.client.stream.budget = Some(config);
            self.budget = $crate::channel::stream::RateBudget::new(config);
            self.client
                .budgets
                .replace(self.budget_key(), self.budget.clone());
            self
        }

        /// The conversation's rate budget, shared by every stream and clone of this channel and
        /// by every channel its client makes for the same chat.
        #[cfg(test)]
        pub(crate) fn stream_budget(&self) -> &$crate::channel::stream::RateBudget {
            &self.budget
        }
    };
}
pub(crate) use channel_stream_builders;
