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
//! A token matches as a token, case as declared: an ASCII token where neither neighbour is
//! `[A-Za-z0-9_]`, so `NO_REPLY.`, `**NO_REPLY**` and `部署已完成NO_REPLY` hold it and
//! `NO_REPLY_COUNT`, `MY_NO_REPLY_FLAG` and `no_reply` do not (a token in another script needs
//! a neighbour that is not a letter or digit). A token inside code is the code's and is kept:
//! in a fenced block, or in an inline code span with other text (`` `TOKENS=NO_REPLY` ``); a
//! reply that is only a token, in backticks or bold too, is silence. Cutting a token closes the
//! gap it leaves (the spaces beside it, its line when it was alone on one) and touches nothing
//! else: indentation, tables and code stay as written.

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
    ///
    /// # Errors
    ///
    /// [`SilenceTokenError::Empty`] for a blank token, [`SilenceTokenError::NotAWord`] for one
    /// that is not one word of letters, digits and `_`, and [`SilenceTokenError::TooLong`] for
    /// one longer than 64 bytes.
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
    /// # Errors
    ///
    /// As [`new`](Self::new), for an entry that is not a valid token.
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
    ///
    /// # Errors
    ///
    /// As [`parse`](Self::parse), when `MESH_SILENCE_TOKENS` holds an entry that is not a valid
    /// token.
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
        SilenceFilter::new(self.tokens.clone())
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

/// Whether `c` beside `token` makes it part of a longer word: for an ASCII token only
/// `[A-Za-z0-9_]` does (so `部署已完成NO_REPLY` and `готовоNO_REPLY` hold the token, and
/// `MY_NO_REPLY_FLAG` does not); for a token in another script, any letter or digit.
fn joins(token: &str, c: char) -> bool {
    if token.is_ascii() {
        c.is_ascii_alphanumeric() || c == '_'
    } else {
        is_word(c)
    }
}

/// How far past a token inside an unclosed inline code span the filter waits for the span's
/// closing backtick before it reads the backtick as literal text (and the token as a token).
const MAX_SPAN_WAIT: usize = 256;

/// Where a place in the text stands, as CommonMark would read it: in prose, inside an inline
/// code span, or inside a fenced code block. Tracked byte by byte over the text as it passes
/// (every byte it looks at is ASCII), so a fence opened in one delta is known in the next.
#[derive(Clone, Debug, Default)]
struct CodeScan {
    /// The open fence: its character and length.
    fence: Option<(u8, usize)>,
    /// Spaces seen at the start of the current line (`None` once the line has other text).
    indent: Option<usize>,
    /// Inside an inline code span (an odd number of backtick runs on this line so far).
    inline: bool,
    /// The run of backticks or tildes being read, and whether it began its line.
    run: Option<(u8, usize, bool)>,
}

/// What a [`CodeScan`] says about a place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Prose,
    Inline,
    Fenced,
}

impl CodeScan {
    fn new() -> Self {
        Self {
            indent: Some(0),
            ..Self::default()
        }
    }

    fn advance(&mut self, text: &str) {
        for b in text.bytes() {
            if let Some((ch, n, at_start)) = self.run {
                if b == ch {
                    self.run = Some((ch, n + 1, at_start));
                    continue;
                }
                self.end_run();
            }
            match b {
                b'\n' => {
                    self.indent = Some(0);
                    self.inline = false;
                }
                b' ' => {
                    self.indent = self.indent.and_then(|i| (i < 3).then_some(i + 1));
                }
                b'`' | b'~' => {
                    self.run = Some((b, 1, self.indent.is_some()));
                    self.indent = None;
                }
                _ => self.indent = None,
            }
        }
    }

    fn end_run(&mut self) {
        let Some((ch, n, at_start)) = self.run.take() else {
            return;
        };
        if at_start && n >= 3 {
            match self.fence {
                None => self.fence = Some((ch, n)),
                Some((open, len)) if open == ch && n >= len => self.fence = None,
                Some(_) => {}
            }
        } else if ch == b'`' && self.fence.is_none() {
            self.inline = !self.inline;
        }
    }

    /// Where the text scanned so far ends.
    fn place(&self) -> Place {
        let mut here = self.clone();
        here.end_run();
        if here.fence.is_some() {
            Place::Fenced
        } else if here.inline {
            Place::Inline
        } else {
            Place::Prose
        }
    }
}

/// Cuts silence tokens out of a stream of text deltas. A delta's end that could still become a
/// token (`NO_RE` before `PLY`) is held back until the next delta says, so a token split
/// across deltas never reaches the person; everything else passes at once.
///
/// A token inside code is the code's, not the agent's: inside a fenced block, or inside an
/// inline code span with other text, it is kept (a reply showing `MESH_SILENCE_TOKENS=NO_REPLY`
/// shows it). A span that is only the token (`` `NO_REPLY` ``) before anything else was said is
/// the agent answering with it.
#[derive(Debug)]
pub(crate) struct SilenceFilter {
    tokens: Vec<String>,
    pending: String,
    removed: usize,
    first: Option<String>,
    /// Where the start of `pending` stands.
    code: CodeScan,
    /// The character just before `pending` (already shown or cut).
    prev: Option<char>,
    /// Bytes shown so far.
    shown: usize,
    /// Whether anything but blanks and emphasis was shown.
    said: bool,
    /// Where in the shown text each token was cut, so a whole reply's gaps are closed there
    /// and nowhere else.
    cuts: Vec<usize>,
    /// What passed while nothing but blanks and emphasis had (a `` ` `` or `**` before a
    /// token): held until something is said, dropped when the reply ends as only tokens.
    unsaid: String,
}

/// The most blank text held back before anything is said (past it, it is shown).
const MAX_UNSAID: usize = 4096;

impl SilenceFilter {
    /// Forgets everything held and shown, as when the stream begins its answer again: the
    /// filter then reads the new answer as a fresh one.
    pub(crate) fn restart(&mut self) {
        *self = Self::new(std::mem::take(&mut self.tokens));
    }

    fn new(tokens: Vec<String>) -> Self {
        Self {
            tokens,
            pending: String::new(),
            removed: 0,
            first: None,
            code: CodeScan::new(),
            prev: None,
            shown: 0,
            said: false,
            cuts: Vec::new(),
            unsaid: String::new(),
        }
    }

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
                text: close_gaps(shown, &self.cuts),
                count: self.removed,
            },
        }
    }

    /// Removes every token in `pending` that is the agent's, and returns what can be shown:
    /// all of it at the end, else all but a tail that is still undecided (a word that could
    /// still grow into a token, or a token whose code span has not closed yet).
    fn cut(&mut self, end: bool) -> String {
        let text = std::mem::take(&mut self.pending);
        let mut out = String::new();
        let mut scan = self.code.clone();
        // `at`: shown or cut up to here; `scanned`: `scan` stands here; `from`: search here.
        let (mut at, mut scanned, mut from) = (0, 0, 0);
        let mut hold_from = None;
        while let Some((start, len)) = self.next_token(&text, from) {
            let stop = start + len;
            if stop == text.len() && !end {
                // It may yet be `NO_REPLYING`, or a code span may close after it.
                hold_from = Some(start);
                break;
            }
            scan.advance(&text[scanned..start]);
            scanned = start;
            let agents = match scan.place() {
                Place::Prose => true,
                Place::Fenced => false,
                Place::Inline => {
                    let line = &text[stop..];
                    let line = &line[..line.find('\n').unwrap_or(line.len())];
                    let opened = text[..start].chars().next_back().or(self.prev) == Some('`');
                    let only = opened && line.starts_with('`');
                    let said = self.said || !is_blank(&out) || !is_blank(&text[at..start]);
                    if only && !said {
                        true
                    } else if line.contains('`') {
                        false
                    } else if line.len() < text.len() - stop || end || line.len() > MAX_SPAN_WAIT {
                        // The line ended (or the wait ran out) with no closing backtick: the
                        // opening one was literal text, and the token is prose.
                        true
                    } else {
                        hold_from = Some(start);
                        break;
                    }
                }
            };
            from = stop;
            if !agents {
                continue;
            }
            out.push_str(&text[at..start]);
            self.cuts.push(self.shown + out.len());
            self.removed += 1;
            if self.first.is_none() {
                self.first = Some(text[start..stop].to_owned());
            }
            at = stop;
        }
        let keep = match hold_from {
            Some(start) => start,
            None if end => text.len(),
            None => text.len() - self.held_tail(&text, at),
        }
        .max(at);
        self.prev = text[..keep].chars().next_back().or(self.prev);
        out.push_str(&text[at..keep]);
        if scanned <= keep {
            scan.advance(&text[scanned..keep]);
        } else {
            scan = self.code.clone();
            scan.advance(&text[..keep]);
        }
        self.code = scan;
        self.pending = text[keep..].to_owned();
        self.shown += out.len();
        if self.said {
            return out;
        }
        self.unsaid.push_str(&out);
        if !is_blank(&out) || self.unsaid.len() > MAX_UNSAID {
            self.said = true;
            return std::mem::take(&mut self.unsaid);
        }
        if end && self.first.is_none() {
            // No token was cut: the blank text was the reply, and is not ours to drop.
            return std::mem::take(&mut self.unsaid);
        }
        String::new()
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
                        let before = text[..start].chars().next_back().or(self.prev);
                        let after = text[start + token.len()..].chars().next();
                        !before.is_some_and(|c| joins(token, c))
                            && !after.is_some_and(|c| joins(token, c))
                    })
                    .map(|start| (start, token.len()))
            })
            .min_by_key(|(start, _)| *start)
    }

    /// How much of `text[from..]`'s end to hold back: the longest tail that starts where a
    /// token may start and could still become one once more text arrives.
    fn held_tail(&self, text: &str, from: usize) -> usize {
        let rest = &text[from..];
        let floor = rest.len().saturating_sub(MAX_TOKEN);
        rest.char_indices()
            .filter(|&(i, _)| i >= floor)
            .find(|&(i, _)| {
                let tail = &rest[i..];
                let before = text[..from + i].chars().next_back().or(self.prev);
                self.tokens
                    .iter()
                    .any(|t| t.starts_with(tail) && !before.is_some_and(|c| joins(t, c)))
            })
            .map_or(0, |(i, _)| rest.len() - i)
    }
}

/// Whether nothing but blanks, punctuation and Markdown emphasis is left.
fn is_blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || matches!(c, '*' | '_' | '`' | '.' | '!' | '~' | '"' | '\''))
}

/// `text` with the gap each cut token left closed, at the cuts and nowhere else: the spaces
/// beside it, its line when it was the whole line (leaving at most one blank line there), and
/// the blank lines at the reply's start or end it leaves. Indentation, code and every other
/// line stay as written.
fn close_gaps(mut text: String, cuts: &[usize]) -> String {
    let blank = |b: u8| matches!(b, b' ' | b'\t');
    for &cut in cuts.iter().rev() {
        let cut = cut.min(text.len());
        let bytes = text.as_bytes();
        let mut left = cut;
        while left > 0 && blank(bytes[left - 1]) {
            left -= 1;
        }
        let mut right = cut;
        while right < bytes.len() && blank(bytes[right]) {
            right += 1;
        }
        let before = left.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(right).copied();
        let line_start = matches!(before, None | Some(b'\n'));
        let line_end = matches!(after, None | Some(b'\n'));
        if line_start && line_end {
            // The token was its line: the line goes.
            let gone = right + usize::from(after.is_some());
            text.replace_range(left..gone, "");
            let bytes = text.as_bytes();
            let mut first = left;
            while first > 0 && bytes[first - 1] == b'\n' {
                first -= 1;
            }
            let mut last = left;
            while last < bytes.len() && bytes[last] == b'\n' {
                last += 1;
            }
            if last == text.len() {
                // The reply's end: no blank lines or spaces left trailing.
                let kept = text[..first].trim_end().len();
                text.truncate(kept);
            } else if first == 0 {
                text.replace_range(first..last, "");
            } else if last - first > 2 {
                text.replace_range(first..last, "\n\n");
            }
        } else if line_end {
            text.replace_range(left..right, "");
        } else if right > cut {
            text.replace_range(cut..right, "");
        } else if after.is_some_and(|b| b.is_ascii_punctuation()) {
            text.replace_range(left..cut, "");
        }
    }
    text
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
