//! The gate's tool rules: tool-call markup written as text ([`Rule::ToolCallMarkup`]) and an
//! agent's tool-trace lines ([`Rule::ToolTrace`]), anywhere in a candidate.
//!
//! Layer A already fails an attempt whose reply *is* a text tool call (see
//! [`crate::model::text_tool_format`]); what reaches the gate is the rest: markup after text
//! that was streamed, a call a connector other than Layer A's let through, and the lines an
//! agent framework writes about its own tool use. The latter are what peers keep shipping to
//! chats: hermes-agent's tool progress (`💻 terminal: "date …"`, NousResearch/hermes-agent#13584;
//! `⚙️ terminal: "whoami"`, #6646; full commands in code cards, #42637 and #70857; the trace
//! leak of #37555), the `🔧 exec: ls -la /srv/app` line of this project's issue 27, and the
//! ReAct `Action:` / `Action Input:` pair (LangChain's agent prompt; LLaMA-Factory's
//! `DEFAULT_TOOL_PROMPT`).
//!
//! Both rules are high-confidence and strippable: cut out, the rest is sent when it is a
//! complete answer ([`is_complete_answer`]), else the reply goes to Layer C. In a streamed
//! block, tool-call markup stops the stream (the model stopped answering to call a tool, so
//! what would follow is not the answer) while a trace line is cut and the stream goes on. The
//! user's message lowers both as it does error text: markup in code when the user asked about
//! code, markup the user quoted, or a question about tool calling itself.

use std::ops::Range;

use crate::gate::finding::Rule;
use crate::gate::rules::Check;
use crate::model::tool_text;

/// The leading symbols of a tool-trace line (hermes-agent's progress lines and their peers).
/// Each is only a trigger: the line after it must read as a trace ([`trace_line`]).
const TRACE_SYMBOLS: &[&str] = &["🔧", "🛠", "⚙", "💻", "🖥", "🐍", "🔨", "🧰", "📟"];

/// Tool names agents give their shell, code and file tools; a trace line names one of these,
/// or a snake_case / dotted name (`web_search`, `functions.read_file`).
const TOOL_NAMES: &[&str] = &[
    "exec",
    "execute",
    "terminal",
    "shell",
    "bash",
    "sh",
    "zsh",
    "cmd",
    "powershell",
    "python",
    "node",
    "run",
    "command",
    "browser",
    "browse",
    "search",
    "fetch",
    "curl",
    "read",
    "write",
    "edit",
    "patch",
    "grep",
    "glob",
    "ls",
    "cat",
    "computer",
    "code",
];

/// What a trace line may say after its symbol instead of `tool:`.
const TRACE_VERBS: &[&str] = &[
    "running ",
    "executing ",
    "calling ",
    "invoking ",
    "using tool",
];

/// The literals the heuristic pass looks for, the rule each serves and how a hit is confirmed:
/// every marker of Layer A's formats, the trace symbols, and the ReAct and `Tool call:` lines.
pub(crate) fn triggers() -> impl Iterator<Item = (&'static str, Rule, Check)> {
    tool_text::literals()
        .map(|l| (l, Rule::ToolCallMarkup, Check::ToolMarkup))
        .chain(
            TRACE_SYMBOLS
                .iter()
                .chain(&["action input:", "tool call:"])
                .map(|l| (*l, Rule::ToolTrace, Check::ToolTrace)),
        )
}

/// The markup a marker at `at` opens, to the end of its call.
pub(crate) fn markup(text: &str, at: usize) -> Option<Range<usize>> {
    tool_text::markup_at(text, at)
}

/// A whole reply that is one bare function-call JSON value or Python call list.
pub(crate) fn whole_reply(text: &str) -> Option<Range<usize>> {
    tool_text::whole_reply_call(text)
}

/// The trace line a trigger at `at` starts, whole (with its line break): the trigger first on
/// its line (after list or quote markers), then a tool name and `:` (`🔧 exec: ls -la`), a
/// trace verb (`🖥️ Running command …`), or, for `Action Input:`, an `Action:` line above it.
pub(crate) fn trace_line(text: &str, at: usize) -> Option<Range<usize>> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let lead = &text[line_start..at];
    if !lead
        .chars()
        .all(|c| c.is_whitespace() || matches!(c, '>' | '-' | '*' | '•'))
    {
        return None;
    }
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
    let line = &text[at..line_end];
    let lower = line.to_ascii_lowercase();
    if lower.starts_with("action input:") {
        // The ReAct pair: `Action: tool` on the line above.
        let above_end = line_start.checked_sub(1)?;
        let above_start = text[..above_end].rfind('\n').map_or(0, |i| i + 1);
        let above = text[above_start..above_end].trim_start();
        let named = above
            .get(..7)
            .is_some_and(|a| a.eq_ignore_ascii_case("action:"))
            && !above[7..].trim().is_empty();
        return named.then_some(above_start..line_end);
    }
    if lower.starts_with("tool call:") {
        // `Tool call: name(arguments)`.
        let rest = line["tool call:".len()..].trim_start();
        let n = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
            .count();
        return (n > 0 && rest.as_bytes().get(n) == Some(&b'(')).then_some(line_start..line_end);
    }
    // A symbol, its variation selector, then the trace.
    let after = line
        .trim_start_matches(|c: char| !c.is_ascii() && !c.is_alphanumeric())
        .trim_start();
    let lower_after = after.to_ascii_lowercase();
    if TRACE_VERBS.iter().any(|v| lower_after.starts_with(v)) {
        return Some(line_start..line_end);
    }
    named_call(after, |_| true).then_some(line_start..line_end)
}

/// Whether `after` (a trace line past its symbol) names a tool and says what it did with it:
/// a known tool's name (`terminal`, `exec`) and `:` with something after it, or a snake_case or
/// dotted name (`web_search`, `functions.read_file`) and `:` with something `payload` accepts.
fn named_call(after: &str, payload: impl Fn(&str) -> bool) -> bool {
    let name_len = after
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.'))
        .count();
    let name = &after[..name_len];
    let Some(rest) = after[name_len..].strip_prefix(':') else {
        return false;
    };
    if rest.trim().is_empty() {
        return false;
    }
    TOOL_NAMES.contains(&name)
        || (name.contains(['_', '.'])
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && payload(rest))
}

/// Whether `c` is a pictograph an agent may lead a tool's progress line with (emoji blocks;
/// not letters, digits, punctuation or CJK).
fn is_pictograph(c: char) -> bool {
    matches!(u32::from(c),
        0x2300..=0x23FF | 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0x1F000..=0x1FAFF)
}

/// Commands a trace line's payload may open with (`🔍 run_query: git log -3`).
const COMMANDS: &[&str] = &[
    "ls ", "cat ", "git ", "grep ", "rg ", "curl ", "wget ", "python", "node ", "npm ", "pip ",
    "cargo ", "docker ", "kubectl ", "cd ", "rm ", "mkdir ", "echo ", "sed ", "find ", "sudo ",
];

/// Whether what follows a tool name's `:` is a command, a path or a query: quoted, a path, a
/// URL, or a shell command. A value (`max_temp: 18°C`) is none of them.
fn is_payload(rest: &str) -> bool {
    let rest = rest.trim_start();
    rest.starts_with(['"', '\'', '`', '/', '~', '\u{201c}'])
        || rest.starts_with("./")
        || rest.starts_with("http://")
        || rest.starts_with("https://")
        || COMMANDS.iter().any(|c| rest.starts_with(c))
}

/// Trace lines that open with a pictograph outside [`TRACE_SYMBOLS`] (agents give each tool
/// its own: `🔍 web_search: "…"`, `📖 read_file: /etc/app.conf`): a line whose first mark is a
/// pictograph, then a tool's name and `:` and a command, path or query ([`named_call`], with
/// [`is_payload`] for a name that is not a known tool's), so a line that describes (`## 🚀 What's new`, `- 🔧
/// Fixed the search tool`, `🌡️ max_temp: 18°C`) is not a trace.
pub(crate) fn pictograph_traces(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        while start < text.len() {
            let line_start = start;
            let line_end = text[start..]
                .find('\n')
                .map_or(text.len(), |i| start + i + 1);
            start = line_end;
            let line = &text[line_start..line_end];
            let body = line.trim_start_matches(|c: char| {
                c.is_whitespace() || matches!(c, '>' | '-' | '*' | '•')
            });
            let Some(first) = body.chars().next() else {
                continue;
            };
            if !is_pictograph(first) || TRACE_SYMBOLS.iter().any(|s| body.starts_with(s)) {
                continue;
            }
            let after = body
                .trim_start_matches(|c: char| !c.is_ascii() && !c.is_alphanumeric())
                .trim_start();
            if named_call(after, is_payload) {
                return Some(line_start..line_end);
            }
        }
        None
    })
}

/// Openings of a reply that only announces what the model was about to do.
const ANNOUNCEMENTS: &[&str] = &[
    "let me",
    "i'll ",
    "i will ",
    "i'm going to",
    "i am going to",
    "i need to",
    "one moment",
    "give me a",
    "hold on",
    "checking",
    "looking",
    "searching",
    "let's ",
    "first, i",
];

/// Whether what is left once tool markup or traces are cut out is an answer a person can take
/// as complete: not empty, not trailing off into the call it announced (`Here is the weather:`,
/// `Checking…`), and not one sentence announcing the work (`Let me look that up.`).
pub(crate) fn is_complete_answer(rest: &str) -> bool {
    let t = rest.trim();
    if t.is_empty() || t.ends_with(':') || t.ends_with('…') || t.ends_with("...") {
        return false;
    }
    let lower = t.to_lowercase().replace('\u{2019}', "'");
    let opening = ["sure, ", "sure! ", "okay, ", "ok, ", "alright, "]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .unwrap_or(&lower);
    if !ANNOUNCEMENTS.iter().any(|a| opening.starts_with(a)) {
        return true;
    }
    // An announcement that goes on to say something (`Let me explain: the deploy …`) answers.
    let first = lower
        .find(['.', '!', '?', ':'])
        .map_or(lower.len(), |i| i + 1);
    !lower[first..].trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(text: &str) -> Option<&str> {
        let at = TRACE_SYMBOLS
            .iter()
            .chain(&["Action Input:", "Tool call:"])
            .filter_map(|s| text.find(s))
            .min()?;
        trace_line(text, at).map(|r| &text[r])
    }

    #[test]
    fn trace_lines_are_found_whole_and_emoji_prose_is_not() {
        assert_eq!(
            trace("🔧 exec: ls -la /srv/app\nThe app has three files."),
            Some("🔧 exec: ls -la /srv/app\n")
        );
        assert_eq!(
            trace("Here:\n💻 terminal: \"date '+%Y-%m-%d'\"\n"),
            Some("💻 terminal: \"date '+%Y-%m-%d'\"\n")
        );
        assert_eq!(
            trace("⚙️ web_search: rust 1.88 release"),
            Some("⚙️ web_search: rust 1.88 release")
        );
        assert_eq!(
            trace("🖥️ Running command preview...\nDone."),
            Some("🖥️ Running command preview...\n")
        );
        assert_eq!(
            trace("Thought: look it up\nAction: search\nAction Input: weather Paris\n"),
            Some("Action: search\nAction Input: weather Paris\n")
        );
        assert_eq!(
            trace("Tool call: get_weather({\"city\": \"Paris\"})"),
            Some("Tool call: get_weather({\"city\": \"Paris\"})")
        );
        for prose in [
            "🔧 Tools: hammer, wrench",
            "💻 laptop: MacBook Pro",
            "Bring your 💻 terminal: the workshop is hands-on.",
            "Action Input: without an action",
            "Tool call: soon",
        ] {
            assert_eq!(trace(prose), None, "{prose}");
        }
    }

    #[test]
    fn a_rest_that_only_announces_the_call_is_not_complete() {
        for incomplete in [
            "",
            "Here is the weather:",
            "Checking…",
            "Let me look that up.",
            "Sure, I'll check the logs for you.",
        ] {
            assert!(!is_complete_answer(incomplete), "{incomplete:?}");
        }
        for complete in [
            "The app directory has three files: main.py, app.yaml and README.md.",
            "It is 18°C in Paris.",
            "Let me explain: the deploy at 09:12 rolled back because the health check failed \
             twice, so the previous version is serving traffic again.",
        ] {
            assert!(is_complete_answer(complete), "{complete:?}");
        }
    }
}
