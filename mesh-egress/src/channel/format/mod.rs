//! Markdown to atoms: one walk over pulldown-cmark's events, parametrised by a [`Dialect`]
//! (what each channel writes for a style, a fence, a quote, a link, and how it escapes).
//!
//! The walk owns the block structure (breaks, line prefixes, lists, tables); dialects only
//! answer "how does this channel spell it". Each channel's dialect lives in its own module.

mod discord;
mod plain;
mod slack;
mod telegram;

pub use discord::DiscordMarkdown;
pub(crate) use plain::Plain;
pub use slack::SlackMrkdwn;
pub use telegram::TelegramHtml;
#[cfg(test)]
pub(crate) use {discord::Discord, slack::Slack, telegram::Telegram};

use std::borrow::Cow;

use pulldown_cmark::{
    Alignment, CodeBlockKind, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd,
};
use unicode_segmentation::UnicodeSegmentation;

use super::atom::{Atoms, Level, MAX_SOURCE, Unit, is_grapheme_boundary};
use super::chunk::{Limits, Packer, Part};
use crate::render::RenderError;
use crate::egress::Markdown;

/// A paired marker as a channel spells it.
#[derive(Clone, Debug)]
pub(crate) struct Pair {
    /// Opening text.
    pub(crate) open: Cow<'static, str>,
    /// Closing text.
    pub(crate) close: Cow<'static, str>,
    /// Entities it costs (Telegram).
    pub(crate) entities: usize,
}

impl Pair {
    pub(crate) fn new(
        open: impl Into<Cow<'static, str>>,
        close: impl Into<Cow<'static, str>>,
        entities: usize,
    ) -> Self {
        Self {
            open: open.into(),
            close: close.into(),
            entities,
        }
    }
}

/// An inline style.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Style {
    Emphasis,
    Strong,
    Strike,
}

/// How a channel shows a heading.
pub(crate) enum Heading {
    /// As its text alone.
    Plain,
    /// With a line prefix (`# `).
    Prefix(String),
    /// Inside a style pair (bold).
    Styled(Pair),
}

/// How a channel shows a block quote.
pub(crate) enum Quote {
    /// A prefix on every line.
    Prefix(&'static str),
    /// A paired marker around the quote.
    Paired(Pair),
}

/// What a channel writes; each method answers for one construct.
pub(crate) trait Dialect {
    /// How parts are measured.
    const UNIT: Unit;
    /// Whether markup counts against the limit (false: measured after entity parsing).
    const MARKUP_COUNTS: bool;

    /// The escape for `c` in ordinary text, if it needs one.
    fn escape(&self, c: char, at_line_start: bool) -> Option<&'static str>;
    /// The escape for `c` in code and URLs shown as text.
    fn code_escape(&self, c: char) -> Option<&'static str>;
    /// Code text made safe inside this channel's code delimiters (before escaping).
    fn code_text<'c>(&self, code: &'c str, inline: bool) -> Cow<'c, str> {
        let _ = inline;
        Cow::Borrowed(code)
    }
    /// An inline style's markers (`None`: the channel shows the text unstyled).
    fn style(&self, style: Style) -> Option<Pair>;
    /// Inline code's markers for this code.
    fn code_span(&self, code: &str) -> Option<Pair>;
    /// A fenced block's markers; `prefix` is the line prefix of the lines inside.
    fn fence(&self, lang: &str, prefix: &str) -> Option<Pair>;
    /// A heading of `level` (1..=6).
    fn heading(&self, level: u8) -> Heading;
    /// A block quote.
    fn quote(&self) -> Quote;
    /// The bullet of an unordered list item at `depth` (0 = outermost).
    fn bullet(&self, depth: usize) -> &'static str;
    /// Markers around a link's label (`None`: the label, then the URL in parentheses).
    fn link(&self, url: &str) -> Option<Pair>;
}

/// Renders `body` for dialect `d` and chunks it within `limits`.
pub(crate) fn render<D: Dialect>(
    d: &D,
    body: &Markdown,
    limits: Limits,
) -> Result<Vec<String>, RenderError> {
    Ok(render_parts(d, body.as_str(), limits)?
        .into_iter()
        .map(|p| p.text)
        .collect())
}

/// Renders `src` and chunks it, keeping each part's layout. Parts are packed while the walk
/// goes on, every [`BATCH`] atoms, so a long message never holds all its atoms at once.
pub(crate) fn render_parts<D: Dialect>(
    d: &D,
    src: &str,
    limits: Limits,
) -> Result<Vec<Part>, RenderError> {
    let mut packer = Packer::new(limits);
    let out = walk(d, src, |out| {
        if out.atoms.len() >= BATCH {
            let done = packer.feed(out, false)?;
            out.atoms.drain(..done);
            packer.drained(done);
        }
        Ok(())
    })?;
    packer.feed(&out, true)?;
    Ok(packer.finish())
}

/// Atoms buffered between packings. Small under test, so every test exercises packing in
/// batches.
const BATCH: usize = if cfg!(test) { 8 } else { 4096 };

/// Renders `src` into the whole atom stream.
#[cfg(test)]
pub(crate) fn atoms<D: Dialect>(d: &D, src: &str) -> Result<Atoms, RenderError> {
    walk(d, src, |_| Ok(()))
}

/// Walks `src`'s events, calling `between` after each one with the atoms so far.
fn walk<D: Dialect>(
    d: &D,
    src: &str,
    mut between: impl FnMut(&mut Atoms) -> Result<(), RenderError>,
) -> Result<Atoms, RenderError> {
    if src.trim().is_empty() {
        return Err(RenderError::Empty);
    }
    if src.len() > MAX_SOURCE {
        return Err(RenderError::TooLarge {
            bytes: src.len(),
            limit: MAX_SOURCE,
        });
    }
    // CommonMark accepts CR and CRLF line endings; chat payloads use LF only.
    let src: Cow<'_, str> = if src.contains('\r') {
        Cow::Owned(src.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Cow::Borrowed(src)
    };
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut walker = Walker {
        d,
        out: Atoms::new(D::UNIT, D::MARKUP_COUNTS, src.len() + src.len() / 4),
        containers: Vec::new(),
        lists: Vec::new(),
        pending: None,
        line_started: false,
        at_line_start: true,
        written: false,
        last: [' '; 2],
        code: None,
        table: None,
        in_link: false,
        styles: Vec::new(),
        heading_prefix: None,
        quotes: Vec::new(),
    };
    let mut events = Parser::new_ext(&src, options);
    while let Some(event) = events.next() {
        walker.event(event, &mut events);
        between(&mut walker.out)?;
    }
    if !walker.out.has_content() {
        return Err(RenderError::Empty);
    }
    Ok(walker.out)
}

/// A block that prefixes the lines inside it.
enum Container {
    Quote,
    Item {
        bullet: String,
        indent: String,
        bullet_pending: bool,
    },
}

/// A table being collected: cells as plain text.
struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    head_rows: usize,
    cell: String,
}

struct Walker<'d, D> {
    d: &'d D,
    out: Atoms,
    containers: Vec<Container>,
    /// Per open list: the next item number (ordered) or `None` (bullets).
    lists: Vec<Option<u64>>,
    /// The break owed before the next content.
    pending: Option<Level>,
    /// Whether the current line's prefix has been written.
    line_started: bool,
    /// Whether nothing has been written on this line after its prefix.
    at_line_start: bool,
    /// Whether any content has been written.
    written: bool,
    /// The last two non-space characters of text, for sentence ends.
    last: [char; 2],
    /// An open code block: its language and body.
    code: Option<(String, String)>,
    table: Option<Table>,
    in_link: bool,
    /// Open heading and style markers (marker ids), innermost last.
    styles: Vec<Option<u32>>,
    /// A heading prefix owed before the heading's first content.
    heading_prefix: Option<String>,
    /// Open block quotes: their marker, if this one opened one.
    quotes: Vec<Option<u32>>,
}

impl<'a, D: Dialect> Walker<'_, D> {
    fn event<I: Iterator<Item = Event<'a>>>(&mut self, event: Event<'a>, rest: &mut I) {
        if self.table.is_some() {
            self.table_event(event, rest);
            return;
        }
        if let Some((_, body)) = &mut self.code {
            match event {
                Event::Text(t) => body.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let (lang, body) = self.code.take().unwrap_or_default();
                    self.code_block(&lang, &body);
                }
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag, rest),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) | Event::InlineMath(t) => self.code_span(&t),
            Event::DisplayMath(t) => self.code_block("", &t),
            Event::Html(t) => {
                // Raw HTML is shown as text, never passed through or dropped.
                let line = t.strip_suffix('\n').unwrap_or(&t);
                self.text(line);
                if t.ends_with('\n') {
                    self.owe(Level::Line);
                }
            }
            Event::InlineHtml(t) => self.text(&t),
            Event::FootnoteReference(t) => self.text(&format!("[{t}]")),
            Event::SoftBreak | Event::HardBreak => self.owe(Level::Line),
            Event::Rule => {
                self.flush();
                self.out.graphemes("———");
                self.wrote();
                self.owe(Level::Paragraph);
            }
            Event::TaskListMarker(done) => {
                self.flush();
                self.out.graphemes(if done { "☑" } else { "☐" });
                self.out.space(" ", Level::Word, false);
                self.wrote();
            }
        }
    }

    fn start<I: Iterator<Item = Event<'a>>>(&mut self, tag: Tag<'a>, rest: &mut I) {
        match tag {
            Tag::Paragraph
            | Tag::HtmlBlock
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_)
            | Tag::Superscript
            | Tag::Subscript => {}
            Tag::Heading { level, .. } => {
                self.flush();
                let level = heading_level(level);
                let id = match self.d.heading(level) {
                    Heading::Plain => None,
                    Heading::Prefix(p) => {
                        // Written with the first content, so an empty heading writes nothing.
                        self.heading_prefix = Some(p);
                        None
                    }
                    Heading::Styled(pair) => Some(self.open(&pair)),
                };
                self.styles.push(id);
            }
            Tag::BlockQuote(_) => match self.d.quote() {
                Quote::Prefix(p) => {
                    self.flush_break();
                    self.containers.push(Container::Quote);
                    // Reopened only mid-line: at a line start the prefix is already there.
                    let id = self.out.open("".into(), "".into(), p.into(), 0, true);
                    self.quotes.push(Some(id));
                }
                // Paired quotes do not nest (Telegram rejects nested blockquotes).
                Quote::Paired(_) if !self.quotes.is_empty() => self.quotes.push(None),
                Quote::Paired(pair) => {
                    self.flush();
                    let id = self.open(&pair);
                    self.quotes.push(Some(id));
                }
            },
            Tag::CodeBlock(kind) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(first) => {
                if !self.lists.is_empty() {
                    self.owe(Level::Line);
                }
                self.lists.push(first);
            }
            Tag::Item => {
                self.owe(Level::Line);
                let depth = self.lists.len().saturating_sub(1);
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let b = format!("{n}. ");
                        *n += 1;
                        b
                    }
                    _ => self.d.bullet(depth).to_owned(),
                };
                let indent = " ".repeat(bullet.chars().count());
                self.containers.push(Container::Item {
                    bullet,
                    indent,
                    bullet_pending: true,
                });
            }
            Tag::Table(alignments) => {
                self.flush_break();
                self.table = Some(Table {
                    alignments,
                    rows: Vec::new(),
                    head_rows: 0,
                    cell: String::new(),
                });
            }
            Tag::TableHead | Tag::TableRow | Tag::TableCell => {}
            Tag::Emphasis | Tag::Strong | Tag::Strikethrough => {
                let style = match tag {
                    Tag::Emphasis => Style::Emphasis,
                    Tag::Strong => Style::Strong,
                    _ => Style::Strike,
                };
                self.flush();
                let id = self.d.style(style).map(|pair| self.open(&pair));
                self.styles.push(id);
            }
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => {
                let label = collect_label(rest);
                let bare = matches!(link_type, LinkType::Autolink | LinkType::Email);
                self.link(&dest_url, label, bare);
            }
            Tag::Image { dest_url, .. } => {
                let label = collect_label(rest);
                if self.in_link {
                    // An image inside a link's label shows as its alt text.
                    self.replay(label);
                } else {
                    self.link(&dest_url, label, false);
                }
            }
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph
            | TagEnd::HtmlBlock
            | TagEnd::CodeBlock
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.owe(Level::Paragraph),
            TagEnd::DefinitionListTitle => self.owe(Level::Line),
            TagEnd::Heading(_) => {
                self.heading_prefix = None;
                if let Some(Some(id)) = self.styles.pop() {
                    self.out.close(id);
                }
                self.owe(Level::Paragraph);
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                if let Some(Some(id)) = self.styles.pop() {
                    self.out.close(id);
                }
            }
            TagEnd::BlockQuote(_) => {
                if let Some(Some(id)) = self.quotes.pop() {
                    self.out.close(id);
                }
                if matches!(self.d.quote(), Quote::Prefix(_)) {
                    self.containers.pop();
                }
                self.owe(Level::Paragraph);
            }
            TagEnd::List(_) => {
                self.lists.pop();
                // A nested list ends its item's line; a top-level one ends a block.
                self.owe(if self.lists.is_empty() {
                    Level::Paragraph
                } else {
                    Level::Line
                });
            }
            TagEnd::Item => {
                self.containers.pop();
                self.owe(Level::Line);
            }
            TagEnd::Table
            | TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image => {}
        }
    }

    fn open(&mut self, pair: &Pair) -> u32 {
        self.out.open(
            pair.open.clone(),
            pair.close.clone(),
            pair.open.clone(),
            pair.entities,
            false,
        )
    }

    /// Owes at least a `level` break before the next content.
    fn owe(&mut self, level: Level) {
        self.pending = Some(self.pending.map_or(level, |p| p.max(level)));
    }

    /// Writes the owed break, if any content precedes it.
    fn flush_break(&mut self) {
        if let Some(level) = self.pending.take()
            && self.written
        {
            let text = if level == Level::Paragraph {
                "\n\n"
            } else {
                "\n"
            };
            self.out.space(text, level, false);
            self.line_started = false;
        }
    }

    /// Writes the owed break and the line prefix, before content.
    fn flush(&mut self) {
        self.flush_break();
        if !self.line_started {
            let prefix = self.line_prefix(true);
            self.out.prefix(&prefix);
            self.line_started = true;
            self.at_line_start = true;
        }
        if let Some(prefix) = self.heading_prefix.take() {
            self.out.prefix(&prefix);
        }
    }

    /// The prefix of the current line: quote markers, bullets, indentation.
    fn line_prefix(&mut self, take_bullets: bool) -> String {
        let mut prefix = String::new();
        if self.containers.is_empty() {
            return prefix;
        }
        let quote = match self.d.quote() {
            Quote::Prefix(p) => p,
            Quote::Paired(_) => "",
        };
        for container in &mut self.containers {
            match container {
                Container::Quote => prefix.push_str(quote),
                Container::Item {
                    bullet,
                    indent,
                    bullet_pending,
                } => {
                    if *bullet_pending && take_bullets {
                        prefix.push_str(bullet);
                        *bullet_pending = false;
                    } else {
                        prefix.push_str(indent);
                    }
                }
            }
        }
        prefix
    }

    fn wrote(&mut self) {
        self.written = true;
        self.at_line_start = false;
    }

    /// Ordinary text: words, breaks and escapes.
    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.flush();
        let mut word = 0;
        let mut url = is_url_start(text);
        let mut space: Option<usize> = None;
        for (at, c) in text.char_indices() {
            let end = at + c.len_utf8();
            if is_break_space(c) && stands_alone(text, at, end) {
                if space.is_none() {
                    self.word(&text[word..at], url);
                    space = Some(at);
                }
                continue;
            }
            if let Some(start) = space.take() {
                let level = if ends_sentence(self.last) {
                    Level::Sentence
                } else {
                    Level::Word
                };
                self.out.space(&text[start..at], level, false);
                word = at;
                url = is_url_start(&text[at..]);
            }
            self.last = [self.last[1], c];
            if matches!(c, '。' | '！' | '？') && is_grapheme_boundary(text, end) {
                // CJK needs no space after a sentence: the break is empty.
                self.word(&text[word..end], url);
                self.out.space("", Level::Sentence, false);
                word = end;
            }
        }
        match space {
            Some(start) => {
                let level = if ends_sentence(self.last) {
                    Level::Sentence
                } else {
                    Level::Word
                };
                self.out.space(&text[start..], level, false);
            }
            None => self.word(&text[word..], url),
        }
    }

    /// A word (no whitespace breaks), escaped as text or as a URL.
    fn word(&mut self, word: &str, url: bool) {
        if word.is_empty() {
            return;
        }
        let d = self.d;
        let mut run = 0;
        for (at, c) in word.char_indices() {
            let escape = if url {
                d.code_escape(c)
            } else {
                d.escape(c, self.at_line_start && at == 0)
            };
            if let Some(escaped) = escape {
                self.out.graphemes(&word[run..at]);
                self.out.escape(escaped, c);
                run = at + c.len_utf8();
            }
        }
        self.out.graphemes(&word[run..]);
        self.wrote();
    }

    /// Code text: every character kept; spaces are breaks that stay in the part.
    fn code_text(&mut self, code: &str, inline: bool) {
        let d = self.d;
        let mut run = 0;
        let mut space: Option<usize> = None;
        let mut leading = !inline;
        for (at, c) in code.char_indices() {
            if (c == ' ' || c == '\t') && is_grapheme_boundary(code, at + 1) {
                if !leading && space.is_none() {
                    self.out.graphemes(&code[run..at]);
                    space = Some(at);
                }
                continue;
            }
            if leading {
                leading = false;
            }
            if let Some(start) = space.take() {
                self.out.space(&code[start..at], Level::Word, !inline);
                run = at;
            }
            if let Some(escaped) = d.code_escape(c) {
                self.out.graphemes(&code[run..at]);
                self.out.escape(escaped, c);
                run = at + c.len_utf8();
            }
        }
        match space {
            Some(start) => self.out.space(&code[start..], Level::Word, !inline),
            None => self.out.graphemes(&code[run..]),
        }
        self.wrote();
    }

    fn code_span(&mut self, code: &str) {
        self.flush();
        let code = self.d.code_text(code, true);
        let id = self.d.code_span(&code).map(|pair| self.open(&pair));
        self.code_text(&code, true);
        if let Some(id) = id {
            self.out.close(id);
        }
    }

    /// A code block (or a table drawn as one).
    fn code_block(&mut self, lang: &str, body: &str) {
        self.flush();
        let prefix = self.line_prefix(false);
        let body = self.d.code_text(body, false);
        let body = body.strip_suffix('\n').unwrap_or(&body);
        let id = self.d.fence(lang, &prefix).map(|pair| self.open(&pair));
        if id.is_some() {
            self.out.prefix(&prefix);
        }
        for (n, line) in body.split('\n').enumerate() {
            if n > 0 {
                self.out.space("\n", Level::Line, false);
                self.out.prefix(&prefix);
            }
            self.code_text(line, false);
        }
        if let Some(id) = id {
            self.out.close(id);
        }
        self.wrote();
        self.owe(Level::Paragraph);
    }

    fn link(&mut self, url: &str, label: Vec<Event<'a>>, bare: bool) {
        let shown = plain_label(&label);
        if bare || shown.trim().is_empty() || shown == url {
            self.flush();
            self.word(url, true);
            return;
        }
        self.in_link = true;
        match self.d.link(url) {
            Some(pair) => {
                self.flush();
                let id = self.open(&pair);
                self.replay(label);
                self.out.close(id);
            }
            None => {
                self.replay(label);
                self.out.space(" ", Level::Word, false);
                self.word(&format!("({url})"), true);
            }
        }
        self.in_link = false;
    }

    fn replay(&mut self, label: Vec<Event<'a>>) {
        let mut events = label.into_iter();
        while let Some(event) = events.next() {
            self.event(event, &mut events);
        }
    }

    fn table_event<I: Iterator<Item = Event<'a>>>(&mut self, event: Event<'a>, rest: &mut I) {
        let Some(table) = &mut self.table else {
            return;
        };
        match event {
            Event::Start(Tag::TableHead | Tag::TableRow) => table.rows.push(Vec::new()),
            Event::End(TagEnd::TableHead) => table.head_rows = table.rows.len(),
            Event::End(TagEnd::TableCell) => {
                let cell = std::mem::take(&mut table.cell);
                if let Some(row) = table.rows.last_mut() {
                    row.push(cell.trim().to_owned());
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                let label = plain_label(&collect_label(rest));
                if label.trim().is_empty() || label == *dest_url {
                    table.cell.push_str(&dest_url);
                } else {
                    table.cell.push_str(&format!("{label} ({dest_url})"));
                }
            }
            Event::Text(t)
            | Event::Code(t)
            | Event::Html(t)
            | Event::InlineHtml(t)
            | Event::InlineMath(t) => table.cell.push_str(&t),
            Event::SoftBreak | Event::HardBreak => table.cell.push(' '),
            Event::TaskListMarker(done) => table.cell.push_str(if done { "☑ " } else { "☐ " }),
            Event::End(TagEnd::Table) => {
                let table = self.table.take().map(draw_table).unwrap_or_default();
                self.code_block("", &table);
            }
            _ => {}
        }
    }
}

/// Collects a link's or image's label events up to its matching end.
fn collect_label<'a, I: Iterator<Item = Event<'a>>>(rest: &mut I) -> Vec<Event<'a>> {
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
fn plain_label(label: &[Event<'_>]) -> String {
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

/// Draws a table as aligned monospace text.
fn draw_table(table: Table) -> String {
    let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |s: &str| {
        if s.is_ascii() {
            s.len()
        } else {
            s.graphemes(true).count()
        }
    };
    let mut widths = vec![0; columns];
    for row in &table.rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let mut out = String::new();
    for (n, row) in table.rows.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let mut line = String::new();
        for (col, w) in widths.iter().enumerate() {
            if col > 0 {
                line.push_str(" | ");
            }
            let cell = row.get(col).map_or("", String::as_str);
            let pad = w - width(cell);
            if matches!(table.alignments.get(col), Some(Alignment::Right)) {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        if n + 1 == table.head_rows {
            out.push('\n');
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("-+-"));
        }
    }
    out
}

fn heading_level(level: HeadingLevel) -> u8 {
    level as u8
}

/// Whitespace a line may break at (not the no-break spaces).
fn is_break_space(c: char) -> bool {
    c.is_whitespace() && !matches!(c, '\u{a0}' | '\u{2007}' | '\u{202f}')
}

/// Puts a zero-width space into every run of `min` backticks (before each one when `min` is
/// 1), so code cannot close its own delimiters.
pub(crate) fn break_backtick_runs(code: &str, min: usize) -> Cow<'_, str> {
    const RUNS: [&str; 3] = ["`", "``", "```"];
    if !code.contains(RUNS[min.clamp(1, 3) - 1]) {
        return Cow::Borrowed(code);
    }
    let mut out = String::with_capacity(code.len() + 8);
    let mut run = 0;
    for c in code.chars() {
        if c == '`' {
            if run + 1 >= min {
                out.push('\u{200b}');
                run = 0;
            }
            run += 1;
        } else {
            run = 0;
        }
        out.push(c);
    }
    Cow::Owned(out)
}

fn is_url_start(s: &str) -> bool {
    s.starts_with("https://") || s.starts_with("http://")
}

fn ends_sentence(last: [char; 2]) -> bool {
    let end = |c: char| matches!(c, '.' | '!' | '?' | '…');
    end(last[1]) || (matches!(last[1], '"' | '\'' | ')' | '”' | '’' | '»') && end(last[0]))
}

/// Whether `text[at..end]` is a grapheme cluster of its own (checked only next to non-ASCII).
fn stands_alone(text: &str, at: usize, end: usize) -> bool {
    let bytes = text.as_bytes();
    let ascii_around =
        (at == 0 || bytes[at - 1].is_ascii()) && bytes.get(end).is_none_or(u8::is_ascii);
    ascii_around || (is_grapheme_boundary(text, at) && is_grapheme_boundary(text, end))
}
