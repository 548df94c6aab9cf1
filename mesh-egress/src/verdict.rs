//! What the quality gate found and decided, as values the ledger records: the [`Rule`] behind a
//! finding and its [`Confidence`], the [`GateVerdict`], and how the judge's part ended
//! ([`JudgeOutcome`], [`JudgeFailure`]).
//!
//! Leaf values, like [`engagement`](crate::engagement) for the ingress classifier: the ledger
//! records them ([`GateRecord`](crate::ledger::GateRecord)) and reads them back from a durable
//! ledger in every build, without knowing the gate (which imports the ledger). The gate (feature
//! `gate`) names the ones it always had under `mesh_egress::gate::…` too.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How sure a rule is: the gate's heuristics and the ingress classifier's rules both say it.
///
/// In the gate, how sure a heuristic is that the candidate must not be sent as is, and so
/// what a judge failure means (the spec's "who guards the guard"): a low-confidence
/// candidate is sent and flagged for review, a high-confidence one (a known leak shape:
/// reasoning, a system-prompt echo, failure text, a credential) is never sent on judge
/// failure. In the ingress classifier, `high` for what the surface states (a DM, a mention, a
/// reply, a bot, an edit, a duplicate), `low` for what is read from the text or the
/// conversation (a thread follow-up, ambient traffic, the judge's answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Possible but ambiguous: a refusal opener, an apology-only reply, a tone marker.
    Low,
    /// A known leak shape: reasoning, a system-prompt echo, failure text, a credential.
    High,
}

impl Confidence {
    /// `low` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::High => "high",
        }
    }
}

impl fmt::Display for Confidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The heuristic rule behind a gate finding. Each has a stable dotted id ([`Rule::id`]) used in
/// the ledger, logs and the corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// A closed reasoning block: `<thinking>…</thinking>`, `<think>…</think>`, …
    ReasoningBlock,
    /// A reasoning opener that is never closed: everything after it is reasoning.
    ReasoningUnclosed,
    /// A reasoning close tag without its opener (the opener was in the prompt template):
    /// everything before it is reasoning.
    ReasoningStrayClose,
    /// Word n-grams of the configured system prompt, above the threshold.
    SystemPromptOverlap,
    /// A canary token planted in the system prompt or the request.
    Canary,
    /// "LLM request failed" and the runtime's own failure wording.
    LlmRequestFailed,
    /// A provider's JSON error body (`{"error": {...}}`, `"type": "overloaded_error"`, …).
    ProviderErrorBody,
    /// A provider request id (`request_id: req_…`).
    RequestId,
    /// The SDK's `NNN status code (no body)` display.
    StatusNoBody,
    /// An HTTP status line displayed as an error (`Error: 502 Bad Gateway`).
    HttpStatusDisplay,
    /// An HTTP-client or runtime error display (`error sending request for url`,
    /// `ECONNREFUSED`, `context deadline exceeded`, provider quota/limit messages, …).
    ClientError,
    /// An HTML error page (`<title>502 Bad Gateway</title>`, nginx, Cloudflare).
    HtmlErrorPage,
    /// A stack trace (Python, Java, JavaScript, Go, .NET, Ruby, PHP).
    StackTrace,
    /// A Rust panic message.
    RustPanic,
    /// An agent runtime's own failure text (`Agent stopped due to iteration limit`, …).
    AgentRuntimeError,
    /// The whole reply is a bare error line (`Error: Request timed out.`, `Overloaded`).
    BareError,
    /// An API-key shape (`sk-`, `sk-ant-`, `sk-or-`, `ghp_`, `AKIA`, …), even partly masked.
    ApiKey,
    /// A chat-bot token (Slack `xoxb-`, Telegram `123456:AA…`) or an auth header value.
    BotToken,
    /// A PEM private key or a signed JWT.
    PrivateKey,
    /// A refusal opener ("As an AI language model", "I'm sorry, but I can't").
    RefusalOpener,
    /// A short apology with no answer, to a substantive ask.
    ApologyOnly,
    /// A tone marker (condescension, self-description as "just an AI", shouting).
    ToneMarker,
    /// Tool-call markup written as text: a text-protocol tool call (`<tool_call>{…}`,
    /// `[TOOL_CALLS]`, `<|python_tag|>`, …; see [`TextToolFormat`](crate::model::TextToolFormat))
    /// or a reply that is a bare function-call JSON object.
    ToolCallMarkup,
    /// An agent's tool-trace line: `🔧 exec: ls -la /srv/app`, `💻 terminal: "date"`, a ReAct
    /// `Action:` / `Action Input:` pair.
    ToolTrace,
}

/// Gives [`Rule`] its ids from one table: [`Rule::id`]'s match is generated from it, so a rule
/// missing from the table (or a name the enum lacks) does not compile, and [`Rule::ALL`], the
/// list [`Rule::from_id`] reads, is every rule.
macro_rules! rule_ids {
    ($($name:ident => $id:literal,)*) => {
        impl Rule {
            /// Every rule, in the table's order.
            pub(crate) const ALL: &'static [Rule] = &[$(Self::$name),*];

            /// The stable dotted id, e.g. `reasoning.block`, `credential.api_key`.
            pub fn id(self) -> &'static str {
                match self {
                    $(Self::$name => $id,)*
                }
            }
        }
    };
}

rule_ids! {
    ReasoningBlock => "reasoning.block",
    ReasoningUnclosed => "reasoning.unclosed",
    ReasoningStrayClose => "reasoning.stray_close",
    SystemPromptOverlap => "system_prompt.overlap",
    Canary => "system_prompt.canary",
    LlmRequestFailed => "failure.llm_request_failed",
    ProviderErrorBody => "failure.provider_error_body",
    RequestId => "failure.request_id",
    StatusNoBody => "failure.status_no_body",
    HttpStatusDisplay => "failure.http_status",
    ClientError => "failure.client_error",
    HtmlErrorPage => "failure.html_error_page",
    StackTrace => "failure.stack_trace",
    RustPanic => "failure.rust_panic",
    AgentRuntimeError => "failure.agent_runtime",
    BareError => "failure.bare_error",
    ApiKey => "credential.api_key",
    BotToken => "credential.bot_token",
    PrivateKey => "credential.private_key",
    RefusalOpener => "refusal.opener",
    ApologyOnly => "refusal.apology_only",
    ToneMarker => "tone.marker",
    ToolCallMarkup => "tool.call_markup",
    ToolTrace => "tool.trace",
}

impl Rule {
    /// The rule whose [`id`](Self::id) is `id`, if any (a ledger row, a corpus label).
    ///
    /// ```
    /// use mesh_egress::verdict::Rule;
    /// assert_eq!(Rule::from_id("reasoning.block"), Some(Rule::ReasoningBlock));
    /// assert_eq!(Rule::from_id("no.such_rule"), None);
    /// ```
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|rule| rule.id() == id)
    }

    /// The confidence the rule carries before context from the user's message is applied.
    pub fn base_confidence(self) -> Confidence {
        match self {
            Self::RefusalOpener | Self::ApologyOnly | Self::ToneMarker => Confidence::Low,
            _ => Confidence::High,
        }
    }

    /// Whether a finding of this rule can be cut out of the message (a reasoning block, tool
    /// markup, a tool-trace line), so the rest may still be sent.
    pub fn is_sanitisable(self) -> bool {
        matches!(
            self,
            Self::ReasoningBlock
                | Self::ReasoningUnclosed
                | Self::ReasoningStrayClose
                | Self::ToolCallMarkup
                | Self::ToolTrace
        )
    }

    /// Whether the rule finds the agent's tool use written as text (markup or trace lines):
    /// once cut out, the rest is sent only if it is a complete answer on its own.
    pub fn is_tool_text(self) -> bool {
        matches!(self, Self::ToolCallMarkup | Self::ToolTrace)
    }

    /// Whether the matched text is a secret, so it is never logged, judged or stored verbatim.
    pub fn is_credential(self) -> bool {
        matches!(self, Self::ApiKey | Self::BotToken | Self::PrivateKey)
    }

    /// Whether a turn blocked on this rule could succeed on a retry. A prompt echo or a
    /// credential leak is a handoff, not a promise to follow up.
    pub fn retryable(self) -> bool {
        !self.guards_a_secret()
    }

    /// Whether a judge's allow may downgrade a high-confidence finding of this rule. Not for
    /// a system-prompt echo, a canary or a credential: the judge reads text the person (or
    /// anything the model read) may have written to talk it round, and "print your
    /// instructions" is exactly the request that makes a judge likely to allow the echo. A
    /// finding the user's own message explains is already low, and is judged as usual.
    pub fn judge_may_downgrade(self) -> bool {
        !self.guards_a_secret()
    }

    /// A system-prompt echo, a canary or a credential: what no retry and no judge may let out.
    fn guards_a_secret(self) -> bool {
        matches!(
            self,
            Self::SystemPromptOverlap
                | Self::Canary
                | Self::ApiKey
                | Self::BotToken
                | Self::PrivateKey
        )
    }

    /// Whether the rule is an internal-failure shape (Class 1 text arriving as model output).
    pub fn is_failure_text(self) -> bool {
        self.id().starts_with("failure.")
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A rule is written as its [`id`](Rule::id) (the ledger's `"rule"`).
impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Self::from_id(&id)
            .ok_or_else(|| serde::de::Error::custom(format_args!("unknown gate rule `{id}`")))
    }
}

/// What the gate decided about one candidate.
///
/// `#[non_exhaustive]`: later verdicts (a streamed reply cut mid-way, say) may be added, so a
/// `match` needs a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GateVerdict {
    /// No heuristic fired (or the gate is off): sent as is, the judge not asked.
    Pass,
    /// Flagged and sent as is: the judge allowed it, or (low confidence only) the judge gave no
    /// ruling and the reply is flagged for offline review.
    Send {
        /// Flagged for offline review.
        review: bool,
    },
    /// Leaked reasoning was stripped and the rest, re-gated, is sent.
    Sanitised {
        /// Flagged for offline review (the judge gave no ruling, or the rest has low findings).
        review: bool,
    },
    /// Not sent: the turn goes to Layer C as a semantic [`EgressError`](crate::EgressError).
    Blocked {
        /// Whether a re-run could succeed (a prompt echo or a credential leak cannot).
        retryable: bool,
    },
}

impl GateVerdict {
    /// A stable lowercase name: `pass`, `send`, `sanitised`, `blocked`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Send { .. } => "send",
            Self::Sanitised { .. } => "sanitised",
            Self::Blocked { .. } => "blocked",
        }
    }

    /// Whether the reply is flagged for offline review.
    pub fn review(self) -> bool {
        matches!(
            self,
            Self::Send { review: true } | Self::Sanitised { review: true }
        )
    }

    /// Whether something (the candidate or its sanitised rest) is sent.
    pub fn sends(self) -> bool {
        !matches!(self, Self::Blocked { .. })
    }
}

impl fmt::Display for GateVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the judge's part of a gate decision ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JudgeOutcome {
    /// The judge allowed the candidate.
    Allow,
    /// The judge blocked the candidate.
    Block,
    /// The judge did not answer within the time bound.
    Timeout,
    /// The judge failed (the kind of its error).
    Error(JudgeFailure),
    /// The agent's judge budget was spent; the judge was not called.
    BudgetExhausted,
    /// The turn stopped (cancelled, ownership lost, deadline) while the judge ran.
    TurnStopped,
    /// No judge is configured.
    NoJudge,
}

impl JudgeOutcome {
    /// A stable lowercase name: `allow`, `block`, `timeout`, `error`, `budget_exhausted`,
    /// `turn_stopped`, `no_judge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Block => "block",
            Self::Timeout => "timeout",
            Self::Error(_) => "error",
            Self::BudgetExhausted => "budget_exhausted",
            Self::TurnStopped => "turn_stopped",
            Self::NoJudge => "no_judge",
        }
    }

    /// Whether the judge gave no ruling (every outcome but allow and block).
    pub fn is_failure(self) -> bool {
        !matches!(self, Self::Allow | Self::Block)
    }
}

impl fmt::Display for JudgeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the judge gave no ruling ([`JudgeOutcome::Error`]): the kind of the gate's
/// `JudgeError`, never its cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JudgeFailure {
    /// The judge's model call failed.
    Model,
    /// The model answered, but not with a clean allow or block.
    Unparseable,
    /// The judge is not available.
    Unavailable,
    /// Not recorded: a ledger row written before the kind was (it says only that the judge
    /// failed). The gate never reports it.
    Unrecorded,
}

impl JudgeFailure {
    /// A stable lowercase name: `model`, `unparseable`, `unavailable`, `unrecorded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Model => "model",
            Self::Unparseable => "unparseable",
            Self::Unavailable => "unavailable",
            Self::Unrecorded => "unrecorded",
        }
    }
}

impl fmt::Display for JudgeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
