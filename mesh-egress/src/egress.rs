//! The egress values: what may cross toward a user ([`AgentMessage`]) and what never may
//! ([`EgressError`]).
//!
//! The two are distinct types on purpose. A delivery path accepts only [`AgentMessage`]; an
//! [`EgressError`] has no `Display`, no `ToString`, no `std::error::Error` and no conversion into
//! any message or string type, so turning one into user-visible text has to be written on
//! purpose, through [`EgressError::internal_cause`], which exists for logs.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::mode::Mode;
use crate::ownership::Ownership;

/// Canonical CommonMark text, before any channel has rendered it.
///
/// `Markdown` has no `Display`: nothing turns it into wire text except a renderer
/// ([`Render`](crate::channel::Render)), so unrendered Markdown cannot reach a channel by accident.
///
/// ```
/// use mesh_egress::Markdown;
/// let md = Markdown::new("**hello**");
/// assert_eq!(md.as_str(), "**hello**");
/// let same: Markdown = "**hello**".into();
/// assert_eq!(md, same);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Markdown(String);

impl Markdown {
    /// Wraps canonical Markdown text.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The Markdown source.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the body holds nothing but whitespace (such a body is never sent).
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl fmt::Debug for Markdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Markdown").field(&self.0).finish()
    }
}

impl From<String> for Markdown {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl From<&str> for Markdown {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

/// Which agent (perspective), conversation and run a value belongs to.
///
/// Every message, error, ledger row and log event carries one, so an operator can trace what a
/// person saw back to the run that produced it.
///
/// Cloning is a reference-count increment: every ledger row and log event carries one, and the
/// healthy path should not pay three string copies for each.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Attribution(Arc<AttributionParts>);

#[derive(PartialEq, Eq, Hash, Serialize, Deserialize)]
struct AttributionParts {
    agent: String,
    conversation: String,
    run: String,
}

impl Attribution {
    /// An attribution for `agent` speaking in `conversation` during `run`.
    pub fn new(
        agent: impl Into<String>,
        conversation: impl Into<String>,
        run: impl Into<String>,
    ) -> Self {
        Self(Arc::new(AttributionParts {
            agent: agent.into(),
            conversation: conversation.into(),
            run: run.into(),
        }))
    }

    /// The agent (perspective) that speaks.
    pub fn agent(&self) -> &str {
        &self.0.agent
    }

    /// The conversation the value belongs to.
    pub fn conversation(&self) -> &str {
        &self.0.conversation
    }

    /// The run (turn execution) that produced the value.
    pub fn run(&self) -> &str {
        &self.0.run
    }
}

impl AsRef<Attribution> for Attribution {
    fn as_ref(&self) -> &Attribution {
        self
    }
}

impl fmt::Debug for Attribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attribution")
            .field("agent", &self.0.agent)
            .field("conversation", &self.0.conversation)
            .field("run", &self.0.run)
            .finish()
    }
}

/// A deliverable agent message: canonical Markdown plus its attribution.
///
/// This is the only kind of value a channel's delivery path accepts (directly, or inside a
/// [`Reply`](crate::Reply)).
///
/// ```
/// use mesh_egress::{AgentMessage, Attribution};
/// let msg = AgentMessage::new("Done: **3** tickets closed.", Attribution::new("ops", "c1", "r1"));
/// assert_eq!(msg.body().as_str(), "Done: **3** tickets closed.");
/// assert_eq!(msg.attribution().conversation(), "c1");
/// ```
#[derive(Clone)]
pub struct AgentMessage {
    body: Markdown,
    attribution: Attribution,
    // Set by `Turn::message` and the turn-aware boundary: every channel refuses the message once
    // it is lost. `None` for `AgentMessage::new`: the caller checks ownership itself.
    ownership: Option<Ownership>,
    // Stamped by the boundary (`resolve`, the turn-aware `resolve_in`, `#[egress_boundary]`):
    // the mode the handler declared, so a failure found later on the way out (the gate blocks
    // the answer, it cannot be rendered) is decided the way the handler's own failure would
    // have been.
    mode: Option<Mode>,
}

impl AgentMessage {
    /// A message with `body` (canonical Markdown) attributed to `attribution`.
    ///
    /// It carries **no ownership**: channels send it whether or not this process still owns the
    /// conversation, so checking is the caller's job. Inside a turn prefer
    /// [`Turn::message`](crate::Turn::message), which ties the message to the turn's ownership
    /// (or add one with [`with_ownership`](Self::with_ownership)); replies from the turn-aware
    /// boundary (`#[egress_boundary]` on a handler taking `&Turn`, and the
    /// [`Bot`](crate::Bot)) are tied to it too.
    pub fn new(body: impl Into<Markdown>, attribution: Attribution) -> Self {
        Self {
            body: body.into(),
            attribution,
            ownership: None,
            mode: None,
        }
    }

    /// The Markdown body, pre-render.
    pub fn body(&self) -> &Markdown {
        &self.body
    }

    /// Who said it, where, in which run.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// Splits the message into its body and attribution.
    pub fn into_parts(self) -> (Markdown, Attribution) {
        (self.body, self.attribution)
    }

    /// Ties the message to a conversation's ownership: every channel refuses to commit or send it
    /// once `ownership` is lost ([`CommitError::OwnershipLost`](crate::CommitError::OwnershipLost)).
    /// [`Turn::message`](crate::Turn::message) does this for you.
    pub fn with_ownership(mut self, ownership: Ownership) -> Self {
        self.ownership = Some(ownership);
        self
    }

    /// The same message (speaker, ownership) with another body: the boundary's edit of what
    /// the agent wrote, such as cutting its silence tokens.
    pub(crate) fn with_body(mut self, body: impl Into<Markdown>) -> Self {
        self.body = body.into();
        self
    }

    /// The mode of the handler this message left, when it left through the boundary
    /// ([`resolve`](crate::boundary::resolve), `#[egress_boundary]`); `None` for a message built
    /// by hand (the front door then uses its turn's mode).
    pub fn mode(&self) -> Option<Mode> {
        self.mode
    }

    /// The message stamped with the mode of the handler it left.
    pub(crate) fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// The ownership this message is tied to, if any.
    pub fn ownership(&self) -> Option<&Ownership> {
        self.ownership.as_ref()
    }

    /// Whether the message may still be sent: it carries no ownership, or its ownership holds.
    pub fn is_owned(&self) -> bool {
        self.ownership.as_ref().is_none_or(Ownership::is_held)
    }
}

impl PartialEq for AgentMessage {
    // Two messages are equal when a person would see the same thing from the same speaker;
    // the ownership handle and the mode stamp are delivery plumbing, not content.
    fn eq(&self, other: &Self) -> bool {
        self.body == other.body && self.attribution == other.attribution
    }
}

impl Eq for AgentMessage {}

impl fmt::Debug for AgentMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentMessage")
            .field("body", &self.body)
            .field("attribution", &self.attribution)
            .field("owned", &self.ownership.is_some())
            .field("mode", &self.mode)
            .finish()
    }
}

/// The two failure classes of the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The runtime already knows the call failed: a status code, a timeout, an empty completion.
    Transport,
    /// The output exists but is wrong to send: a refusal, leaked reasoning, a prompt echo.
    Semantic,
}

impl FailureClass {
    /// A stable lowercase name for logs and ledgers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transport => "transport",
            Self::Semantic => "semantic",
        }
    }
}

/// The boxed internal cause an [`EgressError`] carries.
pub(crate) type Cause = Box<dyn StdError + Send + Sync + 'static>;

/// A structured failure that must never be rendered to a user.
///
/// It is logged (once, at the boundary), attributed, retried or escalated, and Layer C decides
/// what the person sees instead. It deliberately implements neither `Display` nor
/// `std::error::Error` and converts into no message or string type; its `Debug` omits the cause.
/// The cause is reachable only through [`internal_cause`](Self::internal_cause), meant for logs
/// and error tracking.
///
/// ```
/// use mesh_egress::{Attribution, EgressError, FailureClass};
/// let err = EgressError::transport("upstream said 503", Attribution::new("a", "c", "r"));
/// assert_eq!(err.class(), FailureClass::Transport);
/// assert!(err.retryable());
/// assert!(!format!("{err:?}").contains("503"));
/// assert_eq!(err.internal_cause().to_string(), "upstream said 503");
/// ```
#[must_use = "an EgressError must reach the boundary (`boundary::resolve` or `#[egress_boundary]`)"]
pub struct EgressError {
    class: FailureClass,
    retryable: bool,
    attempt: u32,
    attribution: Attribution,
    cause: Cause,
}

impl EgressError {
    fn new(class: FailureClass, cause: Cause, attribution: Attribution) -> Self {
        Self {
            class,
            retryable: true,
            attempt: 1,
            attribution,
            cause,
        }
    }

    /// A transport/infra failure (Class 1). Retryable unless marked otherwise.
    pub fn transport(cause: impl Into<Cause>, attribution: Attribution) -> Self {
        Self::new(FailureClass::Transport, cause.into(), attribution)
    }

    /// A semantic/quality failure (Class 2). Retryable unless marked otherwise.
    pub fn semantic(cause: impl Into<Cause>, attribution: Attribution) -> Self {
        Self::new(FailureClass::Semantic, cause.into(), attribution)
    }

    /// Marks whether a later retry could succeed (a 401 or a 400 cannot).
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Records how many attempts were made before giving up (at least 1).
    pub fn with_attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt.max(1);
        self
    }

    /// Transport or semantic.
    pub fn class(&self) -> FailureClass {
        self.class
    }

    /// Whether a later retry could succeed.
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// How many attempts were made.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Which agent, conversation and run failed.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// The full internal cause, **for logs and error tracking only**.
    ///
    /// Never put what this returns in front of a person: that is the leak this crate exists to
    /// prevent. The boundary already logs it once (target `mesh_egress::egress`).
    pub fn internal_cause(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.cause
    }
}

impl fmt::Debug for EgressError {
    // The cause is left out on purpose: `{:?}` ends up in panics, test output and user-facing
    // "debug" replies more often than anyone intends.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressError")
            .field("class", &self.class)
            .field("retryable", &self.retryable)
            .field("attempt", &self.attempt)
            .field("attribution", &self.attribution)
            .finish_non_exhaustive()
    }
}

/// Either side of the boundary, for code that holds one or the other.
///
/// `Result<AgentMessage, EgressError>` is the everyday form; `Egress` exists for code that
/// stores or passes either without the `?` ergonomics.
#[derive(Debug)]
pub enum Egress {
    /// A deliverable message.
    Message(AgentMessage),
    /// A failure that must not be rendered.
    Error(EgressError),
}

impl Egress {
    /// The everyday form.
    ///
    /// # Errors
    ///
    /// The [`EgressError`] when this is [`Egress::Error`](Self::Error).
    pub fn into_result(self) -> Result<AgentMessage, EgressError> {
        match self {
            Self::Message(msg) => Ok(msg),
            Self::Error(err) => Err(err),
        }
    }
}

impl From<AgentMessage> for Egress {
    fn from(msg: AgentMessage) -> Self {
        Self::Message(msg)
    }
}

impl From<EgressError> for Egress {
    fn from(err: EgressError) -> Self {
        Self::Error(err)
    }
}

impl From<Result<AgentMessage, EgressError>> for Egress {
    fn from(result: Result<AgentMessage, EgressError>) -> Self {
        match result {
            Ok(msg) => Self::Message(msg),
            Err(err) => Self::Error(err),
        }
    }
}

/// Turns any `Result<T, E: Error>` into `Result<T, EgressError>` attributed to a turn.
///
/// ```
/// use mesh_egress::{Attribution, EgressResultExt, Turn};
/// let turn = Turn::new(Attribution::new("a", "c", "r"));
/// let parsed: Result<u32, _> = "12x".parse::<u32>().egress(&turn);
/// let err = parsed.unwrap_err();
/// assert_eq!(err.attribution().run(), "r");
/// ```
pub trait EgressResultExt<T> {
    /// Wraps the error as a retryable transport [`EgressError`] with the turn's attribution.
    ///
    /// # Errors
    ///
    /// When `self` is `Err`: its error, as a retryable transport [`EgressError`] attributed to
    /// `turn`.
    fn egress<A: AsRef<Attribution> + ?Sized>(self, turn: &A) -> Result<T, EgressError>;

    /// Like [`egress`](Self::egress), with an explicit attribution.
    ///
    /// # Errors
    ///
    /// When `self` is `Err`: its error, as a retryable transport [`EgressError`] attributed to
    /// `attribution`.
    fn egress_for(self, attribution: &Attribution) -> Result<T, EgressError>;
}

impl<T, E> EgressResultExt<T> for Result<T, E>
where
    E: StdError + Send + Sync + 'static,
{
    fn egress<A: AsRef<Attribution> + ?Sized>(self, turn: &A) -> Result<T, EgressError> {
        self.egress_for(turn.as_ref())
    }

    fn egress_for(self, attribution: &Attribution) -> Result<T, EgressError> {
        self.map_err(|e| EgressError::transport(e, attribution.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    // The boundary's guarantees, as facts the compiler checks on every build.
    assert_not_impl_any!(EgressError: fmt::Display, StdError, Clone, Into<AgentMessage>, Into<Markdown>, Into<String>);
    assert_not_impl_any!(Markdown: fmt::Display);
    assert_not_impl_any!(AgentMessage: fmt::Display, From<EgressError>, From<Markdown>, From<String>);
    assert_not_impl_any!(String: From<EgressError>);
    assert_not_impl_any!(Markdown: From<EgressError>);
    assert_impl_all!(EgressError: Send, Sync, fmt::Debug);
    assert_impl_all!(AgentMessage: Send, Sync, Clone);

    #[test]
    fn debug_of_an_egress_error_leaves_the_cause_out() {
        let err = EgressError::transport(
            "MARKER-7f3a secret provider body",
            Attribution::new("a", "c", "r"),
        );
        let dbg = format!("{err:?}");
        assert!(!dbg.contains("MARKER-7f3a"), "{dbg}");
        assert!(dbg.contains("Transport"));
        assert_eq!(
            err.internal_cause().to_string(),
            "MARKER-7f3a secret provider body"
        );
    }

    #[test]
    fn attempt_is_at_least_one() {
        let err = EgressError::semantic("x", Attribution::new("a", "c", "r")).with_attempt(0);
        assert_eq!(err.attempt(), 1);
    }

    #[test]
    fn egress_round_trips_through_result() {
        let attr = Attribution::new("a", "c", "r");
        let ok: Egress = AgentMessage::new("hi", attr.clone()).into();
        assert!(ok.into_result().is_ok());
        let err: Egress = EgressError::transport("x", attr).into();
        assert!(err.into_result().is_err());
    }
}
