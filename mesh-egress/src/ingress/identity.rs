//! [`Identity`]: who we are on each surface, so a message can be recognised as ours, as
//! mentioning us, as replying to us or as calling us by name.

/// Who we are: the name people call the bot by, its aliases, and its id on each surface.
///
/// Names and aliases are matched with ASCII letters compared case-insensitively (other
/// characters exactly), as whole words. Ids are compared exactly, except the Telegram username,
/// which Telegram treats case-insensitively.
///
/// ```
/// use mesh_egress::ingress::Identity;
/// let us = Identity::new("Atlas")
///     .alias("atlas-bot")
///     .slack_user("U0BOTATLAS")
///     .discord_user("1100000000000000001")
///     .telegram("atlas_support_bot", 7000000001);
/// assert_eq!(us.name(), "Atlas");
/// assert_eq!(us.names().collect::<Vec<_>>(), ["Atlas", "atlas-bot"]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    name: String,
    aliases: Vec<String>,
    slack_user: Option<String>,
    slack_bot: Option<String>,
    discord_user: Option<String>,
    discord_roles: Vec<String>,
    telegram_username: Option<String>,
    telegram_id: Option<i64>,
}

impl Identity {
    /// We are called `name` (what people write to address us; empty for a bot that only
    /// answers mentions, replies, commands and DMs).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into().trim().to_owned(),
            ..Self::default()
        }
    }

    /// Another name people call us by (blank aliases are ignored).
    pub fn alias(mut self, alias: impl Into<String>) -> Self {
        let alias = alias.into().trim().to_owned();
        if !alias.is_empty() {
            self.aliases.push(alias);
        }
        self
    }

    /// Our Slack bot user id (`U…`, what `<@U…>` mentions and `user` carry).
    pub fn slack_user(mut self, id: impl Into<String>) -> Self {
        self.slack_user = Some(id.into());
        self
    }

    /// Our Slack bot id (`B…`, what `bot_id` carries on our own messages).
    pub fn slack_bot(mut self, id: impl Into<String>) -> Self {
        self.slack_bot = Some(id.into());
        self
    }

    /// Our Discord user id (a snowflake).
    pub fn discord_user(mut self, id: impl Into<String>) -> Self {
        self.discord_user = Some(id.into());
        self
    }

    /// A Discord role that stands for us (the bot's managed role): `<@&id>` mentions us.
    pub fn discord_role(mut self, id: impl Into<String>) -> Self {
        self.discord_roles.push(id.into());
        self
    }

    /// Our Telegram bot username (with or without `@`) and numeric id.
    pub fn telegram(mut self, username: impl Into<String>, id: i64) -> Self {
        self = self.telegram_username(username);
        self.telegram_id = Some(id);
        self
    }

    /// Our Telegram bot username alone (with or without `@`).
    pub fn telegram_username(mut self, username: impl Into<String>) -> Self {
        let username = username.into();
        self.telegram_username = Some(username.trim().trim_start_matches('@').to_owned());
        self
    }

    /// Our Telegram bot id alone.
    pub fn telegram_id(mut self, id: i64) -> Self {
        self.telegram_id = Some(id);
        self
    }

    /// The name people call us by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The aliases.
    pub fn aliases(&self) -> &[String] {
        &self.aliases
    }

    /// The name, then every alias.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str()).chain(self.aliases.iter().map(String::as_str))
    }

    /// Whether `id` is our Slack user or bot id.
    pub(crate) fn is_slack(&self, id: &str) -> bool {
        self.slack_user.as_deref() == Some(id) || self.slack_bot.as_deref() == Some(id)
    }

    /// Whether `id` is our Discord user id.
    pub(crate) fn is_discord_user(&self, id: &str) -> bool {
        self.discord_user.as_deref() == Some(id)
    }

    /// Whether `id` is one of our Discord roles.
    pub(crate) fn is_discord_role(&self, id: &str) -> bool {
        self.discord_roles.iter().any(|r| r == id)
    }

    /// Whether a Telegram user (`id`, `username`) is us.
    pub(crate) fn is_telegram(&self, id: i64, username: Option<&str>) -> bool {
        self.telegram_id == Some(id) || username.is_some_and(|u| self.is_telegram_username(u))
    }

    /// Whether `username` (without `@`) is our Telegram username.
    pub(crate) fn is_telegram_username(&self, username: &str) -> bool {
        self.telegram_username
            .as_deref()
            .is_some_and(|ours| !ours.is_empty() && ours.eq_ignore_ascii_case(username))
    }
}
