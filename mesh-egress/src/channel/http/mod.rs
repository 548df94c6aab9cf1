//! The HTTP connectors; their documentation is the `channel` module's ("Connectors over HTTP").

pub(crate) mod answer;
#[cfg(all(test, feature = "testing"))]
mod budget_tests;
pub(crate) mod budgets;
pub(crate) mod exchange;
mod mentions;
mod policy;
pub(crate) mod retry;
pub(crate) mod stream_call;
pub(crate) mod stream_settings;
pub(crate) mod transport;

use std::fmt;
use std::time::Duration;

pub use mentions::AllowedMentions;
pub use policy::{DEFAULT_MAX_RESPONSE_BYTES, SendPolicy};

// The one surface type, for the connectors beside this module (not re-exported: its path is
// `mesh_egress::Surface`).
use crate::address::Surface;

/// Why a connector gave up on one part: the source of the [`SendError`](super::SendError) it
/// returns.
#[derive(Debug, thiserror::Error)]
#[error("{surface} did not accept the part after {tries} {}: {kind}", if *tries == 1 { "try" } else { "tries" })]
pub struct ChannelError {
    surface: Surface,
    tries: u32,
    kind: ChannelErrorKind,
}

impl ChannelError {
    pub(crate) fn new(surface: Surface, tries: u32, kind: ChannelErrorKind) -> Self {
        Self {
            surface,
            tries,
            kind,
        }
    }

    /// The surface that refused the part.
    pub fn surface(&self) -> Surface {
        self.surface
    }

    /// How many requests were made for the part.
    pub fn tries(&self) -> u32 {
        self.tries
    }

    /// What the last try ended with.
    pub fn kind(&self) -> &ChannelErrorKind {
        &self.kind
    }
}

/// What the last try for a part ended with.
///
/// Text taken from a surface's answer (an error code or description) is cut to 200 characters
/// and scrubbed of the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelErrorKind {
    /// The surface rate-limited the part and the part's wait budget was spent.
    #[error("rate limited{}{}", if *global { " (global)" } else { "" }, retry_after.map(|w| format!(", asked to wait {w:?}")).unwrap_or_default())]
    RateLimited {
        /// How long the surface asked us to wait, if it said.
        retry_after: Option<Duration>,
        /// Whether the limit covers the whole bot rather than this route (Discord's `global`).
        global: bool,
    },
    /// The surface answered with an HTTP status it gives for a server-side failure (5xx).
    #[error("server error (HTTP {status})")]
    Server {
        /// The HTTP status.
        status: u16,
    },
    /// The surface refused the request with an error code or description (bad token, unknown
    /// channel, malformed text). Unless the surface documents the code as transient, sending
    /// again will not fix it.
    #[error("refused (HTTP {status}): {detail}")]
    Refused {
        /// The HTTP status (Slack answers most errors with 200 and `ok: false`).
        status: u16,
        /// The surface's error code or description.
        detail: String,
    },
    /// The answer's body was not the JSON the surface documents. After a 2xx this is ambiguous:
    /// the part may have been posted, so it is repeated only where a repeat cannot post twice.
    #[error("the response (HTTP {status}) was not the expected JSON")]
    Malformed {
        /// The HTTP status.
        status: u16,
    },
    /// The bot token cannot go into a request: it holds characters HTTP headers refuse.
    #[error("the bot token is not a valid HTTP header value")]
    InvalidToken,
    /// The answer's body was longer than the policy's
    /// [`max_response_bytes`](SendPolicy::max_response_bytes); it was not read past the cap.
    /// After a 2xx this is ambiguous, as for [`Malformed`](Self::Malformed): the part may have
    /// been posted, so it is repeated only where a repeat cannot post twice.
    #[error("the response (HTTP {status}) was longer than {limit} bytes")]
    ResponseTooLarge {
        /// The HTTP status.
        status: u16,
        /// The cap it passed, in bytes.
        limit: usize,
    },
    /// No answer: the connection failed, was reset, or timed out (or the request could not be
    /// built from the configured base URL).
    #[error("transport failure: {detail}")]
    Transport {
        /// What failed, without the request URL.
        detail: String,
    },
}

/// A bot token: never printed, never logged.
#[derive(Clone)]
pub(crate) struct Token(String);

impl Token {
    pub(crate) fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the token replaced, cut to 200 characters.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let scrubbed = if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "[redacted]")
        };
        let mut chars = scrubbed.chars();
        let cut: String = chars.by_ref().take(200).collect();
        if chars.next().is_some() {
            format!("{cut}…")
        } else {
            cut
        }
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The builder methods every HTTP client shares: where its API lives, how it retries, and which
/// client it sends through. `$api` completes "Talks to …"; a channel passes `client`, the field
/// holding its own copy of the client.
macro_rules! transport_builders {
    ($api:literal $(, $client:ident)?) => {
        #[doc = concat!("Talks to ", $api, ".")]
        pub fn base_url(mut self, url: impl Into<String>) -> Self {
            self$(.$client)?.base_url = trim_base(url);
            self
        }

        /// Retries within `policy` instead of the default.
        pub fn policy(mut self, policy: SendPolicy) -> Self {
            self$(.$client)?.transport.policy = policy;
            self
        }

        /// Sends through `client` (shared connection pool, proxy settings).
        pub fn client(mut self, client: reqwest::Client) -> Self {
            self$(.$client)?.transport.client = client;
            self
        }
    };
}
pub(crate) use transport_builders;

/// A base URL without its trailing slash.
pub(crate) fn trim_base(url: impl Into<String>) -> String {
    let mut url = url.into();
    while url.ends_with('/') {
        url.pop();
    }
    url
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Token;
    use crate::address::{Address, DiscordAddress, SlackAddress, TelegramAddress};
    use crate::channel::stream::BudgetConfig;
    use crate::channel::{Channel, SurfaceClient};
    use crate::channel::{DiscordClient, SlackChannel, SlackClient, TelegramClient};

    #[test]
    fn channels_a_client_makes_for_one_chat_share_its_budget_and_other_chats_do_not() {
        let slack = SlackClient::new("xoxb-t");
        let one = slack.channel(SlackAddress::new("C1"));
        let again = slack.channel(SlackAddress::new("C1"));
        let thread = slack.channel(SlackAddress::new("C1").in_thread("1.2"));
        let other = slack.channel(SlackAddress::new("C2"));
        assert!(one.stream_budget().shares_with(again.stream_budget()));
        assert!(
            one.stream_budget().shares_with(thread.stream_budget()),
            "Slack's limit is per channel"
        );
        assert!(!one.stream_budget().shares_with(other.stream_budget()));
        // The shorthand's siblings and the boxed channels of a stored address share it too.
        assert!(
            one.for_channel("C2")
                .stream_budget()
                .shares_with(other.stream_budget())
        );
        let shorthand = SlackChannel::new("xoxb-t", "C1");
        assert!(
            !shorthand.stream_budget().shares_with(one.stream_budget()),
            "another client"
        );

        let discord = DiscordClient::new("t");
        let a = discord.channel(DiscordAddress::new("1"));
        assert!(
            a.stream_budget()
                .shares_with(discord.channel(DiscordAddress::new("1")).stream_budget())
        );
        assert!(
            !a.stream_budget()
                .shares_with(discord.channel(DiscordAddress::new("2")).stream_budget())
        );
    }

    #[test]
    fn a_telegram_chat_gets_its_kind_of_budget_and_its_topics_share_it() {
        let telegram = TelegramClient::new("1:t");
        let group = telegram.channel(TelegramAddress::new("-1001"));
        let topic = telegram.channel(TelegramAddress::new("-1001").in_topic(7));
        assert!(group.stream_budget().shares_with(topic.stream_budget()));
        let private = telegram.channel(TelegramAddress::new("42"));
        assert_eq!(
            private.stream_budget().config(),
            BudgetConfig::new(Duration::from_secs(1))
        );
        assert_ne!(
            group.stream_budget().config(),
            private.stream_budget().config()
        );
        assert_eq!(
            topic.address(),
            Address::from(TelegramAddress::new("-1001").in_topic(7))
        );
    }

    #[test]
    fn a_channel_that_sets_its_own_budget_is_the_one_later_channels_to_its_chat_share() {
        let slack = SlackClient::new("xoxb-t");
        let custom = slack
            .channel(SlackAddress::new("C1"))
            .with_stream_budget(BudgetConfig::new(Duration::from_millis(5)));
        let later = slack.channel(SlackAddress::new("C1"));
        assert!(custom.stream_budget().shares_with(later.stream_budget()));
    }

    #[test]
    fn a_client_bounds_the_chats_it_remembers() {
        let slack = SlackClient::new("xoxb-t").with_budget_capacity(2);
        let first = slack.channel(SlackAddress::new("C1"));
        slack.channel(SlackAddress::new("C2"));
        slack.channel(SlackAddress::new("C3"));
        // C1 was forgotten: a channel made now starts a fresh budget.
        let again = slack.channel(SlackAddress::new("C1"));
        assert!(!first.stream_budget().shares_with(again.stream_budget()));
        // C3 is still remembered.
        let c3 = slack.channel(SlackAddress::new("C3"));
        assert!(
            c3.stream_budget()
                .shares_with(slack.channel(SlackAddress::new("C3")).stream_budget())
        );
    }

    #[test]
    fn a_channel_error_names_the_surface_by_its_proper_name() {
        let error = super::ChannelError::new(
            crate::Surface::Slack,
            2,
            super::ChannelErrorKind::Server { status: 503 },
        );
        assert_eq!(
            error.to_string(),
            "Slack did not accept the part after 2 tries: server error (HTTP 503)"
        );
        assert_eq!(error.surface(), crate::Surface::Slack);
    }

    #[test]
    fn a_client_serves_its_own_surface_only_and_says_so_by_its_proper_name() {
        let telegram = TelegramClient::new("1:secret");
        let slack = Address::from(SlackAddress::new("C1"));
        let refused = telegram.channel_for(&slack).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "a Telegram client cannot send to slack:C1"
        );
        assert!(!format!("{telegram:?}").contains("secret"));
    }

    #[test]
    fn a_token_is_redacted_from_debug_and_scrubbed_text() {
        let token = Token::new("123:secret");
        assert_eq!(format!("{token:?}"), "[redacted]");
        assert_eq!(
            token.scrub("Not Found: /bot123:secret/sendMessage"),
            "Not Found: /bot[redacted]/sendMessage"
        );
    }

    #[test]
    fn scrubbed_text_is_cut_to_200_characters() {
        let long = "é".repeat(300);
        let scrubbed = Token::new("t").scrub(&long);
        assert_eq!(scrubbed.chars().count(), 201);
        assert!(scrubbed.ends_with('…'));
    }
}
