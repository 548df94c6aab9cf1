//! How an HTTP connector streams replies: the mode, the conversation's rate budget, and each
//! surface's own knobs. Every connector holds one; clones share its budget.

use std::time::Duration;

use crate::channel::stream::{BudgetConfig, RateBudget, StreamMode};

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
    /// One budget per conversation: a connector targets one conversation, so it holds the one
    /// budget; clones share it, `for_channel`/`for_chat` siblings get a fresh one.
    pub(crate) budget: RateBudget,
    /// Slack: the user and team a stream outside a DM is for.
    pub(crate) recipient: Option<(String, String)>,
    /// Slack: how long a stream is used before a fresh one is started.
    pub(crate) rollover_after: Duration,
    /// Telegram: how often a draft still waiting for text is shown again.
    pub(crate) draft_refresh: Duration,
    /// Whether `with_stream_budget` set the budget (a sibling for another chat keeps it).
    pub(crate) custom_budget: bool,
}

fn telegram_budget(private: bool) -> BudgetConfig {
    let spacing = BudgetConfig::new(Duration::from_secs(1));
    if private {
        spacing
    } else {
        spacing.window(20, Duration::from_secs(60)).final_reserve(5)
    }
}

impl StreamSettings {
    fn with_budget(config: BudgetConfig) -> Self {
        Self {
            mode: None,
            budget: RateBudget::new(config),
            recipient: None,
            rollover_after: SLACK_ROLLOVER_AFTER,
            draft_refresh: TELEGRAM_DRAFT_REFRESH,
            custom_budget: false,
        }
    }

    /// Slack posts about one message per second per channel ("special" rate limit of
    /// `chat.postMessage`); appends to a stream are spaced the same way.
    pub(crate) fn slack() -> Self {
        Self::with_budget(BudgetConfig::new(Duration::from_secs(1)))
    }

    /// Discord asks clients not to hard-code limits: its `X-RateLimit-*` headers pace a
    /// session; the spacing only keeps edits of a growing message from churning.
    pub(crate) fn discord() -> Self {
        Self::with_budget(BudgetConfig::new(Duration::from_millis(500)))
    }

    /// Telegram: "avoid sending more than one message per second in a particular chat", and
    /// "not more than 20 messages per minute" in a group (Bot FAQ); five of those twenty are
    /// held back for permanent messages. A private chat has the spacing only.
    pub(crate) fn telegram(private: bool) -> Self {
        Self::with_budget(telegram_budget(private))
    }

    /// The same settings for another Telegram chat: a budget of its own, the chat's default
    /// limits unless a budget was set with `with_stream_budget`.
    pub(crate) fn telegram_sibling(&self, private: bool) -> Self {
        let config = if self.custom_budget {
            self.budget.config()
        } else {
            telegram_budget(private)
        };
        Self {
            budget: RateBudget::new(config),
            ..self.clone()
        }
    }

    /// The same settings for another conversation: a budget of its own.
    pub(crate) fn sibling(&self) -> Self {
        Self {
            budget: RateBudget::new(self.budget.config()),
            ..self.clone()
        }
    }
}

/// The builder methods every HTTP connector has for streaming.
macro_rules! stream_builders {
    () => {
        /// Streams replies in `mode` instead of the surface's default (see
        /// [`StreamingChannel`](crate::channel::stream::StreamingChannel)).
        pub fn with_stream_mode(mut self, mode: $crate::channel::stream::StreamMode) -> Self {
            self.stream.mode = Some(mode);
            self
        }

        /// Paces this conversation's calls (previews, edits and messages alike) with
        /// `config` instead of the surface's default; clones made afterwards share it.
        pub fn with_stream_budget(mut self, config: $crate::channel::stream::BudgetConfig) -> Self {
            self.stream.budget = $crate::channel::stream::RateBudget::new(config);
            self.stream.custom_budget = true;
            self
        }

        /// The conversation's rate budget, shared by every stream and clone of this connector.
        pub fn stream_budget(&self) -> &$crate::channel::stream::RateBudget {
            &self.stream.budget
        }
    };
}
pub(crate) use stream_builders;
