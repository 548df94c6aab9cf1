//! [`Joiner`]: joins a continuation to text the consumer already holds, so nothing is shown
//! twice.
//!
//! A prefill route continues after the held text; a model may still restate its last words,
//! so the longest overlap (at least [`MIN_OVERLAP`] bytes, or the whole held text) between the
//! held text's end and the continuation's start is dropped. A route asked afresh starts its
//! answer again: the held text's last [`ANCHOR`] bytes are looked for in the new answer within
//! [`JOIN_BOUND`] bytes past the held length, and only what follows them is yielded; not found
//! within the bound (or before the stream ends) means the answers cannot be joined.
//! Everything here is bounded by the held text plus the bound: no unbounded buffer.

/// The shortest overlap dropped from a prefill continuation (shorter matches are chance: a
/// space, one letter).
pub(super) const MIN_OVERLAP: usize = 8;
/// The longest overlap looked for in a prefill continuation.
pub(super) const MAX_OVERLAP: usize = 512;
/// How much of the held text's end identifies it in a fresh answer.
pub(super) const ANCHOR: usize = 64;
/// How far past the held length a fresh answer may run before the anchor must have appeared.
pub(super) const JOIN_BOUND: usize = 1024;

/// How a continuation relates to the held text: the ledger's [`JoinedBy`](crate::ledger::JoinedBy),
/// which records it.
pub(crate) use crate::ledger::JoinedBy as JoinMode;

/// What a push gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Joined {
    /// Text to yield (possibly empty: still looking for the join).
    Text(String),
    /// The continuation cannot be joined to the held text.
    Unjoinable,
}

/// Joins one continuation to the held text.
#[derive(Debug)]
pub(crate) struct Joiner {
    held: String,
    mode: JoinMode,
    buf: String,
    searched: usize,
    joined: bool,
}

impl Joiner {
    pub(crate) fn new(held: &str, mode: JoinMode) -> Self {
        Self {
            held: held.to_owned(),
            mode,
            buf: String::new(),
            searched: 0,
            joined: held.is_empty(),
        }
    }

    pub(super) fn mode(&self) -> JoinMode {
        self.mode
    }

    /// Adds `text` from the continuation.
    pub(crate) fn push(&mut self, text: &str) -> Joined {
        if self.joined {
            return Joined::Text(text.to_owned());
        }
        self.buf.push_str(text);
        match self.mode {
            JoinMode::Prefill => {
                if self.buf.len() >= self.held.len().min(MAX_OVERLAP) {
                    Joined::Text(self.join_prefill())
                } else {
                    Joined::Text(String::new())
                }
            }
            JoinMode::Afresh => self.join_afresh(),
        }
    }

    /// The continuation ended.
    pub(crate) fn finish(&mut self) -> Joined {
        if self.joined {
            return Joined::Text(String::new());
        }
        match self.mode {
            JoinMode::Prefill => Joined::Text(self.join_prefill()),
            JoinMode::Afresh => Joined::Unjoinable,
        }
    }

    fn join_prefill(&mut self) -> String {
        self.joined = true;
        let buf = std::mem::take(&mut self.buf);
        let longest = buf.len().min(self.held.len()).min(MAX_OVERLAP);
        let overlap = (1..=longest)
            .rev()
            .filter(|&k| buf.is_char_boundary(k))
            .find(|&k| self.held.ends_with(&buf[..k]))
            .filter(|&k| k >= MIN_OVERLAP || k == self.held.len())
            .unwrap_or(0);
        buf[overlap..].to_owned()
    }

    fn join_afresh(&mut self) -> Joined {
        let mut from = self.held.len().saturating_sub(ANCHOR);
        while !self.held.is_char_boundary(from) {
            from -= 1;
        }
        let anchor = &self.held[from..];
        let mut start = self.searched;
        while !self.buf.is_char_boundary(start) {
            start -= 1;
        }
        if let Some(at) = self.buf[start..].find(anchor) {
            self.joined = true;
            let rest = self.buf[start + at + anchor.len()..].to_owned();
            self.buf = String::new();
            return Joined::Text(rest);
        }
        self.searched = self.buf.len().saturating_sub(anchor.len());
        if self.buf.len() > self.held.len().saturating_add(JOIN_BOUND) {
            return Joined::Unjoinable;
        }
        Joined::Text(String::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(joined: Joined) -> String {
        match joined {
            Joined::Text(t) => t,
            Joined::Unjoinable => panic!("unjoinable"),
        }
    }

    #[test]
    fn a_prefill_continuation_drops_a_restated_overlap_but_not_a_chance_one() {
        let mut j = Joiner::new("The build is green and", JoinMode::Prefill);
        let mut out = text(j.push(" green and the"));
        out += &text(j.push(" tests pass."));
        assert_eq!(out, " the tests pass.");
        let mut chance = Joiner::new("Yes, a", JoinMode::Prefill);
        let out = text(chance.push("a cat")) + &text(chance.finish());
        assert_eq!(out, "a cat");
    }

    #[test]
    fn a_fresh_answer_yields_only_what_follows_the_held_text() {
        let mut j = Joiner::new("Step one: pull. Step two", JoinMode::Afresh);
        let mut out = String::new();
        for piece in ["Step one: ", "pull. Step", " two: build.", " Done."] {
            out += &text(j.push(piece));
        }
        assert_eq!(out, ": build. Done.");
    }

    #[test]
    fn a_fresh_answer_that_never_meets_the_held_text_is_unjoinable_within_the_bound() {
        let mut j = Joiner::new("Alpha beta gamma", JoinMode::Afresh);
        let filler = "z".repeat(JOIN_BOUND);
        assert_eq!(j.push(&filler), Joined::Text(String::new()));
        assert_eq!(j.push("zzzzzzzzzzzzzzzzzzzz"), Joined::Unjoinable);
        let mut short = Joiner::new("Alpha", JoinMode::Afresh);
        assert_eq!(short.push("Beta"), Joined::Text(String::new()));
        assert_eq!(short.finish(), Joined::Unjoinable);
    }

    #[test]
    fn multibyte_text_never_splits_a_char() {
        let mut j = Joiner::new("héllo wörld ünïcode", JoinMode::Prefill);
        let out = text(j.push("ünïcode — ok")) + &text(j.finish());
        assert_eq!(out, " — ok");
        let mut a = Joiner::new("ünï", JoinMode::Afresh);
        assert_eq!(text(a.push("xü")), "");
        assert_eq!(text(a.push("nïcode")), "code");
    }
}
