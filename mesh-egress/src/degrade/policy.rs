//! [`DegradationPolicy`]: what Layer C says, and the follow-up it promises.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::ledger::Ledger;
use crate::setting::{ConfigWarning, read_setting};
use crate::silence::SilenceTokens;

/// The follow-up a holding line promises: the first delay and the number of tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowUp {
    /// Delay before the first follow-up.
    pub first_delay: Duration,
    /// Follow-up tries before handing off.
    pub attempts: u32,
}

impl FollowUp {
    /// Environment variable for [`first_delay`](Self::first_delay), in milliseconds.
    pub const DELAY_ENV: &'static str = "MESH_FOLLOW_UP_DELAY_MS";
    /// Environment variable for [`attempts`](Self::attempts).
    pub const ATTEMPTS_ENV: &'static str = "MESH_FOLLOW_UP_ATTEMPTS";

    /// Reads `MESH_FOLLOW_UP_DELAY_MS` (default 30000) and `MESH_FOLLOW_UP_ATTEMPTS` (default 3)
    /// from the process environment. See [`from_lookup`](Self::from_lookup).
    pub fn from_env() -> (Self, Vec<ConfigWarning>) {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the follow-up settings through `lookup`, with the same rules as the model's
    /// [`RetryConfig`](crate::model::RetryConfig): an unset or empty value keeps the default
    /// silently; an unparseable or negative value, or `0` attempts, keeps the default and is
    /// reported in the returned warnings (and logged at `mesh_egress::degrade`). A `0` delay is
    /// allowed: follow up at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mesh_egress::degrade::FollowUp;
    /// let (plan, warnings) = FollowUp::from_lookup(|key| match key {
    ///     "MESH_FOLLOW_UP_DELAY_MS" => Some("1500".into()),
    ///     "MESH_FOLLOW_UP_ATTEMPTS" => Some("zero".into()),
    ///     _ => None,
    /// });
    /// assert_eq!(plan.first_delay, Duration::from_millis(1500));
    /// assert_eq!(plan.attempts, 3);
    /// assert_eq!(warnings.len(), 1);
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> (Self, Vec<ConfigWarning>) {
        let mut plan = Self::default();
        let mut warnings = Vec::new();
        if let Some(ms) = read_setting(&lookup, Self::DELAY_ENV, false, &mut warnings) {
            plan.first_delay = Duration::from_millis(ms);
        }
        if let Some(n) = read_setting(&lookup, Self::ATTEMPTS_ENV, true, &mut warnings) {
            plan.attempts = u32::try_from(n).unwrap_or(u32::MAX);
        }
        for warning in &warnings {
            tracing::warn!(target: "mesh_egress::degrade", key = warning.key, "{warning}");
        }
        (plan, warnings)
    }
}

impl Default for FollowUp {
    fn default() -> Self {
        Self {
            first_delay: Duration::from_secs(30),
            attempts: 3,
        }
    }
}

const DEFAULT_HOLDING_LINES: [&str; 3] = [
    "Give me a moment on this one. I'm hitting a snag, and I'll follow up right here.",
    "Still on it. Something is slow on my side; I'll come back to you here shortly.",
    "Bear with me a little longer. I'll get back to you here with the answer.",
];

const DEFAULT_HANDOFF_TO: &str = "a teammate";
const DEFAULT_HANDOFF_LINE: &str = "I can't finish this one myself right now, so I've passed it to {to}, who will pick it up here.";

/// How many conversations' rotation positions are remembered before the oldest are forgotten.
const ROTATION_MEMORY: usize = 10_000;

/// What Layer C says when a turn cannot answer. Cheap to clone; clones share the holding-line
/// rotation.
///
/// ```
/// use mesh_egress::degrade::DegradationPolicy;
/// use std::time::Duration;
/// let policy = DegradationPolicy::default()
///     .with_holding_lines(["One sec, checking.", "Still checking, back shortly."])
///     .with_handoff("the on-call engineer", "I've passed this to {to}; they'll reply here.")
///     .with_follow_up(Duration::from_secs(10), 2);
/// assert_eq!(policy.follow_up().attempts, 2);
/// ```
#[derive(Clone)]
pub struct DegradationPolicy {
    inner: Arc<PolicyInner>,
}

struct PolicyInner {
    holding_lines: Vec<String>,
    handoff_to: String,
    handoff_line: String,
    always_hand_off: bool,
    follow_up: FollowUp,
    silence: SilenceTokens,
    ledger: Option<Ledger>,
    // Shared by every clone, so attaching a ledger or changing a line never restarts the
    // rotation of a conversation.
    rotation: Arc<Mutex<HashMap<String, usize>>>,
}

impl Clone for PolicyInner {
    fn clone(&self) -> Self {
        Self {
            holding_lines: self.holding_lines.clone(),
            handoff_to: self.handoff_to.clone(),
            handoff_line: self.handoff_line.clone(),
            always_hand_off: self.always_hand_off,
            follow_up: self.follow_up,
            silence: self.silence.clone(),
            ledger: self.ledger.clone(),
            rotation: Arc::clone(&self.rotation),
        }
    }
}

impl Default for DegradationPolicy {
    fn default() -> Self {
        Self {
            inner: Arc::new(PolicyInner {
                holding_lines: DEFAULT_HOLDING_LINES
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect(),
                handoff_to: DEFAULT_HANDOFF_TO.to_owned(),
                handoff_line: DEFAULT_HANDOFF_LINE.to_owned(),
                always_hand_off: false,
                follow_up: FollowUp::default(),
                silence: SilenceTokens::none(),
                ledger: None,
                rotation: Arc::new(Mutex::new(HashMap::new())),
            }),
        }
    }
}

impl DegradationPolicy {
    fn edit(mut self, f: impl FnOnce(&mut PolicyInner)) -> Self {
        f(Arc::make_mut(&mut self.inner));
        self
    }

    /// The holding lines to rotate through (an empty set keeps the current lines).
    pub fn with_holding_lines<I, S>(self, lines: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let lines: Vec<String> = lines
            .into_iter()
            .map(Into::into)
            .filter(|l| !l.trim().is_empty())
            .collect();
        if lines.is_empty() {
            return self;
        }
        self.edit(|p| p.holding_lines = lines)
    }

    /// Who a handoff goes to, and the line that says so (`{to}` is replaced by `to`).
    pub fn with_handoff(self, to: impl Into<String>, line: impl Into<String>) -> Self {
        let (to, line) = (to.into(), line.into());
        self.edit(|p| {
            p.handoff_to = to;
            if !line.trim().is_empty() {
                p.handoff_line = line;
            }
        })
    }

    /// Hand off on every interactive failure, retryable or not (no holding lines).
    pub fn always_hand_off(self, yes: bool) -> Self {
        self.edit(|p| p.always_hand_off = yes)
    }

    /// The follow-up a holding line promises.
    pub fn with_follow_up(self, first_delay: Duration, attempts: u32) -> Self {
        self.edit(|p| {
            p.follow_up = FollowUp {
                first_delay,
                attempts: attempts.max(1),
            }
        })
    }

    /// The agent's silence tokens (none by default; `NO_REPLY` and `HEARTBEAT_OK` are the usual
    /// examples): an answer that is only one of them is [`Reply::Silence`](crate::Reply::Silence)
    /// at the boundary, and one inside an answer is cut before rendering, never shown (see
    /// [`silence`](crate::silence)).
    ///
    /// ```
    /// use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
    /// use mesh_egress::boundary::resolve;
    /// use mesh_egress::silence::SilenceTokens;
    /// use mesh_egress::{AgentMessage, Attribution};
    /// let policy = DegradationPolicy::default()
    ///     .with_silence_tokens(SilenceTokens::new(["NO_REPLY"]).expect("a word"));
    /// let attr = Attribution::new("digest", "c1", "r1");
    /// let quiet = resolve(Mode::Proactive, &policy, Ok(AgentMessage::new("NO_REPLY", attr.clone())));
    /// assert!(matches!(quiet, Reply::Silence));
    /// let answer = resolve(Mode::Interactive, &policy, Ok(AgentMessage::new("Done. NO_REPLY", attr)));
    /// assert_eq!(answer.message().map(|m| m.body().as_str()), Some("Done."));
    /// ```
    pub fn with_silence_tokens(self, tokens: SilenceTokens) -> Self {
        self.edit(|p| p.silence = tokens)
    }

    /// The agent's silence tokens.
    pub fn silence_tokens(&self) -> &SilenceTokens {
        &self.inner.silence
    }

    /// Records every outcome of the plain [`resolve`](crate::boundary::resolve) on `ledger`.
    /// The turn-aware boundary (`#[egress_boundary]` on a handler that takes a `&Turn`, and the
    /// [`Bot`](crate::Bot)) records on the turn's ledger instead. Attaching a ledger
    /// keeps the holding-line rotation.
    pub fn with_ledger(self, ledger: Ledger) -> Self {
        self.edit(|p| p.ledger = Some(ledger))
    }

    /// Whether every interactive failure is handed off.
    pub fn always_hands_off(&self) -> bool {
        self.inner.always_hand_off
    }

    /// The promised follow-up.
    pub fn follow_up(&self) -> FollowUp {
        self.inner.follow_up
    }

    /// The ledger outcomes are recorded on, if any.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.inner.ledger.as_ref()
    }

    /// The next holding line for `conversation`; consecutive lines in one conversation differ
    /// whenever the policy has more than one.
    pub fn next_holding_line(&self, conversation: &str) -> &str {
        let lines = &self.inner.holding_lines;
        let mut rotation = self
            .inner
            .rotation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if rotation.len() >= ROTATION_MEMORY && !rotation.contains_key(conversation) {
            rotation.clear();
        }
        let slot = rotation.entry(conversation.to_owned()).or_insert(0);
        let line = &lines[*slot % lines.len()];
        *slot = slot.wrapping_add(1);
        line
    }

    /// The handoff line, with its recipient filled in.
    pub fn handoff_line(&self) -> String {
        self.inner
            .handoff_line
            .replace("{to}", &self.inner.handoff_to)
    }

    /// Who handoffs go to.
    pub fn handoff_to(&self) -> &str {
        &self.inner.handoff_to
    }
}

impl fmt::Debug for DegradationPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DegradationPolicy")
            .field("holding_lines", &self.inner.holding_lines.len())
            .field("handoff_to", &self.inner.handoff_to)
            .field("always_hand_off", &self.inner.always_hand_off)
            .field("follow_up", &self.inner.follow_up)
            .field("silence_tokens", &self.inner.silence)
            .finish_non_exhaustive()
    }
}
