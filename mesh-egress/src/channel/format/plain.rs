//! Plain text: the words without markup; links as `label (url)`, quotes as `> `.

use super::{AsciiSet, Dialect, Heading, Pair, Quote, Style};
use crate::channel::atom::Unit;

/// The plain-text dialect (used by [`PlainText`](crate::channel::PlainText)).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Plain;

impl Dialect for Plain {
    const UNIT: Unit = Unit::Chars;
    const MARKUP_COUNTS: bool = true;
    const TEXT_ESCAPES: AsciiSet = AsciiSet::NONE;
    const CODE_ESCAPES: AsciiSet = AsciiSet::NONE;

    fn escape(&self, _c: char, _at_line_start: bool) -> Option<&'static str> {
        None
    }

    fn code_escape(&self, _c: char) -> Option<&'static str> {
        None
    }

    fn style(&self, _style: Style) -> Option<Pair> {
        None
    }

    fn code_span(&self, _code: &str) -> Option<Pair> {
        None
    }

    fn fence(&self, _lang: &str, _prefix: &str) -> Option<Pair> {
        None
    }

    fn heading(&self, _level: u8) -> Heading {
        Heading::Plain
    }

    fn quote(&self) -> Quote {
        Quote::Prefix("> ")
    }

    fn bullet(&self, depth: usize) -> &'static str {
        if depth == 0 { "• " } else { "◦ " }
    }

    fn link(&self, _url: &str) -> Option<Pair> {
        None
    }
}
