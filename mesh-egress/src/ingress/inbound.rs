//! [`Inbound`]: one message as a surface delivered it, read from the surface's raw event JSON
//! under bounds, and [`InboundError`] when it cannot be.

use std::fmt;

use crate::address::{Address, AddressError, Surface};

/// The largest event document read, in bytes. Slack caps a message's text at 40,000
/// characters and its blocks repeat the text; Discord and Telegram messages are a few KB.
pub const MAX_EVENT_BYTES: usize = 256 * 1024;

/// The deepest nesting of objects and arrays read. Real events nest a dozen levels (Slack's
/// rich-text blocks); serde's own limit is 128, and a deeper document is refused before it is
/// parsed at all.
pub const MAX_DEPTH: usize = 32;

/// The most mentions one message may carry. Discord's 2,000 characters hold about 90; a message
/// with more is refused rather than scanned for ever.
pub const MAX_MENTIONS: usize = 100;

/// Why an event could not be read as an [`Inbound`] message. Every bad input gets one of
/// these; nothing here panics.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InboundError {
    /// The document is larger than [`MAX_EVENT_BYTES`].
    #[error("the event is larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The document is not UTF-8 (JSON is).
    #[error("the event is not valid UTF-8")]
    InvalidUtf8,
    /// Objects and arrays nest deeper than [`MAX_DEPTH`].
    #[error("the event nests deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// More than [`MAX_MENTIONS`] mentions.
    #[error("the message carries more than {limit} mentions")]
    TooManyMentions {
        /// The limit.
        limit: usize,
    },
    /// Not JSON, or not the shape the surface documents (the reason, without the text).
    #[error("the event is not a {surface} event: {reason}")]
    Malformed {
        /// The surface it was read as.
        surface: Surface,
        /// What was wrong.
        reason: String,
    },
    /// A well-formed event that is not a message a person or bot wrote (a reaction, a join, a
    /// URL verification, a heartbeat).
    #[error("not a message: {surface} {kind}")]
    NotAMessage {
        /// The surface.
        surface: Surface,
        /// The event's type, as the surface names it.
        kind: String,
    },
    /// The conversation's id is not an id the surface uses.
    #[error("the event's conversation is not an address: {0}")]
    Address(#[from] AddressError),
    /// The surface delivers no events this classifier reads (web chat, plain).
    #[error("{0} events are not read by the ingress classifier")]
    Unsupported(Surface),
}

impl InboundError {
    /// A stable lowercase name for logs: `too_large`, `invalid_utf8`, `too_deep`,
    /// `too_many_mentions`, `malformed`, `not_a_message`, `address`, `unsupported`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::InvalidUtf8 => "invalid_utf8",
            Self::TooDeep { .. } => "too_deep",
            Self::TooManyMentions { .. } => "too_many_mentions",
            Self::Malformed { .. } => "malformed",
            Self::NotAMessage { .. } => "not_a_message",
            Self::Address(_) => "address",
            Self::Unsupported(_) => "unsupported",
        }
    }

    pub(crate) fn malformed(surface: Surface, reason: impl fmt::Display) -> Self {
        Self::Malformed {
            surface,
            reason: reason.to_string(),
        }
    }

    /// serde's error without its message, which may quote the event's text: what kind of
    /// problem, and where.
    pub(crate) fn json(surface: Surface, error: &serde_json::Error) -> Self {
        use serde_json::error::Category;
        let what = match error.classify() {
            Category::Io => "unreadable",
            Category::Syntax => "not JSON",
            Category::Data => "not the documented shape",
            Category::Eof => "truncated JSON",
        };
        Self::malformed(
            surface,
            format!("{what} at line {} column {}", error.line(), error.column()),
        )
    }

    pub(crate) fn not_a_message(surface: Surface, kind: impl Into<String>) -> Self {
        let mut kind: String = kind.into();
        // The kind comes from the event; keep it short and printable for logs.
        kind.retain(|c| c.is_ascii_graphic());
        kind.truncate(64);
        Self::NotAMessage { surface, kind }
    }
}

/// Where the string whose content starts at `at` ends: the index of its closing quote (or the
/// end of the document, for serde to refuse), escapes skipped. (A word-at-a-time skip was
/// tried and cost more: an event's strings are mostly short keys.)
fn string_end(bytes: &[u8], mut at: usize) -> usize {
    while let Some(&b) = bytes.get(at) {
        match b {
            b'"' => return at,
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Checks an untrusted event document before it is parsed: at most [`MAX_EVENT_BYTES`], UTF-8,
/// and no deeper than [`MAX_DEPTH`] (one linear scan that counts brackets outside strings, so a
/// deeply nested document costs no recursion at all). Returns the document as text.
///
/// # Errors
///
/// [`InboundError::TooLarge`] past [`MAX_EVENT_BYTES`], [`InboundError::InvalidUtf8`] when
/// the document is not UTF-8, and [`InboundError::TooDeep`] when it nests deeper than
/// [`MAX_DEPTH`].
///
/// ```
/// use mesh_egress::ingress::{check_document, InboundError, MAX_DEPTH};
/// assert!(check_document(br#"{"a":[1,{"b":"]]]"}]}"#).is_ok());
/// let deep = "[".repeat(MAX_DEPTH + 1);
/// assert_eq!(check_document(deep.as_bytes()), Err(InboundError::TooDeep { limit: MAX_DEPTH }));
/// assert_eq!(check_document(b"{\"a\":\"\xff\"}"), Err(InboundError::InvalidUtf8));
/// ```
pub fn check_document(bytes: &[u8]) -> Result<&str, InboundError> {
    if bytes.len() > MAX_EVENT_BYTES {
        return Err(InboundError::TooLarge {
            limit: MAX_EVENT_BYTES,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|_| InboundError::InvalidUtf8)?;
    let mut depth = 0usize;
    let mut at = 0usize;
    while let Some(&b) = bytes.get(at) {
        match b {
            b'"' => at = string_end(bytes, at + 1),
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(InboundError::TooDeep { limit: MAX_DEPTH });
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    Ok(text)
}

/// Whether a conversation is a direct message with one person or a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChatKind {
    /// A direct message: one person and us.
    Direct,
    /// A channel, group, thread or multi-person DM.
    Group,
}

/// Who wrote a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Author {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) bot: bool,
    pub(crate) us: bool,
}

impl Author {
    /// The author's id on the surface (Slack `U…`/`B…`, a Discord snowflake, a Telegram id).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The author's handle, when the event carries one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether a bot, an app or a webhook wrote it (ourselves included).
    pub fn is_bot(&self) -> bool {
        self.bot
    }

    /// Whether we wrote it.
    pub fn is_us(&self) -> bool {
        self.us
    }
}

/// A mention, as the surface encodes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mention {
    /// A user by id: Slack `<@U…>` or `<@U…|name>`, Discord `<@id>` or `<@!id>`, a Telegram
    /// `text_mention` entity (a user without a username).
    User(String),
    /// A Telegram `@username` (`mention` entity), without the `@`.
    Username(String),
    /// A role or user group: Discord `<@&id>`, Slack `<!subteam^S…>`.
    Role(String),
    /// Everyone present: Discord `@everyone`/`@here`, Slack `<!channel>`, `<!here>`,
    /// `<!everyone>`.
    Everyone,
}

/// A bot command at the start of a Telegram message: `/name` or `/name@bot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub(crate) name: String,
    pub(crate) bot: Option<String>,
}

impl Command {
    /// The command without the slash (`help`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bot it names after `@`, if any.
    pub fn bot(&self) -> Option<&str> {
        self.bot.as_deref()
    }
}

/// The message a message replies to (for Slack, a thread reply answers the thread's first
/// message, whose author Slack reports as `parent_user_id`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyTo {
    pub(crate) message: String,
    pub(crate) author: Option<String>,
    pub(crate) us: bool,
}

impl ReplyTo {
    /// The id of the message replied to (Slack `ts`, a Discord or Telegram message id).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Its author's id, when the event says.
    pub fn author(&self) -> Option<&str> {
        self.author.as_deref()
    }

    /// Whether we wrote it.
    pub fn is_us(&self) -> bool {
        self.us
    }
}

/// An id that recognises the same inbound delivery again (a surface retries, or sends one
/// message as two events). Not our outbound [`DeliveryId`](crate::DeliveryId).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InboundId {
    /// The delivery itself: Slack's envelope `event_id` (the same on every retry), Telegram's
    /// `update_id`.
    Event(String),
    /// The message: Slack `channel/ts` (the same in `message` and `app_mention`), a Discord
    /// message id, Telegram `chat/message_id`.
    Message(String),
    /// Slack's `client_msg_id` (the same in `message` and `app_mention`).
    Client(String),
}

/// One inbound message, read from a surface's event.
///
/// ```
/// use mesh_egress::ingress::{Identity, Inbound, Mention};
/// use mesh_egress::Surface;
/// let us = Identity::new("Atlas").slack_user("U0LAN0Z89");
/// let event = br#"{"type":"app_mention","user":"U061F7AUR","text":"<@U0LAN0Z89> is it everything a river should be?","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522000016"}"#;
/// let inbound = Inbound::parse(Surface::Slack, event, &us).unwrap();
/// assert!(inbound.mentions_us());
/// assert_eq!(inbound.mentions(), [Mention::User("U0LAN0Z89".into())]);
/// assert_eq!(inbound.address().to_string(), "slack:C123ABC456");
/// assert_eq!(inbound.at_ms(), 1_515_449_522_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inbound {
    pub(crate) surface: Surface,
    pub(crate) address: Address,
    pub(crate) message_id: String,
    pub(crate) author: Author,
    pub(crate) text: String,
    pub(crate) mentions: Vec<Mention>,
    pub(crate) mentions_us: bool,
    pub(crate) mentions_others: bool,
    pub(crate) command: Option<Command>,
    pub(crate) reply_to: Option<ReplyTo>,
    pub(crate) thread: Option<String>,
    pub(crate) chat: ChatKind,
    pub(crate) edited: bool,
    pub(crate) deliveries: Vec<InboundId>,
    pub(crate) at_ms: u64,
    pub(crate) attachments: usize,
    pub(crate) links: usize,
}

impl Inbound {
    /// The surface.
    pub fn surface(&self) -> Surface {
        self.surface
    }

    /// Where an answer goes: the conversation's address (a Slack thread reply's address is its
    /// channel and `thread_ts`; a Telegram forum topic's carries `message_thread_id`).
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The message's id (Slack `ts`, a Discord snowflake, a Telegram `message_id`).
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// Who wrote it.
    pub fn author(&self) -> &Author {
        &self.author
    }

    /// Its text as the surface encodes it (Slack mrkdwn with `<@U…>` tokens, Discord
    /// Markdown, Telegram plain text or a caption).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its mentions, as the surface encodes them.
    pub fn mentions(&self) -> &[Mention] {
        &self.mentions
    }

    /// Whether one of the mentions is us.
    pub fn mentions_us(&self) -> bool {
        self.mentions_us
    }

    /// Whether it mentions someone (or some role) other than us. `@everyone` is not counted.
    pub fn mentions_others(&self) -> bool {
        self.mentions_others
    }

    /// The command it starts with (Telegram), if any.
    pub fn command(&self) -> Option<&Command> {
        self.command.as_ref()
    }

    /// The message it replies to, if any.
    pub fn reply_to(&self) -> Option<&ReplyTo> {
        self.reply_to.as_ref()
    }

    /// The thread it belongs to, if any: a Slack `thread_ts`, a Discord thread's channel id, a
    /// Telegram reply thread's `message_thread_id` (forum topics are conversations of their
    /// own, in the address, not threads).
    pub fn thread(&self) -> Option<&str> {
        self.thread.as_deref()
    }

    /// A direct message or a group.
    pub fn chat(&self) -> ChatKind {
        self.chat
    }

    /// Whether this is an edit of an earlier message.
    pub fn is_edit(&self) -> bool {
        self.edited
    }

    /// The ids that recognise a repeated delivery of the same message.
    pub fn deliveries(&self) -> &[InboundId] {
        &self.deliveries
    }

    /// When it was written, in milliseconds since the Unix epoch, from the event itself.
    pub fn at_ms(&self) -> u64 {
        self.at_ms
    }

    /// How many files or media it carries.
    pub fn attachments(&self) -> usize {
        self.attachments
    }
}

/// What each surface's reader fills in; [`Inbound`] adds what follows from it.
pub(crate) struct Parts {
    pub(crate) surface: Surface,
    pub(crate) address: Address,
    pub(crate) message_id: String,
    pub(crate) author: Author,
    pub(crate) text: String,
    pub(crate) mentions: Vec<Mention>,
    pub(crate) command: Option<Command>,
    pub(crate) reply_to: Option<ReplyTo>,
    pub(crate) thread: Option<String>,
    pub(crate) chat: ChatKind,
    pub(crate) edited: bool,
    pub(crate) deliveries: Vec<InboundId>,
    pub(crate) at_ms: u64,
    pub(crate) attachments: usize,
    pub(crate) links: usize,
}

impl Parts {
    /// The message, with whether its mentions name us (`is_us`) or someone else.
    pub(crate) fn into_inbound(self, is_us: impl Fn(&Mention) -> bool) -> Inbound {
        let mentions_us = self.mentions.iter().any(&is_us);
        let mentions_others = self
            .mentions
            .iter()
            .any(|m| !matches!(m, Mention::Everyone) && !is_us(m));
        Inbound {
            surface: self.surface,
            address: self.address,
            message_id: self.message_id,
            author: self.author,
            text: self.text,
            mentions: self.mentions,
            mentions_us,
            mentions_others,
            command: self.command,
            reply_to: self.reply_to,
            thread: self.thread,
            chat: self.chat,
            edited: self.edited,
            deliveries: self.deliveries,
            at_ms: self.at_ms,
            attachments: self.attachments,
            links: self.links,
        }
    }
}

/// How many `http(s)://` links a text holds (a signal of a question that needs reading).
pub(crate) fn count_links(text: &str) -> usize {
    text.match_indices("http")
        .filter(|(at, _)| {
            let rest = &text[at + 4..];
            rest.starts_with("://") || rest.starts_with("s://")
        })
        .count()
}

/// The mentions of one message as they are read: each distinct one kept once, every one
/// counted, and a message with more than [`MAX_MENTIONS`] refused.
#[derive(Default)]
pub(crate) struct Mentions {
    list: Vec<Mention>,
    seen: usize,
}

impl Mentions {
    /// Counts `mention` and keeps it unless already kept.
    pub(crate) fn push(&mut self, mention: Mention) -> Result<(), InboundError> {
        self.seen += 1;
        if self.seen > MAX_MENTIONS {
            return Err(InboundError::TooManyMentions {
                limit: MAX_MENTIONS,
            });
        }
        if !self.list.contains(&mention) {
            self.list.push(mention);
        }
        Ok(())
    }

    /// Whether `mention` was kept.
    pub(crate) fn contains(&self, mention: &Mention) -> bool {
        self.list.contains(mention)
    }

    /// Drops the kept mentions `keep` refuses (they stay counted).
    pub(crate) fn retain(&mut self, keep: impl FnMut(&Mention) -> bool) {
        self.list.retain(keep);
    }

    pub(crate) fn into_vec(self) -> Vec<Mention> {
        self.list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_inside_strings_and_escapes_do_not_count_as_nesting() {
        let deep_in_string = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(100), "{".repeat(100));
        assert!(check_document(deep_in_string.as_bytes()).is_ok());
        let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(check_document(at_limit.as_bytes()).is_ok());
        let over = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(
            check_document(over.as_bytes()),
            Err(InboundError::TooDeep { limit: MAX_DEPTH })
        );
    }

    /// The nesting depth of `bytes` read the plain way, one byte at a time.
    fn plain_depth(bytes: &[u8]) -> usize {
        let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
        for &b in bytes {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        deepest
    }

    proptest::proptest! {
        #[test]
        fn the_fast_scan_agrees_with_the_plain_one(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["[", "]", "{", "}", "\"", "\\", "\\\"", "a", "bcdefghij", "é", ":", ","]),
                0..200,
            )
        ) {
            let doc: String = parts.concat();
            let deep = plain_depth(doc.as_bytes()) > MAX_DEPTH;
            let verdict = check_document(doc.as_bytes());
            proptest::prop_assert_eq!(verdict.is_err(), deep, "{:?}", doc);
        }
    }

    #[test]
    fn an_oversized_document_is_refused_before_it_is_read() {
        let big = vec![b' '; MAX_EVENT_BYTES + 1];
        assert_eq!(
            check_document(&big),
            Err(InboundError::TooLarge {
                limit: MAX_EVENT_BYTES
            })
        );
    }

    #[test]
    fn mentions_are_kept_once_and_every_one_counts_against_the_bound() {
        let mut mentions = Mentions::default();
        for _ in 0..MAX_MENTIONS {
            mentions.push(Mention::Everyone).expect("room");
        }
        assert!(mentions.contains(&Mention::Everyone));
        assert_eq!(
            mentions.push(Mention::User("one more".into())),
            Err(InboundError::TooManyMentions {
                limit: MAX_MENTIONS
            })
        );
        assert_eq!(mentions.into_vec(), [Mention::Everyone]);
    }
}
