//! The walk over pulldown-cmark's events: block structure, breaks and line prefixes.
//!
//! The walker's state is split by concern: [`Lines`] (the break owed and the current line),
//! [`Blocks`] (quotes and list items that prefix lines), [`Inline`] (open styles and links).
//! Nothing here recurses on the input: a link's label is collected once by a loop and replayed
//! with links and images inside it flattened, so the call depth is constant whatever the
//! nesting.

use std::borrow::Cow;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::grid::Table;
use super::link::collect_label;
use super::text::{SPACES, clean_event};
use super::{Dialect, Heading, LinkPolicy, MAX_NESTING, MAX_PREFIX_WIDTH, Pair, Quote, Style};
use crate::channel::atom::{Atoms, Level, MAX_SOURCE};
use crate::render::{RenderError, holds_hostile_control};

/// Line breaks inside a paragraph are written as spaces once the line prefix is wider than
/// this. A lazy continuation line costs two bytes of input but would cost its whole prefix in
/// output, so without this a deep quote multiplies the reply's size; CommonMark lets a soft
/// break render as a space.
const FOLD_BREAKS_PAST: usize = 6;

/// Walks `src`'s events, calling `between` after each one with the atoms so far.
pub(super) fn walk<D: Dialect>(
    d: &D,
    src: &str,
    links: LinkPolicy,
    link_markup_cap: usize,
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
        links,
        link_markup_cap,
        // The packer drains the buffer once it holds a batch after an event: room for half a
        // batch more keeps one event's atoms from growing it.
        out: Atoms::new(
            D::UNIT,
            D::MARKUP_COUNTS,
            src.len() + src.len() / 4,
            super::BATCH + super::BATCH / 2,
        ),
        lines: Lines {
            pending: None,
            line_started: false,
            at_line_start: true,
            leading_digits: Some(0),
            written: false,
            last: [' '; 2],
        },
        blocks: Blocks::default(),
        inline: Inline {
            styles: Vec::new(),
            heading_prefix: None,
            in_link: false,
            reference_bytes: src.len(),
        },
        code: None,
        table: None,
    };
    let source_clean = !holds_hostile_control(&src);
    // A parser string the source does not hold verbatim comes from a backslash escape (ASCII
    // punctuation) or a character reference (`&#27;`, which can decode to a control): from a
    // source without controls and without `&`, no string needs a look.
    let clean = !source_clean || src.contains('&');
    drive(
        &mut walker,
        Parser::new_ext(&src, options),
        clean.then_some(source_clean),
        &mut between,
    )?;
    if !walker.out.has_content() {
        return Err(RenderError::Empty);
    }
    Ok(walker.out)
}

/// Feeds every event of `events` to the walker, calling `between` after each one; with
/// `clean` set (to whether the source is clean), control characters are first removed from
/// each event's strings.
///
/// The event is handed over by reference and cleaned in place: moved through an adapter
/// and into the walker, the event (about 80 bytes) was copied three times per event, which
/// cost more than most events' rendering.
fn drive<'a, D: Dialect>(
    walker: &mut Walker<'_, D>,
    mut events: Parser<'a>,
    clean: Option<bool>,
    between: &mut impl FnMut(&mut Atoms) -> Result<(), RenderError>,
) -> Result<(), RenderError> {
    while let Some(mut event) = events.next() {
        match clean {
            None => walker.event(&mut event, &mut events),
            Some(source_clean) => {
                clean_event(&mut event, source_clean);
                // A link's label is read on from the same events, cleaned the same way.
                let mut rest = events.by_ref().map(|mut e| {
                    clean_event(&mut e, source_clean);
                    e
                });
                walker.event(&mut event, &mut rest);
            }
        }
        between(&mut walker.out)?;
    }
    Ok(())
}

/// A block that prefixes the lines inside it.
pub(super) enum Container {
    Quote,
    Item {
        /// The bullet or number; a dialect's bullets are static.
        bullet: Cow<'static, str>,
        /// The bullet's width in characters: the indentation of the item's other lines.
        width: usize,
        bullet_pending: bool,
    },
}

/// The break owed and the state of the current line.
pub(super) struct Lines {
    /// The break owed before the next content.
    pub(super) pending: Option<Level>,
    /// Whether the current line's prefix has been written.
    pub(super) line_started: bool,
    /// Whether nothing has been written on this line after its prefix.
    pub(super) at_line_start: bool,
    /// How many ASCII digits the line holds after its prefix, while it holds nothing else.
    pub(super) leading_digits: Option<usize>,
    /// Whether any content has been written.
    pub(super) written: bool,
    /// The last two non-space characters of text, for sentence ends.
    pub(super) last: [char; 2],
}

/// Open quotes and list items: what prefixes each line.
#[derive(Default)]
pub(super) struct Blocks {
    /// The containers that write a prefix, outermost first (at most [`MAX_NESTING`] of each
    /// kind, at most [`MAX_PREFIX_WIDTH`] characters together).
    pub(super) containers: Vec<Container>,
    /// The width of the line prefix `containers` write, in characters.
    pub(super) prefix_width: usize,
    /// Per open list: the next item number (ordered) or `None` (bullets).
    pub(super) lists: Vec<Option<u64>>,
    /// Per open item: whether it pushed a container (past the cap it did not).
    pub(super) items: Vec<bool>,
    /// Items that pushed a container.
    pub(super) item_depth: usize,
    /// Per open block quote.
    pub(super) quotes: Vec<QuoteLevel>,
    /// Quotes that are shown (pushed a container or opened a marker).
    pub(super) quote_depth: usize,
    /// The line prefix being written (kept for its allocation).
    line: String,
}

/// One open block quote.
pub(super) struct QuoteLevel {
    /// The marker it opened, if any.
    marker: Option<u32>,
    /// Whether it pushed a prefix container.
    container: bool,
}

/// Open inline structure.
pub(super) struct Inline {
    /// Open heading and style markers (marker ids), innermost last.
    pub(super) styles: Vec<Option<u32>>,
    /// A heading prefix owed before the heading's first content.
    pub(super) heading_prefix: Option<String>,
    /// Inside a link's or image's label: nested links and images are flattened.
    pub(super) in_link: bool,
    /// Bytes of URL that reference links may still write. A reference definition is written
    /// once and can be used in every link, so without a budget a long URL used a thousand
    /// times multiplies the output.
    pub(super) reference_bytes: usize,
}

/// An open code block: its language and body.
pub(super) struct CodeBlock {
    lang: String,
    body: String,
}

pub(super) struct Walker<'d, D> {
    pub(super) d: &'d D,
    pub(super) links: LinkPolicy,
    /// The longest link markup (`<url|` … `>`) written, in characters: a longer one could
    /// not fit a part, so its link is shown as text, which the chunker can cut.
    pub(super) link_markup_cap: usize,
    pub(super) out: Atoms,
    pub(super) lines: Lines,
    pub(super) blocks: Blocks,
    pub(super) inline: Inline,
    pub(super) code: Option<CodeBlock>,
    pub(super) table: Option<Table>,
}

impl<'a, D: Dialect> Walker<'_, D> {
    /// One event; `rest` are the events after it (a link's label is read from them). Taken
    /// by reference, so it is not copied on its way in; a tag's parts are moved out of it
    /// where they are kept.
    pub(super) fn event<I: Iterator<Item = Event<'a>>>(
        &mut self,
        event: &mut Event<'a>,
        rest: &mut I,
    ) {
        if self.table.is_some() {
            self.table_event(event, rest);
            return;
        }
        if let Some(code) = &mut self.code {
            match event {
                Event::Text(t) => code.body.push_str(t),
                Event::End(TagEnd::CodeBlock) => {
                    if let Some(code) = self.code.take() {
                        self.code_block(&code.lang, &code.body);
                    }
                }
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag, rest),
            Event::End(tag) => self.end(*tag),
            Event::Text(t) => self.text(t),
            Event::Code(t) | Event::InlineMath(t) => self.code_span(t),
            Event::DisplayMath(t) => self.code_block("", t),
            Event::Html(t) => {
                // Raw HTML is shown as text, never passed through or dropped.
                let line = t.strip_suffix('\n').unwrap_or(t);
                self.text(line);
                if t.ends_with('\n') {
                    self.owe(Level::Line);
                }
            }
            Event::InlineHtml(t) => self.text(t),
            Event::FootnoteReference(t) => self.text(&format!("[{t}]")),
            Event::SoftBreak | Event::HardBreak => {
                if self.blocks.prefix_width > FOLD_BREAKS_PAST {
                    self.text(" ");
                } else {
                    self.owe(Level::Line);
                }
            }
            Event::Rule => {
                self.end_line();
                self.flush();
                self.out.graphemes("———");
                self.wrote();
                self.owe(Level::Paragraph);
            }
            Event::TaskListMarker(done) => {
                self.flush();
                self.out.graphemes(if *done { "☑" } else { "☐" });
                self.out.space(" ", Level::Word, false);
                self.wrote();
            }
        }
    }

    fn start<I: Iterator<Item = Event<'a>>>(&mut self, tag: &mut Tag<'a>, rest: &mut I) {
        // A block never continues the line before it. In a tight list item the item's text
        // comes without a paragraph, so nothing else owes the break: without this a quote or
        // a fence after it is glued to its last word (`* a\n  > b` as "• ab").
        if matches!(
            tag,
            Tag::BlockQuote(_)
                | Tag::CodeBlock(_)
                | Tag::Heading { .. }
                | Tag::HtmlBlock
                | Tag::Table(_)
        ) {
            self.end_line();
        }
        match tag {
            Tag::Paragraph
            | Tag::HtmlBlock
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_)
            | Tag::Superscript
            | Tag::Subscript
            | Tag::TableHead
            | Tag::TableRow
            | Tag::TableCell => {}
            Tag::Heading { level, .. } => {
                self.flush();
                let id = match self.d.heading(*level as u8) {
                    Heading::Plain => None,
                    Heading::Prefix(p) => {
                        // Written with the first content, so an empty heading writes nothing.
                        self.inline.heading_prefix = Some(p);
                        None
                    }
                    Heading::Styled(pair) => Some(self.open(pair)),
                };
                self.inline.styles.push(id);
            }
            Tag::BlockQuote(_) => self.start_quote(),
            Tag::CodeBlock(kind) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => fence_language(info).to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(CodeBlock {
                    lang,
                    body: String::new(),
                });
            }
            Tag::List(first) => {
                if !self.blocks.lists.is_empty() {
                    self.owe(Level::Line);
                }
                self.blocks.lists.push(*first);
            }
            Tag::Item => self.start_item(),
            Tag::Table(alignments) => {
                self.flush_break();
                self.table = Some(Table::new(std::mem::take(alignments)));
            }
            Tag::Emphasis | Tag::Strong | Tag::Strikethrough => {
                let style = match tag {
                    Tag::Emphasis => Style::Emphasis,
                    Tag::Strong => Style::Strong,
                    _ => Style::Strike,
                };
                self.flush();
                // Past the cap the words stay, unstyled.
                let id = if self.inline.styles.len() < MAX_NESTING {
                    self.d.style(style).map(|pair| self.open(pair))
                } else {
                    None
                };
                self.inline.styles.push(id);
            }
            // Inside a label, links and images are flattened to their words: no nested links
            // on any surface, and no recursion on the input's nesting.
            Tag::Link { .. } | Tag::Image { .. } if self.inline.in_link => {}
            Tag::Link {
                link_type,
                dest_url,
                ..
            }
            | Tag::Image {
                link_type,
                dest_url,
                ..
            } => {
                let label = collect_label(rest);
                self.link(dest_url, label, *link_type);
            }
        }
    }

    fn start_quote(&mut self) {
        let shown = self.blocks.quote_depth < MAX_NESTING;
        let level = match self.d.quote() {
            Quote::Prefix(p)
                if shown && self.blocks.prefix_width + p.chars().count() <= MAX_PREFIX_WIDTH =>
            {
                self.flush_break();
                self.blocks.containers.push(Container::Quote);
                self.blocks.prefix_width += p.chars().count();
                // Reopened only mid-line: at a line start the prefix is already there.
                let id = self.out.open("".into(), "".into(), Some(p.into()), 0, true);
                QuoteLevel {
                    marker: Some(id),
                    container: true,
                }
            }
            // Paired quotes do not nest (Telegram rejects nested blockquotes).
            Quote::Paired(pair) if self.blocks.quote_depth == 0 => {
                self.flush();
                QuoteLevel {
                    marker: Some(self.open(pair)),
                    container: false,
                }
            }
            // Past the cap a quote's words join the quote around it.
            quote => {
                if matches!(quote, Quote::Prefix(_)) {
                    self.flush_break();
                }
                QuoteLevel {
                    marker: None,
                    container: false,
                }
            }
        };
        if level.marker.is_some() {
            self.blocks.quote_depth += 1;
        }
        self.blocks.quotes.push(level);
    }

    fn start_item(&mut self) {
        self.owe(Level::Line);
        let depth = self.blocks.item_depth;
        let bullet: Cow<'static, str> = match self.blocks.lists.last_mut() {
            Some(Some(n)) => {
                let mut b = n.to_string();
                b.push_str(". ");
                *n = n.saturating_add(1);
                Cow::Owned(b)
            }
            _ => Cow::Borrowed(self.d.bullet(depth)),
        };
        let width = bullet.chars().count();
        // Past the cap an item is a line of the item around it: its words stay, its bullet
        // and indentation do not.
        let shown = depth < MAX_NESTING && self.blocks.prefix_width + width <= MAX_PREFIX_WIDTH;
        if shown {
            self.blocks.containers.push(Container::Item {
                bullet,
                width,
                bullet_pending: true,
            });
            self.blocks.prefix_width += width;
            self.blocks.item_depth += 1;
        }
        self.blocks.items.push(shown);
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
                self.inline.heading_prefix = None;
                if let Some(Some(id)) = self.inline.styles.pop() {
                    self.out.close(id);
                }
                self.owe(Level::Paragraph);
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                if let Some(Some(id)) = self.inline.styles.pop() {
                    self.out.close(id);
                }
            }
            TagEnd::BlockQuote(_) => {
                if let Some(level) = self.blocks.quotes.pop() {
                    if let Some(id) = level.marker {
                        self.out.close(id);
                        self.blocks.quote_depth -= 1;
                    }
                    if level.container {
                        self.pop_container();
                    }
                }
                self.owe(Level::Paragraph);
            }
            TagEnd::List(_) => {
                self.blocks.lists.pop();
                // A nested list ends its item's line; a top-level one ends a block.
                self.owe(if self.blocks.lists.is_empty() {
                    Level::Paragraph
                } else {
                    Level::Line
                });
            }
            TagEnd::Item => {
                if self.blocks.items.pop() == Some(true) {
                    self.pop_container();
                    self.blocks.item_depth -= 1;
                }
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

    fn pop_container(&mut self) {
        let width = match self.blocks.containers.pop() {
            Some(Container::Quote) => match self.d.quote() {
                Quote::Prefix(p) => p.chars().count(),
                Quote::Paired(_) => 0,
            },
            Some(Container::Item { width, .. }) => width,
            None => 0,
        };
        self.blocks.prefix_width -= width;
    }

    pub(super) fn open(&mut self, pair: Pair) -> u32 {
        self.out
            .open(pair.open, pair.close, None, pair.entities, false)
    }

    /// Owes a line break if the current line has content (and only then: a run of nested
    /// blocks opening at a line start must not write a break each).
    fn end_line(&mut self) {
        if self.lines.line_started && !self.lines.at_line_start {
            self.owe(Level::Line);
        }
    }

    /// Owes at least a `level` break before the next content.
    pub(super) fn owe(&mut self, level: Level) {
        self.lines.pending = Some(self.lines.pending.map_or(level, |p| p.max(level)));
    }

    /// Writes the owed break, if any content precedes it. The check inlines where blocks
    /// open (a deep nest of quotes opens one per two bytes); the write does not.
    #[inline]
    pub(super) fn flush_break(&mut self) {
        if let Some(level) = self.lines.pending.take()
            && self.lines.written
        {
            self.write_break(level);
        }
    }

    /// Writes a break of `level` at the end of the current line.
    #[inline(never)]
    fn write_break(&mut self, level: Level) {
        let text = if level == Level::Paragraph {
            "\n\n"
        } else {
            "\n"
        };
        self.out.space(text, level, false);
        self.lines.line_started = false;
    }

    /// Writes the owed break and the line prefix, before content.
    pub(super) fn flush(&mut self) {
        self.flush_break();
        if !self.lines.line_started {
            if !self.blocks.containers.is_empty() {
                // One buffer for every line's prefix: a list or a quote writes one per line.
                let mut prefix = std::mem::take(&mut self.blocks.line);
                prefix.clear();
                self.push_line_prefix(&mut prefix, true);
                self.out.prefix(&prefix);
                self.blocks.line = prefix;
            }
            self.lines.line_started = true;
            self.lines.at_line_start = true;
            self.lines.leading_digits = Some(0);
        }
        if let Some(prefix) = self.inline.heading_prefix.take() {
            self.out.prefix(&prefix);
        }
    }

    /// The prefix of the current line: quote markers, bullets, indentation.
    pub(super) fn line_prefix(&mut self, take_bullets: bool) -> String {
        let mut prefix = String::new();
        self.push_line_prefix(&mut prefix, take_bullets);
        prefix
    }

    /// Appends the prefix of the current line to `prefix`.
    fn push_line_prefix(&mut self, prefix: &mut String, take_bullets: bool) {
        if self.blocks.containers.is_empty() {
            return;
        }
        let quote = match self.d.quote() {
            Quote::Prefix(p) => p,
            Quote::Paired(_) => "",
        };
        if D::QUOTE_STARTS_LINE {
            for container in &self.blocks.containers {
                if matches!(container, Container::Quote) {
                    prefix.push_str(quote);
                }
            }
        }
        for container in &mut self.blocks.containers {
            match container {
                Container::Quote if D::QUOTE_STARTS_LINE => {}
                Container::Quote => prefix.push_str(quote),
                Container::Item {
                    bullet,
                    width,
                    bullet_pending,
                } => {
                    if *bullet_pending && take_bullets {
                        prefix.push_str(bullet);
                        *bullet_pending = false;
                    } else {
                        // The whole prefix is at most `MAX_PREFIX_WIDTH` characters.
                        prefix.push_str(&SPACES[..(*width).min(SPACES.len())]);
                    }
                }
            }
        }
    }

    pub(super) fn wrote(&mut self) {
        self.lines.written = true;
        self.lines.at_line_start = false;
        self.lines.leading_digits = None;
    }
}

/// The longest fence language kept. The tag is repeated on every part a long block is split
/// into, so a hostile info string (a model told to open a fence with kilobytes of "language")
/// would otherwise fill each part with it; real tags (`rust`, `objective-c++`) are short.
const MAX_FENCE_LANGUAGE: usize = 32;

/// The language a fence is re-opened with: the info string's first word, or none when that is
/// longer than [`MAX_FENCE_LANGUAGE`].
fn fence_language(info: &str) -> &str {
    let lang = info.split_whitespace().next().unwrap_or("");
    if lang.len() > MAX_FENCE_LANGUAGE {
        ""
    } else {
        lang
    }
}
