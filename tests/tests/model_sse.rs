//! The stream decoder against the WHATWG HTML standard's "Parsing an event stream"
//! (html.spec.whatwg.org/multipage/server-sent-events.html): each rule its own case, every
//! case also fed byte by byte and, by proptest, in arbitrary splits across reads.

use mesh_egress::model::{SseDecoder, SseEvent};
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

const LF: Case = Case {
    rule: "a line ends in LF",
    wire: b"data: a\n\ndata: b\n\n",
    events: &[Data("a"), Data("b")],
};
const CRLF: Case = Case {
    rule: "a line ends in CRLF",
    wire: b"data: a\r\n\r\ndata: b\r\n\r\n",
    events: &[Data("a"), Data("b")],
};
const CR: Case = Case {
    rule: "a line ends in a lone CR",
    wire: b"data: a\r\rdata: b\r\r",
    events: &[Data("a"), Data("b")],
};
const MIXED_ENDINGS: Case = Case {
    rule: "CRLF, LF and CR mix in one stream, one line end each",
    wire: b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r",
    events: &[Data("a\nb\nc"), Data("d")],
};
const CR_THEN_LF_IS_ONE_END: Case = Case {
    rule: "a CR followed by an LF is one line end, not a line end and a blank line",
    wire: b"data: a\r\ndata: b\r\n\r\n",
    events: &[Data("a\nb")],
};
const CR_CR_LF: Case = Case {
    rule: "CR then CRLF is two line ends: a line and a blank line",
    wire: b"data: a\r\r\ndata: b\r\n\r\n",
    events: &[Data("a"), Data("b")],
};
const BOM: Case = Case {
    rule: "one leading byte order mark is dropped",
    wire: b"\xEF\xBB\xBFdata: a\n\n",
    events: &[Data("a")],
};
const SECOND_BOM: Case = Case {
    rule: "only one byte order mark is dropped: a second one is part of the field name",
    wire: b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n",
    events: &[Data("b")],
};
const BOM_LATER: Case = Case {
    rule: "a byte order mark after the start is text",
    wire: b"data: \xEF\xBB\xBFa\n\n",
    events: &[Data("\u{FEFF}a")],
};
const PARTIAL_BOM: Case = Case {
    rule: "bytes that start like a byte order mark but are not one are kept",
    wire: b"\xEF\xBBdata: a\n\ndata: b\n\n",
    events: &[Data("b")],
};
const DATA_WITH_SPACE: Case = Case {
    rule: "one space after the colon is dropped",
    wire: b"data: a\n\n",
    events: &[Data("a")],
};
const DATA_WITHOUT_SPACE: Case = Case {
    rule: "a value right after the colon is the whole value",
    wire: b"data:a\n\n",
    events: &[Data("a")],
};
const ONLY_ONE_SPACE: Case = Case {
    rule: "only the first space after the colon is dropped",
    wire: b"data:  a \n\n",
    events: &[Data(" a ")],
};
const COLON_IN_VALUE: Case = Case {
    rule: "the field name ends at the first colon; later colons are the value's",
    wire: b"data: {\"a\":1}\n\n",
    events: &[Data("{\"a\":1}")],
};
const MULTI_LINE_DATA: Case = Case {
    rule: "data lines are joined with LF",
    wire: b"data: a\ndata:b\ndata:  c\n\n",
    events: &[Data("a\nb\n c")],
};
const EMPTY_DATA: Case = Case {
    rule: "a field without a colon has an empty value; an empty data line still dispatches",
    wire: b"data\n\ndata:\n\ndata\ndata\n\n",
    events: &[Data(""), Data(""), Data("\n")],
};
const IGNORED_FIELDS: Case = Case {
    rule: "id, retry and unknown fields are ignored",
    wire: b"id: 7\nretry: 3000\nfoo: bar\ndata: a\nid\nretry: x\n\n",
    events: &[Data("a")],
};
const NO_DATA_NO_EVENT: Case = Case {
    rule: "an event without data is not dispatched",
    wire: b"id: 1\n\nretry: 10\n\nevent: x\n\ndata: a\n\n",
    events: &[Data("a")],
};
const FIELD_NAMES_EXACT: Case = Case {
    rule: "field names are case-sensitive and exact",
    wire: b"Data: a\n\ndata : b\n\n data: c\n\ndata: d\n\n",
    events: &[Data("d")],
};
const COMMENTS: Case = Case {
    rule: "a line starting with a colon is a comment, also between data lines",
    wire: b": ping\n\n:\n\ndata: a\n: OPENROUTER PROCESSING\ndata: b\n\n",
    events: &[Data("a\nb")],
};
const EVENT_NAME: Case = Case {
    rule: "event names the event, and the name ends with its dispatch",
    wire: b"event: error\ndata: x\n\ndata: y\n\nevent: error\n\ndata: z\n\n",
    events: &[Error("x"), Data("y"), Data("z")],
};
const EVENT_NAME_WITHOUT_SPACE: Case = Case {
    rule: "event values follow the same colon-and-space rule",
    wire: b"event:error\ndata:x\n\nevent:  error\ndata: y\n\n",
    events: &[Error("x"), Data("y")],
};
const DONE: Case = Case {
    rule: "data [DONE] ends the completion",
    wire: b"data: a\n\ndata: [DONE]\n\n",
    events: &[Data("a"), Done],
};
const UNFINISHED_EVENT: Case = Case {
    rule: "an event not ended by a blank line when the stream ends is dropped",
    wire: b"data: a\n\ndata: b\n",
    events: &[Data("a")],
};
const UNFINISHED_LINE: Case = Case {
    rule: "a line not ended when the stream ends is dropped",
    wire: b"data: a\n\ndata: b",
    events: &[Data("a")],
};
const INVALID_UTF8: Case = Case {
    rule: "the stream is UTF-8 decoded: an invalid sequence is one U+FFFD",
    wire: b"data: a\xFFb\xE2\x82\n\ndata: \xC3\xA9\n\n",
    events: &[Data("a\u{FFFD}b\u{FFFD}"), Data("\u{e9}")],
};
const NUL_AND_CONTROLS: Case = Case {
    rule: "every character other than CR and LF, NUL included, is part of a line",
    wire: b"data: a\x00b\x0bc\x0cd\n\n",
    events: &[Data("a\u{0}b\u{b}c\u{c}d")],
};

const CASES: &[&Case] = &[
    &LF,
    &CRLF,
    &CR,
    &MIXED_ENDINGS,
    &CR_THEN_LF_IS_ONE_END,
    &CR_CR_LF,
    &BOM,
    &SECOND_BOM,
    &BOM_LATER,
    &PARTIAL_BOM,
    &DATA_WITH_SPACE,
    &DATA_WITHOUT_SPACE,
    &ONLY_ONE_SPACE,
    &COLON_IN_VALUE,
    &MULTI_LINE_DATA,
    &EMPTY_DATA,
    &IGNORED_FIELDS,
    &NO_DATA_NO_EVENT,
    &FIELD_NAMES_EXACT,
    &COMMENTS,
    &EVENT_NAME,
    &EVENT_NAME_WITHOUT_SPACE,
    &DONE,
    &UNFINISHED_EVENT,
    &UNFINISHED_LINE,
    &INVALID_UTF8,
    &NUL_AND_CONTROLS,
];

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
fn a_line_ends_in_lf() {
    check(&LF);
}

#[test]
fn a_line_ends_in_crlf() {
    check(&CRLF);
}

#[test]
fn a_line_ends_in_a_lone_cr() {
    check(&CR);
}

#[test]
fn line_endings_mix_in_one_stream() {
    check(&MIXED_ENDINGS);
}

#[test]
fn a_cr_then_an_lf_is_one_line_end() {
    check(&CR_THEN_LF_IS_ONE_END);
}

#[test]
fn a_cr_then_a_crlf_is_two_line_ends() {
    check(&CR_CR_LF);
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
fn one_leading_byte_order_mark_is_dropped() {
    check(&BOM);
}

#[test]
fn a_byte_order_mark_split_across_reads_is_dropped() {
    assert_eq!(
        decode(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]),
        [Data("a").event()]
    );
}

#[test]
fn only_one_byte_order_mark_is_dropped() {
    check(&SECOND_BOM);
}

#[test]
fn a_byte_order_mark_after_the_start_is_text() {
    check(&BOM_LATER);
}

#[test]
fn the_start_of_a_byte_order_mark_alone_is_kept() {
    check(&PARTIAL_BOM);
}

#[test]
fn one_space_after_the_colon_is_dropped() {
    check(&DATA_WITH_SPACE);
}

#[test]
fn data_without_a_space_after_the_colon() {
    check(&DATA_WITHOUT_SPACE);
}

#[test]
fn only_the_first_space_after_the_colon_is_dropped() {
    check(&ONLY_ONE_SPACE);
}

#[test]
fn later_colons_belong_to_the_value() {
    check(&COLON_IN_VALUE);
}

#[test]
fn data_lines_are_joined_with_lf() {
    check(&MULTI_LINE_DATA);
}

#[test]
fn empty_data_lines_still_dispatch() {
    check(&EMPTY_DATA);
}

#[test]
fn id_retry_and_unknown_fields_are_ignored() {
    check(&IGNORED_FIELDS);
}

#[test]
fn an_event_without_data_is_not_dispatched() {
    check(&NO_DATA_NO_EVENT);
}

#[test]
fn field_names_are_exact() {
    check(&FIELD_NAMES_EXACT);
}

#[test]
fn comments_are_ignored() {
    check(&COMMENTS);
}

#[test]
fn the_event_name_lasts_until_its_dispatch() {
    check(&EVENT_NAME);
}

#[test]
fn event_values_follow_the_colon_and_space_rule() {
    check(&EVENT_NAME_WITHOUT_SPACE);
}

#[test]
fn done_ends_the_completion() {
    check(&DONE);
}

#[test]
fn an_unfinished_event_at_the_end_is_dropped() {
    check(&UNFINISHED_EVENT);
}

#[test]
fn an_unfinished_line_at_the_end_is_dropped() {
    check(&UNFINISHED_LINE);
}

#[test]
fn invalid_utf8_decodes_to_replacement_characters() {
    check(&INVALID_UTF8);
}

#[test]
fn every_character_but_cr_and_lf_is_part_of_a_line() {
    check(&NUL_AND_CONTROLS);
}

#[test]
fn a_cr_only_line_past_its_cap_is_a_typed_failure() {
    let mut decoder = SseDecoder::new(16, 1 << 20);
    let mut out = Vec::new();
    decoder.feed(b"data: short\r\r", &mut out).expect("fits");
    let error = decoder
        .feed(b"data: a line far longer than sixteen bytes\r", &mut out)
        .expect_err("line cap");
    assert_eq!(
        error.kind(),
        mesh_egress::model::ModelErrorKind::InvalidResponse
    );
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
