//! The one chunker: packs a renderer's atoms into parts that fit the channel's limits, within
//! the renderer's part budget.
//!
//! Every channel uses this same function; channels differ only in the unit their atoms are
//! measured in and in whether they count entities. The rules:
//!
//! - an atom is never split; a grapheme run is cut inside only at a cluster boundary, and only
//!   when nothing else fits;
//! - a part ends at the strongest break (paragraph > line > sentence > word) that leaves it at
//!   least half full, else at the latest break, else at a hard cut;
//! - markers open at a cut are closed at the end of the part and reopened at the start of the
//!   next, and those markers count against the limit;
//! - every part holds at least one visible atom, so chunking always progresses; a limit too
//!   small for that is a [`RenderError`];
//! - at most `max_parts` parts are made. The parts concatenate to the rendered text (whitespace
//!   dropped at cuts and reopened markers aside) **except at a budget cut**: when the reply
//!   needs more parts, only the first `max_parts` are kept, the last of them packed with room
//!   for [`BUDGET_MARKER`] and ending in it, and the cut is reported as a
//!   [`PartBudgetCut`](crate::render::PartBudgetCut). A reply that fits `max_parts` parts
//!   exactly is not cut. For genuinely
//!   long output (a log, a report) send a file or a link instead, or raise the budget with
//!   the renderer's `with_max_parts`.

use std::ops::Range;

use unicode_segmentation::UnicodeSegmentation;

use super::atom::{Atom, Atoms, Kind, Level};
use crate::render::{PartBudgetCut, RenderError};

/// A channel's limits for one part.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Maximum length in the channel's unit; `None` means unlimited.
    pub(crate) units: Option<usize>,
    /// Maximum number of entities (formatting markers); `None` means unlimited.
    pub(crate) entities: Option<usize>,
}

/// One part as the chunker built it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    /// The exact payload.
    pub(crate) text: String,
    /// Bytes of reopened markers at the start of `text`.
    pub(crate) head: usize,
    /// Bytes of closing markers at the end of `text`.
    pub(crate) tail: usize,
    /// Where the rest of `text` lies in the rendered output.
    pub(crate) body: Range<usize>,
}

/// A position in the stream: an atom, and a byte inside it (its start unless a grapheme run
/// was cut).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    idx: usize,
    byte: usize,
}

/// What [`Chunker::run`] carries along a run of simple atoms.
#[derive(Clone, Copy, Debug)]
struct Scan {
    /// Units written so far, reopened markers included.
    len: usize,
    /// Whether the part shows something so far.
    has_content: bool,
    /// Whether the atom before is an `Open`.
    prev_open: bool,
}

/// The state of a part up to some position: where a cut there would leave it.
#[derive(Clone, Copy, Debug)]
struct Mark {
    pos: Pos,
    /// Units written so far, reopened markers included.
    len: usize,
    /// Units the closing markers would add.
    closes: usize,
    /// Entities in the part so far, reopened markers included.
    entities: usize,
}

impl Mark {
    fn fill(&self) -> usize {
        self.len + self.closes
    }
}

/// The chunker's state between feeds, so a renderer can pack parts while it writes atoms and
/// drop the atoms already packed (memory stays bounded by a part, not the message).
pub(crate) struct Packer {
    limits: Limits,
    /// The part budget (at least one).
    max_parts: usize,
    /// Markers open at `pos`.
    stack: Vec<u32>,
    /// Where the next part starts, relative to the atoms still buffered.
    pos: Pos,
    parts: Vec<Part>,
    /// Whether more visible output follows the budget's last part.
    overflow: bool,
    /// Whether the budget's last part was packed with room for the marker.
    reserved: bool,
    /// Where the budget's last part starts and the markers open there, while it may still
    /// need packing again with room for the marker.
    last_start: Option<(Pos, Vec<u32>)>,
}

impl Packer {
    /// A packer at the start of a message.
    pub(crate) fn new(limits: Limits, max_parts: usize) -> Self {
        Self {
            limits,
            max_parts: max_parts.max(1),
            stack: Vec::new(),
            pos: Pos { idx: 0, byte: 0 },
            parts: Vec::new(),
            overflow: false,
            reserved: false,
            last_start: None,
        }
    }

    /// Packs every part that the buffered atoms decide. Until `last`, the final buffered atom
    /// is left alone (the renderer may still amend it) and a part that reaches the end of the
    /// buffer waits for more. Returns how many leading atoms are done with.
    pub(crate) fn feed(&mut self, atoms: &Atoms, last: bool) -> Result<usize, RenderError> {
        let end = if last {
            atoms.atoms.len()
        } else {
            atoms.atoms.len().saturating_sub(1)
        };
        if self.overflow {
            // Past the budget: nothing more is packed, the walk only measures what is left out.
            self.pos.idx = end;
            return Ok(end);
        }
        let max = self.limits.units.unwrap_or(usize::MAX);
        let chunker = &mut Chunker {
            atoms,
            list: &atoms.atoms[..end],
            last,
            max,
            max_entities: self.limits.entities.unwrap_or(usize::MAX),
        };
        let last_visible = if last {
            atoms.atoms.iter().rposition(|a| atoms.is_visible(a))
        } else {
            None
        };
        loop {
            self.pos = chunker.skip_at_start(self.pos, &mut self.stack);
            if self.pos.idx >= end {
                break;
            }
            if last {
                let Some(last_visible) = last_visible else {
                    break;
                };
                if self.pos.idx > last_visible
                    || (self.pos.idx == last_visible
                        && !atoms.is_visible_from(&atoms.atoms[self.pos.idx], self.pos.byte))
                {
                    break;
                }
            }
            if self.parts.len() == self.max_parts {
                // More to show past the budget: the reply is cut, and its last part is packed
                // again with room for the marker.
                let more = atoms.atoms[self.pos.idx..end]
                    .iter()
                    .any(|a| atoms.is_visible(a));
                if more {
                    self.overflow = true;
                    self.repack_last(chunker, max);
                    self.pos.idx = end;
                }
                break;
            }
            if self.parts.len() + 1 == self.max_parts {
                // Kept (with its atoms) until the reply is known to fit or to be cut.
                self.last_start = Some((self.pos, self.stack.clone()));
            }
            match chunker.part(self.pos, &mut self.stack)? {
                Some((part, next)) => {
                    self.parts.push(part);
                    self.pos = next;
                }
                None => break,
            }
        }
        if self.overflow {
            return Ok(end);
        }
        Ok(self
            .last_start
            .as_ref()
            .map_or(self.pos.idx, |(start, _)| start.idx.min(self.pos.idx)))
    }

    /// Packs the budget's last part again with room for the marker. If a piece does not fit
    /// that room, the part keeps the whole limit and the marker becomes a part of its own.
    fn repack_last(&mut self, chunker: &mut Chunker<'_>, max: usize) {
        let reserve = marker_for(max).1;
        let Some((start, mut stack)) = self.last_start.take() else {
            return;
        };
        if reserve == 0 {
            return;
        }
        chunker.max = max - reserve;
        if let Ok(Some((part, _))) = chunker.part(start, &mut stack) {
            self.parts.pop();
            self.parts.push(part);
            self.reserved = true;
        }
        chunker.max = max;
    }

    /// The buffer dropped its first `done` atoms.
    pub(crate) fn drained(&mut self, done: usize) {
        self.pos.idx -= done;
        if let Some((start, _)) = &mut self.last_start {
            start.idx -= done;
        }
    }

    /// The parts packed, within the budget, and the cut if the budget shortened the reply;
    /// `rendered` is the length of the whole rendered text in bytes.
    pub(crate) fn finish(mut self, rendered: usize) -> (Vec<Part>, Option<PartBudgetCut>) {
        if !self.overflow {
            return (self.parts, None);
        }
        let max = self.limits.units.unwrap_or(usize::MAX);
        let marker = match marker_for(max) {
            (Some(marker), _) if self.reserved => marker,
            // No room was kept: the marker is a part of its own, in place of the last one.
            _ => {
                let start = self.parts.last().map_or(0, |p| p.body.start);
                if self.parts.len() >= self.max_parts {
                    self.parts.pop();
                }
                let text = if max >= BUDGET_MARKER_LONE.chars().count() {
                    BUDGET_MARKER_LONE
                } else {
                    BUDGET_MARKER_SHORT
                };
                self.parts.push(Part {
                    text: text.to_owned(),
                    head: 0,
                    tail: text.len(),
                    body: start..start,
                });
                let omitted = rendered.saturating_sub(start);
                let cut = PartBudgetCut::new(self.parts.len() - 1, self.max_parts, omitted);
                return (self.parts, Some(cut));
            }
        };
        let mut omitted = rendered;
        if let Some(last) = self.parts.last_mut() {
            omitted = rendered.saturating_sub(last.body.end);
            last.text.push_str(marker);
            last.tail += marker.len();
        }
        let cut = PartBudgetCut::new(self.parts.len(), self.max_parts, omitted);
        (self.parts, Some(cut))
    }
}

/// Ends the last part when the part budget cut a reply short. Plain text with no markup, so it
/// reads the same on every surface and needs no escaping.
pub(crate) const BUDGET_MARKER: &str = "\n\n… (reply shortened)";

/// The marker when a part has no room for [`BUDGET_MARKER`].
const BUDGET_MARKER_SHORT: &str = "…";

/// The marker as a part of its own.
const BUDGET_MARKER_LONE: &str = "… (reply shortened)";

/// The marker a part limit of `max` units has room for, and the units to reserve for it
/// (`None`: the marker replaces the last part).
fn marker_for(max: usize) -> (Option<&'static str>, usize) {
    // Both markers are one UTF-16 unit per character.
    let long = BUDGET_MARKER.chars().count();
    if max >= 4 * long {
        (Some(BUDGET_MARKER), long)
    } else if max >= 2 {
        (Some(BUDGET_MARKER_SHORT), 1)
    } else {
        (None, 0)
    }
}

/// Whether a part may start at the first of `atoms`: what follows the whitespace and closing
/// markers skipped there does not continue a grapheme cluster.
fn resumes(atoms: &[Atom]) -> bool {
    atoms
        .iter()
        .find(|a| !matches!(a.kind, Kind::Space { keep: false, .. } | Kind::Close(_)))
        .is_none_or(|a| !a.joins_prev)
}

struct Chunker<'a> {
    atoms: &'a Atoms,
    /// The atoms this feed may look at.
    list: &'a [Atom],
    /// Whether `list` ends the message.
    last: bool,
    max: usize,
    max_entities: usize,
}

impl Chunker<'_> {
    /// Skips what a part never starts with: whitespace dropped at the cut, and closing
    /// markers already written at the end of the previous part.
    fn skip_at_start(&self, mut pos: Pos, stack: &mut Vec<u32>) -> Pos {
        let list = self.list;
        while let Some(atom) = list.get(pos.idx) {
            if pos.byte != atom.start() {
                break;
            }
            match atom.kind {
                Kind::Space { keep: false, .. } => {}
                Kind::Close(id) if stack.last() == Some(&id) => {
                    stack.pop();
                }
                _ => break,
            }
            pos.idx += 1;
            pos.byte = self
                .atoms
                .atoms
                .get(pos.idx)
                .map_or(self.atoms.text.len(), |a| a.start());
        }
        pos
    }

    /// Builds one part starting at `start` with `stack` open; updates `stack` to what is open
    /// at the cut and returns the part and where the next one starts. `None`: the part reaches
    /// past the atoms available to this feed.
    fn part(&self, start: Pos, stack: &mut Vec<u32>) -> Result<Option<(Part, Pos)>, RenderError> {
        let atoms = self.atoms;
        let list = self.list;
        let first_is_prefix = matches!(list[start.idx].kind, Kind::Prefix);
        let mut head = String::new();
        let mut st = Mark {
            pos: start,
            len: 0,
            closes: 0,
            entities: 0,
        };
        for &id in stack.iter() {
            let marker = atoms.marker(id);
            st.closes += marker.close_units;
            st.entities += marker.entities;
            if marker.mid_line_only && first_is_prefix {
                continue;
            }
            st.len += marker.reopen_units;
            head.push_str(&marker.reopen);
        }

        let mut has_content = false;
        let mut prev_open = false;
        let mut before_opens: Option<Mark> = None;
        let mut breaks: [Option<Mark>; 4] = [None; 4];
        // The markers taken, in order (only the general step takes them): which of them the
        // part holds sets what is open after it.
        let mut markers: Vec<usize> = Vec::new();
        let mut i = start.idx;
        let end = loop {
            let Some(atom) = list.get(i) else {
                if !self.last {
                    return Ok(None);
                }
                break st;
            };
            let byte = if i == start.idx {
                start.byte
            } else {
                atom.start()
            };
            // Most atoms are whole words, escapes, prefixes or the spaces between words that
            // fit: a run of them only adds their units and their visibility (what the general
            // step below does for them, without its marker bookkeeping), and a space notes the
            // break before it (after it, for kept whitespace). No marker opens or closes along
            // the run, so it is checked against the room the closing markers leave, in a loop
            // of its own. An atom that does not fit goes to the general step.
            if byte == atom.start()
                && !matches!(atom.kind, Kind::Open(_) | Kind::Close(_))
                && st.entities <= self.max_entities
                && let Some(room) = self.max.checked_sub(st.closes)
            {
                let scan = Scan {
                    len: st.len,
                    has_content,
                    prev_open,
                };
                let (j, scan) = self.run(i, room, scan, &st, &mut breaks);
                has_content = scan.has_content;
                prev_open = scan.prev_open;
                if j > i {
                    st.pos = Pos {
                        idx: j,
                        byte: list[j - 1].end(),
                    };
                    st.len = scan.len;
                    i = j;
                    continue;
                }
            }
            let units = if byte == atom.start() {
                atom.units()
            } else {
                atoms.unit.measure(&atoms.text[byte..atom.end()])
            };
            let mut next = Mark {
                pos: Pos {
                    idx: i + 1,
                    byte: atom.end(),
                },
                len: st.len + units,
                ..st
            };
            match atom.kind {
                Kind::Open(id) => {
                    next.closes += atoms.marker(id).close_units;
                    next.entities += atoms.marker(id).entities;
                }
                Kind::Close(id) => next.closes -= atoms.marker(id).close_units,
                Kind::Space { level, keep: false }
                    if has_content && !prev_open && !atom.joins_prev && self.can_resume(i) =>
                {
                    breaks[level as usize] = Some(st);
                }
                _ => {}
            }
            if next.fill() <= self.max && next.entities <= self.max_entities {
                if matches!(atom.kind, Kind::Open(_)) && !prev_open {
                    before_opens = (has_content && !atom.joins_prev).then_some(st);
                }
                has_content = has_content || atoms.is_visible_from(atom, byte);
                prev_open = matches!(atom.kind, Kind::Open(_));
                if let Kind::Space { level, keep: true } = atom.kind
                    && has_content
                    && self.can_resume(i + 1)
                {
                    breaks[level as usize] = Some(next);
                }
                if matches!(atom.kind, Kind::Open(_) | Kind::Close(_)) {
                    markers.push(i);
                }
                st = next;
                i += 1;
                continue;
            }
            // Atom `i` does not fit: choose where this part ends.
            if let Some(cut) = self.best_break(&breaks) {
                break cut;
            }
            if has_content && byte == atom.start() && !atom.joins_prev {
                if !prev_open {
                    break st;
                }
                if let Some(cut) = before_opens {
                    break cut;
                }
            }
            if let Some(cut) = self.cut_inside(&st, byte, i, has_content) {
                break cut;
            }
            return Err(self.too_small(&st, &next, byte, i, has_content));
        };

        for &idx in markers.iter().take_while(|&&idx| idx < end.pos.idx) {
            match list[idx].kind {
                Kind::Open(id) => stack.push(id),
                Kind::Close(_) => {
                    stack.pop();
                }
                _ => {}
            }
        }
        // One allocation of the part's exact size: its head, its body, its closing markers.
        let body = &atoms.text[start.byte..end.pos.byte];
        let tail: usize = stack.iter().map(|&id| atoms.marker(id).close.len()).sum();
        let mut text = String::with_capacity(head.len() + body.len() + tail);
        text.push_str(&head);
        text.push_str(body);
        for &id in stack.iter().rev() {
            text.push_str(&atoms.marker(id).close);
        }
        Ok(Some((
            Part {
                text,
                head: head.len(),
                tail,
                body: start.byte..end.pos.byte,
            },
            end.pos,
        )))
    }

    /// Takes the run of simple atoms from `from` that fit in `room` units (the limit less the
    /// closing markers of `at`, the state at `from`), noting the breaks among them in
    /// `breaks`; returns the index after the run and the scan's state there. Simple atoms are
    /// grapheme runs, escapes, prefixes and whitespace: a marker or an atom that does not fit
    /// ends the run. A function of its own so that its few variables stay in registers.
    #[inline(never)]
    fn run(
        &self,
        from: usize,
        room: usize,
        scan: Scan,
        at: &Mark,
        breaks: &mut [Option<Mark>; 4],
    ) -> (usize, Scan) {
        let list = self.list;
        let Scan {
            mut len,
            mut has_content,
            mut prev_open,
        } = scan;
        // Walked as a shrinking slice: what follows an atom is at hand for `resumes`.
        let mut rest = list.get(from..).unwrap_or_default();
        while let [atom, after @ ..] = rest {
            let next = len + atom.units();
            match atom.kind {
                Kind::Graphemes | Kind::Escape | Kind::Prefix => {
                    if next > room {
                        break;
                    }
                    has_content = has_content || self.atoms.is_visible(atom);
                }
                Kind::Space { level, keep: false } => {
                    // The break is before the space (and noted even when the space does not
                    // fit: the general step notes the same one).
                    if has_content && !prev_open && !atom.joins_prev && resumes(after) {
                        // Atoms are contiguous: this one starts where the run is.
                        let pos = Pos {
                            idx: list.len() - rest.len(),
                            byte: atom.start(),
                        };
                        breaks[level as usize] = Some(Mark { pos, len, ..*at });
                    }
                    if next > room {
                        break;
                    }
                }
                Kind::Space { level, keep: true } => {
                    // Kept whitespace (code): the break is after it.
                    if next > room {
                        break;
                    }
                    if has_content && resumes(after) {
                        let pos = Pos {
                            idx: list.len() - after.len(),
                            byte: atom.end(),
                        };
                        breaks[level as usize] = Some(Mark {
                            pos,
                            len: next,
                            ..*at
                        });
                    }
                }
                Kind::Open(_) | Kind::Close(_) => break,
            }
            len = next;
            prev_open = false;
            rest = after;
        }
        let scan = Scan {
            len,
            has_content,
            prev_open,
        };
        (list.len() - rest.len(), scan)
    }

    /// Whether a part may start at atom `idx`: what follows the whitespace and closing
    /// markers skipped there does not continue a grapheme cluster.
    fn can_resume(&self, idx: usize) -> bool {
        resumes(self.list.get(idx..).unwrap_or_default())
    }

    /// The strongest break leaving the part at least half full, else the latest break.
    fn best_break(&self, breaks: &[Option<Mark>; 4]) -> Option<Mark> {
        let strongest = [Level::Paragraph, Level::Line, Level::Sentence, Level::Word]
            .into_iter()
            .filter_map(|level| breaks[level as usize])
            .find(|mark| mark.fill() >= self.max / 2);
        strongest.or_else(|| breaks.iter().flatten().copied().max_by_key(|m| m.pos.byte))
    }

    /// A hard cut inside grapheme run `idx` (from `byte`): as many whole clusters as fit.
    /// A part with nothing visible yet takes clusters only up to a visible one: indentation
    /// alone is no part.
    fn cut_inside(&self, st: &Mark, byte: usize, idx: usize, has_content: bool) -> Option<Mark> {
        let atoms = self.atoms;
        let atom = &self.list[idx];
        if atom.kind != Kind::Graphemes {
            return None;
        }
        let text = &atoms.text[byte..atom.end()];
        let mut len = st.len;
        let mut visible = has_content;
        let mut cut = None;
        for (offset, cluster) in text.grapheme_indices(true) {
            let units = atoms.unit.measure(cluster);
            if len + units + st.closes > self.max {
                break;
            }
            len += units;
            visible = visible || !cluster.trim().is_empty();
            if visible {
                cut = Some((byte + offset + cluster.len(), len));
            }
        }
        let (cut, len) = cut.filter(|&(c, _)| c < atom.end())?;
        Some(Mark {
            pos: Pos { idx, byte: cut },
            len,
            ..*st
        })
    }

    fn too_small(
        &self,
        st: &Mark,
        next: &Mark,
        byte: usize,
        idx: usize,
        has_content: bool,
    ) -> RenderError {
        if next.entities > self.max_entities {
            return RenderError::TooManyEntities {
                limit: self.max_entities,
                needed: next.entities,
            };
        }
        let atom = &self.list[idx];
        let piece = match atom.kind {
            Kind::Graphemes => {
                // Up to and including the first visible cluster (or the first, after content).
                let mut units = 0;
                for cluster in self.atoms.text[byte..atom.end()].graphemes(true) {
                    units += self.atoms.unit.measure(cluster);
                    if has_content || !cluster.trim().is_empty() {
                        break;
                    }
                }
                units
            }
            _ => next.len - st.len,
        };
        RenderError::LimitTooSmall {
            limit: self.max,
            needed: st.len + piece + next.closes,
        }
    }
}
