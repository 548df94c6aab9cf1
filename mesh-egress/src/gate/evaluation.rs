//! The evaluation types: what the gate is told ([`GateInput`]), what it decided
//! ([`GateVerdict`]) and its account of one candidate ([`Evaluation`]).

use crate::egress::{AgentMessage, Attribution, EgressError};
use crate::gate::finding::Finding;
use crate::gate::judge::JudgeOutcome;
pub use crate::verdict::GateVerdict;

/// What the gate is told about the turn besides the candidate: the user's message it answers,
/// and any per-request canary tokens.
///
/// ```
/// use mesh_egress::gate::GateInput;
/// let canaries = ["c4n4ry-7f1e"];
/// let input = GateInput::new("What is our refund policy?").with_canaries(&canaries);
/// assert_eq!(input.user_message(), "What is our refund policy?");
/// let plain: GateInput<'_> = "hi".into();
/// assert!(plain.canaries().is_empty());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GateInput<'a> {
    pub(crate) user_message: &'a str,
    pub(crate) canaries: &'a [&'a str],
}

impl<'a> GateInput<'a> {
    /// The user's message the candidate answers (empty for proactive turns).
    pub fn new(user_message: &'a str) -> Self {
        Self {
            user_message,
            canaries: &[],
        }
    }

    /// Canary tokens planted in this request's prompt; any of them in the reply is a leak.
    pub fn with_canaries(mut self, canaries: &'a [&'a str]) -> Self {
        self.canaries = canaries;
        self
    }

    /// The user's message.
    pub fn user_message(&self) -> &'a str {
        self.user_message
    }

    /// The per-request canaries.
    pub fn canaries(&self) -> &'a [&'a str] {
        self.canaries
    }
}

impl<'a> From<&'a str> for GateInput<'a> {
    fn from(user_message: &'a str) -> Self {
        Self::new(user_message)
    }
}

impl<'a> From<&'a String> for GateInput<'a> {
    fn from(user_message: &'a String) -> Self {
        Self::new(user_message)
    }
}

/// The internal cause of a gate block: which rules fired. It never holds the candidate's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the quality gate blocked the reply (rules: {})", .rules.join(", "))]
pub struct GateBlocked {
    pub(crate) rules: Vec<&'static str>,
}

impl GateBlocked {
    /// The ids of the rules behind the block.
    pub fn rules(&self) -> &[&'static str] {
        &self.rules
    }
}

/// The gate's account of one candidate: the verdict, the findings, the judge's part, and what
/// is sent (the candidate, its sanitised rest, or nothing).
#[derive(Debug)]
pub struct Evaluation {
    pub(crate) verdict: GateVerdict,
    pub(crate) findings: Vec<Finding>,
    pub(crate) judge: Option<JudgeOutcome>,
    pub(crate) message: Option<AgentMessage>,
    pub(crate) attribution: Attribution,
}

impl Evaluation {
    /// What the gate decided.
    pub fn verdict(&self) -> GateVerdict {
        self.verdict
    }

    /// Every finding, in text order (a sanitised reply's re-gate findings follow).
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// How the judge's part ended, if it was asked (`None` when nothing was flagged).
    pub fn judge(&self) -> Option<JudgeOutcome> {
        self.judge
    }

    /// What is sent, if anything.
    pub fn message(&self) -> Option<&AgentMessage> {
        self.message.as_ref()
    }

    /// The message to send, or a semantic [`EgressError`] (cause: [`GateBlocked`]) for Layer C.
    ///
    /// # Errors
    ///
    /// A semantic [`EgressError`] (cause: [`GateBlocked`], naming the rules that fired) when
    /// the gate blocked the message (retryable as its verdict says) or left no message.
    pub fn into_result(self) -> Result<AgentMessage, EgressError> {
        match (self.verdict, self.message) {
            (GateVerdict::Blocked { .. }, _) | (_, None) => {
                let retryable = match self.verdict {
                    GateVerdict::Blocked { retryable } => retryable,
                    _ => true,
                };
                let mut rules: Vec<&'static str> =
                    self.findings.iter().map(Finding::rule_id).collect();
                rules.dedup();
                Err(
                    EgressError::semantic(GateBlocked { rules }, self.attribution)
                        .with_retryable(retryable),
                )
            }
            (_, Some(message)) => Ok(message),
        }
    }
}
