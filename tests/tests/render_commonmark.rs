//! Every example of the CommonMark 0.31.2 spec (`data/commonmark`, CC-BY-SA 4.0, see its
//! README) through every renderer: the words a reader sees in the example's reference HTML are
//! all on the surface, in order, and each surface's output is valid for it.
//!
//! Words are the runs of letters and digits of the visible text: the reference HTML with its
//! tags removed (an image's `alt` kept) and its entities decoded; on plain text the output
//! itself; on Slack the mrkdwn as Slack shows it (a link's label, entities decoded); on
//! Discord the output read back as CommonMark, which Discord's Markdown follows; on Telegram
//! the HTML's text. The surface may add words (a dead link's target beside its label, raw
//! HTML shown as text), never lose or reorder one. Characters a surface uses as inline markers
//! and cannot escape (Slack's `*`, `_`, `~`, `` ` ``) are left out of the visible text on both
//! sides, so intra-word emphasis compares as the words it joins.
//!
//! Where the hardening rules say otherwise, they win, and the comparison follows them:
//!
//! - control characters (C0 but newline and tab, DEL, C1, bidi controls) never reach a
//!   surface: they are removed from the reference's text too;
//! - raw HTML is shown as text, never interpreted: the reference's words are still required,
//!   the tag's own words are extra;
//! - a link whose target has a forbidden scheme (or none) is shown dead, its label with the
//!   target as text beside it: the label's words are required, the target's are extra.
//!
//! The counts reached per surface are the floor: the test fails when a surface passes fewer.

use mesh_egress::Markdown;
use mesh_egress::channel::{
    DiscordMarkdown, PlainText, Render, RenderError, SlackMrkdwn, TelegramHtml,
};
use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use serde_json::Value;

const SPEC: &str = include_str!("data/commonmark/spec-0.31.2.json");

/// Examples every surface must pass, of the spec's 652.
const FLOOR: [(Surface, usize); 4] = [
    (Surface::Plain, 652),
    (Surface::Slack, 652),
    (Surface::Discord, 652),
    (Surface::Telegram, 652),
];

struct Example {
    number: u64,
    section: String,
    markdown: String,
    html: String,
}

fn examples() -> Vec<Example> {
    let spec: Value = serde_json::from_str(SPEC).expect("the spec examples are JSON");
    spec.as_array()
        .expect("a list of examples")
        .iter()
        .map(|e| {
            let text = |key: &str| {
                // The spec writes a tab as `→`.
                e[key].as_str().expect("a string field").replace('→', "\t")
            };
            Example {
                number: e["number"].as_u64().expect("a number"),
                section: text("section"),
                markdown: text("markdown"),
                html: text("html"),
            }
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Surface {
    Plain,
    Slack,
    Discord,
    Telegram,
}

impl Surface {
    fn renderer(self) -> Box<dyn Render> {
        match self {
            Self::Plain => Box::new(PlainText::new()),
            Self::Slack => Box::new(SlackMrkdwn::new()),
            Self::Discord => Box::new(DiscordMarkdown::new()),
            Self::Telegram => Box::new(TelegramHtml::new()),
        }
    }

    /// Inline markers the surface shows as written when they do not mark anything.
    fn transparent(self, c: char) -> bool {
        match self {
            Self::Slack => matches!(c, '*' | '_' | '~' | '`' | '\u{200b}'),
            _ => c == '\u{200b}',
        }
    }

    /// The text a reader of the surface sees in `part`, or why `part` is not valid there.
    fn visible(self, part: &str, source: &str) -> Result<String, String> {
        if let Some(c) = part.chars().find(|&c| is_control(c)) {
            return Err(format!("control character {c:?} reached the surface"));
        }
        match self {
            Self::Plain => Ok(part.to_owned()),
            Self::Slack => slack_text(part),
            Self::Discord => discord_text(part, source),
            Self::Telegram => telegram_text(part),
        }
    }
}

/// The characters the hardening rules keep off every surface.
fn is_control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The runs of letters and digits in `text`, leaving out `transparent` characters.
fn words(text: &str, transparent: impl Fn(char) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars().filter(|&c| !transparent(c) && !is_control(c)) {
        if c.is_alphanumeric() {
            word.push(c);
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The first word of `wanted` that `got` does not have in order, if any.
fn first_missing<'w>(wanted: &'w [String], got: &[String]) -> Option<&'w str> {
    let mut got = got.iter();
    wanted
        .iter()
        .find(|w| !got.any(|g| g == *w))
        .map(String::as_str)
}

/// `&name;`, `&#n;` and `&#xh;` decoded, for the four names HTML output uses. `strict`
/// (Telegram, which accepts only those): anything else after a `&` is an error; otherwise it
/// stays as written (raw HTML passed through the reference).
fn decode_entities(text: &str, strict: bool) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let decoded = tail.find(';').filter(|&e| e <= 32).and_then(|end| {
            let name = &tail[1..end];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                _ => {
                    let number = match name.strip_prefix("#x").or(name.strip_prefix("#X")) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => name.strip_prefix('#').and_then(|d| d.parse().ok()),
                    };
                    number.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &tail[len..];
            }
            None if strict => {
                return Err(format!(
                    "a & that is no entity in {:?}",
                    &tail[..tail.len().min(20)]
                ));
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// One tag of an HTML text: its name (lowercase, `/` first when closing), its attributes.
struct HtmlTag {
    name: String,
    attributes: Vec<(String, String)>,
    self_closing: bool,
}

/// Splits `html` into text and tags, by a loop; comments and declarations are skipped.
/// `strict` (Telegram): a tag or comment left open is an error; otherwise it hides the rest,
/// as in a browser (raw HTML passed through the reference can be cut short).
fn html_pieces(html: &str, strict: bool) -> Result<Vec<Result<String, HtmlTag>>, String> {
    let mut pieces = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        pieces.push(Ok(rest[..at].to_owned()));
        let tail = &rest[at..];
        if let Some(comment) = tail.strip_prefix("<!--") {
            match comment.find("-->") {
                Some(end) => rest = &comment[end + 3..],
                None if strict => return Err("an unclosed comment".into()),
                None => return Ok(pieces),
            }
            continue;
        }
        // The tag ends at the first `>` outside quotes.
        let mut quote = None;
        let end = tail
            .char_indices()
            .find(|&(_, c)| match quote {
                Some(q) if c == q => {
                    quote = None;
                    false
                }
                Some(_) => false,
                None if c == '"' || c == '\'' => {
                    quote = Some(c);
                    false
                }
                None => c == '>',
            })
            .map(|(i, _)| i);
        let Some(end) = end else {
            if strict {
                return Err("an unclosed tag".into());
            }
            return Ok(pieces);
        };
        let inner = &tail[1..end];
        rest = &tail[end + 1..];
        if inner.starts_with('!') || inner.starts_with('?') {
            continue;
        }
        let self_closing = inner.ends_with('/');
        let inner = inner.trim_end_matches('/');
        let name_end = inner
            .find(|c: char| c.is_whitespace())
            .unwrap_or(inner.len());
        let name = inner[..name_end].to_ascii_lowercase();
        let mut attributes = Vec::new();
        let mut attrs = inner[name_end..].trim();
        while !attrs.is_empty() {
            let key_end = attrs
                .find(|c: char| c == '=' || c.is_whitespace())
                .unwrap_or(attrs.len());
            let key = attrs[..key_end].to_ascii_lowercase();
            attrs = attrs[key_end..].trim_start();
            let mut value = String::new();
            if let Some(v) = attrs.strip_prefix('=') {
                let v = v.trim_start();
                let (text, after) = match v.chars().next() {
                    Some(q @ ('"' | '\'')) => {
                        let close = v[1..].find(q).map_or(v.len() - 1, |c| c + 1);
                        (&v[1..close], v.get(close + 1..).unwrap_or(""))
                    }
                    _ => {
                        let e = v.find(char::is_whitespace).unwrap_or(v.len());
                        (&v[..e], &v[e..])
                    }
                };
                value = decode_entities(text, false)?;
                attrs = after.trim_start();
            }
            attributes.push((key, value));
        }
        pieces.push(Err(HtmlTag {
            name,
            attributes,
            self_closing,
        }));
    }
    pieces.push(Ok(rest.to_owned()));
    Ok(pieces)
}

/// Tags that do not end a word: the inline ones.
fn is_inline_tag(name: &str) -> bool {
    matches!(
        name.trim_start_matches('/'),
        "a" | "em"
            | "strong"
            | "code"
            | "del"
            | "s"
            | "b"
            | "i"
            | "u"
            | "ins"
            | "strike"
            | "span"
            | "tg-spoiler"
    )
}

/// Whether a link to `href` is live on every surface (the default schemes); any other is
/// shown dead, its target as text after its label.
fn is_live_target(href: &str) -> bool {
    let lower = href.to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s))
}

/// The text a browser shows for `html`: tags removed (block tags end words), entities decoded,
/// an image shown as its `alt`. A dead link's label ends a word: its target follows it.
fn html_text(html: &str, strict: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut links: Vec<bool> = Vec::new();
    for piece in html_pieces(html, strict)? {
        match piece {
            Ok(text) => out.push_str(&decode_entities(&text, strict)?),
            Err(tag) if tag.name == "img" => {
                let alt = tag.attributes.iter().find(|(k, _)| k == "alt");
                out.push(' ');
                out.push_str(alt.map_or("", |(_, v)| v));
                out.push(' ');
            }
            Err(tag) if tag.name == "a" => {
                let href = tag.attributes.iter().find(|(k, _)| k == "href");
                links.push(href.is_some_and(|(_, v)| is_live_target(v)));
            }
            Err(tag) if tag.name == "/a" => {
                if links.pop() == Some(false) {
                    out.push(' ');
                }
            }
            Err(tag) if is_inline_tag(&tag.name) => {}
            Err(_) => out.push('\n'),
        }
    }
    Ok(out)
}

/// Telegram's text, after checking the HTML is what its parse mode accepts: only its tags,
/// each closed in order, `href` only on links, a language class only on code, no link in a
/// link, nothing but code in a code block, no quote in a quote, and only its entities.
fn telegram_text(part: &str) -> Result<String, String> {
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
    ];
    let mut open: Vec<String> = Vec::new();
    for piece in html_pieces(part, true)? {
        match piece {
            Ok(text) => {
                if text.contains('>') {
                    return Err("a raw > in text".into());
                }
                decode_entities(&text, true)?;
            }
            Err(tag) if tag.name.starts_with('/') => {
                let name = &tag.name[1..];
                if open.pop().as_deref() != Some(name) {
                    return Err(format!("</{name}> closes nothing open"));
                }
            }
            Err(tag) => {
                let name = tag.name.as_str();
                if !TAGS.contains(&name) || tag.self_closing {
                    return Err(format!("<{name}> is not a Telegram tag"));
                }
                for (key, value) in &tag.attributes {
                    let allowed = match (name, key.as_str()) {
                        ("a", "href") => true,
                        ("code", "class") => value.starts_with("language-"),
                        ("span", "class") => value == "tg-spoiler",
                        ("blockquote", "expandable") => true,
                        _ => false,
                    };
                    if !allowed {
                        return Err(format!("<{name} {key}> is not allowed"));
                    }
                }
                if let Some(outer) = open.last()
                    && (outer == "code" || (outer == "pre" && name != "code"))
                {
                    return Err(format!("<{name}> inside <{outer}>"));
                }
                if (name == "a" && open.iter().any(|t| t == "a"))
                    || (name == "blockquote" && open.iter().any(|t| t == "blockquote"))
                {
                    return Err(format!("<{name}> nested in itself"));
                }
                open.push(name.to_owned());
            }
        }
    }
    if let Some(name) = open.last() {
        return Err(format!("<{name}> never closed"));
    }
    html_text(part, true)
}

/// Slack's text, after checking every `<…>` is a link with a web or mail target (never a
/// mention or a broadcast) and every `&` an escape: a link shows its label (else its target).
fn slack_text(part: &str) -> Result<String, String> {
    let mut text = String::new();
    for (n, line) in part.split('\n').enumerate() {
        if n > 0 {
            text.push('\n');
        }
        // A quote is `> ` at a line's start (a nested one repeats it).
        let mut line = line;
        while let Some(rest) = line
            .strip_prefix("> ")
            .or(line.strip_prefix('>').filter(|r| r.is_empty()))
        {
            line = rest;
        }
        text.push_str(&slack_line(line)?);
    }
    Ok(text)
}

/// One line of Slack text, its quote markers removed.
fn slack_line(line: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('<') {
        out.push_str(&decode_slack(&rest[..at])?);
        let tail = &rest[at + 1..];
        let end = tail.find('>').ok_or("an unclosed <")?;
        let inner = &tail[..end];
        let (target, label) = inner.split_once('|').unwrap_or((inner, inner));
        if !["http://", "https://", "mailto:"]
            .iter()
            .any(|s| target.starts_with(s))
        {
            return Err(format!("<{target}> is not a web or mail link"));
        }
        out.push_str(&decode_slack(label)?);
        rest = &tail[end + 1..];
    }
    out.push_str(&decode_slack(rest)?);
    Ok(out)
}

/// Slack's three escapes decoded; any other `&` or a raw `>` is invalid.
fn decode_slack(text: &str) -> Result<String, String> {
    if text.contains('>') {
        return Err("a raw > in Slack text".into());
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (c, len) = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
            .iter()
            .find(|(e, _)| tail.starts_with(e))
            .map(|(e, c)| (*c, e.len()))
            .ok_or("a bare & in Slack text")?;
        out.push(c);
        rest = &tail[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The words of each code block in `markdown` read as CommonMark, empty blocks left out
/// (an empty block shows nothing, so a surface may leave it out).
fn code_blocks(markdown: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => open = Some(String::new()),
            Event::Text(t) => {
                if let Some(code) = &mut open {
                    code.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let code = words(&open.take().unwrap_or_default(), |c| c == '\u{200b}');
                if !code.is_empty() {
                    blocks.push(code);
                }
            }
            _ => {}
        }
    }
    blocks
}

/// Discord's text: the output read back as CommonMark (raw HTML shown as Discord shows it, as
/// text), after checking it holds the code blocks the source holds with the same words: no
/// fence left open to swallow what follows, no text read as code, no fence that does not open.
fn discord_text(part: &str, source: &str) -> Result<String, String> {
    if code_blocks(part) != code_blocks(source) {
        return Err(format!(
            "code blocks {:?} where the source has {:?}",
            code_blocks(part),
            code_blocks(source)
        ));
    }
    let mut out = String::new();
    for event in Parser::new(part) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                out.push_str(&t);
            }
            Event::Start(Tag::Emphasis | Tag::Strong | Tag::Link { .. } | Tag::Image { .. })
            | Event::End(TagEnd::Emphasis | TagEnd::Strong | TagEnd::Link | TagEnd::Image) => {}
            _ => out.push('\n'),
        }
    }
    Ok(out)
}

/// Whether `example` passes on `surface`, or why not.
fn check(example: &Example, surface: Surface) -> Result<(), String> {
    let wanted = words(&html_text(&example.html, false)?, |c| {
        surface.transparent(c)
    });
    let parts = match surface
        .renderer()
        .render(&Markdown::new(example.markdown.clone()))
    {
        Ok(parts) => parts,
        // Nothing visible renders to nothing: the boundary sends no part.
        Err(RenderError::Empty) if wanted.is_empty() => return Ok(()),
        Err(error) => return Err(format!("render failed: {error:?}")),
    };
    let mut got = Vec::new();
    for part in &parts {
        let text = surface
            .visible(part, &example.markdown)
            .map_err(|e| format!("{e} in {part:?}"))?;
        got.extend(words(&text, |c| surface.transparent(c)));
    }
    match first_missing(&wanted, &got) {
        None => Ok(()),
        Some(word) => Err(format!("lost {word:?}: {parts:?}")),
    }
}

#[test]
fn every_commonmark_example_keeps_its_words_and_renders_valid_on_every_surface() {
    let examples = examples();
    assert_eq!(examples.len(), 652, "the spec has 652 examples");
    let mut failed = Vec::new();
    for (surface, floor) in FLOOR {
        let mut passed = 0;
        for example in &examples {
            match check(example, surface) {
                Ok(()) => passed += 1,
                Err(why) => failed.push(format!(
                    "{surface:?} #{} ({}): {why}\n  markdown: {:?}",
                    example.number, example.section, example.markdown
                )),
            }
        }
        println!("{surface:?}: {passed}/{} examples", examples.len());
        if passed < floor {
            for line in &failed {
                println!("{line}");
            }
            panic!("{surface:?} passed {passed} examples, below its floor of {floor}");
        }
    }
    for line in &failed {
        println!("{line}");
    }
}

#[test]
fn the_checks_catch_what_they_are_for() {
    // Words glued together, a lost word, a reordered one.
    let want = |s: &str| words(s, |_| false);
    assert_eq!(first_missing(&want("a b"), &want("ab")), Some("a"));
    assert_eq!(first_missing(&want("a b c"), &want("a c")), Some("b"));
    assert_eq!(first_missing(&want("a b"), &want("b a")), Some("b"));
    assert_eq!(first_missing(&want("a b"), &want("x a y b z")), None);
    // Invalid output on each surface.
    assert!(telegram_text("<b>x</i>").is_err());
    assert!(telegram_text("<div>x</div>").is_err());
    assert!(telegram_text("<a href=\"x\"><a href=\"y\">z</a></a>").is_err());
    assert!(telegram_text("<pre><b>x</b></pre>").is_err());
    assert!(telegram_text("a & b").is_err());
    assert!(telegram_text("<b>x").is_err());
    assert_eq!(
        telegram_text("<b>x</b>&lt;<pre><code class=\"language-rs\">y</code></pre>"),
        Ok("x<\ny\n".to_owned())
    );
    assert!(slack_text("<!channel>").is_err());
    assert!(slack_text("<@U123>").is_err());
    assert!(slack_text("a & b").is_err());
    assert_eq!(
        slack_text("<https://x|label> &lt;"),
        Ok("label <".to_owned())
    );
    assert!(discord_text("```\ncode\n\nmore", "```\ncode\n```\n\nmore").is_err());
    assert!(discord_text("\\```\ncode\n```", "```\ncode\n```").is_err());
    assert!(Surface::Plain.visible("a\u{1b}b", "a").is_err());
    // The reference's text: inline tags join, block tags separate, an image is its alt.
    assert_eq!(
        words(&html_text("<p>foo<em>bar</em></p><p>baz</p><img src=\"u\" alt=\"qux\" /><a href=\"/r\">x</a>y", false).expect("html"), |_| false),
        ["foobar", "baz", "qux", "x", "y"]
    );
}
