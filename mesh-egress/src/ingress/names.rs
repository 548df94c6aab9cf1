//! Reading our name in a message: addressing us ("Atlas, …", "hey atlas can you …", "…, atlas?",
//! "@atlas"), or only talking about us ("atlas is down again", "I asked atlas yesterday").

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

/// How a message uses one of our names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameUse {
    /// Not at all.
    Absent,
    /// Addresses us: at the start (after greetings and mentions), after a comma at the end, or
    /// written `@name`.
    Addressing,
    /// Somewhere else: about us, or to us in a way only the judge can tell.
    InPassing,
}

/// Words that, right after a name at the start, make it the subject of a sentence about us
/// ("Atlas is down", "atlas broke the build") rather than a call to us.
const ABOUT: &[&str] = &[
    "is", "isn't", "isnt", "was", "wasn't", "wasnt", "seems", "seemed", "keeps", "kept", "broke",
    "crashed", "says", "said", "has", "hasn't", "had", "got", "gets", "went", "goes", "sucks",
    "rocks", "and", "or", "itself", "now", "still", "just", "never", "always",
];

/// Words that may come before a name that addresses us.
const GREETINGS: &[&str] = &[
    "hey",
    "hi",
    "hello",
    "yo",
    "ok",
    "okay",
    "thanks",
    "thank you",
    "thx",
    "ty",
    "dear",
    "morning",
    "good morning",
    "oi",
    "hiya",
    "please",
    "pls",
];

/// Finds our names in text, compiled once.
pub(crate) struct Names {
    names: Vec<String>,
    anywhere: Option<AhoCorasick>,
}

impl Names {
    pub(crate) fn new<'a>(names: impl Iterator<Item = &'a str>) -> Result<Self, String> {
        let names: Vec<String> = names
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        let anywhere = if names.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&names)
                    .map_err(|e| e.to_string())?,
            )
        };
        Ok(Self { names, anywhere })
    }

    /// How `text` uses our names.
    pub(crate) fn read(&self, text: &str) -> NameUse {
        let Some(anywhere) = &self.anywhere else {
            return NameUse::Absent;
        };
        let mut found = false;
        for hit in anywhere.find_iter(text) {
            let (start, end) = (hit.start(), hit.end());
            let possessive = text[end..].starts_with(['\'', '’']);
            if !word_start(text, start) || !(word_end(text, end) || possessive) {
                continue;
            }
            found = true;
            if text[..start].ends_with('@') {
                return NameUse::Addressing;
            }
        }
        if !found {
            return NameUse::Absent;
        }
        if self.at_start(text) || self.at_end_after_comma(text) {
            NameUse::Addressing
        } else {
            NameUse::InPassing
        }
    }

    /// The name a word-bounded prefix of `text` is, with the rest of the text.
    fn strip_name<'t>(&self, text: &'t str) -> Option<&'t str> {
        self.names.iter().find_map(|name| {
            let head = text.get(..name.len())?;
            let rest = &text[name.len()..];
            (head.eq_ignore_ascii_case(name) && word_end(text, name.len())).then_some(rest)
        })
    }

    fn at_start(&self, text: &str) -> bool {
        let mut rest = skip_lead(text);
        for greeting in GREETINGS {
            if let Some(after) = strip_word(rest, greeting) {
                rest = after.trim_start_matches([' ', ',', '!']);
                break;
            }
        }
        let Some(after) = self.strip_name(rest) else {
            return false;
        };
        let Some(first) = after.chars().next() else {
            return true;
        };
        if !first.is_whitespace() {
            // Punctuation after the name: "Atlas, …", "Atlas: …", "Atlas?".
            return true;
        }
        let next = after
            .trim_start()
            .split(|c: char| !(c.is_alphanumeric() || c == '\''))
            .next()
            .unwrap_or_default();
        !ABOUT.iter().any(|w| w.eq_ignore_ascii_case(next))
    }

    fn at_end_after_comma(&self, text: &str) -> bool {
        let body = text.trim_end_matches(|c: char| {
            c.is_whitespace() || matches!(c, '?' | '!' | '.' | '…' | ')' | ':')
        });
        self.names.iter().any(|name| {
            let Some(start) = body.len().checked_sub(name.len()) else {
                return false;
            };
            let Some(tail) = body.get(start..) else {
                return false;
            };
            if !tail.eq_ignore_ascii_case(name) || !word_start(body, start) {
                return false;
            }
            let before = body[..start].trim_end();
            before.ends_with(',')
                || GREETINGS
                    .iter()
                    .any(|g| ends_with_word(before, g) && before.len() == g.len())
        })
    }
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Names")
            .field("names", &self.names.len())
            .finish()
    }
}

/// Skips whitespace and the mentions a message may start with (`<@U…>`, `<!here>`, `@bob`).
fn skip_lead(text: &str) -> &str {
    let mut rest = text.trim_start();
    loop {
        if rest.starts_with('<')
            && let Some(close) = rest.find('>')
        {
            rest = rest[close + 1..].trim_start_matches([' ', ',', ':']);
            continue;
        }
        if let Some(tail) = rest.strip_prefix('@') {
            let word = tail
                .find(|c: char| c.is_whitespace() || c == ',' || c == ':')
                .unwrap_or(tail.len());
            // "@atlas" is a name written as a mention; only other handles are skipped.
            if word > 0 && tail[word..].starts_with([' ', ',', ':']) {
                rest = tail[word..].trim_start_matches([' ', ',', ':']);
                continue;
            }
        }
        return rest;
    }
}

/// `text` without a leading `word` (ASCII case-insensitive) that ends at a word boundary.
fn strip_word<'t>(text: &'t str, word: &str) -> Option<&'t str> {
    let head = text.get(..word.len())?;
    (head.eq_ignore_ascii_case(word) && word_end(text, word.len())).then(|| &text[word.len()..])
}

fn ends_with_word(text: &str, word: &str) -> bool {
    text.len() >= word.len()
        && text
            .get(text.len() - word.len()..)
            .is_some_and(|t| t.eq_ignore_ascii_case(word))
}

/// Whether a word may start at byte `at`: the text starts there, or the character before is
/// not part of a word.
fn word_start(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'))
}

/// Whether a word may end at byte `at`: the text ends there, or what follows is not part of a
/// word (`atlas-bot` and `atlas's` do not end at `atlas`; `atlas.` and `atlas,` do).
fn word_end(text: &str, at: usize) -> bool {
    let mut after = text[at..].chars();
    match after.next() {
        None => true,
        Some(c) if c.is_alphanumeric() || c == '_' || c == '\'' || c == '’' => false,
        Some('-' | '.') => after.next().is_none_or(|c| !c.is_alphanumeric()),
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::new(["Atlas", "atlas-bot"].into_iter()).expect("compiles")
    }

    #[test]
    fn a_name_at_the_start_addresses_us_unless_it_is_the_subject() {
        let names = names();
        for text in [
            "Atlas, what's the ETA for NW-4471?",
            "atlas: summarise this thread",
            "hey atlas can you check the build",
            "Thanks Atlas!",
            "<@U0BOB> atlas please look at this too",
            "ATLAS?",
            "atlas-bot run the report",
            "what do you think, atlas?",
            "@atlas are you there",
            "thank you atlas",
        ] {
            assert_eq!(names.read(text), NameUse::Addressing, "{text:?}");
        }
        for text in [
            "atlas is down again",
            "Atlas broke the build",
            "I asked atlas yesterday and it said no",
            "atlas's answer was wrong",
            "the atlas team meets at 3",
            "can atlas do this or do we need a person?",
        ] {
            assert_eq!(names.read(text), NameUse::InPassing, "{text:?}");
        }
        for text in ["atlantic crossing", "Atlassian is down", "no names here"] {
            assert_eq!(names.read(text), NameUse::Absent, "{text:?}");
        }
    }
}
