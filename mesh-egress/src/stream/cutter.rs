//! The block cutter: text deltas in, blocks out, cut only where a block renders on its own.
//!
//! Strong cuts sit on line boundaries (after a blank line, after a closing fence, before a list
//! item), so the cutter scans each line once, when its `\n` arrives: the work per delta is the
//! new text, never the whole buffer. A line boundary is always a grapheme boundary (UAX #29
//! GB4/GB5 break after a line feed), so no cluster check is needed there. Weak cuts (a word
//! boundary inside the pending line) are looked for only on an idle flush or at the size cap,
//! over the pending line alone.

use unicode_segmentation::GraphemeCursor;

/// Sizes the cutter works with, in bytes of UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutterConfig {
    /// A strong cut is taken only once the block holds at least this much, so a stream of
    /// one-line paragraphs is not sent as a flurry of tiny messages.
    pub min_block: usize,
    /// Bounded memory: a block that grows past this is cut at the best safe point there is.
    pub max_block: usize,
}

impl Default for CutterConfig {
    /// 80 bytes is about one sentence; 4000 stays under the smallest surface limit the
    /// renderers know (Telegram's 4096), so a capped block is still one part there.
    fn default() -> Self {
        Self {
            min_block: 80,
            max_block: 4000,
        }
    }
}

/// An open fenced code block: its marker, so a matching closing line can be recognised and a
/// block cut at the cap can close and reopen it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fence {
    marker: char,
    len: usize,
    opener: String,
}

/// Cuts a stream of text deltas into blocks at safe Markdown boundaries.
///
/// ```
/// use mesh_egress::stream::{BlockCutter, CutterConfig};
/// let mut cutter = BlockCutter::new(CutterConfig { min_block: 1, max_block: 4000 });
/// let mut blocks = cutter.push("First paragraph.\n\nSecond ");
/// blocks.extend(cutter.push("paragraph.\n"));
/// blocks.extend(cutter.finish());
/// assert_eq!(blocks, vec!["First paragraph.\n\n", "Second paragraph.\n"]);
/// ```
#[derive(Debug, Clone)]
pub struct BlockCutter {
    config: CutterConfig,
    /// The pending block: text received and not yet cut off.
    buf: String,
    /// Bytes of `buf` already scanned as whole lines.
    scanned: usize,
    fence: Option<Fence>,
    /// Open reasoning tags (`<think>`, `<thinking>`) not yet closed.
    reasoning: usize,
    /// Text to put in front of the next block (a fence reopened after a cap cut).
    carry: String,
}

impl BlockCutter {
    /// Drops everything pending, as a new cutter with the same settings would start.
    pub(crate) fn reset(&mut self) {
        *self = Self::new(self.config);
    }

    /// A cutter with the given sizes; `min_block` is at least 1 and `max_block` at least 64
    /// (a cap smaller than a line marker would cut every line).
    pub fn new(config: CutterConfig) -> Self {
        let min_block = config.min_block.max(1);
        Self {
            config: CutterConfig {
                min_block,
                max_block: config.max_block.max(64).max(min_block),
            },
            buf: String::new(),
            scanned: 0,
            fence: None,
            reasoning: 0,
            carry: String::new(),
        }
    }

    /// The text received and not yet given out as a block.
    pub fn pending(&self) -> &str {
        &self.buf
    }

    /// Whether the pending text is inside an open reasoning tag (no cut happens there, except
    /// at the size cap).
    pub fn in_reasoning(&self) -> bool {
        self.reasoning > 0
    }

    /// Feeds one delta; returns the blocks it completed, in order.
    pub fn push(&mut self, delta: &str) -> Vec<String> {
        self.buf.push_str(delta);
        let mut out = Vec::new();
        while let Some(rel) = self.buf[self.scanned..].find('\n') {
            let start = self.scanned;
            let end = start + rel + 1;
            if end > self.config.max_block && start > 0 {
                // Cap at the line boundary, where the fence state is known to be right.
                self.cut_at_cap(start, &mut out);
                continue;
            }
            self.scanned = end;
            if let Some(cut) = self.scan_line(start, end) {
                self.cut_at(cut, &mut out);
            }
        }
        while self.buf.len() > self.config.max_block {
            let cut = self.cap_point();
            self.cut_at_cap(cut, &mut out);
        }
        out
    }

    /// The stream went quiet: give out what is pending up to the best safe word boundary, so a
    /// slow stream still shows progress. Nothing is cut inside a fence or a reasoning tag.
    pub fn flush_idle(&mut self) -> Option<String> {
        if self.fence.is_some() || self.reasoning > 0 {
            return None;
        }
        let point = self.weak_point(self.scanned, self.buf.len()).or_else(|| {
            // The last whole line, when the pending line has no safe word boundary.
            (self.scanned > 0).then_some(self.scanned)
        })?;
        let mut out = Vec::new();
        self.take(point, &mut out);
        out.pop()
    }

    /// The stream ended: whatever is pending is the last block.
    pub fn finish(&mut self) -> Option<String> {
        if self.buf.is_empty() {
            return None;
        }
        let mut block = std::mem::take(&mut self.carry);
        block.push_str(&self.buf);
        self.buf.clear();
        self.scanned = 0;
        Some(block)
    }

    /// Reads the whole line `buf[start..end]` and says where to cut, if anywhere.
    fn scan_line(&mut self, start: usize, end: usize) -> Option<usize> {
        let line = &self.buf[start..end];
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        if let Some(fence) = &self.fence {
            if indent < 4 && closes(fence, trimmed) {
                self.fence = None;
                return (self.reasoning == 0).then_some(end);
            }
            return None;
        }
        if indent < 4
            && let Some((marker, len)) = fence_marker(trimmed)
        {
            let cut_before = self.list_or_fence_cut(start);
            self.fence = Some(Fence {
                marker,
                len,
                opener: line.trim_end_matches(['\n', '\r']).to_owned(),
            });
            return cut_before;
        }
        let was_reasoning = self.reasoning > 0;
        self.reasoning = reasoning_after(self.reasoning, line);
        if was_reasoning || self.reasoning > 0 {
            return None;
        }
        if line.trim().is_empty() {
            return Some(end);
        }
        if indent < 4 && is_list_item(trimmed) {
            return self.list_or_fence_cut(start);
        }
        None
    }

    /// A cut just before the line starting at `start`, when there is text before it.
    fn list_or_fence_cut(&self, start: usize) -> Option<usize> {
        (start > 0 && self.reasoning == 0).then_some(start)
    }

    fn cut_at(&mut self, cut: usize, out: &mut Vec<String>) {
        if cut >= self.config.min_block {
            self.take(cut, out);
        }
    }

    /// Gives out `buf[..point]` as a block.
    fn take(&mut self, point: usize, out: &mut Vec<String>) {
        let mut block = std::mem::take(&mut self.carry);
        block.push_str(&self.buf[..point]);
        self.buf.drain(..point);
        self.scanned = self.scanned.saturating_sub(point);
        out.push(block);
    }

    /// The best place to cut a block that reached the cap: the last line boundary, else the
    /// last safe word boundary of the pending line, else the last grapheme boundary under the
    /// cap.
    fn cap_point(&self) -> usize {
        let cap = self.config.max_block;
        let line_start = self.buf[..floor_char_boundary(&self.buf, cap)]
            .rfind('\n')
            .map_or(0, |nl| nl + 1);
        if line_start > 0 {
            return line_start;
        }
        if let Some(point) = self.weak_point(0, cap) {
            return point;
        }
        let mut point = floor_char_boundary(&self.buf, cap);
        while point > 0 && !grapheme_boundary(&self.buf, point) {
            point = floor_char_boundary(&self.buf, point - 1);
        }
        if point == 0 {
            // One cluster longer than the cap (hostile input): cut after it whole.
            let mut cursor = GraphemeCursor::new(0, self.buf.len(), true);
            point = cursor
                .next_boundary(&self.buf, 0)
                .ok()
                .flatten()
                .unwrap_or(self.buf.len());
        }
        point
    }

    /// A cap cut: inside an open fence the block is closed and the next one reopens it, so no
    /// block holds half a fence.
    fn cut_at_cap(&mut self, point: usize, out: &mut Vec<String>) {
        if self.scanned < point {
            // The cut falls inside the pending line: rescan is not needed for whole lines, and
            // the part after the cut stays pending.
            self.scanned = point;
        }
        self.take(point, out);
        if let Some(fence) = &self.fence
            && let Some(last) = out.last_mut()
        {
            if !last.ends_with('\n') {
                last.push('\n');
            }
            last.extend(std::iter::repeat_n(fence.marker, fence.len));
            last.push('\n');
            self.carry = format!("{}\n", fence.opener);
        }
    }

    /// The last word boundary in `buf[from..=to]` outside inline code, a link and an entity,
    /// with the next character present so the grapheme check can be made. `from` is a line
    /// start, so the inline state starts empty.
    fn weak_point(&self, from: usize, to: usize) -> Option<usize> {
        let line = &self.buf[from..];
        let mut best = None;
        let mut code_run = 0usize; // length of the backtick run that opened a code span
        let mut link_depth = 0usize;
        let mut in_link_target = false;
        let mut entity = false;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '`' {
                let mut run = 1;
                while chars.peek().is_some_and(|(_, n)| *n == '`') {
                    chars.next();
                    run += 1;
                }
                code_run = match code_run {
                    0 => run,
                    open if open == run => 0,
                    open => open,
                };
                continue;
            }
            if code_run > 0 {
                continue;
            }
            match c {
                '&' => entity = true,
                ';' => entity = false,
                c if entity && !(c.is_ascii_alphanumeric() || c == '#') => entity = false,
                '[' => link_depth += 1,
                ']' if link_depth > 0 => {
                    link_depth -= 1;
                    if chars.peek().is_some_and(|(_, n)| *n == '(') {
                        in_link_target = true;
                    }
                }
                ')' if in_link_target => in_link_target = false,
                ' ' if link_depth == 0 && !in_link_target && !entity => {
                    let point = from + i + 1;
                    if point > to {
                        break;
                    }
                    if point < self.buf.len() && grapheme_boundary(&self.buf, point) {
                        best = Some(point);
                    }
                }
                _ => {}
            }
        }
        best
    }
}

/// A fence opener: three or more backticks or tildes (a backtick fence's info has none).
fn fence_marker(line: &str) -> Option<(char, usize)> {
    let marker = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|c| *c == marker).count();
    let info = &line[len..];
    (len >= 3 && !(marker == '`' && info.contains('`'))).then_some((marker, len))
}

/// A closing fence: the same marker, at least as long, nothing but spaces after.
fn closes(fence: &Fence, line: &str) -> bool {
    let len = line.chars().take_while(|c| *c == fence.marker).count();
    len >= fence.len && line[len..].trim().is_empty()
}

/// A bullet (`-`, `*`, `+`) or ordered (`1.`, `1)`) list item.
fn is_list_item(line: &str) -> bool {
    let bytes = line.as_bytes();
    match bytes.first() {
        Some(b'-' | b'*' | b'+') => matches!(bytes.get(1), Some(b' ' | b'\t')),
        Some(b'0'..=b'9') => {
            let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            digits <= 9
                && matches!(bytes.get(digits), Some(b'.' | b')'))
                && matches!(bytes.get(digits + 1), Some(b' ' | b'\t'))
        }
        _ => false,
    }
}

/// The open reasoning-tag depth after `line`. Tags are matched case-insensitively; a model
/// that never closes one keeps the stream uncut until the cap or the end.
fn reasoning_after(mut depth: usize, line: &str) -> usize {
    let lower = line.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find('<') {
        rest = &rest[at..];
        if rest.starts_with("<think>") || rest.starts_with("<thinking>") {
            depth = depth.saturating_add(1);
        } else if rest.starts_with("</think>") || rest.starts_with("</thinking>") {
            depth = depth.saturating_sub(1);
        }
        rest = &rest[1..];
    }
    depth
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn grapheme_boundary(s: &str, at: usize) -> bool {
    GraphemeCursor::new(at, s.len(), true)
        .is_boundary(s, 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
