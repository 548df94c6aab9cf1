//! Tables: cells collected as plain text, drawn as aligned monospace text in a code block.

use pulldown_cmark::{Alignment, Event, Tag, TagEnd};
use unicode_segmentation::UnicodeSegmentation;

use super::Dialect;
use super::label::{collect_label, is_reference, plain_label};
use super::text::SPACES;
use super::walker::Walker;

/// A table being collected: cells as plain text.
pub(super) struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    head_rows: usize,
    cell: String,
}

impl Table {
    pub(super) fn new(alignments: Vec<Alignment>) -> Self {
        Self {
            alignments,
            rows: Vec::new(),
            head_rows: 0,
            cell: String::new(),
        }
    }
}

impl<'a, D: Dialect> Walker<'_, D> {
    /// One event inside a table.
    pub(super) fn table_event<I: Iterator<Item = Event<'a>>>(
        &mut self,
        event: Event<'a>,
        rest: &mut I,
    ) {
        let Some(table) = &mut self.table else {
            return;
        };
        match event {
            Event::Start(Tag::TableHead | Tag::TableRow) => table.rows.push(Vec::new()),
            Event::End(TagEnd::TableHead) => table.head_rows = table.rows.len(),
            Event::End(TagEnd::TableCell) => {
                let mut cell = std::mem::take(&mut table.cell);
                if let Some(row) = table.rows.last_mut() {
                    let trimmed = cell.trim();
                    if trimmed.len() != cell.len() {
                        cell = trimmed.to_owned();
                    }
                    row.push(cell);
                }
            }
            Event::Start(
                Tag::Link {
                    dest_url,
                    link_type,
                    ..
                }
                | Tag::Image {
                    dest_url,
                    link_type,
                    ..
                },
            ) => {
                let label = plain_label(&collect_label(rest));
                // A referenced URL is paid for once in the source: it spends the budget.
                let url_shown = !is_reference(link_type)
                    || match self.inline.reference_bytes.checked_sub(dest_url.len()) {
                        Some(left) => {
                            self.inline.reference_bytes = left;
                            true
                        }
                        None => false,
                    };
                if !url_shown || label.trim().is_empty() && dest_url.is_empty() {
                    table.cell.push_str(&label);
                } else if label.trim().is_empty() || label == *dest_url {
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

/// The width of a cell in columns (grapheme clusters).
fn width(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.graphemes(true).count()
    }
}

/// Draws a table as aligned monospace text. Padding is dropped when it would make the drawing
/// more than twice the size of its cells (one wide cell over many short rows would otherwise
/// multiply the output), and empty cells at a row's end are never drawn.
pub(super) fn draw_table(mut table: Table) -> String {
    for row in &mut table.rows {
        while row.last().is_some_and(String::is_empty) {
            row.pop();
        }
    }
    let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    let mut content = 0;
    for row in &table.rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
            content += cell.len() + 3;
        }
    }
    let row_width: usize = widths.iter().sum::<usize>() + 3 * columns.saturating_sub(1);
    let padded = row_width.saturating_mul(table.rows.len() + 1);
    let pad = padded <= content.saturating_mul(2).saturating_add(256);
    let mut out = String::with_capacity(padded.min(content.saturating_mul(2)) + 64);
    for (n, row) in table.rows.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let line_start = out.len();
        let drawn = if pad { columns } else { row.len() };
        for (col, w) in widths.iter().enumerate().take(drawn) {
            if col > 0 {
                out.push_str(" | ");
            }
            let cell = row.get(col).map_or("", String::as_str);
            let gap = if pad { w - width(cell) } else { 0 };
            if matches!(table.alignments.get(col), Some(Alignment::Right)) {
                push_repeated(&mut out, SPACES, gap);
                out.push_str(cell);
            } else {
                out.push_str(cell);
                push_repeated(&mut out, SPACES, gap);
            }
        }
        // The line's trailing padding (and trailing blanks of its last cell) is dropped.
        let kept = out[line_start..].trim_end().len();
        out.truncate(line_start + kept);
        if n + 1 == table.head_rows {
            out.push('\n');
            let rules: &mut dyn Iterator<Item = usize> = if pad {
                &mut widths.iter().copied()
            } else {
                &mut row.iter().map(|c| width(c).max(1))
            };
            for (col, w) in rules.enumerate() {
                if col > 0 {
                    out.push_str("-+-");
                }
                push_repeated(&mut out, DASHES, w);
            }
        }
    }
    out
}

/// Dashes for rules, as [`SPACES`] is for padding.
const DASHES: &str = "----------------------------------------------------------------";

/// Appends `n` copies of the one ASCII character `run` repeats.
fn push_repeated(out: &mut String, run: &str, mut n: usize) {
    while n > 0 {
        let k = n.min(run.len());
        out.push_str(&run[..k]);
        n -= k;
    }
}
