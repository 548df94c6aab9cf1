//! [`AllowedMentions`]: whom a Discord message may notify.

use serde_json::{Value, json};

/// Whom a [`DiscordChannel`](crate::channel::DiscordChannel) message may notify: by default no one.
///
/// Model text is untrusted: a prompt-injected reply can write `@everyone`, `@here`, `<@id>` or
/// `<@&role>`. Discord notifies for those unless the message says otherwise, so every message
/// the connector sends carries Discord's `allowed_mentions` object: `{"parse": []}` (nothing is
/// parsed into a notification), plus the users and roles an application lists here on purpose.
/// A mention outside the list still renders as a mention, but pings no one. See Discord's
/// "Allowed Mentions Object" (Channel resource) for the field.
///
/// Ids are Discord snowflakes in decimal (`"80351110224678912"`), not the `<@…>` syntax.
/// Discord accepts at most 100 of each and refuses the whole message otherwise (a
/// [`ChannelErrorKind::Refused`](super::ChannelErrorKind::Refused) failure).
///
/// ```
/// use mesh_egress::channel::DiscordChannel;
/// use mesh_egress::channel::AllowedMentions;
///
/// // The on-call engineer and the SRE role may be pinged; "@everyone" in a reply pings no one.
/// let discord = DiscordChannel::new("bot-token", "123456789012345678").with_allowed_mentions(
///     AllowedMentions::none()
///         .users(["80351110224678912"])
///         .roles(["41771983423143936"]),
/// );
/// # let _ = discord;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedMentions {
    users: Vec<String>,
    roles: Vec<String>,
}

impl AllowedMentions {
    /// Notifies no one (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// Also lets a message notify the users with these ids (duplicates are kept once).
    pub fn users<I, S>(mut self, ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        extend_unique(&mut self.users, ids);
        self
    }

    /// Also lets a message notify the members of the roles with these ids (duplicates are kept
    /// once).
    pub fn roles<I, S>(mut self, ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        extend_unique(&mut self.roles, ids);
        self
    }

    /// The users a message may notify.
    pub fn user_ids(&self) -> &[String] {
        &self.users
    }

    /// The roles a message may notify.
    pub fn role_ids(&self) -> &[String] {
        &self.roles
    }

    /// The `allowed_mentions` object for a request body. `parse` is always empty: `@everyone`,
    /// `@here` and any id not listed never notify.
    pub(crate) fn to_json(&self) -> Value {
        let mut object = json!({ "parse": [] });
        if !self.users.is_empty() {
            object["users"] = Value::from(self.users.clone());
        }
        if !self.roles.is_empty() {
            object["roles"] = Value::from(self.roles.clone());
        }
        object
    }
}

fn extend_unique<I, S>(list: &mut Vec<String>, ids: I)
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    for id in ids {
        let id = id.into();
        if !list.contains(&id) {
            list.push(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_parses_nothing_and_lists_no_one() {
        assert_eq!(AllowedMentions::none().to_json(), json!({ "parse": [] }));
        assert_eq!(AllowedMentions::default(), AllowedMentions::none());
    }

    #[test]
    fn listed_users_and_roles_are_sent_once_each_and_parse_stays_empty() {
        let allowed = AllowedMentions::none()
            .users(["1", "2", "1"])
            .roles(vec![String::from("9")]);
        assert_eq!(
            allowed.to_json(),
            json!({ "parse": [], "users": ["1", "2"], "roles": ["9"] })
        );
        assert_eq!(allowed.user_ids(), ["1", "2"]);
        assert_eq!(allowed.role_ids(), ["9"]);
    }
}
