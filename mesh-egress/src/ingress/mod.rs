//! The ingress classifier: is this inbound message addressed to us, and how hard is it? The
//! egress gate's sibling on the same fast-model plumbing, pointed the other way: cheap
//! heuristics first, a fast model second and only for the ambiguous, with a defined failure.
//!
//! 1. **Inbound.** [`Inbound::parse`] reads one raw event of a surface (Slack Events API,
//!    Discord gateway `MESSAGE_CREATE`, Telegram `Update`) under bounds ([`check_document`]:
//!    size, UTF-8, nesting; at most [`MAX_MENTIONS`] mentions): the conversation's
//!    [`Address`](crate::Address), the author (a bot? us?), the text, the mentions as the
//!    surface encodes them, reply-to, thread, DM or group, edit, and the ids that recognise a
//!    repeated delivery.
//! 2. **Heuristics**, in one pass ([`rules`](self) table below): our own messages, edits,
//!    duplicates and bots are ignored; a DM, a mention, a reply to us, a command or our name
//!    engages; a message for someone else or for everyone is observed; a follow-up in a thread
//!    we answered in, from the person we answered, engages within a window of messages and
//!    minutes ([`ThreadWindow`]); the rest is ambient and observed. Each engaged message gets a
//!    [`Complexity`], `quick` or `deep`, for choosing a route.
//! 3. **The judge**, only for ambient messages with a hint they may be for us (our name in
//!    passing, a question right after we spoke, a question to the room, someone new in our
//!    thread): one fast-model call through the same [`Router`](crate::model::Router), time
//!    bound, per-agent budget ([`SharedBudget`](crate::model::SharedBudget), which the gate's judge may share) and fenced
//!    prompt as the gate's judge, answering `YES` or `NO`. If it fails, times out, is over
//!    budget or answers anything else, the heuristic default stands (`observe`): never an
//!    error, never a second call.
//! 4. **Observable.** Every decision is a [`LedgerRecord::Ingress`] row (rule, confidence, the
//!    judge's answer; never the text) and a `tracing` event at target `mesh_egress::ingress`.
//!
//! State (deliveries seen, threads answered in, bot-to-bot turns, and, only when a judge is
//! configured, the last few messages per conversation for its prompt) is bounded and kept across events; time comes from the events'
//! own timestamps, so replaying a log decides the same way.
//!
//! | order | rule | decision |
//! |---|---|---|
//! | 1–4 | `self`, `edit`, `duplicate`, `bot` | ignore |
//! | 5–9 | `dm`, `mention`, `reply`, `command`, `name` | engage |
//! | 10–11 | `other_mention`, `everyone` | observe |
//! | 12 | `thread` | engage |
//! | 13 | `ambient` (the judge may turn it into `judge`: engage or observe) | observe |
//!
//! ```
//! use mesh_egress::engagement::{Decision, Reason};
//! use mesh_egress::ingress::{Identity, Ingress};
//! use mesh_egress::Surface;
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ingress = Ingress::builder(Identity::new("Atlas").slack_user("U0LAN0Z89")).build()?;
//! let mention = br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","user":"U061F7AUR","text":"<@U0LAN0Z89> is it everything a river should be?","ts":"1515449522.000016","channel":"C123ABC456"}}"#;
//! let decided = ingress.decide(&ingress.parse(Surface::Slack, mention)?).await;
//! assert!(decided.decision().engages());
//! assert_eq!(decided.reason(), Reason::Mention);
//!
//! // The same message as a `message` event: recognised, not answered twice.
//! let again = br#"{"type":"event_callback","event_id":"Ev2","event":{"type":"message","user":"U061F7AUR","text":"<@U0LAN0Z89> is it everything a river should be?","ts":"1515449522.000016","channel":"C123ABC456","channel_type":"channel"}}"#;
//! let decided = ingress.decide(&ingress.parse(Surface::Slack, again)?).await;
//! assert_eq!((decided.decision(), decided.reason()), (Decision::Ignore, Reason::Duplicate));
//! # Ok(()) }
//! ```

mod builder;
mod complexity;
mod discord;
mod identity;
mod inbound;
mod judge;
mod names;
mod parse;
mod rules;
mod slack;
mod state;
mod telegram;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::engagement::{Complexity, Decision, Engagement, JudgeAnswer, Reason};
use crate::verdict::Confidence;
pub use builder::{IngressBuilder, IngressConfigError};
pub use identity::Identity;
pub use inbound::{
    Author, ChatKind, Command, Inbound, InboundError, InboundId, MAX_DEPTH, MAX_EVENT_BYTES,
    MAX_MENTIONS, Mention, ReplyTo, check_document,
};

use crate::address::Surface;
use crate::egress::Attribution;
use crate::ledger::{IngressRecord, Ledger, LedgerRecord};
use crate::turn::Turn;
use judge::IngressJudge;
use rules::{Pass, Rules, settle};
use state::{Keys, Speaker, State};

/// How long a thread we answered in stays ours: at most `messages` messages from others since
/// our last answer there, and at most `age` since it (both measured on the events' own
/// timestamps). Default: 10 messages, 30 minutes. The same age bounds "we spoke here recently"
/// for the judge's hints.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::ingress::ThreadWindow;
/// let window = ThreadWindow::new(20, Duration::from_secs(3600));
/// assert_eq!(window.messages(), 20);
/// assert_eq!(window.age(), Duration::from_secs(3600));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadWindow {
    messages: u32,
    age: Duration,
}

impl ThreadWindow {
    /// At most `messages` messages from others and at most `age` since our last answer.
    pub fn new(messages: u32, age: Duration) -> Self {
        Self { messages, age }
    }

    /// The message bound.
    pub fn messages(&self) -> u32 {
        self.messages
    }

    /// The age bound.
    pub fn age(&self) -> Duration {
        self.age
    }

    fn age_ms(&self) -> u64 {
        u64::try_from(self.age.as_millis()).unwrap_or(u64::MAX)
    }
}

impl Default for ThreadWindow {
    fn default() -> Self {
        Self::new(10, Duration::from_secs(30 * 60))
    }
}

/// The ingress classifier of one bot (one [`Identity`]). Cheap to clone; clones share the
/// compiled rules, the judge and the remembered state. Build it with [`Ingress::builder`].
#[derive(Clone)]
pub struct Ingress {
    inner: Arc<Inner>,
}

struct Inner {
    rules: Rules,
    state: Mutex<State>,
    judge: Option<IngressJudge>,
    ledger: Ledger,
    agent: String,
}

impl fmt::Debug for Ingress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ingress")
            .field("name", &self.inner.rules.identity.name())
            .field("agent", &self.inner.agent)
            .field("window", &self.inner.rules.window)
            .field("judge", &self.inner.judge)
            .finish_non_exhaustive()
    }
}

impl Ingress {
    /// A builder for the classifier of the bot `identity` describes.
    pub fn builder(identity: Identity) -> IngressBuilder {
        IngressBuilder::new(identity)
    }

    /// Who we are.
    pub fn identity(&self) -> &Identity {
        &self.inner.rules.identity
    }

    /// Reads one raw event of `surface` ([`Inbound::parse`] with our identity).
    ///
    /// # Errors
    ///
    /// As [`Inbound::parse`].
    pub fn parse(&self, surface: Surface, event: &[u8]) -> Result<Inbound, InboundError> {
        Inbound::parse(surface, event, self.identity())
    }

    /// Decides what to do with `inbound`, remembers what the decision means for the next
    /// messages, and records it on the ledger and as a `mesh_egress::ingress` event. Resolves
    /// at once unless the message is ambiguous and a judge is configured; then within the
    /// judge's time bound.
    pub async fn decide(&self, inbound: &Inbound) -> Engagement {
        let inner = &*self.inner;
        let (keys, pass) = {
            let mut state = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
            let keys = state.keys(inbound);
            match inner.rules.first_pass(&mut state, &keys, inbound) {
                Pass::Settled(decided) => {
                    settle(&mut state, &keys, inbound, &decided, inner.judge.is_some());
                    drop(state);
                    self.record(inbound, &decided);
                    return decided;
                }
                ambiguous => (keys, ambiguous),
            }
        };
        let decided = self.judge_ambiguous(inbound, &keys, pass).await;
        {
            let mut state = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
            settle(&mut state, &keys, inbound, &decided, inner.judge.is_some());
        }
        self.record(inbound, &decided);
        decided
    }

    /// The judge's part: `observe` by default, the judge's answer when it gives one.
    async fn judge_ambiguous(&self, inbound: &Inbound, keys: &Keys, pass: Pass) -> Engagement {
        let ambient = Engagement::new(Decision::Observe, Reason::Ambient, Confidence::Low);
        let (
            Some(judge),
            Pass::Ambiguous {
                complexity,
                history,
            },
        ) = (&self.inner.judge, pass)
        else {
            return ambient;
        };
        let turn = Turn::new(self.attribution(inbound)).with_ledger(self.inner.ledger.clone());
        let author = if inbound.author().is_bot() {
            Speaker::Bot(keys.author)
        } else {
            Speaker::Person(keys.author)
        };
        let answer = judge
            .ask(&turn, self.identity(), &history, inbound, author)
            .await;
        let decided = match answer {
            JudgeAnswer::Engage => Engagement::new(
                Decision::Engage { complexity },
                Reason::Judge,
                Confidence::Low,
            ),
            JudgeAnswer::Observe => {
                Engagement::new(Decision::Observe, Reason::Judge, Confidence::Low)
            }
            _ => ambient,
        };
        decided.with_judge(answer)
    }

    /// The agent (the budget's key), the conversation (its address: ids only) and the message.
    fn attribution(&self, inbound: &Inbound) -> Attribution {
        Attribution::new(
            self.inner.agent.as_str(),
            inbound.address().to_string(),
            inbound.message_id(),
        )
    }

    fn record(&self, inbound: &Inbound, decided: &Engagement) {
        let attribution = self.attribution(inbound);
        let complexity = decided
            .decision()
            .complexity()
            .map_or("none", Complexity::as_str);
        let judge = decided.judge().map_or("not_asked", JudgeAnswer::as_str);
        // Ids and rule names only: never the message's text.
        if decided.decision().engages() || decided.judge().is_some() {
            tracing::info!(
                target: "mesh_egress::ingress",
                agent = attribution.agent(),
                surface = inbound.surface().as_str(),
                conversation = attribution.conversation(),
                message_id = attribution.run(),
                decision = decided.decision().as_str(),
                reason = decided.reason().as_str(),
                confidence = decided.confidence().as_str(),
                complexity,
                judge,
                "ingress decision"
            );
        } else {
            tracing::debug!(
                target: "mesh_egress::ingress",
                agent = attribution.agent(),
                surface = inbound.surface().as_str(),
                conversation = attribution.conversation(),
                message_id = attribution.run(),
                decision = decided.decision().as_str(),
                reason = decided.reason().as_str(),
                confidence = decided.confidence().as_str(),
                complexity,
                judge,
                "ingress decision"
            );
        }
        self.inner.ledger.record_owned(
            attribution,
            LedgerRecord::Ingress(IngressRecord {
                surface: inbound.surface(),
                engagement: *decided,
            }),
        );
    }
}
