//! Tables: cells collected as plain text, drawn as aligned monospace text in a code block.

use pulldown_cmark::{Event, Tag, TagEnd};

use super::Dialect;
use super::grid::draw_table;
use super::link::{collect_label, is_reference, plain_label};
use super::walker::Walker;

impl<'a, D: Dialect> Walker<'_, D> {
    /// One event inside a table.
    pub(super) fn table_event<I: Iterator<Item = Event<'a>>>(
        &mut self,
        event: &mut Event<'a>,
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
                let url_shown = !is_reference(*link_type)
                    || match self.inline.reference_bytes.checked_sub(dest_url.len()) {
                        Some(left) => {
                            self.inline.reference_bytes = left;
                            true
                        }
                        None => false,
                    };
                if !url_shown || label.trim().is_empty() && dest_url.is_empty() {
                    table.cell.push_str(&label);
                } else if label.trim().is_empty() || label == **dest_url {
                    table.cell.push_str(dest_url);
                } else {
                    table.cell.push_str(&format!("{label} ({dest_url})"));
                }
            }
            Event::Text(t)
            | Event::Code(t)
            | Event::Html(t)
            | Event::InlineHtml(t)
            | Event::InlineMath(t) => table.cell.push_str(t),
            Event::SoftBreak | Event::HardBreak => table.cell.push(' '),
            Event::TaskListMarker(done) => table.cell.push_str(if *done { "☑ " } else { "☐ " }),
            Event::End(TagEnd::Table) => {
                let table = self.table.take().map(draw_table).unwrap_or_default();
                self.code_block("", &table);
            }
            _ => {}
        }
    }
}
