//! Which link targets become live links, and when a label must show its target beside it.
//!
//! A model can be prompt-injected into writing links, so a link is live only when its scheme
//! is on the renderer's allow-list ([`DEFAULT_LINK_SCHEMES`] by default): `javascript:`,
//! `data:`, `file:`, `vbscript:`, `tg://` (Telegram's user links mention anyone), relative,
//! fragment-only and empty targets are shown as text. A live link whose label reads as an
//! address other than its target shows the target beside the label, so
//! `[https://bank.example](https://evil.example)` cannot show one address and open another.

use pulldown_cmark::{Event, LinkType, Tag, TagEnd};

/// The schemes whose targets become live links unless a renderer is configured otherwise.
pub const DEFAULT_LINK_SCHEMES: &[&str] = &["http", "https", "mailto"];

/// A renderer's link allow-list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinkPolicy {
    schemes: &'static [&'static str],
}

impl Default for LinkPolicy {
    fn default() -> Self {
        Self::new(DEFAULT_LINK_SCHEMES)
    }
}

impl LinkPolicy {
    /// Live links for targets with one of `schemes` (compared without case).
    pub(crate) fn new(schemes: &'static [&'static str]) -> Self {
        Self { schemes }
    }

    /// The allowed schemes.
    pub(crate) fn schemes(&self) -> &'static [&'static str] {
        self.schemes
    }

    /// Whether `url` may be a live link: an absolute URL with an allowed scheme (web schemes
    /// also need their `//`, so `https:evil` stays text).
    pub(crate) fn allows(&self, url: &str) -> bool {
        let Some((scheme, rest)) = split_scheme(url) else {
            return false;
        };
        let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
        if web && !rest.starts_with("//") {
            return false;
        }
        !rest.is_empty() && self.schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme))
    }
}

/// A URL's scheme and what follows its `:`, if it has a syntactically valid scheme
/// (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`).
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// The host `s` names, lowercased without a leading `www.`: the part after `scheme://` (or
/// after the `@` of an address), up to a path, query, fragment or port.
fn host_of(s: &str) -> Option<String> {
    let rest = match split_scheme(s) {
        Some((_, rest)) if rest.starts_with("//") => &rest[2..],
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mailto") => rest,
        _ => s,
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let host = host.split(':').next().unwrap_or(host);
    let host = host.trim_end_matches('.').to_lowercase();
    let host = host.strip_prefix("www.").map(str::to_owned).unwrap_or(host);
    (!host.is_empty()).then_some(host)
}

/// Whether a label reads as an address: one token that is a URL with a scheme, or a host
/// name (`bank.example`, `paypal.com/login`, `a@bank.example`) whose last label is letters.
fn label_host(label: &str) -> Option<String> {
    let label = label.trim();
    if label.is_empty() || label.chars().any(char::is_whitespace) {
        return None;
    }
    if let Some((_, rest)) = split_scheme(label)
        && rest.starts_with("//")
    {
        return host_of(label);
    }
    let host = host_of(label)?;
    let labels: Vec<&str> = host.split('.').collect();
    let tld = labels.last().copied().unwrap_or("");
    let hostish = labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_alphanumeric() || c == '-'))
        && tld.chars().count() >= 2
        && tld.chars().all(char::is_alphabetic);
    hostish.then_some(host)
}

/// Whether a live link labelled `label` must show its target `url` beside the label: the label
/// reads as an address on another host.
pub(super) fn label_disguises(label: &str, url: &str) -> bool {
    match label_host(label) {
        Some(shown) => host_of(url).is_none_or(|target| target != shown),
        None => false,
    }
}

/// Whether a link's URL comes from a reference definition rather than from the link itself.
pub(super) fn is_reference(link_type: LinkType) -> bool {
    matches!(
        link_type,
        LinkType::Reference
            | LinkType::ReferenceUnknown
            | LinkType::Collapsed
            | LinkType::CollapsedUnknown
            | LinkType::Shortcut
            | LinkType::ShortcutUnknown
    )
}

/// Collects a link's or image's label events up to its matching end (a loop with a counter:
/// no recursion on the nesting).
pub(super) fn collect_label<'a, I: Iterator<Item = Event<'a>>>(rest: &mut I) -> Vec<Event<'a>> {
    let mut depth = 0usize;
    let mut label = Vec::new();
    for event in rest.by_ref() {
        match &event {
            Event::Start(Tag::Link { .. } | Tag::Image { .. }) => depth += 1,
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            _ => {}
        }
        label.push(event);
    }
    label
}

/// A label's text without markup.
pub(super) fn plain_label(label: &[Event<'_>]) -> String {
    let mut text = String::new();
    for event in label {
        match event {
            Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) | Event::InlineMath(t) => {
                text.push_str(t)
            }
            Event::SoftBreak | Event::HardBreak => text.push(' '),
            _ => {}
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_absolute_targets_are_live() {
        let policy = LinkPolicy::default();
        for live in [
            "https://a.example/x",
            "HTTP://a.example",
            "mailto:a@b.example",
        ] {
            assert!(policy.allows(live), "{live}");
        }
        for text in [
            "javascript:alert(1)",
            "JaVaScRiPt:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
            "vbscript:msgbox",
            "tg://user?id=1",
            "/relative",
            "relative",
            "#fragment",
            "!channel",
            "@U123",
            "",
            "https:evil.example",
            "mailto:",
        ] {
            assert!(!policy.allows(text), "{text}");
        }
        assert!(LinkPolicy::new(&["tg"]).allows("tg://resolve?domain=x"));
    }

    #[test]
    fn a_label_naming_another_host_disguises_its_target() {
        assert!(label_disguises(
            "https://bank.example",
            "https://evil.example"
        ));
        assert!(label_disguises(
            "bank.example",
            "https://evil.example/login"
        ));
        assert!(label_disguises(
            "www.bank.example/login",
            "https://bank.example.evil.example"
        ));
        assert!(label_disguises("a@bank.example", "mailto:a@evil.example"));
        assert!(!label_disguises(
            "https://bank.example",
            "https://www.bank.example/login"
        ));
        assert!(!label_disguises("Bank.Example", "https://bank.example"));
        assert!(!label_disguises("the docs", "https://evil.example"));
        assert!(!label_disguises("v2.0", "https://evil.example"));
    }
}
