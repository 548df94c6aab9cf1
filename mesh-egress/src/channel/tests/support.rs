//! Shared checks: the invariants every chunking must keep.

use crate::channel::atom::{Atoms, is_grapheme_boundary};
use crate::channel::chunk::{Limits, Part};
use crate::channel::discord::Discord;
use crate::channel::format::{self, Plain};
use crate::channel::slack::Slack;
use crate::channel::telegram::Telegram;
use crate::render::RenderError;

/// A channel under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ch {
    Plain,
    Slack,
    Discord,
    Telegram,
}

pub(super) const ALL: [Ch; 4] = [Ch::Plain, Ch::Slack, Ch::Discord, Ch::Telegram];

impl Ch {
    pub(super) fn limits(self, units: usize) -> Limits {
        Limits {
            units: Some(units),
            entities: (self == Ch::Telegram).then_some(100),
        }
    }

    /// The rendering before chunking: the atoms every part's body indexes into.
    pub(super) fn atoms(self, src: &str) -> Result<Atoms, RenderError> {
        match self {
            Ch::Plain => format::atoms(&Plain, src),
            Ch::Slack => format::atoms(&Slack, src),
            Ch::Discord => format::atoms(&Discord, src),
            Ch::Telegram => format::atoms(&Telegram, src),
        }
    }

    /// The rendered text before chunking.
    pub(super) fn full(self, src: &str) -> Result<String, RenderError> {
        Ok(self.atoms(src)?.text)
    }

    pub(super) fn parts(self, src: &str, units: usize) -> Result<Vec<Part>, RenderError> {
        self.parts_with(src, self.limits(units))
    }

    pub(super) fn parts_with(self, src: &str, limits: Limits) -> Result<Vec<Part>, RenderError> {
        match self {
            Ch::Plain => format::render_parts(&Plain, src, limits),
            Ch::Slack => format::render_parts(&Slack, src, limits),
            Ch::Discord => format::render_parts(&Discord, src, limits),
            Ch::Telegram => format::render_parts(&Telegram, src, limits),
        }
    }

    pub(super) fn texts(self, src: &str, units: usize) -> Vec<String> {
        match self.parts(src, units) {
            Ok(parts) => parts.into_iter().map(|p| p.text).collect(),
            Err(e) => panic!("{self:?} failed to render {src:?} at {units}: {e}"),
        }
    }

    /// A part's length in this channel's unit (Telegram: after entity parsing).
    pub(super) fn measure(self, part: &str) -> usize {
        match self {
            Ch::Telegram => telegram_visible(part).encode_utf16().count(),
            _ => part.chars().count(),
        }
    }
}

/// Telegram's view of an HTML part: tags removed, entities decoded.
pub(super) fn telegram_visible(part: &str) -> String {
    let mut out = String::new();
    let mut rest = part;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let end = rest.find('>').expect("an unclosed tag");
            rest = &rest[end + 1..];
        } else if c == '&' {
            let end = rest.find(';').expect("an unterminated entity");
            out.push(match &rest[..=end] {
                "&lt;" => '<',
                "&gt;" => '>',
                "&amp;" => '&',
                "&quot;" => '"',
                other => panic!("unknown entity {other}"),
            });
            rest = &rest[end + 1..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Telegram's opening tags in a part, checking that tags nest and close within the part.
pub(super) fn telegram_entities(part: &str) -> usize {
    let mut stack: Vec<String> = Vec::new();
    let mut count = 0;
    let mut rest = part;
    while let Some(start) = rest.find('<') {
        let end = start + rest[start..].find('>').expect("an unclosed tag");
        let tag = &rest[start + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name),
                "misnested tag in {part:?}"
            );
        } else {
            let name = tag.split(' ').next().unwrap_or("").to_owned();
            // `<pre><code class=…>` is one entity, a code block with a language.
            if !(name == "code" && rest[..start].ends_with("<pre>")) {
                count += 1;
            }
            stack.push(name);
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed tags {stack:?} in {part:?}");
    count
}

/// Whether anything visible lies in `range` of the rendering.
fn drops_visible(atoms: &Atoms, range: std::ops::Range<usize>) -> bool {
    atoms.atoms.iter().any(|a| {
        a.start() >= range.start
            && a.end() <= range.end
            && a.end() > a.start()
            && atoms.is_visible(a)
    })
}

/// Every invariant of a chunking of `src` at `limit`:
/// parts fit (units and entities); no part starts or ends inside a grapheme cluster; fences and
/// tags are balanced in every part; parts are in order, each part's body is a slice of the
/// rendering, and nothing visible is left out between or after them (only whitespace at a cut
/// and markup); so joined, the parts are the rendering plus reopening markers.
pub(super) fn check(ch: Ch, src: &str, limit: usize) -> Result<Vec<Part>, RenderError> {
    let atoms = ch.atoms(src)?;
    let full = &atoms.text;
    let parts = ch.parts(src, limit)?;
    assert!(!parts.is_empty(), "no parts for {src:?}");
    assert!(parts.len() <= full.len() + 1, "more parts than bytes");
    let mut at = 0;
    for (n, part) in parts.iter().enumerate() {
        let text = &part.text;
        assert!(!text.trim().is_empty(), "blank part {n} of {src:?}");
        let len = ch.measure(text);
        assert!(len <= limit, "{ch:?} part {n} is {len} > {limit}: {text:?}");
        match ch {
            Ch::Telegram => assert!(telegram_entities(text) <= 100),
            Ch::Slack | Ch::Discord => assert_eq!(
                text.matches("```").count() % 2,
                0,
                "unbalanced fence in {ch:?} part {n}: {text:?}"
            ),
            Ch::Plain => {}
        }
        let body = part.body.clone();
        assert_eq!(
            &text[part.head..text.len() - part.tail],
            &full[body.clone()]
        );
        assert!(
            is_grapheme_boundary(full, body.start),
            "part {n} starts in a cluster"
        );
        assert!(
            is_grapheme_boundary(full, body.end),
            "part {n} ends in a cluster"
        );
        assert!(body.start >= at, "parts out of order");
        assert!(
            !drops_visible(&atoms, at..body.start),
            "{ch:?} dropped {:?} before part {n}",
            &full[at..body.start]
        );
        at = body.end;
    }
    assert!(
        !drops_visible(&atoms, at..full.len()),
        "{ch:?} dropped the end {:?}",
        &full[at..]
    );
    Ok(parts)
}
