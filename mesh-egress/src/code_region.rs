//! Where Markdown text holds code: fenced blocks and inline spans. A leaf: the gate lowers a
//! failure shape inside code the user asked about, and Layer A does not read a tool-call
//! marker inside code as the model's decision (it is quoting the format).

use std::ops::Range;

/// Byte ranges of fenced code blocks and inline code spans.
pub(crate) fn code_regions(text: &str) -> Vec<Range<usize>> {
    let mut regions = Vec::new();
    let mut fence: Option<(u8, usize, usize)> = None; // (char, length, start)
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = line.trim_start_matches(' ').as_bytes();
        let run = |c: u8| body.iter().take_while(|&&b| b == c).count();
        match fence {
            Some((c, len, start)) => {
                if indent <= 3
                    && run(c) >= len
                    && body[run(c)..].iter().all(u8::is_ascii_whitespace)
                {
                    regions.push(start..offset);
                    fence = None;
                }
            }
            None => {
                let (bt, tl) = (run(b'`'), run(b'~'));
                if indent <= 3 && (bt >= 3 || tl >= 3) {
                    let (c, len) = if bt >= 3 { (b'`', bt) } else { (b'~', tl) };
                    fence = Some((c, len, line_start));
                } else {
                    inline_code(line, line_start, &mut regions);
                }
            }
        }
    }
    if let Some((_, _, start)) = fence {
        regions.push(start..text.len());
    }
    regions
}

fn inline_code(line: &str, base: usize, regions: &mut Vec<Range<usize>>) {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = b[i..].iter().take_while(|&&c| c == b'`').count();
        let mut j = i + n;
        let mut closed = None;
        while j < b.len() {
            if b[j] == b'`' {
                let m = b[j..].iter().take_while(|&&c| c == b'`').count();
                if m == n {
                    closed = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                regions.push(base + i..base + end);
                i = end;
            }
            None => i += n,
        }
    }
}
