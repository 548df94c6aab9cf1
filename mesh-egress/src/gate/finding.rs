//! What a heuristic found: [`Finding`], its [`Rule`] and [`Confidence`].

use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};

/// How sure a heuristic is that the candidate must not be sent as is.
///
/// The confidence decides what a judge failure means (the spec's "who guards the guard"):
/// a low-confidence candidate is sent and flagged for review, a high-confidence one is never
/// sent on judge failure.
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

/// The heuristic rule behind a [`Finding`]. Each has a stable dotted id ([`Rule::id`]) used in
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

impl Rule {
    /// The stable dotted id, e.g. `reasoning.block`, `credential.api_key`.
    pub fn id(self) -> &'static str {
        match self {
            Self::ReasoningBlock => "reasoning.block",
            Self::ReasoningUnclosed => "reasoning.unclosed",
            Self::ReasoningStrayClose => "reasoning.stray_close",
            Self::SystemPromptOverlap => "system_prompt.overlap",
            Self::Canary => "system_prompt.canary",
            Self::LlmRequestFailed => "failure.llm_request_failed",
            Self::ProviderErrorBody => "failure.provider_error_body",
            Self::RequestId => "failure.request_id",
            Self::StatusNoBody => "failure.status_no_body",
            Self::HttpStatusDisplay => "failure.http_status",
            Self::ClientError => "failure.client_error",
            Self::HtmlErrorPage => "failure.html_error_page",
            Self::StackTrace => "failure.stack_trace",
            Self::RustPanic => "failure.rust_panic",
            Self::AgentRuntimeError => "failure.agent_runtime",
            Self::BareError => "failure.bare_error",
            Self::ApiKey => "credential.api_key",
            Self::BotToken => "credential.bot_token",
            Self::PrivateKey => "credential.private_key",
            Self::RefusalOpener => "refusal.opener",
            Self::ApologyOnly => "refusal.apology_only",
            Self::ToneMarker => "tone.marker",
            Self::ToolCallMarkup => "tool.call_markup",
            Self::ToolTrace => "tool.trace",
        }
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
        !matches!(
            self,
            Self::SystemPromptOverlap
                | Self::Canary
                | Self::ApiKey
                | Self::BotToken
                | Self::PrivateKey
        )
    }

    /// Whether a judge's allow may downgrade a high-confidence finding of this rule. Not for
    /// a system-prompt echo, a canary or a credential: the judge reads text the person (or
    /// anything the model read) may have written to talk it round, and "print your
    /// instructions" is exactly the request that makes a judge likely to allow the echo. A
    /// finding the user's own message explains is already low, and is judged as usual.
    pub fn judge_may_downgrade(self) -> bool {
        !matches!(
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

/// Why a finding was lowered from its rule's base confidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Demotion {
    /// The match sits inside fenced or inline code, and the user's message is about code or
    /// errors.
    InCode,
    /// The user's own message contains the same error (they asked about it).
    QuotedFromUser,
    /// The user asked a question about this kind of failure by name ("why does Rust panic
    /// when…?", "how do I read a traceback?"), so a reply that shows one is teaching.
    AskedAbout,
}

/// One heuristic match in a candidate message.
#[derive(Clone, PartialEq, Eq)]
pub struct Finding {
    pub(crate) rule: Rule,
    pub(crate) confidence: Confidence,
    pub(crate) span: Range<usize>,
    pub(crate) excerpt: String,
    pub(crate) demotion: Option<Demotion>,
}

/// The longest excerpt a finding keeps, in bytes (before redaction).
const EXCERPT_MAX: usize = 120;

impl Finding {
    pub(crate) fn new(rule: Rule, span: Range<usize>, text: &str) -> Self {
        let matched = text.get(span.clone()).unwrap_or_default();
        let excerpt = if rule.is_credential() {
            redact(matched)
        } else {
            truncate(matched, EXCERPT_MAX).to_owned()
        };
        Self {
            rule,
            confidence: rule.base_confidence(),
            span,
            excerpt,
            demotion: None,
        }
    }

    pub(crate) fn demote(&mut self, why: Demotion) {
        if self.confidence == Confidence::High {
            self.confidence = Confidence::Low;
            self.demotion = Some(why);
        }
    }

    /// The rule that fired.
    pub fn rule(&self) -> Rule {
        self.rule
    }

    /// The rule's stable id (`reasoning.block`, …).
    pub fn rule_id(&self) -> &'static str {
        self.rule.id()
    }

    /// The confidence after context from the user's message.
    pub fn confidence(&self) -> Confidence {
        self.confidence
    }

    /// The byte range of the match in the candidate's Markdown.
    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// What matched, cut to a short excerpt; a credential is redacted to its first and last
    /// characters, so it is safe to show an operator.
    pub fn excerpt(&self) -> &str {
        &self.excerpt
    }

    /// Why the finding is lower than its rule's base confidence, if it is.
    pub fn demotion(&self) -> Option<Demotion> {
        self.demotion
    }
}

impl fmt::Debug for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Finding")
            .field("rule", &self.rule.id())
            .field("confidence", &self.confidence)
            .field("span", &self.span)
            .field("excerpt", &self.excerpt)
            .field("demotion", &self.demotion)
            .finish()
    }
}

/// Cuts `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Keeps the first four and last two characters of a secret; masks the rest.
pub(crate) fn redact(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= 8 {
        return "[redacted]".to_owned();
    }
    let head: String = chars[..4].iter().collect();
    let tail: String = chars[chars.len() - 2..].iter().collect();
    format!("{head}…[redacted]…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_excerpt_never_holds_the_secret() {
        let key = "sk-proj-Ab3dEf9hIj2kLm5nOp8qRs1tUv4wXy7z";
        let text = format!("here: {key}");
        let f = Finding::new(Rule::ApiKey, 6..text.len(), &text);
        assert!(!f.excerpt().contains("Ab3dEf9h"), "{}", f.excerpt());
        assert!(f.excerpt().starts_with("sk-p"));
    }

    #[test]
    fn demotion_lowers_only_high_findings() {
        let mut f = Finding::new(Rule::StackTrace, 0..3, "abc");
        f.demote(Demotion::InCode);
        assert_eq!(f.confidence(), Confidence::Low);
        assert_eq!(f.demotion(), Some(Demotion::InCode));
        let mut low = Finding::new(Rule::ToneMarker, 0..3, "abc");
        low.demote(Demotion::QuotedFromUser);
        assert_eq!(low.demotion(), None);
    }
}
