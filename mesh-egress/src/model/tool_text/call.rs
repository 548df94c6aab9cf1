//! One call as a text tool decision's markup wrote it ([`RawCall`]), why markup could not be
//! read as calls ([`TextToolProblem`]), the call-count bound and the identifier rule: what the
//! format readers (`parse.rs`, `python.rs`) and the marker check share.

use serde_json::Value;

/// The most calls one text tool decision may make (as a streamed completion's assembler).
pub(crate) const MAX_CALLS: usize = 128;

/// Why a text tool call's markup could not be read as calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum TextToolProblem {
    /// The body is not the JSON (or Python literal) the format carries.
    #[error("its body is not valid JSON")]
    NotJson,
    /// No function name where the format puts one.
    #[error("it names no function")]
    NoName,
    /// The arguments are not one JSON object of named values.
    #[error("its arguments are not one JSON object")]
    ArgumentsNotObject,
    /// It calls a function the request did not offer.
    #[error("it calls a function the request did not offer")]
    UnknownFunction,
    /// The markup opens a call and holds none.
    #[error("it holds no call")]
    NoCall,
    /// More calls than one reply may make.
    #[error("it makes more than 128 calls")]
    TooManyCalls,
}

/// One call as the markup wrote it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RawCall {
    pub(crate) name: String,
    pub(crate) arguments: Value,
    /// The call's id, where the format carries one (Kimi K2's `functions.name:0`).
    pub(crate) id: Option<String>,
}

/// Adds `call`, refusing a call count past [`MAX_CALLS`].
pub(crate) fn push_call(calls: &mut Vec<RawCall>, call: RawCall) -> Result<(), TextToolProblem> {
    if calls.len() >= MAX_CALLS {
        return Err(TextToolProblem::TooManyCalls);
    }
    calls.push(call);
    Ok(())
}

/// The length of the identifier (`[A-Za-z_][A-Za-z0-9_.-]*`) `s` starts with.
pub(crate) fn ident(s: &str) -> usize {
    let b = s.as_bytes();
    if !b
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
    {
        return 0;
    }
    b.iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        .count()
}
