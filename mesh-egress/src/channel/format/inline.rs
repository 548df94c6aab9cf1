//! Inline text as atoms: words and the breaks between them, escapes, code spans and blocks.

use std::borrow::Cow;
use std::marker::PhantomData;

use super::Dialect;
use super::text::{ends_sentence, is_ascii_break, is_break_space, is_url_start, stands_alone};
use super::walker::Walker;
use crate::channel::atom::{Level, is_boundary};

/// Per byte, whether a word may hold it with no look from the dialect `D`: an ASCII character
/// that is no whitespace, not in [`Dialect::WORD_ESCAPES`] and not in [`Dialect::GUARDED`].
struct PlainBytes<D>(PhantomData<D>);

impl<D: Dialect> PlainBytes<D> {
    const TABLE: [bool; 256] = {
        let mut table = [false; 256];
        let mut b = 0;
        while b < 0x80 {
            table[b] = !is_ascii_break(b as u8)
                && !D::WORD_ESCAPES.contains(b as u8)
                && !D::GUARDED.contains(b as u8);
            b += 1;
        }
        table
    };
}

impl<D: Dialect> Walker<'_, D> {
    /// Ordinary text: words, breaks and escapes.
    pub(super) fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.flush();
        let plain_bytes = &PlainBytes::<D>::TABLE;
        let bytes = text.as_bytes();
        let mut word = 0;
        let mut url = is_url_start(text);
        // Whether the word so far holds only plain bytes (see `text_word`).
        let mut plain = true;
        let mut space: Option<usize> = None;
        let mut at = 0;
        // Byte by byte for ASCII, char by char above it: chat text is mostly ASCII, and an
        // ASCII space between ASCII bytes always stands alone.
        while at < bytes.len() {
            if space.is_none() {
                // Inside a word an ASCII byte that is no whitespace changes nothing here; one
                // the dialect may escape or guard only makes the word need its look.
                loop {
                    while let Some(&b) = bytes.get(at)
                        && plain_bytes[usize::from(b)]
                    {
                        at += 1;
                    }
                    match bytes.get(at) {
                        Some(&b) if b.is_ascii() && !is_ascii_break(b) => {
                            plain = false;
                            at += 1;
                        }
                        _ => break,
                    }
                }
                if at == bytes.len() {
                    break;
                }
            }
            let b = bytes[at];
            let (c, end) = if b.is_ascii() {
                (char::from(b), at + 1)
            } else {
                let c = text[at..].chars().next().unwrap_or('\u{fffd}');
                (c, at + c.len_utf8())
            };
            let alone = |text: &str| {
                (b.is_ascii()
                    && (at == 0 || bytes[at - 1].is_ascii())
                    && bytes.get(end).is_none_or(u8::is_ascii))
                    || stands_alone(text, at, end)
            };
            if is_break_space(c) && alone(text) {
                if space.is_none() {
                    self.text_word(&text[word..at], url, plain);
                    space = Some(at);
                }
                at = end;
                continue;
            }
            if let Some(start) = space.take() {
                let level = self.break_level();
                self.out.space(&text[start..at], level, false);
                word = at;
                url = is_url_start(&text[at..]);
                plain = true;
            }
            // The character is in a word: the first of a new one, one above ASCII, or
            // whitespace that joins a cluster.
            plain = plain && plain_bytes[usize::from(b)];
            if !b.is_ascii() && matches!(c, '。' | '！' | '？') && is_boundary(text, end) {
                // CJK needs no space after a sentence: the break is empty.
                self.text_word(&text[word..end], url, false);
                self.out.space("", Level::Sentence, false);
                word = end;
                plain = true;
            }
            at = end;
        }
        match space {
            Some(start) => {
                let level = self.break_level();
                self.out.space(&text[start..], level, false);
            }
            None => self.text_word(&text[word..], url, plain),
        }
    }

    /// A word of ordinary text; `plain`: every byte of it is in [`PlainBytes`]. Such a word
    /// needs nothing from the dialect (most of chat text): unless it is a URL, one whose first
    /// character the dialect may escape at a line's start, or the digits a line starts with,
    /// it is written as it is, unmeasured.
    #[inline(always)]
    fn text_word(&mut self, word: &str, url: bool, plain: bool) {
        let bytes = word.as_bytes();
        if plain
            && !url
            && let Some(&first) = bytes.first()
            && !D::TEXT_ESCAPES.contains(first)
            && (self.lines.leading_digits.is_none() || !first.is_ascii_digit())
        {
            // What `word_end` notes, from bytes.
            self.lines.last = match bytes {
                [.., before, last] => [char::from(*before), char::from(*last)],
                _ => [self.lines.last[1], char::from(first)],
            };
            self.out.ascii_word(word);
            self.wrote();
            return;
        }
        self.looked_word(word, url);
    }

    /// A word of ordinary text that needs the dialect's look. Out of line: the plain word's
    /// step in [`text_word`](Self::text_word) is inlined into the text walk.
    #[inline(never)]
    fn looked_word(&mut self, word: &str, url: bool) {
        self.word_end(word);
        self.word(word, url);
    }

    /// Notes the last two characters of a word that ends, for sentence ends (a word of one
    /// character keeps the one before it).
    fn word_end(&mut self, word: &str) {
        let mut tail = word.chars().rev();
        match (tail.next(), tail.next()) {
            (Some(last), Some(before)) => self.lines.last = [before, last],
            (Some(last), None) => self.lines.last = [self.lines.last[1], last],
            _ => {}
        }
    }

    /// The strength of a break after the text so far.
    fn break_level(&self) -> Level {
        if ends_sentence(self.lines.last) {
            Level::Sentence
        } else {
            Level::Word
        }
    }

    /// A word (no whitespace breaks), set apart by the dialect's
    /// [`guard_word`](Dialect::guard_word) if it holds a [`GUARDED`](Dialect::GUARDED)
    /// character, escaped as text or as a URL.
    pub(super) fn word(&mut self, word: &str, url: bool) {
        if word.is_empty() {
            return;
        }
        let d = self.d;
        let word = if word.bytes().any(|b| D::GUARDED.contains(b)) {
            d.guard_word(word)
        } else {
            Cow::Borrowed(word)
        };
        // The digits the line starts with, so far: a `.` or `)` after one to nine of them
        // would make the line an ordered list item. The parser may hand the digits and the
        // `.` over as separate texts (`1\. not a list`), so the count spans words.
        let mut digits = if url { None } else { self.lines.leading_digits };
        let escapes = if url {
            &D::CODE_ESCAPES
        } else {
            &D::TEXT_ESCAPES
        };
        let bytes = word.as_bytes();
        let mut run = 0;
        let mut at = 0;
        while at < bytes.len() {
            if digits.is_none() {
                // An ASCII character outside the dialect's escape set needs no look, but for a
                // list marker's count (no dialect escapes an ASCII letter or digit).
                while let Some(&b) = bytes.get(at)
                    && b.is_ascii()
                    && !escapes.contains(b)
                {
                    at += 1;
                }
                if at == bytes.len() {
                    break;
                }
            }
            let b = bytes[at];
            let c = if b.is_ascii() {
                char::from(b)
            } else {
                word[at..].chars().next().unwrap_or('\u{fffd}')
            };
            let marker = match digits {
                Some(n) if c.is_ascii_digit() => {
                    digits = Some(n + 1);
                    false
                }
                Some(n) => {
                    digits = None;
                    (1..=9).contains(&n) && matches!(c, '.' | ')')
                }
                None => false,
            };
            let escape = if url {
                d.code_escape(c)
            } else if marker {
                d.list_number_escape(c)
            } else {
                d.escape(c, self.lines.at_line_start && at == 0)
            };
            if let Some(escaped) = escape {
                self.out.graphemes(&word[run..at]);
                self.out.escape(escaped, c);
                run = at + c.len_utf8();
            }
            at += c.len_utf8();
        }
        self.out.graphemes(&word[run..]);
        self.wrote();
        self.lines.leading_digits = digits;
    }

    /// Code text: every character kept; spaces are breaks that stay in the part. Walked by
    /// bytes: an ASCII byte that is neither a space nor in the dialect's code escapes only
    /// moves on, and a character above ASCII is decoded only to ask for its escape.
    fn code_text(&mut self, code: &str, inline: bool) {
        let d = self.d;
        let bytes = code.as_bytes();
        let mut run = 0;
        // Whether `code[run..at]` is ASCII: then it is written unmeasured.
        let mut ascii = true;
        let mut space: Option<usize> = None;
        let mut leading = !inline;
        let mut at = 0;
        while at < bytes.len() {
            let b = bytes[at];
            if b == b' ' || b == b'\t' {
                // After an ASCII space an ASCII byte (or the end) always starts a new cluster.
                let next_ascii = bytes.get(at + 1).is_none_or(u8::is_ascii);
                if next_ascii || is_boundary(code, at + 1) {
                    if !leading && space.is_none() {
                        self.out.code_graphemes(&code[run..at], ascii);
                        space = Some(at);
                    }
                    at += 1;
                    continue;
                }
            }
            leading = false;
            if let Some(start) = space.take() {
                self.out.space(&code[start..at], Level::Word, !inline);
                run = at;
                ascii = true;
            }
            if b.is_ascii() {
                if D::CODE_ESCAPES.contains(b)
                    && let Some(escaped) = d.code_escape(char::from(b))
                {
                    self.out.code_graphemes(&code[run..at], ascii);
                    self.out.escape(escaped, char::from(b));
                    run = at + 1;
                    ascii = true;
                }
                at += 1;
                continue;
            }
            let c = code[at..].chars().next().unwrap_or('\u{fffd}');
            if let Some(escaped) = d.code_escape(c) {
                self.out.code_graphemes(&code[run..at], ascii);
                self.out.escape(escaped, c);
                run = at + c.len_utf8();
                ascii = true;
            } else {
                ascii = false;
            }
            at += c.len_utf8();
        }
        match space {
            Some(start) => self.out.space(&code[start..], Level::Word, !inline),
            None => self.out.code_graphemes(&code[run..], ascii),
        }
        self.wrote();
    }

    /// Inline code.
    pub(super) fn code_span(&mut self, code: &str) {
        self.flush();
        let code = self.d.code_text(code, true);
        let id = self.d.code_span(&code).map(|pair| self.open(pair));
        self.code_text(&code, true);
        if let Some(id) = id {
            self.out.close(id);
        }
    }

    /// A code block (or a table drawn as one).
    pub(super) fn code_block(&mut self, lang: &str, body: &str) {
        self.flush();
        let prefix = self.line_prefix(false);
        let body = self.d.code_text(body, false);
        let body = body.strip_suffix('\n').unwrap_or(&body);
        let id = self.d.fence(lang, &prefix).map(|pair| self.open(pair));
        if id.is_some() {
            self.out.prefix(&prefix);
        }
        // Lines found by a byte loop: code lines are short, and a search call per line cost
        // more than the line.
        let mut rest = body;
        loop {
            let end = rest.bytes().position(|b| b == b'\n').unwrap_or(rest.len());
            self.code_text(&rest[..end], false);
            if end == rest.len() {
                break;
            }
            self.out.space("\n", Level::Line, false);
            self.out.prefix(&prefix);
            rest = &rest[end + 1..];
        }
        if let Some(id) = id {
            self.out.close(id);
        }
        self.wrote();
        self.owe(Level::Paragraph);
    }
}
