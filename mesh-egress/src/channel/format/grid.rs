//! A table's cells and their drawing as aligned monospace text (the walk collects them, in
//! `table.rs`).

use pulldown_cmark::Alignment;
use unicode_segmentation::UnicodeSegmentation;

use super::text::SPACES;

/// A table being collected: cells as plain text.
pub(super) struct Table {
    pub(super) alignments: Vec<Alignment>,
    pub(super) rows: Vec<Vec<String>>,
    pub(super) head_rows: usize,
    pub(super) cell: String,
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
