//! The text protocols Layer A recognises, the markers that open each, and the one cheap check
//! of a completion's text ([`find`]): a look at its first byte, and an Aho-Corasick pass over
//! it for the markers (skipped on a short reply that holds none of their first bytes), the
//! automata built once per process. Everything past that (where a
//! call ends, whether it sits in code, what it says) runs only on a text that holds a marker.

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::call::ident;
use super::format::TextToolFormat;
use super::{parse, python};
use crate::code_region::code_regions;

/// Where a marker counts as the model's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// A special token of the family's vocabulary: anywhere outside code, when what follows
    /// it opens a call (see [`opens`]).
    Token,
    /// A tag that also reads as prose (`<tool_call>`): the same, and gpt-oss's recipient only in
    /// a commentary channel's header.
    Tag,
    /// First on its line (up to three spaces before it), outside code.
    LineStart,
    /// The first text of the reply.
    Start,
}

/// One literal that opens a text tool call.
struct Marker {
    literal: &'static str,
    format: TextToolFormat,
    place: Place,
}

const fn marker(literal: &'static str, format: TextToolFormat, place: Place) -> Marker {
    Marker {
        literal,
        format,
        place,
    }
}

use TextToolFormat as F;

/// Every marker; one automaton holds them all. Sources are in the module docs.
const MARKERS: &[Marker] = &[
    marker("<tool_call>", F::Hermes, Place::Tag),
    marker("<|python_tag|>", F::LlamaPythonTag, Place::Token),
    marker("<function=", F::FunctionTag, Place::Tag),
    marker("[TOOL_CALLS]", F::Mistral, Place::Token),
    marker("<｜tool▁calls▁begin｜>", F::DeepSeek, Place::Token),
    marker("<｜tool▁call▁begin｜>", F::DeepSeek, Place::Token),
    marker("<|tool_calls_section_begin|>", F::KimiK2, Place::Token),
    marker("<|tool_call_begin|>", F::KimiK2, Place::Token),
    marker("<|tool_call|>", F::Granite, Place::Token),
    marker("<|tool_call>", F::Gemma4, Place::Token),
    marker("<|tool_call_start|>", F::Lfm2, Place::Token),
    marker("functools[", F::Functools, Place::Start),
    // Functionary's reply opens with its recipient (`>>>all` for text, `>>>name` for a call).
    marker(">>>", F::Functionary, Place::Start),
    marker("```tool_code", F::ToolCode, Place::LineStart),
    // The commentary channel's header naming a function as its recipient.
    marker(
        "<|channel|>commentary to=functions.",
        F::Harmony,
        Place::Token,
    ),
];

/// The literals, in table order (the gate looks for the same ones).
pub(crate) fn literals() -> impl Iterator<Item = &'static str> {
    MARKERS.iter().map(|m| m.literal)
}

/// The scanned markers, by their first byte: those that open with `<` (nearly all) and the rest
/// (`[TOOL_CALLS]`, `` ```tool_code ``). One automaton over all of them spends its prefilter on
/// several start bytes and runs about as slowly as three `str::contains` on clean prose; one
/// per group lets each prefilter skip to its own rare byte (see `benches/tool_text.rs`). Markers
/// that only count as the reply's first text (`functools[`, `>>>`) are checked there by
/// [`find`] and never scanned for.
fn groups() -> [Vec<&'static Marker>; 2] {
    let scanned = || MARKERS.iter().filter(|m| m.place != Place::Start);
    [
        scanned().filter(|m| m.literal.starts_with('<')).collect(),
        scanned().filter(|m| !m.literal.starts_with('<')).collect(),
    ]
}

/// One group's automaton and its markers, in pattern order.
struct Group {
    automaton: AhoCorasick,
    markers: Vec<&'static Marker>,
}

/// What [`find`] scans with, built once: the groups' automata and the markers that only count
/// as the reply's first text.
struct Scanner {
    groups: Vec<Group>,
    starts: Vec<&'static Marker>,
}

/// `SCANNED[b]`: some scanned marker (one that may open a call past the reply's start) starts
/// with byte `b`.
const SCANNED: [bool; 256] = first_bytes(false);

/// `LEADS[b]`: a reply whose first byte is `b` may be a call by its start alone: a marker that
/// only counts as the reply's first text starts with `b`, or `b` opens a whole-reply call (`[`
/// for a Python call list, `[` or `{` for bare JSON; see [`whole_reply`]).
const LEADS: [bool; 256] = {
    let mut table = first_bytes(true);
    table[b'[' as usize] = true;
    table[b'{' as usize] = true;
    table
};

/// The first bytes of the markers that only count as the reply's first text (`starts`), or of
/// the scanned ones (the rest).
const fn first_bytes(starts: bool) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < MARKERS.len() {
        let marker = &MARKERS[i];
        if starts == matches!(marker.place, Place::Start) {
            table[marker.literal.as_bytes()[0] as usize] = true;
        }
        i += 1;
    }
    table
}

/// Up to this length [`find`] first looks for a scanned marker's first byte, one table lookup
/// per byte, and skips the automata when there is none: on a short reply each automaton's
/// fixed cost per search (its input checks, start state and prefilter call, about 200
/// instructions) is most of the check, while a longer text amortises it and the automata's own
/// vectorised prefilters are faster than this loop (see the router benchmark's profile in
/// BENCHMARKS.md).
const SHORT_TEXT: usize = 128;

/// Whether `text` may hold a scanned marker (always true past [`SHORT_TEXT`], where the
/// automata's prefilters answer that).
#[inline]
fn may_hold_marker(text: &str) -> bool {
    // Every byte is looked at (no early exit): on a short text that is cheaper than a branch
    // per byte.
    text.len() > SHORT_TEXT
        || text
            .bytes()
            .fold(false, |seen, b| seen | SCANNED[usize::from(b)])
}

/// Whether `text` opens with a byte that neither a whole-reply call nor a marker counting only
/// at the reply's start can open with, and that is not blank (so the reply starts there): then
/// neither is looked for. Most replies open so (a letter, a digit, most punctuation).
#[inline]
fn opens_plainly(text: &str) -> bool {
    text.as_bytes()
        .first()
        .is_some_and(|&b| b.is_ascii_graphic() && !LEADS[usize::from(b)])
}

/// The scanner, built on first use. `None` only if the builder refused the table, which is a
/// constant far below its limits (a unit test pins that it builds).
fn scanner() -> Option<&'static Scanner> {
    static SCANNER: OnceLock<Option<Scanner>> = OnceLock::new();
    SCANNER
        .get_or_init(|| {
            let groups = groups()
                .into_iter()
                .map(|markers| {
                    // Exact case: these are tokens of a vocabulary, not words. No literal is a
                    // prefix of another, so the leftmost match is the only one.
                    let automaton = AhoCorasickBuilder::new()
                        .match_kind(MatchKind::LeftmostFirst)
                        .build(markers.iter().map(|m| m.literal))
                        .ok()?;
                    Some(Group { automaton, markers })
                })
                .collect::<Option<Vec<Group>>>()?;
            let starts = MARKERS.iter().filter(|m| m.place == Place::Start).collect();
            Some(Scanner { groups, starts })
        })
        .as_ref()
}

/// A text tool call found in a completion's text: its format and where its markup starts (the
/// text before it is what the model said first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) format: TextToolFormat,
    pub(crate) start: usize,
}

/// Whether what follows a marker opens a call of its format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opens {
    Yes,
    No,
    /// The text ends before it can tell (a stream's head still arriving).
    NeedMore,
}

/// The healthy-path check: the text tool call `text` holds, if any. Cost on a reply without one:
/// a look at its first byte (and, when that byte is blank or may open a call by the reply's
/// start alone, at its first non-blank text) and one automaton pass per group (on a short
/// reply, a look for the markers' first bytes instead, unless one occurs).
// Inlined so the common case (a reply that opens plainly and, short, holds none of the
// markers' first bytes) is a few instructions in the caller, not a call into the full look.
#[inline]
pub(crate) fn find(text: &str) -> Option<Found> {
    let plain_opening = opens_plainly(text);
    if plain_opening && !may_hold_marker(text) {
        return None;
    }
    look(text, plain_opening)
}

/// [`find`]'s full look; `plain_opening`: [`opens_plainly`] said yes, so `text` may hold a
/// scanned marker (or `find` would have answered).
fn look(text: &str, plain_opening: bool) -> Option<Found> {
    if !plain_opening {
        let lead = text.len() - text.trim_start().len();
        if let Some(format) = whole_reply(&text[lead..]) {
            return Some(Found {
                format,
                start: lead,
            });
        }
        if let Some(found) = at_start(scanner()?, text, lead) {
            return Some(found);
        }
        if !may_hold_marker(text) {
            return None;
        }
    }
    let scanner = scanner()?;
    let mut code: Option<Vec<Range<usize>>> = None;
    let mut first: Option<Found> = None;
    for Group { automaton, markers } in &scanner.groups {
        for m in automaton.find_iter(text) {
            if first.is_some_and(|f| f.start <= m.start()) {
                break;
            }
            let marker = markers[m.pattern().as_usize()];
            if !placed(text, m.range(), marker)
                || opens(marker.literal, &text[m.end()..]) != Opens::Yes
            {
                continue;
            }
            let regions = code.get_or_insert_with(|| code_regions(text));
            if in_code(text, regions, m.start(), marker.format) {
                continue;
            }
            first = Some(Found {
                format: marker.format,
                start: markup_start(text, m.start(), marker.format),
            });
            break;
        }
    }
    first
}

/// A call of a format that opens the reply (`functools[`, `>>>`): at `lead`, or, for
/// Functionary's `>>>all` text, at the first recipient line after it that names a function.
fn at_start(scanner: &Scanner, text: &str, lead: usize) -> Option<Found> {
    let marker = scanner
        .starts
        .iter()
        .find(|m| text[lead..].starts_with(m.literal))?;
    let opens_at = |at: usize| opens(marker.literal, &text[at + marker.literal.len()..]);
    if opens_at(lead) == Opens::Yes {
        return Some(Found {
            format: marker.format,
            start: lead,
        });
    }
    if marker.format != TextToolFormat::Functionary {
        return None;
    }
    let mut from = lead;
    while let Some(i) = text[from..].find("\n>>>") {
        let at = from + i + 1;
        if opens_at(at) == Opens::Yes {
            return Some(Found {
                format: marker.format,
                start: at,
            });
        }
        from = at;
    }
    None
}

/// What a stream's head (`head`, everything so far) says, before any of it is shown: a text
/// tool call starts here, it cannot be one, or it is too early to tell.
pub(crate) fn head(head: &str) -> HeadRead {
    let t = head.trim_start();
    if t.is_empty() {
        return HeadRead::Undecided;
    }
    for marker in MARKERS {
        if marker.literal.starts_with(t) && marker.literal.len() > t.len() {
            return HeadRead::Undecided;
        }
        if let Some(rest) = t.strip_prefix(marker.literal) {
            return match opens(marker.literal, rest) {
                Opens::Yes => HeadRead::Markup(marker.format),
                Opens::NeedMore => HeadRead::Undecided,
                Opens::No => HeadRead::Text,
            };
        }
    }
    match t.as_bytes()[0] {
        b'{' => json_head(t),
        b'[' => match t[1..].trim_start() {
            // A list of call objects, or a Python call list.
            inner if inner.starts_with('{') => json_head(inner),
            "" => HeadRead::Undecided,
            _ => pythonic_head(t),
        },
        _ => HeadRead::Text,
    }
}

/// What a stream's head says (see [`head`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeadRead {
    /// Too early to tell: hold it.
    Undecided,
    /// Markup of this format opens the reply.
    Markup(TextToolFormat),
    /// It may be a whole-reply call (a bare JSON object, a Python call list): hold it to the
    /// end, within a cap.
    WholeReply,
    /// Ordinary text: show it.
    Text,
}

/// `{` then a first key a function-call object starts with.
fn json_head(t: &str) -> HeadRead {
    let rest = t[1..].trim_start();
    let Some(key) = rest.strip_prefix('"') else {
        return if rest.is_empty() {
            HeadRead::Undecided
        } else {
            HeadRead::Text
        };
    };
    let Some(close) = key.find('"') else {
        return if key.len() < 16 && key.bytes().all(|b| b.is_ascii_alphabetic()) {
            HeadRead::Undecided
        } else {
            HeadRead::Text
        };
    };
    match &key[..close] {
        "name" | "type" | "function" | "id" => HeadRead::WholeReply,
        _ => HeadRead::Text,
    }
}

/// `[` then a (dotted) name and `(`.
fn pythonic_head(t: &str) -> HeadRead {
    let rest = t[1..].trim_start();
    let name = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        .count();
    match rest.as_bytes().get(name) {
        None if name < 64 => HeadRead::Undecided,
        Some(b'(') if name > 0 && !rest.as_bytes()[0].is_ascii_digit() => HeadRead::WholeReply,
        _ => HeadRead::Text,
    }
}

/// The formats that are the whole reply rather than markup inside it: a Python call list and
/// a bare function-call JSON value. Only a text starting with `[` or `{` is looked at further.
fn whole_reply(t: &str) -> Option<TextToolFormat> {
    let t = t.trim_end();
    let first = *t.as_bytes().first()?;
    if first == b'['
        && (t.ends_with(')') || t.ends_with(']'))
        && pythonic_head(t) == HeadRead::WholeReply
        && python::calls(t).is_ok()
    {
        return Some(TextToolFormat::PythonicList);
    }
    // A JSON value: an object, or a list of objects (`[{…}]`, never a Python list).
    if matches!(first, b'{' | b'[') && (t.ends_with('}') || t.ends_with(']')) {
        let value: serde_json::Value = serde_json::from_str(t).ok()?;
        return parse::is_bare_call(&value).then_some(TextToolFormat::BareJson);
    }
    None
}

/// Whether the marker at `at` sits where its [`Place`] allows.
fn placed(text: &str, at: Range<usize>, marker: &Marker) -> bool {
    let before = &text[..at.start];
    match marker.place {
        Place::Token => true,
        Place::Tag => true,
        Place::Start => before.trim().is_empty(),
        Place::LineStart => {
            let line = before.rsplit('\n').next().unwrap_or(before);
            line.len() <= 3 && line.bytes().all(|b| b == b' ')
        }
    }
}

/// Whether what follows the marker `literal` (`rest`) opens a call: each marker is followed by
/// its format's payload (a JSON value, a name and its separator), so a sentence that names the
/// marker (`[TOOL_CALLS] is the token Mistral emits`) is prose, not a call.
pub(crate) fn opens(literal: &str, rest: &str) -> Opens {
    match literal {
        "<tool_call>" => {
            if let found @ (Opens::Yes | Opens::NeedMore) =
                starts_with_any(rest, &["{", "<function="])
            {
                return found;
            }
            // GLM-4.5: the function's name, then its `<arg_key>` pairs (or the close).
            named_then(
                rest,
                &["<arg_key>", "</tool_call>", "\n<arg_key>", "\n</tool_call>"],
            )
        }
        // `<function=name>` then its JSON arguments (Llama 3.1) or `<parameter=` pairs
        // (Qwen3-Coder): a name in angle brackets alone is prose about the tag.
        "<function=" => match named_then(rest, &[">"]) {
            Opens::Yes => {
                let args = &rest[ident(rest) + 1..];
                starts_with_any(args, &["{", "<parameter="])
            }
            other => other,
        },
        // The token is followed at once by the call or the code interpreter's code; after a
        // space it is a sentence naming the token, unless a call follows anyway.
        "<|python_tag|>" => match rest.chars().next() {
            None => Opens::NeedMore,
            // Code or a call starts at once; punctuation after the token (`<|python_tag|>,`,
            // `<|python_tag|>.`) is a sentence naming it.
            Some(c) if c.is_alphanumeric() || matches!(c, '_' | '{' | '[' | '\n' | '#') => {
                Opens::Yes
            }
            Some(c) if !c.is_whitespace() => Opens::No,
            Some(_) => match starts_with_any(rest, &["{", "["]) {
                Opens::No => named_then(rest, &["("]),
                other => other,
            },
        },
        "[TOOL_CALLS]" => match starts_with_any(rest, &["[", "{"]) {
            Opens::No => named_then(rest, &["[ARGS]", "[CALL_ID]"]),
            other => other,
        },
        "<｜tool▁calls▁begin｜>" => starts_with_any(rest, &["<｜tool▁call▁begin｜>"]),
        "<｜tool▁call▁begin｜>" => named_then(rest, &["<｜tool▁sep｜>"]),
        "<|tool_calls_section_begin|>" => starts_with_any(rest, &["<|tool_call_begin|>"]),
        "<|tool_call_begin|>" => named_then(rest, &[":", "<|tool_call_argument_begin|>"]),
        "<|tool_call|>" => starts_with_any(rest, &["[", "{"]),
        "<|tool_call>" => starts_with_any(rest, &["call:"]),
        "<|tool_call_start|>" => starts_with_any(rest, &["["]),
        "functools[" => starts_with_any(rest, &["{"]),
        // The fence's info string ends its line; the block's first line is a call.
        "```tool_code" => match rest.split_once('\n') {
            None => {
                if rest.trim().is_empty() {
                    Opens::NeedMore
                } else {
                    Opens::No
                }
            }
            Some((info, _)) if !info.trim().is_empty() => Opens::No,
            Some((_, body)) => named_then(body, &["("]),
        },
        "<|channel|>commentary to=functions." => match (ident(rest), rest.len()) {
            (0, 0) => Opens::NeedMore,
            (0, _) => Opens::No,
            _ => Opens::Yes,
        },
        ">>>" => {
            let n = ident(rest);
            let Some(after) = rest.get(n..) else {
                return Opens::No;
            };
            if after.is_empty() {
                return Opens::NeedMore;
            }
            if n == 0 || &rest[..n] == "all" {
                return Opens::No;
            }
            match after.strip_prefix('\n') {
                Some(args) => starts_with_any(args, &["{"]),
                None => Opens::No,
            }
        }
        _ => Opens::No,
    }
}

/// `rest`, blanks skipped, starts with one of `prefixes` (yes), is still the start of one
/// (need more), or neither.
fn starts_with_any(rest: &str, prefixes: &[&str]) -> Opens {
    let r = rest.trim_start();
    if prefixes.iter().any(|p| r.starts_with(p)) {
        Opens::Yes
    } else if prefixes.iter().any(|p| p.starts_with(r)) {
        Opens::NeedMore
    } else {
        Opens::No
    }
}

/// `rest`, blanks skipped, is an identifier followed at once by one of `then`.
fn named_then(rest: &str, then: &[&str]) -> Opens {
    let r = rest.trim_start();
    let n = ident(r);
    if n == 0 {
        return if r.is_empty() {
            Opens::NeedMore
        } else {
            Opens::No
        };
    }
    let after = &r[n..];
    if then.iter().any(|p| after.starts_with(p)) {
        Opens::Yes
    } else if then.iter().any(|p| p.starts_with(after)) {
        Opens::NeedMore
    } else {
        Opens::No
    }
}

/// Whether a marker at `at` is inside code: a fence or an inline span (the model is quoting
/// the format). A `` ```tool_code `` fence is the call itself, not a quotation of it.
fn in_code(text: &str, regions: &[Range<usize>], at: usize, format: TextToolFormat) -> bool {
    regions.iter().any(|r| {
        r.contains(&at) && !(format == TextToolFormat::ToolCode && r.start == line_start(text, at))
    })
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// Where the markup of a call found at `at` starts: gpt-oss's frame opens with its turn's
/// header before the channel.
fn markup_start(text: &str, at: usize, format: TextToolFormat) -> usize {
    match text[..at].strip_suffix("<|start|>assistant") {
        Some(before) if format == TextToolFormat::Harmony => before.len(),
        _ => at,
    }
}

/// Where the markup of a call of `format` that starts at `start` ends: after its closing token
/// (and any calls that follow it at once), or at the end of the text when it has none.
pub(crate) fn markup_end(text: &str, start: usize, format: TextToolFormat) -> usize {
    let closer = match format {
        TextToolFormat::Hermes => Some(("</tool_call>", Some("<tool_call>"))),
        TextToolFormat::FunctionTag => Some(("</function>", Some("<function="))),
        TextToolFormat::DeepSeek => Some(("<｜tool▁calls▁end｜>", None)),
        TextToolFormat::KimiK2 => Some(("<|tool_calls_section_end|>", None)),
        TextToolFormat::Gemma4 => Some(("<tool_call|>", Some("<|tool_call>"))),
        TextToolFormat::Lfm2 => Some(("<|tool_call_end|>", Some("<|tool_call_start|>"))),
        TextToolFormat::Harmony => Some(("<|call|>", None)),
        TextToolFormat::ToolCode => {
            // The fence's own close: the next line that is only backticks.
            let body = text[start..]
                .find('\n')
                .map_or(text.len(), |i| start + i + 1);
            let mut at = body;
            for line in text[body..].split_inclusive('\n') {
                at += line.len();
                if line.trim().len() >= 3 && line.trim().bytes().all(|b| b == b'`') {
                    return at;
                }
            }
            return text.len();
        }
        _ => None,
    };
    let Some((close, again)) = closer else {
        return text.len();
    };
    let mut end = start;
    loop {
        let Some(i) = text[end..].find(close) else {
            return text.len();
        };
        end += i + close.len();
        match again {
            Some(open) if text[end..].trim_start().starts_with(open) => {}
            _ => return end,
        }
    }
}

/// The markup a gate finding covers: from a marker at `at` (a literal of [`literals`]) to the
/// end of its call, when the marker opens one there; `None` otherwise. Code is the gate's own
/// business (it lowers what the user asked about), so it is not excluded here.
#[cfg_attr(not(feature = "gate"), allow(dead_code))] // read by the gate only
pub(crate) fn markup_at(text: &str, at: usize) -> Option<Range<usize>> {
    let marker = MARKERS.iter().find(|m| text[at..].starts_with(m.literal))?;
    let end = at + marker.literal.len();
    if !placed(text, at..end, marker) || opens(marker.literal, &text[end..]) != Opens::Yes {
        return None;
    }
    let start = markup_start(text, at, marker.format);
    Some(start..markup_end(text, start, marker.format))
}

/// Where `text`'s undecided end starts, for a streamed block about to be shown: the earliest
/// marker placed to open a call whose payload has not arrived yet (`<tool_call>` and nothing
/// but blanks after it: [`Opens::NeedMore`]), or an end that is the start of a marker
/// (`<tool_`). Only the last `within` bytes are read (a caller holds no more than that), so a
/// block costs the same however long it is. `None` when that end is decided, markup or not.
/// Markers that only open a reply (`functools[`, `>>>`) are the stream head's business.
#[cfg_attr(not(feature = "markdown"), allow(dead_code))] // read by the streaming boundary
pub(crate) fn undecided_from(text: &str, within: usize) -> Option<usize> {
    let longest = MARKERS.iter().map(|m| m.literal.len()).max().unwrap_or(0);
    let floor = floor_boundary(text, text.len().saturating_sub(within + longest));
    let tail = &text[floor..];
    let mut from = None::<usize>;
    if may_hold_marker(tail)
        && let Some(scanner) = scanner()
    {
        for Group { automaton, markers } in &scanner.groups {
            for m in automaton.find_iter(tail) {
                let (start, end) = (floor + m.start(), floor + m.end());
                if from.is_some_and(|f| f <= start) {
                    break;
                }
                let marker = markers[m.pattern().as_usize()];
                if placed(text, start..end, marker)
                    && opens(marker.literal, &text[end..]) == Opens::NeedMore
                {
                    from = Some(start);
                    break;
                }
            }
        }
    }
    // A marker cut short by the block's end: its longest start the text ends with (only where
    // the end holds a marker's first byte at all).
    let end = &text.as_bytes()[text.len().saturating_sub(longest)..];
    let cut_short = end
        .iter()
        .any(|&b| SCANNED[usize::from(b)])
        .then(|| {
            MARKERS
                .iter()
                .filter(|m| m.place != Place::Start)
                .filter_map(|m| {
                    (1..m.literal.len())
                        .rev()
                        .filter(|&k| m.literal.is_char_boundary(k) && text.len() >= k)
                        .map(|k| text.len() - k)
                        .find(|&start| {
                            text.ends_with(&m.literal[..text.len() - start])
                                && placed(text, start..text.len(), m)
                        })
                })
                .min()
        })
        .flatten();
    [from, cut_short].into_iter().flatten().min()
}

/// The nearest char boundary at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A bare function-call reply, as the gate sees it: the whole text, when it is one.
#[cfg_attr(not(feature = "gate"), allow(dead_code))] // read by the gate only
pub(crate) fn whole_reply_call(text: &str) -> Option<Range<usize>> {
    let lead = text.len() - text.trim_start().len();
    whole_reply(&text[lead..]).map(|_| lead..lead + text.trim().len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(text: &str) -> Option<TextToolFormat> {
        find(text).map(|f| f.format)
    }

    #[test]
    fn a_block_ending_in_an_undecided_marker_says_where_it_starts() {
        let text = "Here is what I found for you.\n";
        for tail in [
            "<tool_call>\n",
            "<tool_call>",
            "<tool_",
            "<",
            "<|python_tag|>",
            "[TOOL_",
        ] {
            let block = format!("{text}{tail}");
            assert_eq!(undecided_from(&block, 1024), Some(text.len()), "{block:?}");
        }
        for decided in [
            "Here is what I found for you.\n",
            "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>",
            "The tag <tool_call> is what Qwen emits.",
            "a < b and b > c.",
            // `functools[` and `>>>` open a reply only: the stream head's business.
            "Then:\n>>>",
        ] {
            assert_eq!(undecided_from(decided, 1024), None, "{decided:?}");
        }
        // The earliest undecided place wins.
        let two = "Text <tool_call>\n\n<";
        assert_eq!(undecided_from(two, 1024), Some(5));
        // Only the end is read: a marker further back than the window is decided already.
        let far = format!("<tool_call>{}", " ".repeat(2048));
        assert_eq!(undecided_from(&far, 1024), None);
        assert_eq!(undecided_from(&far, 4096), Some(0));
    }

    #[test]
    fn the_marker_table_compiles() {
        assert!(scanner().is_some_and(|s| s.groups.iter().all(|g| !g.markers.is_empty())));
    }

    #[test]
    fn the_first_byte_filter_never_hides_a_marker() {
        let scanner = scanner().expect("the table builds");
        for group in &scanner.groups {
            for marker in &group.markers {
                // The marker alone, and inside prose: the automata still run (whether it opens
                // a call there is theirs to say; `each_marker_is_found_where_it_opens_a_call`
                // runs short texts through the filter too).
                assert!(may_hold_marker(marker.literal), "{}", marker.literal);
                let inside = format!("Some prose, then {} and more.", marker.literal);
                assert!(may_hold_marker(&inside), "{}", marker.literal);
            }
        }
        // Every scanned marker is in a group, and every other one is checked at the start.
        let grouped: usize = scanner.groups.iter().map(|g| g.markers.len()).sum();
        assert_eq!(grouped + scanner.starts.len(), MARKERS.len());
        // A short reply with none of those bytes skips the automata; a long one never does.
        assert!(!may_hold_marker("All green."));
        assert!(may_hold_marker(&"All green. ".repeat(20)));
    }

    #[test]
    fn the_first_byte_look_never_hides_a_call_by_the_start() {
        // Every marker that only counts at the reply's start, and every whole-reply call, is
        // looked for when the reply opens with its first byte, or with blank text first.
        for marker in MARKERS.iter().filter(|m| m.place == Place::Start) {
            assert!(!opens_plainly(marker.literal), "{}", marker.literal);
        }
        let call = r#"{"type": "function", "name": "f", "parameters": {}}"#;
        for text in ["[f(a=1)]", &format!("[{call}]"), call] {
            assert!(whole_reply(text).is_some(), "{text}");
            assert!(!opens_plainly(text), "{text}");
        }
        for text in ["", " functools[{}]", "\u{b}>>>f", "\u{a0}[f()]", "é"] {
            assert!(!opens_plainly(text), "{text:?}");
        }
        assert!(opens_plainly("All green."));
        assert!(opens_plainly("42 tickets"));
    }

    #[test]
    fn each_marker_is_found_where_it_opens_a_call() {
        for (text, expected) in [
            (
                r#"<tool_call>{"name": "f", "arguments": {}}</tool_call>"#,
                F::Hermes,
            ),
            (
                "Checking.\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
                F::Hermes,
            ),
            (
                "<|python_tag|>brave_search.call(query=\"x\")",
                F::LlamaPythonTag,
            ),
            ("<function=f>{\"a\": 1}</function>", F::FunctionTag),
            ("[TOOL_CALLS]f[ARGS]{}", F::Mistral),
            ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f", F::DeepSeek),
            (
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0",
                F::KimiK2,
            ),
            ("<|tool_call|>[{\"name\": \"f\"}]", F::Granite),
            ("<|tool_call>call:f{}<tool_call|>", F::Gemma4),
            ("<|tool_call_start|>[f()]<|tool_call_end|>", F::Lfm2),
            ("functools[{\"name\": \"f\"}]", F::Functools),
            (" \n functools[{\"name\": \"f\"}]", F::Functools),
            (">>>get_weather\n{\"city\": \"Paris\"}", F::Functionary),
            ("```tool_code\nf(a=1)\n```", F::ToolCode),
            (
                "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}",
                F::Harmony,
            ),
            ("[get_weather(city='Paris')]", F::PythonicList),
            (
                r#"{"type": "function", "name": "f", "parameters": {}}"#,
                F::BareJson,
            ),
        ] {
            assert_eq!(format(text), Some(expected), "{text}");
        }
    }

    #[test]
    fn prose_code_and_look_alikes_are_not_calls() {
        for text in [
            "The weather in Paris is 18°C.",
            "Hermes wraps calls in a `<tool_call>` tag.",
            "```\n<tool_call>{\"name\": \"f\"}</tool_call>\n```",
            "The <tool_call> tag holds one JSON object.",
            "Use <function=name> tags, see above.",
            "> > > nested quote\n>>>all\nhello",
            "[docs](https://example.com) explain it.",
            "{\"city\": \"Paris\", \"temp\": 18}",
            "{\"name\": \"Alice Smith\", \"parameters\": {}}",
            "Prefix functools[ is mid-text",
            "```python\n>>> print(1)\n```",
        ] {
            assert_eq!(format(text), None, "{text}");
        }
    }

    #[test]
    fn a_stream_head_is_held_until_it_can_tell() {
        assert_eq!(head("  "), HeadRead::Undecided);
        assert_eq!(head("<tool_"), HeadRead::Undecided);
        assert_eq!(head("<tool_call>"), HeadRead::Undecided);
        assert_eq!(head("<tool_call>\n{\"na"), HeadRead::Markup(F::Hermes));
        assert_eq!(head("<tool_call> is a tag"), HeadRead::Text);
        assert_eq!(head("[TOOL"), HeadRead::Undecided);
        assert_eq!(head("[TOOL_CALLS]"), HeadRead::Undecided);
        assert_eq!(head("[TOOL_CALLS] ["), HeadRead::Markup(F::Mistral));
        assert_eq!(head("[TOOL_CALLS] is a token"), HeadRead::Text);
        assert_eq!(head("{\"na"), HeadRead::Undecided);
        assert_eq!(head("{\"name\""), HeadRead::WholeReply);
        assert_eq!(head("{\"city\""), HeadRead::Text);
        assert_eq!(head("[get_weather("), HeadRead::WholeReply);
        assert_eq!(head("[docs]("), HeadRead::Text);
        assert_eq!(head("[{\"name\""), HeadRead::WholeReply);
        assert_eq!(head("Sure, "), HeadRead::Text);
    }

    #[test]
    fn the_markup_ends_after_its_last_closing_token() {
        let text = "Let me check.\n<tool_call>{\"name\": \"a\"}</tool_call>\n<tool_call>{\"name\": \"b\"}</tool_call>\nDone?";
        let found = find(text).expect("found");
        let end = markup_end(text, found.start, found.format);
        assert_eq!(&text[end..], "\nDone?");
        assert_eq!(&text[..found.start], "Let me check.\n");
        let fence = "```tool_code\nf(a=1)\n```\nafter";
        assert_eq!(&fence[markup_end(fence, 0, F::ToolCode)..], "after");
    }
}
