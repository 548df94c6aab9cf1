//! [`Engagement`]: what the ingress classifier decided about one inbound message — engage (and
//! how hard the question looks), observe, or ignore — with the rule that decided it. Leaf
//! values: they import nothing of ours, so the ledger can record a decision without knowing
//! the classifier (`mesh_egress::ingress`, feature `ingress`), and a front door can route on one.
//!
//! Every name serialises as the stable lowercase string [`Reason::as_str`] and its siblings
//! return, the names the `ingress` example prints.
//!
//! ```
//! use mesh_egress::engagement::{Complexity, Decision, Engagement, Reason};
//! use mesh_egress::verdict::Confidence;
//! let decided = Engagement::new(
//!     Decision::Engage { complexity: Complexity::Quick },
//!     Reason::Mention,
//!     Confidence::High,
//! );
//! assert!(decided.decision().engages());
//! assert_eq!(decided.reason().as_str(), "mention");
//! assert_eq!(decided.judge(), None);
//! let json = serde_json::to_string(&decided).unwrap();
//! assert_eq!(
//!     json,
//!     r#"{"decision":{"kind":"engage","complexity":"quick"},"reason":"mention","confidence":"high","judge":null}"#
//! );
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::verdict::Confidence;

/// How hard an engaged message looks, from cheap signals (length, code, several questions,
/// attachments, words that ask for analysis): for choosing a route before the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    /// A short question or request: a fast route will do.
    Quick,
    /// Long, technical or multi-part: worth the stronger route.
    Deep,
}

impl Complexity {
    /// `quick` or `deep`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quick => "quick",
            Self::Deep => "deep",
        }
    }
}

/// What to do with an inbound message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decision {
    /// It is addressed to us: run a turn.
    Engage {
        /// How hard it looks.
        complexity: Complexity,
    },
    /// Not for us, but part of the conversation: keep it as context, do not answer.
    Observe,
    /// Nothing to do with it (our own message, an edit, a duplicate delivery, a bot).
    Ignore,
}

impl Decision {
    /// `engage`, `observe` or `ignore`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Engage { .. } => "engage",
            Self::Observe => "observe",
            Self::Ignore => "ignore",
        }
    }

    /// Whether a turn should run.
    pub fn engages(self) -> bool {
        matches!(self, Self::Engage { .. })
    }

    /// The complexity of an engaged message.
    pub fn complexity(self) -> Option<Complexity> {
        match self {
            Self::Engage { complexity } => Some(complexity),
            Self::Observe | Self::Ignore => None,
        }
    }
}

/// The rule that decided. The first that applies wins, in the order the variants are listed
/// from [`OwnMessage`](Self::OwnMessage) (checks that ignore) through
/// [`Dm`](Self::Dm)…[`Thread`](Self::Thread) (checks that engage) to
/// [`Ambient`](Self::Ambient); [`Judge`](Self::Judge) is the fast model settling an ambient
/// message no rule settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// Our own message, delivered back to us (`self`).
    #[serde(rename = "self")]
    OwnMessage,
    /// An edit of an earlier message.
    Edit,
    /// A message already seen (a retried delivery, the same message as two event types).
    Duplicate,
    /// From a bot not on the allow-list, or past the conversation's cap on bot-to-bot turns.
    Bot,
    /// A direct message.
    Dm,
    /// A native mention of us.
    Mention,
    /// A reply to one of our messages (`reply`; the variant is not called `Reply` so that
    /// compiler messages keep naming the crate's `Reply` without a path).
    #[serde(rename = "reply")]
    ReplyToUs,
    /// A command for us (Telegram `/command` or `/command@us`).
    Command,
    /// Our name or an alias, addressing us (at the start, or after a comma at the end).
    Name,
    /// Mentions someone else and not us (or is a command for another bot).
    OtherMention,
    /// Addressed to everyone (`@everyone`, `@here`, `<!channel>`), not to us by name.
    Everyone,
    /// A follow-up in a thread we answered in, from the person we answered, within the window.
    Thread,
    /// Group traffic no rule addresses to us.
    Ambient,
    /// The fast model's answer on an ambient message.
    Judge,
}

impl Reason {
    /// Every reason, in precedence order.
    pub const ALL: [Reason; 14] = [
        Self::OwnMessage,
        Self::Edit,
        Self::Duplicate,
        Self::Bot,
        Self::Dm,
        Self::Mention,
        Self::ReplyToUs,
        Self::Command,
        Self::Name,
        Self::OtherMention,
        Self::Everyone,
        Self::Thread,
        Self::Ambient,
        Self::Judge,
    ];

    /// The stable lowercase name: `dm`, `mention`, `reply`, `name`, `command`, `thread`,
    /// `ambient`, `other_mention`, `everyone`, `bot`, `self`, `duplicate`, `edit`, `judge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OwnMessage => "self",
            Self::Edit => "edit",
            Self::Duplicate => "duplicate",
            Self::Bot => "bot",
            Self::Dm => "dm",
            Self::Mention => "mention",
            Self::ReplyToUs => "reply",
            Self::Command => "command",
            Self::Name => "name",
            Self::OtherMention => "other_mention",
            Self::Everyone => "everyone",
            Self::Thread => "thread",
            Self::Ambient => "ambient",
            Self::Judge => "judge",
        }
    }

    /// Whether the message was addressed to us directly: a DM, a mention, a reply, a command or
    /// our name.
    pub fn is_direct(self) -> bool {
        matches!(
            self,
            Self::Dm | Self::Mention | Self::ReplyToUs | Self::Command | Self::Name
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the fast-model judge's part of a decision ended, when it was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JudgeAnswer {
    /// The judge said the message is for us.
    Engage,
    /// The judge said it is not.
    Observe,
    /// The judge did not answer within its time bound.
    Timeout,
    /// The judge's model call failed.
    Error,
    /// The judge answered something other than one clean word.
    Unparseable,
    /// The agent's judge budget was spent; the judge was not called.
    BudgetExhausted,
}

impl JudgeAnswer {
    /// `engage`, `observe`, `timeout`, `error`, `unparseable` or `budget_exhausted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Engage => "engage",
            Self::Observe => "observe",
            Self::Timeout => "timeout",
            Self::Error => "error",
            Self::Unparseable => "unparseable",
            Self::BudgetExhausted => "budget_exhausted",
        }
    }

    /// Whether the judge gave no ruling, so the heuristic default stood.
    pub fn is_failure(self) -> bool {
        !matches!(self, Self::Engage | Self::Observe)
    }
}

/// One decision: what to do, why, how sure, and the judge's answer if it was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Engagement {
    decision: Decision,
    reason: Reason,
    confidence: Confidence,
    judge: Option<JudgeAnswer>,
}

impl Engagement {
    /// A decision the heuristics made (the judge not asked).
    pub fn new(decision: Decision, reason: Reason, confidence: Confidence) -> Self {
        Self {
            decision,
            reason,
            confidence,
            judge: None,
        }
    }

    /// The same decision, recording that the judge was asked and how it answered.
    pub fn with_judge(mut self, answer: JudgeAnswer) -> Self {
        self.judge = Some(answer);
        self
    }

    /// What to do.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// The rule that decided.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// How sure the rule is.
    pub fn confidence(&self) -> Confidence {
        self.confidence
    }

    /// The judge's answer, if it was asked.
    pub fn judge(&self) -> Option<JudgeAnswer> {
        self.judge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_are_the_contracts_and_round_trip() {
        let names: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "self",
                "edit",
                "duplicate",
                "bot",
                "dm",
                "mention",
                "reply",
                "command",
                "name",
                "other_mention",
                "everyone",
                "thread",
                "ambient",
                "judge"
            ]
        );
        for reason in Reason::ALL {
            let json = serde_json::to_string(&reason).expect("serialise");
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
            assert_eq!(
                serde_json::from_str::<Reason>(&json).expect("parse"),
                reason
            );
        }
    }

    #[test]
    fn only_engage_carries_a_complexity() {
        let deep = Decision::Engage {
            complexity: Complexity::Deep,
        };
        assert_eq!(deep.complexity(), Some(Complexity::Deep));
        assert_eq!(Decision::Observe.complexity(), None);
        assert_eq!(Decision::Ignore.as_str(), "ignore");
        let back: Decision =
            serde_json::from_str(r#"{"kind":"engage","complexity":"deep"}"#).expect("parse");
        assert_eq!(back, deep);
    }
}
