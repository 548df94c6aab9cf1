//! The decoder against the WHATWG HTML standard's "Parsing an event stream"
//! (html.spec.whatwg.org/multipage/server-sent-events.html): each rule its own case, every
//! case also fed byte by byte and, by proptest, in arbitrary splits across reads.

use super::{SseDecoder, SseEvent};
use proptest::prelude::*;

/// One rule of the standard: the bytes on the wire and the events they make.
#[derive(Debug)]
struct Case {
    rule: &'static str,
    wire: &'static [u8],
    events: &'static [Expected],
}

/// An expected event: its data and whether it was named `error`, or the end marker.
#[derive(Clone, Copy, Debug)]
enum Expected {
    Data(&'static str),
    Error(&'static str),
    Done,
}

impl Expected {
    fn event(self) -> SseEvent {
        match self {
            Self::Data(data) => SseEvent::Data {
                data: data.to_owned(),
                error: false,
            },
            Self::Error(data) => SseEvent::Data {
                data: data.to_owned(),
                error: true,
            },
            Self::Done => SseEvent::Done,
        }
    }
}

use Expected::{Data, Done, Error};

/// The table: each row a test (its name as CI reports it), the case's name, the rule, the wire
/// and the events. A macro because a test's name must be an item of its own; each row becomes
/// the case, a test that [`check`]s it, and its place in [`CASES`] (in row order).
macro_rules! rules {
    ($($test:ident, $name:ident: $rule:literal, $wire:literal => [$($event:expr),*];)*) => {
        $(
            const $name: Case = Case {
                rule: $rule,
                wire: $wire,
                events: &[$($event),*],
            };

            #[test]
            fn $test() {
                check(&$name);
            }
        )*

        const CASES: &[&Case] = &[$(&$name),*];
    };
}

rules! {
    a_line_ends_in_lf, LF:
        "a line ends in LF",
        b"data: a\n\ndata: b\n\n" => [Data("a"), Data("b")];
    a_line_ends_in_crlf, CRLF:
        "a line ends in CRLF",
        b"data: a\r\n\r\ndata: b\r\n\r\n" => [Data("a"), Data("b")];
    a_line_ends_in_a_lone_cr, CR:
        "a line ends in a lone CR",
        b"data: a\r\rdata: b\r\r" => [Data("a"), Data("b")];
    line_endings_mix_in_one_stream, MIXED_ENDINGS:
        "CRLF, LF and CR mix in one stream, one line end each",
        b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r" => [Data("a\nb\nc"), Data("d")];
    a_cr_then_an_lf_is_one_line_end, CR_THEN_LF_IS_ONE_END:
        "a CR followed by an LF is one line end, not a line end and a blank line",
        b"data: a\r\ndata: b\r\n\r\n" => [Data("a\nb")];
    a_cr_then_a_crlf_is_two_line_ends, CR_CR_LF:
        "CR then CRLF is two line ends: a line and a blank line",
        b"data: a\r\r\ndata: b\r\n\r\n" => [Data("a"), Data("b")];
    one_leading_byte_order_mark_is_dropped, BOM:
        "one leading byte order mark is dropped",
        b"\xEF\xBB\xBFdata: a\n\n" => [Data("a")];
    only_one_byte_order_mark_is_dropped, SECOND_BOM:
        "only one byte order mark is dropped: a second one is part of the field name",
        b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n" => [Data("b")];
    a_byte_order_mark_after_the_start_is_text, BOM_LATER:
        "a byte order mark after the start is text",
        b"data: \xEF\xBB\xBFa\n\n" => [Data("\u{FEFF}a")];
    the_start_of_a_byte_order_mark_alone_is_kept, PARTIAL_BOM:
        "bytes that start like a byte order mark but are not one are kept",
        b"\xEF\xBBdata: a\n\ndata: b\n\n" => [Data("b")];
    one_space_after_the_colon_is_dropped, DATA_WITH_SPACE:
        "one space after the colon is dropped",
        b"data: a\n\n" => [Data("a")];
    data_without_a_space_after_the_colon, DATA_WITHOUT_SPACE:
        "a value right after the colon is the whole value",
        b"data:a\n\n" => [Data("a")];
    only_the_first_space_after_the_colon_is_dropped, ONLY_ONE_SPACE:
        "only the first space after the colon is dropped",
        b"data:  a \n\n" => [Data(" a ")];
    later_colons_belong_to_the_value, COLON_IN_VALUE:
        "the field name ends at the first colon; later colons are the value's",
        b"data: {\"a\":1}\n\n" => [Data("{\"a\":1}")];
    data_lines_are_joined_with_lf, MULTI_LINE_DATA:
        "data lines are joined with LF",
        b"data: a\ndata:b\ndata:  c\n\n" => [Data("a\nb\n c")];
    empty_data_lines_still_dispatch, EMPTY_DATA:
        "a field without a colon has an empty value; an empty data line still dispatches",
        b"data\n\ndata:\n\ndata\ndata\n\n" => [Data(""), Data(""), Data("\n")];
    id_retry_and_unknown_fields_are_ignored, IGNORED_FIELDS:
        "id, retry and unknown fields are ignored",
        b"id: 7\nretry: 3000\nfoo: bar\ndata: a\nid\nretry: x\n\n" => [Data("a")];
    an_event_without_data_is_not_dispatched, NO_DATA_NO_EVENT:
        "an event without data is not dispatched",
        b"id: 1\n\nretry: 10\n\nevent: x\n\ndata: a\n\n" => [Data("a")];
    field_names_are_exact, FIELD_NAMES_EXACT:
        "field names are case-sensitive and exact",
        b"Data: a\n\ndata : b\n\n data: c\n\ndata: d\n\n" => [Data("d")];
    comments_are_ignored, COMMENTS:
        "a line starting with a colon is a comment, also between data lines",
        b": ping\n\n:\n\ndata: a\n: OPENROUTER PROCESSING\ndata: b\n\n" => [Data("a\nb")];
    the_event_name_lasts_until_its_dispatch, EVENT_NAME:
        "event names the event, and the name ends with its dispatch",
        b"event: error\ndata: x\n\ndata: y\n\nevent: error\n\ndata: z\n\n"
            => [Error("x"), Data("y"), Data("z")];
    event_values_follow_the_colon_and_space_rule, EVENT_NAME_WITHOUT_SPACE:
        "event values follow the same colon-and-space rule",
        b"event:error\ndata:x\n\nevent:  error\ndata: y\n\n" => [Error("x"), Data("y")];
    done_ends_the_completion, DONE:
        "data [DONE] ends the completion",
        b"data: a\n\ndata: [DONE]\n\n" => [Data("a"), Done];
    an_unfinished_event_at_the_end_is_dropped, UNFINISHED_EVENT:
        "an event not ended by a blank line when the stream ends is dropped",
        b"data: a\n\ndata: b\n" => [Data("a")];
    an_unfinished_line_at_the_end_is_dropped, UNFINISHED_LINE:
        "a line not ended when the stream ends is dropped",
        b"data: a\n\ndata: b" => [Data("a")];
    invalid_utf8_decodes_to_replacement_characters, INVALID_UTF8:
        "the stream is UTF-8 decoded: an invalid sequence is one U+FFFD",
        b"data: a\xFFb\xE2\x82\n\ndata: \xC3\xA9\n\n"
            => [Data("a\u{FFFD}b\u{FFFD}"), Data("\u{e9}")];
    every_character_but_cr_and_lf_is_part_of_a_line, NUL_AND_CONTROLS:
        "every character other than CR and LF, NUL included, is part of a line",
        b"data: a\x00b\x0bc\x0cd\n\n" => [Data("a\u{0}b\u{b}c\u{c}d")];
}

/// Feeds `reads` one after another to a fresh decoder.
fn decode(reads: &[&[u8]]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new(1024, 1 << 20);
    let mut out = Vec::new();
    for read in reads {
        decoder.feed(read, &mut out).expect("within the caps");
    }
    out
}

fn expected(case: &Case) -> Vec<SseEvent> {
    case.events.iter().map(|e| e.event()).collect()
}

/// The case in one read, and again one byte per read.
fn check(case: &Case) {
    assert_eq!(
        decode(&[case.wire]),
        expected(case),
        "{}: one read",
        case.rule
    );
    let bytes: Vec<&[u8]> = case.wire.chunks(1).collect();
    assert_eq!(
        decode(&bytes),
        expected(case),
        "{}: byte by byte",
        case.rule
    );
}

#[test]
fn a_cr_ending_one_read_and_an_lf_starting_the_next_are_one_crlf() {
    // Were the CR a line end and the LF another, the blank line would dispatch "a" alone.
    assert_eq!(
        decode(&[b"data: a\r", b"", b"\ndata: b\r", b"\n\r", b"", b"\n"]),
        [Data("a\nb").event()]
    );
}

#[test]
fn a_cr_ending_a_read_is_a_line_end_at_once() {
    // A CR-only stream's last event is complete at its CR: nothing more need arrive.
    let mut decoder = SseDecoder::new(1024, 1 << 20);
    let mut out = Vec::new();
    decoder.feed(b"data: a\r\r", &mut out).expect("decodes");
    assert_eq!(out, [Data("a").event()]);
    decoder
        .feed(b"data: [DONE]\r\r", &mut out)
        .expect("decodes");
    assert_eq!(out, [Data("a").event(), Done.event()]);
}

#[test]
fn a_byte_order_mark_split_across_reads_is_dropped() {
    assert_eq!(
        decode(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]),
        [Data("a").event()]
    );
}

#[test]
fn a_cr_only_line_past_its_cap_is_a_typed_failure() {
    let mut decoder = SseDecoder::new(16, 1 << 20);
    let mut out = Vec::new();
    decoder.feed(b"data: short\r\r", &mut out).expect("fits");
    let error = decoder
        .feed(b"data: a line far longer than sixteen bytes\r", &mut out)
        .expect_err("line cap");
    assert_eq!(error.kind(), crate::model::ModelErrorKind::InvalidResponse);
}

fn ends_on_a_blank_line(wire: &[u8]) -> bool {
    [&b"\n\n"[..], b"\r\r", b"\n\r", b"\n\r\n"]
        .iter()
        .any(|end| wire.ends_with(end))
}

/// Cuts `wire` at the given points (any order, repeats allowed) into consecutive reads.
fn split<'a>(wire: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
    at.sort_unstable();
    let mut reads = Vec::new();
    let mut from = 0;
    for cut in at {
        reads.push(&wire[from..cut]);
        from = cut;
    }
    reads.push(&wire[from..]);
    reads
}

proptest! {
    #[test]
    fn every_case_survives_any_split_across_reads(
        case in prop::sample::select(CASES),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        prop_assert_eq!(decode(&split(case.wire, &cuts)), expected(case), "{}", case.rule);
    }

    #[test]
    fn the_cases_run_together_survive_any_split_across_reads(
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..24),
    ) {
        // Cases that end on a complete event, run back to back as one stream: the decoder
        // keeps no state from one event into the next but what the standard says. A byte
        // order mark counts only at the very start, so the BOM cases stay out.
        let chained: Vec<&Case> = CASES
            .iter()
            .copied()
            .filter(|c| !c.wire.starts_with(b"\xEF") && ends_on_a_blank_line(c.wire))
            .collect();
        let wire: Vec<u8> = chained.iter().flat_map(|c| c.wire.iter().copied()).collect();
        let want: Vec<SseEvent> = chained.iter().flat_map(|c| expected(c)).collect();
        prop_assert_eq!(decode(&split(&wire, &cuts)), want);
    }
}
