//! A streamed attempt's head, held back until it shows whether the reply opens with a text
//! tool call: such a call is then a failed attempt (or, with tools offered, a tool call)
//! before a word of it reached the person. An ordinary reply is held only for its first few
//! bytes, until they cannot start a marker.

use super::format::TextToolFormat;
use super::markers::{self, HeadRead};

/// The most a head may hold while it is still undecided (a marker, its payload's first token):
/// past it, the text is shown.
const UNDECIDED_CAP: usize = 256;
/// The most held for a reply that may be a whole-reply call (a bare JSON object, a Python call
/// list); a longer one is an answer, shown from there on.
const WHOLE_REPLY_CAP: usize = 16 * 1024;

/// The head check of one streamed attempt (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct HeadCheck {
    held: String,
    state: State,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Undecided,
    WholeReply,
    Markup(TextToolFormat),
    Shown,
}

/// What to do with the text that came in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HeadStep {
    /// Nothing to show yet.
    Hold,
    /// Show this; everything after it passes through.
    Show(String),
    /// A text tool call of this format opens the reply (said once; the rest is held).
    Call(TextToolFormat),
}

impl HeadCheck {
    /// A check for an attempt that has shown nothing.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Takes the next text delta.
    pub(crate) fn push(&mut self, delta: &str) -> HeadStep {
        match self.state {
            State::Shown => HeadStep::Show(delta.to_owned()),
            State::Markup(_) => {
                self.held.push_str(delta);
                HeadStep::Hold
            }
            State::WholeReply => {
                self.held.push_str(delta);
                if self.held.len() > WHOLE_REPLY_CAP {
                    return self.show();
                }
                HeadStep::Hold
            }
            State::Undecided => {
                self.held.push_str(delta);
                match markers::head(&self.held) {
                    HeadRead::Undecided if self.held.len() <= UNDECIDED_CAP => HeadStep::Hold,
                    HeadRead::Undecided | HeadRead::Text => self.show(),
                    HeadRead::WholeReply => {
                        self.state = State::WholeReply;
                        HeadStep::Hold
                    }
                    HeadRead::Markup(format) => {
                        self.state = State::Markup(format);
                        HeadStep::Call(format)
                    }
                }
            }
        }
    }

    /// The stream ended cleanly: what is held is shown, or it is a text tool call (a call
    /// opening the reply, or a whole-reply call now that the reply is whole).
    pub(crate) fn finish(&mut self) -> HeadStep {
        match self.state {
            State::Shown => HeadStep::Show(String::new()),
            State::Markup(format) => HeadStep::Call(format),
            State::Undecided | State::WholeReply => match markers::find(&self.held) {
                Some(found) => {
                    self.state = State::Markup(found.format);
                    HeadStep::Call(found.format)
                }
                None => self.show(),
            },
        }
    }

    /// Shows everything held after all (a call the person's own message quoted).
    pub(crate) fn release(&mut self) -> String {
        match self.show() {
            HeadStep::Show(text) => text,
            _ => String::new(),
        }
    }

    /// Everything held (the whole reply, once a call was found).
    pub(crate) fn held(&self) -> &str {
        &self.held
    }

    fn show(&mut self) -> HeadStep {
        self.state = State::Shown;
        HeadStep::Show(std::mem::take(&mut self.held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(deltas: &[&str]) -> (Vec<HeadStep>, HeadStep) {
        let mut head = HeadCheck::new();
        let steps = deltas.iter().map(|d| head.push(d)).collect();
        (steps, head.finish())
    }

    #[test]
    fn an_ordinary_reply_is_held_only_until_it_cannot_start_a_marker() {
        let (steps, end) = run(&["Su", "re, ", "done."]);
        assert_eq!(
            steps,
            [
                HeadStep::Show("Su".into()),
                HeadStep::Show("re, ".into()),
                HeadStep::Show("done.".into())
            ]
        );
        assert_eq!(end, HeadStep::Show(String::new()));
        let (steps, _) = run(&["<", "b>bold</b>"]);
        assert_eq!(
            steps,
            [HeadStep::Hold, HeadStep::Show("<b>bold</b>".into())]
        );
    }

    #[test]
    fn a_marker_split_across_deltas_is_a_call_before_anything_is_shown() {
        let (steps, end) = run(&["<tool", "_call>\n", "{\"name\": \"f\"}", "</tool_call>"]);
        assert_eq!(
            steps,
            [
                HeadStep::Hold,
                HeadStep::Hold,
                HeadStep::Call(TextToolFormat::Hermes),
                HeadStep::Hold
            ]
        );
        assert_eq!(end, HeadStep::Call(TextToolFormat::Hermes));
    }

    #[test]
    fn a_whole_reply_call_is_known_at_the_end_and_an_answer_in_braces_is_shown_then() {
        let (_, end) = run(&["{\"name\": \"f\", ", "\"parameters\": {}}"]);
        assert_eq!(end, HeadStep::Call(TextToolFormat::BareJson));
        let (steps, end) = run(&["{\"name\": \"Ada\", ", "\"role\": \"admin\"}"]);
        assert_eq!(steps, [HeadStep::Hold, HeadStep::Hold]);
        assert_eq!(
            end,
            HeadStep::Show("{\"name\": \"Ada\", \"role\": \"admin\"}".into())
        );
    }

    #[test]
    fn a_head_that_never_decides_is_shown_past_its_cap() {
        let mut head = HeadCheck::new();
        assert_eq!(head.push("{\"name\""), HeadStep::Hold);
        let long = "x".repeat(WHOLE_REPLY_CAP);
        assert!(matches!(head.push(&long), HeadStep::Show(text) if text.len() > WHOLE_REPLY_CAP));
    }
}
