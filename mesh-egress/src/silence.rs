//! [`SilenceTokens`]: an agent's control tokens, the words it answers with when it chooses to
//! say nothing (`NO_REPLY`, `HEARTBEAT_OK`).
//!
//! Agent runtimes let the model decide to stay quiet by answering with a token the runtime
//! recognises; a runtime that matches the token loosely ships it to the person. OpenClaw posted
//! `NO_REPLY` after real answers and into Telegram groups (openclaw/openclaw#30916,
//! librefang/librefang#2649). Here the choice is typed: a reply that is only a declared token is
//! [`Reply::Silence`](crate::Reply::Silence), and a token appended to or embedded in an answer
//! is cut out before rendering, also in a streamed answer whose token arrives split across
//! deltas. None is declared by default.
//!
//! A token matches as a whole word, case as declared: `NO_REPLY` in `NO_REPLY.` or
//! `**NO_REPLY**`, never inside `NO_REPLY_COUNT` or `no_reply`.

use std::fmt;

/// The environment variable `turn` (and any application that wants it) reads the tokens from:
/// comma-separated, blanks around each ignored.
pub(crate) const ENV_SILENCE_TOKENS: &str = "MESH_SILENCE_TOKENS";

/// The longest token accepted, in bytes: a control token is a word, and the stream filter
/// holds back at most this much.
const MAX_TOKEN: usize = 64;

/// An application's silence tokens (see the [module docs](self)). Cheap to clone.
///
/// Declared once on the [`DegradationPolicy`](crate::degrade::DegradationPolicy); the
/// boundary applies them to every reply, whole or streamed, before anything is rendered.
///
/// ```
/// use mesh_egress::boundary::resolve;
/// use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
/// use mesh_egress::silence::SilenceTokens;
/// use mesh_egress::{AgentMessage, Attribution};
/// let tokens = SilenceTokens::new(["NO_REPLY", "HEARTBEAT_OK"]).expect("valid tokens");
/// let policy = DegradationPolicy::default().with_silence_tokens(tokens);
/// let said = |text: &str| {
///     let message = AgentMessage::new(text, Attribution::new("digest", "c1", "r1"));
///     resolve(Mode::Proactive, &policy, Ok(message))
/// };
/// assert!(matches!(said("NO_REPLY"), Reply::Silence));
/// let cut = said("The deploy finished at 09:12.\n\nNO_REPLY");
/// assert_eq!(cut.message().map(|m| m.body().as_str()), Some("The deploy finished at 09:12."));
/// assert_eq!(said("All green.").message().map(|m| m.body().as_str()), Some("All green."));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SilenceTokens {
    tokens: Vec<String>,
}

/// A token that cannot be a control token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SilenceTokenError {
    /// Empty, or only blanks.
    #[error("a silence token is empty")]
    Empty,
    /// It holds a blank or a character that is not a letter, a digit or `_`, so it could not be
    /// matched as one word.
    #[error("the silence token {0:?} is not one word of letters, digits and `_`")]
    NotAWord(String),
    /// Longer than 64 bytes.
    #[error("the silence token {0:?} is longer than 64 bytes")]
    TooLong(String),
}

/// What [`SilenceTokens::apply`] did to a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Silenced {
    /// No token in it.
    Untouched,
    /// The reply is only a token (with blanks, punctuation or emphasis around it): the agent
    /// chose to say nothing.
    Silence {
        /// The token it answered with.
        token: String,
    },
    /// Tokens were cut out of an answer; `text` is what is left to send.
    Removed {
        /// The answer without them.
        text: String,
        /// How many were cut.
        count: usize,
    },
}

impl SilenceTokens {
    /// No tokens: every reply is an answer (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// The tokens given; each must be one word of letters, digits and `_`, up to 64 bytes.
    pub fn new<I, S>(tokens: I) -> Result<Self, SilenceTokenError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut out = Vec::new();
        for token in tokens {
            let token: String = token.into();
            let token = token.trim();
            if token.is_empty() {
                return Err(SilenceTokenError::Empty);
            }
            if !token.chars().all(is_word) {
                return Err(SilenceTokenError::NotAWord(token.to_owned()));
            }
            if token.len() > MAX_TOKEN {
                return Err(SilenceTokenError::TooLong(token.to_owned()));
            }
            if !out.iter().any(|t| t == token) {
                out.push(token.to_owned());
            }
        }
        Ok(Self { tokens: out })
    }

    /// The tokens in `value`, comma-separated (how `MESH_SILENCE_TOKENS` is written); empty
    /// entries are skipped, so an unset or blank value declares none.
    ///
    /// ```
    /// use mesh_egress::silence::SilenceTokens;
    /// let tokens = SilenceTokens::parse("NO_REPLY, HEARTBEAT_OK,").expect("valid");
    /// assert_eq!(tokens.tokens(), ["NO_REPLY", "HEARTBEAT_OK"]);
    /// assert!(SilenceTokens::parse("").expect("none").is_empty());
    /// assert!(SilenceTokens::parse("NO REPLY").is_err());
    /// ```
    pub fn parse(value: &str) -> Result<Self, SilenceTokenError> {
        Self::new(value.split(',').filter(|t| !t.trim().is_empty()))
    }

    /// The tokens declared by `MESH_SILENCE_TOKENS` in the process environment (none when it
    /// is unset).
    pub fn from_env() -> Result<Self, SilenceTokenError> {
        Self::parse(&std::env::var(ENV_SILENCE_TOKENS).unwrap_or_default())
    }

    /// The tokens, in the order declared.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Whether none is declared.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// What to do with a whole reply: send it untouched, stay silent, or send it without its
    /// tokens. With no tokens declared this does no work.
    pub(crate) fn apply(&self, body: &str) -> Silenced {
        // The healthy path: one substring search per token, no copy.
        if !self.tokens.iter().any(|t| body.contains(t.as_str())) {
            return Silenced::Untouched;
        }
        let mut filter = self.filter();
        let mut text = filter.push(body);
        text.push_str(&filter.finish());
        filter.verdict(text)
    }

    /// A filter for a streamed reply's text deltas (see [`SilenceFilter`]).
    pub(crate) fn filter(&self) -> SilenceFilter {
        SilenceFilter {
            tokens: self.tokens.clone(),
            pending: String::new(),
            removed: 0,
            first: None,
        }
    }
}

impl fmt::Debug for SilenceTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.tokens).finish()
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Cuts silence tokens out of a stream of text deltas. A delta's end that could still become a
/// token (`NO_RE` before `PLY`) is held back until the next delta says, so a token split
/// across deltas never reaches the person; everything else passes at once.
#[derive(Debug)]
pub(crate) struct SilenceFilter {
    tokens: Vec<String>,
    pending: String,
    removed: usize,
    first: Option<String>,
}

impl SilenceFilter {
    /// Takes the next delta; returns the text that may be shown now.
    pub(crate) fn push(&mut self, delta: &str) -> String {
        if self.tokens.is_empty() {
            return delta.to_owned();
        }
        self.pending.push_str(delta);
        self.cut(false)
    }

    /// The stream ended: the rest, without tokens.
    pub(crate) fn finish(&mut self) -> String {
        if self.tokens.is_empty() {
            return String::new();
        }
        self.cut(true)
    }

    /// How many tokens were cut so far.
    #[cfg(any(test, feature = "markdown"))]
    pub(crate) fn removed(&self) -> usize {
        self.removed
    }

    /// The first token cut, if any.
    #[cfg(feature = "markdown")]
    pub(crate) fn first_token(&self) -> Option<&str> {
        self.first.as_deref()
    }

    /// The verdict on a reply whose shown text (everything pushed and finished) is `shown`.
    pub(crate) fn verdict(&self, shown: String) -> Silenced {
        match &self.first {
            None => Silenced::Untouched,
            Some(token) if is_blank(&shown) => Silenced::Silence {
                token: token.clone(),
            },
            Some(_) => Silenced::Removed {
                text: tidy(&shown),
                count: self.removed,
            },
        }
    }

    /// Removes every whole token in `pending`, and returns what can be shown: all of it at the
    /// end, else all but a tail that could still grow into a token (or into a longer word).
    fn cut(&mut self, end: bool) -> String {
        let mut out = String::new();
        let mut at = 0;
        let text = std::mem::take(&mut self.pending);
        while let Some((start, len)) = self.next_token(&text, at) {
            let stop = start + len;
            if stop == text.len() && !end {
                // It may yet be `NO_REPLYING`: decide when more arrives.
                break;
            }
            out.push_str(&text[at..start]);
            self.removed += 1;
            if self.first.is_none() {
                self.first = Some(text[start..stop].to_owned());
            }
            at = stop;
        }
        let rest = &text[at..];
        let hold = if end { 0 } else { self.held_tail(rest) };
        out.push_str(&rest[..rest.len() - hold]);
        self.pending = rest[rest.len() - hold..].to_owned();
        out
    }

    /// Where the first whole token at or after `from` starts, and its length.
    fn next_token(&self, text: &str, from: usize) -> Option<(usize, usize)> {
        self.tokens
            .iter()
            .filter_map(|token| {
                text[from..]
                    .match_indices(token.as_str())
                    .map(|(i, _)| from + i)
                    .find(|&start| {
                        let before = text[..start].chars().next_back();
                        let after = text[start + token.len()..].chars().next();
                        !before.is_some_and(is_word) && !after.is_some_and(is_word)
                    })
                    .map(|start| (start, token.len()))
            })
            .min_by_key(|(start, _)| *start)
    }

    /// How much of `rest`'s end to hold back: the last word, when it could still become (or
    /// is) a token once more text arrives.
    fn held_tail(&self, rest: &str) -> usize {
        let word = rest
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_word(*c))
            .last()
            .map_or(rest.len(), |(i, _)| i);
        let tail = &rest[word..];
        if tail.is_empty() {
            return 0;
        }
        let could_be = self.tokens.iter().any(|t| t.starts_with(tail));
        if could_be { tail.len() } else { 0 }
    }
}

/// Whether nothing but blanks, punctuation and Markdown emphasis is left.
fn is_blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || matches!(c, '*' | '_' | '`' | '.' | '!' | '~' | '"' | '\''))
}

/// `text` with the blank lines and spaces a cut token leaves behind tidied.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut newlines = 0;
    for line in text.trim().split('\n') {
        let line = line.trim_end();
        let collapsed: String = {
            let mut s = String::with_capacity(line.len());
            let mut space = false;
            for c in line.chars() {
                if c == ' ' && space {
                    continue;
                }
                space = c == ' ';
                s.push(c);
            }
            s
        };
        if collapsed.trim().is_empty() {
            newlines += 1;
            if newlines > 1 {
                continue;
            }
        } else {
            newlines = 0;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&collapsed);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> SilenceTokens {
        SilenceTokens::new(["NO_REPLY", "HEARTBEAT_OK"]).expect("valid")
    }

    #[test]
    fn a_reply_of_only_a_token_is_silence_whatever_wraps_it() {
        for body in [
            "NO_REPLY",
            "  HEARTBEAT_OK\n",
            "**NO_REPLY**",
            "`NO_REPLY`.",
            "NO_REPLY NO_REPLY",
        ] {
            assert!(
                matches!(tokens().apply(body), Silenced::Silence { .. }),
                "{body:?}"
            );
        }
    }

    #[test]
    fn a_token_in_an_answer_is_cut_and_a_longer_word_is_not_a_token() {
        assert_eq!(
            tokens().apply("Done, the report is sent. NO_REPLY"),
            Silenced::Removed {
                text: "Done, the report is sent.".into(),
                count: 1
            }
        );
        assert_eq!(
            tokens().apply("First.\n\nNO_REPLY\n\nSecond."),
            Silenced::Removed {
                text: "First.\n\nSecond.".into(),
                count: 1
            }
        );
        for untouched in ["NO_REPLY_COUNT is 3", "no_reply", "xNO_REPLY", "All green."] {
            assert_eq!(
                tokens().apply(untouched),
                Silenced::Untouched,
                "{untouched}"
            );
        }
        assert_eq!(SilenceTokens::none().apply("NO_REPLY"), Silenced::Untouched);
    }

    #[test]
    fn a_token_split_across_deltas_never_passes_the_filter() {
        for split in ["NO_", "NO_REP", "NO_REPLY"] {
            let mut filter = tokens().filter();
            let mut shown = filter.push("The answer is 42. ");
            shown.push_str(&filter.push(split));
            assert!(!shown.contains("NO_"), "{split}: {shown:?}");
            shown.push_str(&filter.push(&"NO_REPLY"[split.len()..]));
            shown.push_str(&filter.finish());
            assert_eq!(shown.trim_end(), "The answer is 42.", "{split}");
            assert_eq!(filter.removed(), 1);
        }
        // A word that only starts like a token is held, then shown whole.
        let mut filter = tokens().filter();
        assert_eq!(filter.push("NO"), "");
        assert_eq!(filter.push("NE of that"), "NONE of that");
        assert_eq!(filter.finish(), "");
    }

    #[test]
    fn bad_tokens_are_typed_errors() {
        assert_eq!(SilenceTokens::new([" "]), Err(SilenceTokenError::Empty));
        assert!(matches!(
            SilenceTokens::new(["NO REPLY"]),
            Err(SilenceTokenError::NotAWord(_))
        ));
        assert!(matches!(
            SilenceTokens::new(["X".repeat(65)]),
            Err(SilenceTokenError::TooLong(_))
        ));
    }
}
