//! The trigger table: every literal the heuristic pass looks for, the rule it belongs to, and
//! how a hit is confirmed.
//!
//! All literals go into one ASCII-case-insensitive Aho-Corasick automaton, so clean text costs
//! one pass. A hit is confirmed only where it occurs (a regex over a small window around it, a
//! tag or credential validator, an "is this displayed as an error" check), so the confirmation
//! work scales with hits, not with the text.

use crate::gate::finding::Rule;

/// The reasoning-tag families that pair up (an opener closes only its own family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TagFamily {
    Thinking,
    Think,
    Reasoning,
    Scratchpad,
    Reflection,
    AntThinking,
    Kimi,
}

/// How a credential-shaped hit is validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CredShape {
    /// A vendor prefix followed by key material (`sk-…`, `ghp_…`, `xoxb-…`).
    Prefixed,
    /// AWS access key id: `AKIA` and sixteen upper-case letters or digits.
    AwsKeyId,
    /// A Telegram bot token, found at its `:AA` seam: `123456789:AA…`.
    Telegram,
    /// An `Authorization:`/`Bearer`/`x-api-key:` header value.
    Header,
}

/// How a trigger hit becomes a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// The literal alone is the finding.
    Always,
    /// Only when displayed as an error: at the start of a line (after list or quote markers),
    /// or right after `error:`-style text on the same line.
    Display,
    /// An HTTP status phrase: needs a three-digit code right before it, displayed as an error.
    Status,
    /// Only within the first 120 bytes of the reply.
    Opener,
    /// A regex over a window around the hit must match across the hit.
    Regex(&'static str),
    /// A reasoning tag (opening or closing) of a family.
    Tag(TagFamily, bool),
    /// A credential shape.
    Credential(CredShape),
    /// A text tool call's marker: it must open a call of its format
    /// ([`tool_markup`](crate::gate::tool_markup)).
    ToolMarkup,
    /// A tool-trace line's trigger: it must start a trace line.
    ToolTrace,
}

/// One literal the automaton looks for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Trigger {
    pub(crate) pattern: &'static str,
    pub(crate) rule: Rule,
    pub(crate) check: Check,
}

const fn t(pattern: &'static str, rule: Rule, check: Check) -> Trigger {
    Trigger {
        pattern,
        rule,
        check,
    }
}

use Check::{Always, Credential, Display, Opener, Regex, Status, Tag};
use CredShape::{AwsKeyId, Header, Prefixed, Telegram};
use Rule::*;
use TagFamily::*;

const FRAME: &str = r"\n[ \t]+at [^\n]{1,300}?(:\d+(:\d+)?\)?|:line \d+)[ \t]*(\n|$)";
const JSON_ERROR: &str = r#"\{\s*"error"\s*:\s*(\{|")"#;
const REQUEST_ID: &str = r#"(?i)request[_ -]?id["']?\s*[:=]\s*["']?(req_[A-Za-z0-9]{8,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"#;
const LLM_CALL: &str = r"(?i)\b(?:llm|model|completion)\s(?:request|call)s?\s(?:failed|timed\sout|rejected|errored|aborted)\b|\berror\scalling\s(?:the\s)?(?:llm|model)\b";
/// serde_json's `Display`: the message, then ` at line N column M` (serde-rs/json
/// `src/error.rs`), as the runtimes that relay it print it (MostlyKIGuess/Yappus-Term#1).
const SERDE: &str = r"(?:missing field `[^`\n]{1,64}`|unknown field `[^`\n]{1,64}`[^\n]{0,160}?|duplicate field `[^`\n]{1,64}`|invalid type: [^\n]{1,160}?|invalid value: [^\n]{1,160}?|invalid length [^\n]{1,80}?|expected [^\n]{1,80}?|EOF while parsing [a-z ]{1,40}|trailing characters|trailing comma|key must be a string|control character [^\n]{1,40}?|lone leading surrogate[^\n]{0,40}?) at line \d+ column \d+";
const HTML_ERROR: &str = r"(?i)<(title|h1)>\s*(\d{3}\b[^<]{0,80}|[^<]{0,80}(bad gateway|service unavailable|gateway time-?out|internal server error|too many requests|access denied|attention required|just a moment|error)[^<]{0,40})</(title|h1)>";

/// The crate's own cause wording: the longest literal run (four words or more) of every
/// sentence shape the runtime formats into an error's `Display`, lower-cased, so an answer that
/// carries `e.internal_cause()` is blocked like `LLM request failed` (rule
/// [`LlmRequestFailed`](crate::verdict::Rule::LlmRequestFailed), always high). The list is
/// held to the code by `tests/tests/gate_own_causes.rs`, which collects the shapes from the
/// sources (`MESH_OWN_CAUSES=list` prints this list) and leaves out, with the answer each
/// would eat, the runs that are ordinary English.
pub(crate) const OWN_CAUSES: &[&str] = &[
    "0 is not allowed; using the default",
    "a canary token must not be empty",
    "a commitment id is `c` followed by 32 hexadecimal digits",
    "a reply stream needs a running tokio runtime",
    "a silence token is empty",
    "an identity holds a control character",
    "an identity is empty",
    "an identity is longer than",
    "an in-memory database is not a durable store: give sqlite a file path",
    "entities one piece needs",
    "events are not read by the ingress classifier",
    "has an address the store cannot use",
    "is at or above the total deadline; clamping the attempt timeout to the total",
    "is longer than 64 bytes",
    "is negative; using the default",
    "is not a number; using the default",
    "is not one word of letters, digits and",
    "is not pending in the outbox (or its lease moved on); not sent",
    "it calls a function the request did not offer",
    "it holds no call",
    "it makes more than 128 calls",
    "it names no function",
    "its arguments are not one json object",
    "ledger row(s) could not be written to the store",
    "model answer stopped at its output limit",
    "model provider answered http",
    "model recovery gave up",
    "model refused or filtered the answer",
    "model request could not be sent",
    "model request timed out",
    "model response body was larger than its cap",
    "model response could not be decoded",
    "model returned an empty completion",
    "model tool call did not parse after one repair",
    "no route is registered under",
    "ownership of the conversation was lost before commit",
    "ownership of the conversation was lost during delivery",
    "recorder was told to fail this send",
    "the bot token is not a valid http header value",
    "the channel did not accept the part",
    "the commit record could not be written",
    "the conversation's ownership was lost, or its lease had too little time left for a try",
    "the conversation's ownership was lost; the rest of the reply was not sent",
    "the event is not valid utf-8",
    "the event nests deeper than",
    "the event's conversation is not an address",
    "the follow-up answer does not continue the delivered text",
    "the gate's heuristics did not compile",
    "the judge time bound must be positive",
    "the judge's answer was not a clean allow or block",
    "the judge's model call failed",
    "the judge's routed model call failed",
    "the lease on conversation",
    "the message body renders to nothing visible; nothing would be sent",
    "the message could not be committed",
    "the message could not be rendered for this channel",
    "the model answered with no text",
    "the quality gate blocked the reply (rules",
    "the reply stream stopped with",
    "the store holds a row it cannot read",
    "the store needs a tokio runtime for this (call it from async code",
    "the store's database failed",
    "the store's migrations could not be applied",
    "the stored input does not fit the route's input type",
    "the stream's next call was refused",
    "the stream's worker stopped",
    "the streamed answer had nothing to show",
    "the surface did not confirm every part of the reply",
    "the system-prompt n-gram length must be 1 to 32 words, got",
    "the system-prompt overlap threshold must be in (0, 1], got",
    "the thread window must allow at least one message and some time",
    "the turn reached its deadline",
    "this build of mesh-egress has no",
    "tool call could not be read",
    "tool call into its text, and the request offered no tools",
    "tool call(s) and no text",
    "use sqlite:path or postgres",
];

/// Every trigger. Patterns are matched ASCII-case-insensitively; a pattern containing `'` is
/// also matched with a typographic apostrophe (`’`).
pub(crate) const TRIGGERS: &[Trigger] = &[
    // ── leaked reasoning ─────────────────────────────────────────────────────────────────
    t("<thinking", ReasoningBlock, Tag(Thinking, true)),
    t("</thinking", ReasoningBlock, Tag(Thinking, false)),
    t("<think", ReasoningBlock, Tag(Think, true)),
    t("</think", ReasoningBlock, Tag(Think, false)),
    t("<reasoning", ReasoningBlock, Tag(Reasoning, true)),
    t("</reasoning", ReasoningBlock, Tag(Reasoning, false)),
    t("<scratchpad", ReasoningBlock, Tag(Scratchpad, true)),
    t("</scratchpad", ReasoningBlock, Tag(Scratchpad, false)),
    t("<reflection", ReasoningBlock, Tag(Reflection, true)),
    t("</reflection", ReasoningBlock, Tag(Reflection, false)),
    t("<antthinking", ReasoningBlock, Tag(AntThinking, true)),
    t("</antthinking", ReasoningBlock, Tag(AntThinking, false)),
    t("◁think▷", ReasoningBlock, Tag(Kimi, true)),
    t("◁/think▷", ReasoningBlock, Tag(Kimi, false)),
    // ── the runtime's and providers' failure text ───────────────────────────────────────
    t("llm request failed", LlmRequestFailed, Always),
    t("model request failed", LlmRequestFailed, Always),
    t("completion request failed", LlmRequestFailed, Always),
    t("llm call failed", LlmRequestFailed, Always),
    // The same line with another ending: "LLM request timed out." (nexu-io/nexu#396), "LLM
    // request rejected: …" (openclaw/openclaw#9951), "Error calling LLM: …"
    // (HKUDS/nanobot#3681).
    t("llm request", LlmRequestFailed, Regex(LLM_CALL)),
    t("llm call", LlmRequestFailed, Regex(LLM_CALL)),
    t("model request", LlmRequestFailed, Regex(LLM_CALL)),
    t("model call", LlmRequestFailed, Regex(LLM_CALL)),
    t("completion request", LlmRequestFailed, Regex(LLM_CALL)),
    t("error calling", LlmRequestFailed, Regex(LLM_CALL)),
    t("status code (no body)", StatusNoBody, Always),
    t("\"error\"", ProviderErrorBody, Regex(JSON_ERROR)),
    t("\"type\":\"error\"", ProviderErrorBody, Always),
    t("\"type\": \"error\"", ProviderErrorBody, Always),
    t("\"object\":\"error\"", ProviderErrorBody, Always),
    t("\"object\": \"error\"", ProviderErrorBody, Always),
    t("invalid_request_error", ProviderErrorBody, Always),
    t("overloaded_error", ProviderErrorBody, Always),
    t("rate_limit_error", ProviderErrorBody, Always),
    t("authentication_error", ProviderErrorBody, Always),
    t("permission_error", ProviderErrorBody, Always),
    t("not_found_error", ProviderErrorBody, Always),
    t("\"api_error\"", ProviderErrorBody, Always),
    t("insufficient_quota", ProviderErrorBody, Always),
    t("rate_limit_exceeded", ProviderErrorBody, Always),
    t("context_length_exceeded", ProviderErrorBody, Always),
    t("resource_exhausted", ProviderErrorBody, Always),
    t("invalid_api_key", ProviderErrorBody, Always),
    t("model_not_found", ProviderErrorBody, Always),
    t("provider returned error", ProviderErrorBody, Always),
    t("request_id", RequestId, Regex(REQUEST_ID)),
    t("request id", RequestId, Regex(REQUEST_ID)),
    t("request-id", RequestId, Regex(REQUEST_ID)),
    t("req_011", RequestId, Always),
    t(
        "error code: ",
        ClientError,
        Regex(r"(?i)error code: \d{3}\b"),
    ),
    t("no endpoints found", ClientError, Always),
    t("error sending request for url", ClientError, Always),
    t("error decoding response body", ClientError, Always),
    t("error trying to connect", ClientError, Always),
    t(
        "connection closed before message completed",
        ClientError,
        Always,
    ),
    t("max retries exceeded with url", ClientError, Always),
    t("httpsconnectionpool(", ClientError, Always),
    t("httpconnectionpool(", ClientError, Always),
    t("econnrefused", ClientError, Always),
    t("econnreset", ClientError, Always),
    t("etimedout", ClientError, Always),
    t("enotfound", ClientError, Always),
    t("eai_again", ClientError, Always),
    t("socket hang up", ClientError, Always),
    t("context deadline exceeded", ClientError, Always),
    t("i/o timeout", ClientError, Always),
    t("client.timeout exceeded", ClientError, Always),
    t("sockettimeoutexception", ClientError, Always),
    t("connectexception", ClientError, Always),
    t("unknownhostexception", ClientError, Always),
    t("upstream connect error", ClientError, Always),
    t("no healthy upstream", ClientError, Always),
    t("upstream request timeout", ClientError, Always),
    t("you exceeded your current quota", ClientError, Always),
    t("incorrect api key provided", ClientError, Always),
    t("invalid x-api-key", ClientError, Always),
    t("rate limit reached for", ClientError, Always),
    t("maximum context length is", ClientError, Always),
    t("prompt is too long", ClientError, Always),
    t(
        "the server had an error while processing your request",
        ClientError,
        Always,
    ),
    t("apiconnectionerror", ClientError, Always),
    t("apitimeouterror", ClientError, Always),
    t("ratelimiterror", ClientError, Always),
    t("internalservererror", ClientError, Always),
    t("apistatuserror", ClientError, Always),
    t("tcp connect error", ClientError, Always),
    t("ai_apicallerror", ClientError, Always),
    t("ai_retryerror", ClientError, Always),
    t(
        "an error occurred (",
        ClientError,
        Regex(r"(?i)an error occurred \(\w+\) when calling the \w+ operation"),
    ),
    t("throttlingexception", ClientError, Always),
    t("google.api_core.exceptions.", ClientError, Always),
    t("content management policy", ClientError, Always),
    t(
        "does not exist or you do not have access to it",
        ClientError,
        Always,
    ),
    t("request too large for", ClientError, Always),
    t("credit balance is too low", ClientError, Always),
    t("no allowed providers are available", ClientError, Always),
    t("invalid 'messages[", ClientError, Always),
    t("hyper::error(", ClientError, Always),
    t("reqwest::error {", ClientError, Always),
    t("certificate verify failed", ClientError, Always),
    t("temporary failure in name resolution", ClientError, Always),
    // tokio's `time::error::Elapsed` (tokio-rs/tokio `tokio/src/time/error.rs`).
    t("deadline has elapsed", ClientError, Display),
    // axios (wangrongding/wechat-bot#203).
    t(
        "timeout of ",
        ClientError,
        Regex(r"(?i)timeout of \d+ms exceeded"),
    ),
    t(" at line ", ClientError, Regex(SERDE)),
    // Context-overflow copy as runtimes print it: openclaw/openclaw#22777 and #18719, the
    // Anthropic API's "input length and `max_tokens` exceed context limit" (openclaw#9951),
    // "Prompt exceeds maximum context length" (ddalcu/mlx-serve#66).
    t("prompt too large for the model", AgentRuntimeError, Always),
    // LM Studio's server error as Cline relays it (cline/cline#3664). Added after the held-out
    // figures were taken: this shape was the held-out part's one miss.
    t("when context the overflows", ClientError, Always),
    t(
        "context length of only",
        ClientError,
        Regex(r"(?i)context length of only \d+ tokens"),
    ),
    t("exceed context limit", ClientError, Always),
    t("exceeds maximum context length", ClientError, Always),
    t("exceeds the maximum context length", ClientError, Always),
    t("api error: ", ClientError, Regex(r"(?i)api error: \d{3}\b")),
    t("connection refused", ClientError, Display),
    t("connection reset by peer", ClientError, Display),
    t("operation timed out", ClientError, Display),
    t("request timed out", ClientError, Display),
    t("fetch failed", ClientError, Display),
    t("broken pipe", ClientError, Display),
    t("bad gateway", HttpStatusDisplay, Status),
    t("service unavailable", HttpStatusDisplay, Status),
    t("gateway timeout", HttpStatusDisplay, Status),
    t("gateway time-out", HttpStatusDisplay, Status),
    t("internal server error", HttpStatusDisplay, Status),
    t("too many requests", HttpStatusDisplay, Status),
    t("unauthorized", HttpStatusDisplay, Status),
    t("service temporarily unavailable", HttpStatusDisplay, Status),
    t("<title>", HtmlErrorPage, Regex(HTML_ERROR)),
    t("<h1>", HtmlErrorPage, Regex(HTML_ERROR)),
    t("<center>nginx", HtmlErrorPage, Always),
    t("cloudflare ray id", HtmlErrorPage, Always),
    t("traceback (most recent call last)", StackTrace, Always),
    t(
        "\", line ",
        StackTrace,
        Regex(r#"File "[^"\n]+", line \d+"#),
    ),
    t("exception in thread \"", StackTrace, Always),
    t("\n\tat ", StackTrace, Regex(FRAME)),
    t("\n  at ", StackTrace, Regex(FRAME)),
    t("\n   at ", StackTrace, Regex(FRAME)),
    t("\n    at ", StackTrace, Regex(FRAME)),
    t(
        "caused by: ",
        StackTrace,
        Regex(r"Caused by: [\w.$]+(Exception|Error)\b"),
    ),
    t(
        "goroutine ",
        StackTrace,
        Regex(r"goroutine \d+ \[[a-z ,0-9]+\]:"),
    ),
    t("panic: runtime error", StackTrace, Always),
    t("--- end of stack trace", StackTrace, Always),
    t(".rb:", StackTrace, Regex(r"\.rb:\d+:in [`'‘]")),
    t(
        "stack trace:",
        StackTrace,
        Regex(r"(?i)stack trace:\s*\n\s*#0 "),
    ),
    t("php fatal error", StackTrace, Always),
    t("fatal error: uncaught", StackTrace, Always),
    t("node:internal/", StackTrace, Always),
    t(
        "panicked at",
        RustPanic,
        Regex(r"thread '[^'\n]{0,100}' panicked at"),
    ),
    // The panic's note, not the variable: a teaching answer names `RUST_BACKTRACE=1` because
    // the user asked how to get a backtrace.
    t(
        "rust_backtrace=",
        RustPanic,
        Regex(r"(?i)run with `?RUST_BACKTRACE=(?:1|full)`? environment variable"),
    ),
    t(
        "called `result::unwrap()` on an `err` value",
        RustPanic,
        Always,
    ),
    t(
        "called `option::unwrap()` on a `none` value",
        RustPanic,
        Always,
    ),
    t("agent stopped due to", AgentRuntimeError, Always),
    t("agent failed before reply", AgentRuntimeError, Always),
    t("reached max iterations", AgentRuntimeError, Always),
    t("could not parse llm output", AgentRuntimeError, Always),
    t("outputparserexception", AgentRuntimeError, Always),
    t("ids were found without", AgentRuntimeError, Always),
    t("graphrecursionerror", AgentRuntimeError, Always),
    t(
        "recursion limit of",
        AgentRuntimeError,
        Regex(r"(?i)recursion limit of \d+ reached"),
    ),
    t("error executing tool", AgentRuntimeError, Always),
    t("tool call failed", AgentRuntimeError, Display),
    t("failed to call a function", AgentRuntimeError, Always),
    t(
        "an error occurred while processing your request",
        AgentRuntimeError,
        Always,
    ),
    t("[object object]", AgentRuntimeError, Always),
    // ── credentials ──────────────────────────────────────────────────────────────────────
    t("sk-", ApiKey, Credential(Prefixed)),
    t("sk_live_", ApiKey, Credential(Prefixed)),
    t("sk_test_", ApiKey, Credential(Prefixed)),
    t("rk_live_", ApiKey, Credential(Prefixed)),
    t("ghp_", ApiKey, Credential(Prefixed)),
    t("gho_", ApiKey, Credential(Prefixed)),
    t("ghu_", ApiKey, Credential(Prefixed)),
    t("ghs_", ApiKey, Credential(Prefixed)),
    t("ghr_", ApiKey, Credential(Prefixed)),
    t("github_pat_", ApiKey, Credential(Prefixed)),
    t("glpat-", ApiKey, Credential(Prefixed)),
    t("hf_", ApiKey, Credential(Prefixed)),
    t("gsk_", ApiKey, Credential(Prefixed)),
    t("xai-", ApiKey, Credential(Prefixed)),
    t("pplx-", ApiKey, Credential(Prefixed)),
    t("r8_", ApiKey, Credential(Prefixed)),
    t("npm_", ApiKey, Credential(Prefixed)),
    t("aiza", ApiKey, Credential(Prefixed)),
    t("akia", ApiKey, Credential(AwsKeyId)),
    t("xoxb-", BotToken, Credential(Prefixed)),
    t("xoxp-", BotToken, Credential(Prefixed)),
    t("xoxa-", BotToken, Credential(Prefixed)),
    t("xoxe-", BotToken, Credential(Prefixed)),
    t("xapp-", BotToken, Credential(Prefixed)),
    t(":aa", BotToken, Credential(Telegram)),
    t("authorization:", BotToken, Credential(Header)),
    t("bearer ", BotToken, Credential(Header)),
    t("x-api-key:", BotToken, Credential(Header)),
    t("api-key:", BotToken, Credential(Header)),
    t(
        "eyj",
        PrivateKey,
        Regex(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    t(
        "-----begin",
        PrivateKey,
        Regex(r"-----BEGIN [A-Z ]*PRIVATE KEY-----\s*[A-Za-z0-9+/=\s]{40,}"),
    ),
    // ── refusals and tone (low confidence) ───────────────────────────────────────────────
    t("as an ai language model", RefusalOpener, Always),
    t("as a large language model", RefusalOpener, Always),
    t("as an ai,", RefusalOpener, Opener),
    t("as an ai assistant", RefusalOpener, Opener),
    t("i'm sorry, but i can't", RefusalOpener, Opener),
    t("i'm sorry, but i cannot", RefusalOpener, Opener),
    t("i am sorry, but i cannot", RefusalOpener, Opener),
    t("i'm sorry, i can't", RefusalOpener, Opener),
    t("sorry, but i can't", RefusalOpener, Opener),
    t("i cannot help with", RefusalOpener, Opener),
    t("i can't help with", RefusalOpener, Opener),
    t("i can't assist with", RefusalOpener, Opener),
    t("i cannot assist with", RefusalOpener, Opener),
    t("i'm not able to help with", RefusalOpener, Opener),
    t("i'm unable to help", RefusalOpener, Opener),
    t("i am unable to help", RefusalOpener, Opener),
    t("i won't be able to help", RefusalOpener, Opener),
    t("as i already said", ToneMarker, Always),
    t("as i said before", ToneMarker, Always),
    t("as i've already explained", ToneMarker, Always),
    t("calm down", ToneMarker, Always),
    t("obviously you", ToneMarker, Always),
    t("i'm just an ai", ToneMarker, Always),
    t("i am just an ai", ToneMarker, Always),
    t("i'm only an ai", ToneMarker, Always),
    t("i don't have feelings", ToneMarker, Always),
    t("that's a stupid", ToneMarker, Always),
    t("!!!", ToneMarker, Always),
];

/// Words in a user's message that make code in the reply expected (it asks about code or
/// errors), so a failure shape inside the reply's code is not high-confidence on its own.
pub(crate) const TECHNICAL_WORDS: &[&str] = &[
    "`",
    "error",
    "exception",
    "traceback",
    "stack",
    "trace",
    "panic",
    "crash",
    "bug",
    "debug",
    "log",
    "status",
    "http",
    "api",
    "code",
    "fail",
    "json",
    "html",
    "xml",
    "tag",
    "regex",
    "parse",
    "script",
    "function",
    "rust",
    "python",
    "java",
    "node",
    "sdk",
    "request",
    "response",
    "server",
    "example",
    "snippet",
    "output",
    "print",
    "test",
    "curl",
    "header",
    "<think",
    "<reasoning",
    "<scratchpad",
    "reasoning",
    "tool call",
    "tool_call",
    "function call",
];

/// Opening words of an apology.
pub(crate) const APOLOGY_OPENERS: &[&str] = &[
    "sorry",
    "i'm sorry",
    "i am sorry",
    "i apologize",
    "i apologise",
    "my apologies",
    "apologies",
    "unfortunately, i",
];

/// What an apology-only reply says instead of an answer.
pub(crate) const DEFLECTIONS: &[&str] = &[
    "i can't",
    "i cannot",
    "i can not",
    "i'm not able",
    "i am not able",
    "i'm unable",
    "i am unable",
    "i don't",
    "i do not",
    "i'm not sure",
    "i am not sure",
    "please try again",
    "try again later",
    "could you rephrase",
    "can you rephrase",
    "something went wrong",
];
