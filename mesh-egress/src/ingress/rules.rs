//! The heuristic pass: one pass over an inbound message and the remembered state, first rule
//! that applies wins.
//!
//! | order | rule | decision | confidence |
//! |---|---|---|---|
//! | 1 | our own message (`self`) | ignore | high |
//! | 2 | an edit | ignore | high |
//! | 3 | a delivery seen before (`duplicate`) | ignore | high |
//! | 4 | a bot not allow-listed, or past the conversation's bot-to-bot cap (`bot`) | ignore | high |
//! | 5 | a direct message (`dm`) | engage | high |
//! | 6 | a native mention of us (`mention`) | engage | high |
//! | 7 | a reply to our message (`reply`) | engage | high |
//! | 8 | a command for us, or one naming no bot (`command`) | engage | high |
//! | 9 | our name addressing us (`name`) | engage | high |
//! | 10 | mentions others, not us, or a command for another bot (`other_mention`) | observe | high |
//! | 11 | `@everyone`/`@here` (`everyone`) | observe | high |
//! | 12 | a thread we answered in, from the person we answered, within the window (`thread`) | engage | low |
//! | 13 | anything else (`ambient`) | observe | low |
//!
//! An ambient message from a person is *ambiguous*, and goes to the judge when one is
//! configured, only when something hints it may be for us: our name in passing, a question in
//! a conversation we spoke in within the window, someone other than our partner writing in a
//! thread we answered in, or a question to the room ("anyone know…?"). Everything else ambient
//! stays `observe` without a model call.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use crate::engagement::{Complexity, Decision, Engagement, Reason};
use crate::ingress::ThreadWindow;
use crate::ingress::complexity::Gauge;
use crate::ingress::identity::Identity;
use crate::ingress::inbound::{ChatKind, Inbound};
use crate::ingress::names::{NameUse, Names};
use crate::ingress::state::{ConversationMemory, Keys, Line, State, ThreadMemory};
use crate::verdict::Confidence;

/// Words that, opening a message, make it a question or request even without a `?`.
const ASKING: &[&str] = &[
    "can", "could", "would", "will", "what", "how", "why", "when", "where", "who", "which", "is",
    "are", "do", "does", "did", "please", "pls", "any", "and", "also", "ok", "so",
];

/// Words that ask the room rather than a person ("anyone know…?").
const ROOM: &[&str] = &[
    "anyone",
    "anybody",
    "someone",
    "somebody",
    "any bot",
    "the bot",
    "a bot",
    "assistant",
];

/// What the pass needs, compiled once.
pub(crate) struct Rules {
    pub(crate) identity: Identity,
    pub(crate) names: Names,
    pub(crate) gauge: Gauge,
    pub(crate) room: AhoCorasick,
    pub(crate) window: ThreadWindow,
    pub(crate) allowed_bots: Vec<String>,
    pub(crate) bot_turn_cap: u32,
}

/// How the pass ended.
#[derive(Debug)]
pub(crate) enum Pass {
    /// A rule decided.
    Settled(Engagement),
    /// Ambient, but possibly for us: the judge may decide. Without one, `observe` stands.
    Ambiguous {
        /// The complexity should the judge engage.
        complexity: Complexity,
        /// The conversation's last few messages, oldest first (before this one).
        history: Vec<Line>,
    },
}

impl Rules {
    pub(crate) fn compile_room() -> Result<AhoCorasick, String> {
        AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(ROOM)
            .map_err(|e| e.to_string())
    }

    /// The pass over `inbound`, remembering its deliveries.
    pub(crate) fn first_pass(&self, state: &mut State, keys: &Keys, inbound: &Inbound) -> Pass {
        let settled = |decision, reason, confidence| {
            Pass::Settled(Engagement::new(decision, reason, confidence))
        };
        let high = Confidence::High;
        let author = inbound.author();
        if author.is_us() {
            return settled(Decision::Ignore, Reason::OwnMessage, high);
        }
        if inbound.is_edit() {
            return settled(Decision::Ignore, Reason::Edit, high);
        }
        if state.seen_before(inbound.surface(), inbound.deliveries()) {
            return settled(Decision::Ignore, Reason::Duplicate, high);
        }
        let conversation = state
            .conversations
            .peek(keys.conversation)
            .cloned()
            .unwrap_or_default();
        if author.is_bot() {
            let allowed = self.allowed_bots.iter().any(|b| {
                b == author.id() || author.name().is_some_and(|n| n.eq_ignore_ascii_case(b))
            });
            if !allowed || conversation.bot_turns >= self.bot_turn_cap {
                return settled(Decision::Ignore, Reason::Bot, high);
            }
        }
        let engage = |reason, confidence| {
            let complexity = self.gauge.measure(inbound);
            settled(Decision::Engage { complexity }, reason, confidence)
        };
        if inbound.chat() == ChatKind::Direct {
            return engage(Reason::Dm, high);
        }
        if inbound.mentions_us() {
            return engage(Reason::Mention, high);
        }
        if inbound.reply_to().is_some_and(|r| r.is_us()) {
            return engage(Reason::ReplyToUs, high);
        }
        let command_for = inbound.command().map(|c| match c.bot() {
            None => true,
            Some(bot) => self.identity.is_telegram_username(bot),
        });
        if command_for == Some(true) {
            return engage(Reason::Command, high);
        }
        let name = self.names.read(inbound.text());
        if name == NameUse::Addressing {
            return engage(Reason::Name, high);
        }
        if inbound.mentions_others() || command_for == Some(false) {
            return settled(Decision::Observe, Reason::OtherMention, high);
        }
        if inbound
            .mentions()
            .contains(&crate::ingress::inbound::Mention::Everyone)
        {
            return settled(Decision::Observe, Reason::Everyone, high);
        }
        let thread = keys.thread.and_then(|t| state.threads.peek(t).copied());
        let in_our_thread = thread.filter(|t| self.within_window(t, inbound.at_ms()));
        let partner = in_our_thread.map(|t| t.partner.is_none_or(|p| p == keys.author));
        if partner == Some(true) {
            return engage(Reason::Thread, Confidence::Low);
        }
        let ambiguous = !author.is_bot()
            && (name == NameUse::InPassing
                || partner == Some(false)
                || (self.spoke_recently(&conversation, inbound.at_ms()) && asks(inbound.text()))
                || (inbound.text().contains('?') && self.room.is_match(inbound.text())));
        if ambiguous {
            let history = state
                .history
                .peek(keys.context)
                .map(|lines| lines.iter().cloned().collect())
                .unwrap_or_default();
            return Pass::Ambiguous {
                complexity: self.gauge.measure(inbound),
                history,
            };
        }
        settled(Decision::Observe, Reason::Ambient, Confidence::Low)
    }

    fn within_window(&self, thread: &ThreadMemory, at_ms: u64) -> bool {
        at_ms.saturating_sub(thread.ours_at) <= self.window.age_ms()
            && thread.since < self.window.messages()
    }

    fn spoke_recently(&self, conversation: &ConversationMemory, at_ms: u64) -> bool {
        conversation
            .ours_at
            .is_some_and(|ours| at_ms.saturating_sub(ours) <= self.window.age_ms())
    }
}

/// Remembers what the decision on `inbound` means for the next messages: a thread and
/// conversation we now answer in (or spoke in), the run of bot-to-bot turns, a follow-up
/// counted against the thread's window, and, when a judge will read it (`history`), the
/// message itself in the conversation's history: without a judge no text is kept.
pub(crate) fn settle(
    state: &mut State,
    keys: &Keys,
    inbound: &Inbound,
    decided: &Engagement,
    history: bool,
) {
    if matches!(decided.reason(), Reason::Duplicate | Reason::Edit) {
        return;
    }
    let at = inbound.at_ms();
    let ours = decided.reason() == Reason::OwnMessage;
    let engaged = decided.decision().engages();
    let conversation = state
        .conversations
        .entry(keys.conversation, ConversationMemory::default);
    if ours || engaged {
        conversation.ours_at = Some(conversation.ours_at.map_or(at, |t| t.max(at)));
    }
    if engaged && inbound.author().is_bot() {
        conversation.bot_turns = conversation.bot_turns.saturating_add(1);
    } else if !inbound.author().is_bot() {
        conversation.bot_turns = 0;
    }
    let answered_in = if ours {
        keys.thread.or(keys.answer_thread)
    } else if engaged {
        keys.answer_thread
    } else {
        None
    };
    if let Some(thread) = answered_in {
        let partner = (!ours).then_some(keys.author);
        let memory = state.threads.entry(thread, || ThreadMemory {
            ours_at: at,
            partner,
            since: 0,
        });
        memory.ours_at = memory.ours_at.max(at);
        memory.since = 0;
        if partner.is_some() {
            memory.partner = partner;
        }
    } else if let Some(thread) = keys.thread
        && state.threads.peek(thread).is_some()
    {
        let memory = state.threads.entry(thread, || ThreadMemory {
            ours_at: at,
            partner: None,
            since: 0,
        });
        memory.since = memory.since.saturating_add(1);
    }
    if history {
        state.remember(keys, inbound);
    }
}

/// Whether `text` reads as a question or request: a `?`, or an opening word that asks.
fn asks(text: &str) -> bool {
    if text.contains('?') {
        return true;
    }
    let first = text
        .trim_start()
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    ASKING.iter().any(|w| w.eq_ignore_ascii_case(first))
}
