//! Text-protocol tool decisions: a model that writes its tool call into the message text
//! instead of the `tool_calls` field. Every open-weight family has its own text protocol, and
//! a server without that family's tool parser (a vLLM, Ollama or llama.cpp deployment started
//! without it, a gateway that passes raw text through) hands the raw markup over as `content`.
//! Delivered as an answer, the person reads `<tool_call>{"name": "search_logs", …}`.
//!
//! Layer A reads a completion's text for one ([`text_tool_format`]; a look at its first byte
//! and one Aho-Corasick pass over it, the automata built once, or on a short reply with none of
//! the markers' first bytes not even that pass: the healthy path pays that and nothing else). A call found outside code (a marker inside a fence or an inline code span is
//! the model quoting the format, as when the person asked about it):
//!
//! - **the request offered tools**: it is read into structured [`ToolCall`]s (its name must be
//!   an offered function) and the text before it stays the completion's text. Markup that
//!   cannot be read gets the connector's one in-attempt repair (the spec's Layer A): the
//!   request is sent again with the model's reply and a correction saying what was wrong; if
//!   that also fails, the attempt fails with a retryable `malformed_tool_call`.
//! - **it offered none**: the attempt fails with a retryable `malformed_tool_call` (cause
//!   [`TextToolCallError::NoToolsOffered`]), retried and fallen back from like any other
//!   failure; only when recovery is spent does the turn reach Layer C. No markup is shown.
//!
//! A streamed attempt holds its head back until it can tell (`head`), so a stream that opens
//! with a call is a failed attempt before anything is shown. Markup that arrives after text
//! was shown is the quality gate's to catch.
//!
//! The formats and the source of each are listed on [`TextToolFormat`].
//!
//! The labelled corpus these are checked against, with a held-out part, is
//! `tests/tests/data/text_tool_calls.json` of the repository.

mod call;
mod format;
mod head;
mod markers;
mod parse;
mod python;

pub use call::TextToolProblem;
pub use format::TextToolFormat;
pub(crate) use head::{HeadCheck, HeadStep};
#[cfg(feature = "markdown")]
pub(crate) use markers::undecided_from;
#[cfg(feature = "gate")]
pub(crate) use markers::{literals, markup_at, whole_reply_call};

use super::error::ModelError;
use super::wire::{ChatMessage, ChatRequest, Completion, ToolCall, ToolDefinition, usable};

/// Why a text tool call failed its attempt (the source of its `malformed_tool_call`
/// [`ModelError`], reachable from the turn's `EgressError` through `internal_cause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TextToolCallError {
    /// The model wrote a tool call into its text, and the request offered no tools: there is
    /// nothing to run and nothing to show.
    #[error("the model wrote a {format} tool call into its text, and the request offered no tools")]
    NoToolsOffered {
        /// The protocol it wrote.
        format: TextToolFormat,
    },
    /// The request offered tools, and the call could not be read (after the repair, when the
    /// connector makes one).
    #[error("the model's {format} tool call could not be read: {problem}")]
    Unreadable {
        /// The protocol it wrote.
        format: TextToolFormat,
        /// What was wrong with it.
        problem: TextToolProblem,
    },
}

/// The text tool call `text` holds, if any (outside code, where the format's markers open a
/// call, or as the whole reply): the check Layer A runs on every completion's text.
///
/// ```
/// use mesh_egress::model::{TextToolFormat, text_tool_format};
/// let leaked = r#"<tool_call>{"name": "search_logs", "arguments": {"q": "deploy"}}</tool_call>"#;
/// assert_eq!(text_tool_format(leaked), Some(TextToolFormat::Hermes));
/// assert_eq!(text_tool_format("The deploy finished at 09:12."), None);
/// // Quoting the format in code is an answer, not a call.
/// assert_eq!(text_tool_format("Hermes wraps each call in `<tool_call>` tags."), None);
/// ```
pub fn text_tool_format(text: &str) -> Option<TextToolFormat> {
    markers::find(text).map(|found| found.format)
}

/// What a correction re-asks the model for: the second request of the connector's one repair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Correction {
    /// A structured tool call whose arguments are not JSON.
    ArgumentsNotJson,
    /// A text tool call that could not be read.
    TextToolCall {
        format: TextToolFormat,
        problem: TextToolProblem,
    },
}

impl Correction {
    /// The correction as the model reads it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // read by the HTTP connectors only
    fn message(&self, tools: &[ToolDefinition]) -> String {
        match self {
            Self::ArgumentsNotJson => "Your tool call arguments were not valid JSON. Make the \
                                       same tool call again, with arguments that are one valid \
                                       JSON object and nothing else."
                .to_owned(),
            Self::TextToolCall { problem, .. } => {
                let mut message = format!(
                    "Your tool call could not be read: {problem}. Make the same tool call again, \
                     in the same format, with the function's name and its arguments as one \
                     valid JSON object, and nothing else."
                );
                if *problem == TextToolProblem::UnknownFunction {
                    let names: Vec<&str> = tools.iter().map(|t| t.function.name.as_str()).collect();
                    message.push_str(&format!(
                        " The functions you may call are: {}.",
                        names.join(", ")
                    ));
                }
                message
            }
        }
    }
}

/// What a completion is, after Layer A's look at its tool decisions.
#[derive(Debug)]
pub(crate) enum Inspected {
    /// Ready to use: nothing to fix, or a text tool call read into structured calls.
    Usable(Completion),
    /// A tool decision that could not be read: the connector's one repair, if it makes one.
    Repair {
        #[cfg_attr(not(feature = "http"), allow(dead_code))] // read by the HTTP connectors only
        completion: Completion,
        correction: Correction,
    },
    /// The attempt failed (a text tool call with no tools offered).
    Failed(ModelError),
}

/// Layer A's look at a completion's tool decisions (see the module docs): a structured call
/// with unreadable arguments needs the repair; a text tool call becomes structured calls when
/// the request offered tools, a repair when it cannot be read, and a failed attempt when no
/// tools were offered.
pub(crate) fn inspect(mut completion: Completion, request: &ChatRequest) -> Inspected {
    if completion
        .tool_calls
        .iter()
        .any(|call| call.parsed_arguments().is_err())
    {
        return Inspected::Repair {
            completion,
            correction: Correction::ArgumentsNotJson,
        };
    }
    let Some(text) = completion.content.as_deref() else {
        return Inspected::Usable(completion);
    };
    let Some(found) = markers::find(text) else {
        return Inspected::Usable(completion);
    };
    let format = found.format;
    if quoted_by_user(text, request) {
        return Inspected::Usable(completion);
    }
    if request.tools.is_empty() {
        return Inspected::Failed(
            ModelError::malformed_tool_call()
                .with_source(TextToolCallError::NoToolsOffered { format }),
        );
    }
    match read(text, found, &request.tools) {
        Ok((preface, calls)) => {
            completion.content = preface;
            completion.tool_calls.extend(calls);
            completion.finish_reason = Some("tool_calls".to_owned());
            Inspected::Usable(completion)
        }
        Err(problem) => Inspected::Repair {
            completion,
            correction: Correction::TextToolCall { format, problem },
        },
    }
}

/// Layer A's verdict on one attempt's completion, where no repair can be made (the Router, for
/// any connector): usable, or a failed attempt (empty, or a tool decision that cannot be used).
// Inlined so the healthy case is decided where the completion already is, without moving it
// into a call and back.
#[inline]
pub(crate) fn settle(
    result: Result<Completion, ModelError>,
    request: &ChatRequest,
) -> Result<Completion, ModelError> {
    // The healthy case, asked in place: what `inspect` finds `Usable` unchanged, without moving
    // the completion through it.
    if let Ok(completion) = &result
        && plainly_usable(completion)
    {
        return result;
    }
    settle_inspected(result, request)
}

/// Whether [`settle`] passes `completion` unchanged without a closer look: text and no tool
/// call, the text holding no text tool call. Asked by reference, so a caller can take the
/// healthy case without moving the completion.
#[inline]
pub(crate) fn plainly_usable(completion: &Completion) -> bool {
    completion.tool_calls.is_empty()
        && completion
            .finish_reason
            .as_deref()
            .is_none_or(|reason| crate::model::finish::verdict(reason, false).is_none())
        && completion.content.as_deref().is_some_and(|text| {
            // Not blank (a printable first byte says so at once), and no call in it.
            (text.as_bytes().first().is_some_and(u8::is_ascii_graphic) || completion.has_text())
                && markers::find(text).is_none()
        })
}

/// [`settle`] for a completion [`plainly_usable`] did not pass (or an error): `inspect`'s
/// verdict.
pub(crate) fn settle_inspected(
    result: Result<Completion, ModelError>,
    request: &ChatRequest,
) -> Result<Completion, ModelError> {
    match inspect(usable(result)?, request) {
        Inspected::Usable(completion) => Ok(completion),
        Inspected::Failed(error) => Err(error),
        Inspected::Repair { correction, .. } => Err(unrepaired(&correction)),
    }
}

/// The failure of a tool decision still unreadable after (or without) the repair.
pub(crate) fn unrepaired(correction: &Correction) -> ModelError {
    match correction {
        Correction::ArgumentsNotJson => ModelError::malformed_tool_call(),
        Correction::TextToolCall { format, problem } => ModelError::malformed_tool_call()
            .with_source(TextToolCallError::Unreadable {
                format: *format,
                problem: *problem,
            }),
    }
}

/// Whether the person's own message makes the call `text` carries an answer (see
/// [`asked`](crate::asked), the notion the gate shares): it holds the markup's marker (they
/// asked about it, or pasted it), it holds the reply itself (a bare JSON call they pasted), or
/// it asks how tool calling or its JSON is written. The last two only when the request offered
/// no tools: with tools, a call naming one is the model's decision whatever the person said.
/// Only asked once a call was found.
pub(crate) fn quoted_by_user(text: &str, request: &ChatRequest) -> bool {
    let Some(user) = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == super::wire::Role::User)
        .and_then(|m| m.content.as_deref())
    else {
        return false;
    };
    markers::literals().any(|literal| user.contains(literal) && text.contains(literal))
        || request.tools.is_empty()
            && (crate::asked::quotes(user, text)
                || crate::asked::asks(&user.to_lowercase(), crate::asked::TOOL_CALL_TOPICS))
}

/// A stream's text tool call (`text` is the whole reply the head held), read with the request's
/// tools: the text before it and the calls, or the failure of the attempt. A stream gets no
/// repair (it would be a second streamed request inside the attempt): a call that cannot be
/// read is a failed attempt, retried like any other.
pub(crate) fn read_streamed(
    text: &str,
    format: TextToolFormat,
    request: &ChatRequest,
) -> Result<(Option<String>, Vec<ToolCall>), ModelError> {
    if request.tools.is_empty() {
        return Err(ModelError::malformed_tool_call()
            .with_source(TextToolCallError::NoToolsOffered { format }));
    }
    let found = markers::find(text).unwrap_or(markers::Found {
        format,
        start: text.len() - text.trim_start().len(),
    });
    read(text, found, &request.tools).map_err(|problem| {
        unrepaired(&Correction::TextToolCall {
            format: found.format,
            problem,
        })
    })
}

/// The text before the call (`None` when blank) and the calls, each naming an offered function.
fn read(
    text: &str,
    found: markers::Found,
    tools: &[ToolDefinition],
) -> Result<(Option<String>, Vec<ToolCall>), TextToolProblem> {
    let end = markers::markup_end(text, found.start, found.format);
    let raw = parse::parse(found.format, &text[found.start..end])?;
    let mut calls = Vec::with_capacity(raw.len());
    for call in raw {
        if !tools.iter().any(|t| t.function.name == call.name) {
            return Err(TextToolProblem::UnknownFunction);
        }
        let id = call
            .id
            .unwrap_or_else(|| format!("call_{:016x}", fastrand::u64(..)));
        calls.push(ToolCall::function(
            id,
            call.name,
            call.arguments.to_string(),
        ));
    }
    // Harmony's preface is its analysis channel (reasoning), never an answer; Functionary's
    // text opens with its `>>>all` recipient line.
    let preface = text[..found.start].trim_end();
    let preface = preface
        .strip_prefix(">>>all")
        .unwrap_or(preface)
        .trim_start();
    let preface = (found.format != TextToolFormat::Harmony && !preface.trim().is_empty())
        .then(|| preface.to_owned());
    Ok((preface, calls))
}

/// The second request of the connector's one repair: the original request, the model's reply
/// as it came, and the correction.
#[cfg_attr(not(feature = "http"), allow(dead_code))] // read by the HTTP connectors only
pub(crate) fn repair_request(
    request: &ChatRequest,
    broken: &Completion,
    correction: &Correction,
) -> ChatRequest {
    let reply = match correction {
        Correction::ArgumentsNotJson => {
            let calls: Vec<String> = broken
                .tool_calls
                .iter()
                .map(|c| format!("{}({})", c.function.name, c.function.arguments))
                .collect();
            format!(
                "{}Tool call: {}",
                broken
                    .content
                    .as_deref()
                    .map(|c| format!("{c}\n"))
                    .unwrap_or_default(),
                calls.join(", ")
            )
        }
        Correction::TextToolCall { .. } => broken.content.clone().unwrap_or_default(),
    };
    let mut repaired = request.clone();
    repaired.messages.push(ChatMessage::assistant(reply));
    repaired
        .messages
        .push(ChatMessage::user(correction.message(&request.tools)));
    repaired
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelErrorKind, classify};

    fn tools() -> Vec<ToolDefinition> {
        vec![ToolDefinition::function(
            "search_logs",
            "search the logs",
            serde_json::json!({"type": "object"}),
        )]
    }

    const LEAK: &str = "Let me look.\n<tool_call>{\"name\": \"search_logs\", \"arguments\": {\"q\": \"deploy\"}}</tool_call>";

    #[test]
    fn with_tools_offered_a_text_call_becomes_a_structured_one_and_the_text_before_it_stays() {
        let request = ChatRequest::default().with_tools(tools());
        let Inspected::Usable(done) = inspect(Completion::text("m", LEAK), &request) else {
            panic!("usable");
        };
        assert_eq!(done.content.as_deref(), Some("Let me look."));
        assert_eq!(done.tool_calls.len(), 1);
        assert_eq!(done.tool_calls[0].function.name, "search_logs");
        assert_eq!(
            done.tool_calls[0].parsed_arguments().expect("json"),
            serde_json::json!({"q": "deploy"})
        );
        assert_eq!(done.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn without_tools_a_text_call_is_a_retryable_malformed_tool_call() {
        let error = settle(Ok(Completion::text("m", LEAK)), &ChatRequest::default())
            .expect_err("no tools offered");
        assert_eq!(error.kind(), ModelErrorKind::MalformedToolCall);
        assert!(classify(&error).retryable);
        let cause = std::error::Error::source(&error)
            .and_then(|s| s.downcast_ref::<TextToolCallError>())
            .expect("typed cause");
        assert_eq!(
            cause,
            &TextToolCallError::NoToolsOffered {
                format: TextToolFormat::Hermes
            }
        );
    }

    #[test]
    fn an_unreadable_or_unknown_call_asks_for_a_repair_that_says_what_was_wrong() {
        let request = ChatRequest::default().with_tools(tools());
        let unknown = "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>";
        let Inspected::Repair {
            completion,
            correction,
        } = inspect(Completion::text("m", unknown), &request)
        else {
            panic!("a repair");
        };
        assert_eq!(
            correction,
            Correction::TextToolCall {
                format: TextToolFormat::Hermes,
                problem: TextToolProblem::UnknownFunction
            }
        );
        let repaired = repair_request(&request, &completion, &correction);
        let said = repaired.messages.last().and_then(|m| m.content.clone());
        assert!(said.is_some_and(|s| s.contains("could not be read") && s.contains("search_logs")));
        assert_eq!(
            repaired.messages[repaired.messages.len() - 2]
                .content
                .as_deref(),
            Some(unknown)
        );
    }

    #[test]
    fn a_healthy_answer_is_untouched() {
        let request = ChatRequest::default().with_tools(tools());
        let answer = Completion::text("m", "All green.");
        assert!(matches!(inspect(answer.clone(), &request), Inspected::Usable(c) if c == answer));
    }
}
