//! [`IngressBuilder`]: how a classifier is configured, and [`IngressConfigError`].

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use crate::ingress::complexity::Gauge;
use crate::ingress::identity::Identity;
use crate::ingress::judge::IngressJudge;
use crate::ingress::names::Names;
use crate::ingress::rules::Rules;
use crate::ingress::state::State;
use crate::ingress::{Ingress, Inner, ThreadWindow};
use crate::ledger::Ledger;
use crate::model::fast::{
    DEFAULT_FAST_TIMEOUT, DynFastModel, FastModel, JudgeBudget, SharedBudget,
};
use crate::model::{ModelConnector, Router};

/// The default cap on consecutive bot-to-bot turns in one conversation.
pub(crate) const DEFAULT_BOT_TURN_CAP: u32 = 3;

/// A configuration mistake in [`IngressBuilder`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngressConfigError {
    /// The judge's time bound must be positive.
    #[error("the judge time bound must be positive")]
    JudgeTimeout,
    /// A thread window of zero messages or zero time can never hold a follow-up.
    #[error("the thread window must allow at least one message and some time")]
    Window,
    /// The matchers did not compile.
    #[error("{0}")]
    Compile(String),
}

/// Builds an [`Ingress`] classifier.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::ingress::{Identity, Ingress, ThreadWindow};
/// use mesh_egress::model::JudgeBudget;
/// use mesh_egress::model::{RetryConfig, Router};
/// use mesh_egress::testing::{ScriptedConnector, Step};
/// let fast = Router::new(
///     ScriptedConnector::new().otherwise(Step::answer("NO")),
///     "fast-model",
///     RetryConfig::default(),
/// );
/// let ingress = Ingress::builder(Identity::new("Atlas").alias("atty").slack_user("U0BOT"))
///     .thread_window(ThreadWindow::new(20, Duration::from_secs(3600)))
///     .allow_bot("U0DEPLOYBOT")
///     .bot_turn_cap(2)
///     .judge(fast)
///     .judge_timeout(Duration::from_millis(400))
///     .judge_budget(JudgeBudget::per_agent(500, Duration::from_secs(3600)))
///     .build()
///     .expect("valid configuration");
/// # let _ = ingress;
/// assert!(Ingress::builder(Identity::new("Atlas")).judge_timeout(Duration::ZERO).build().is_err());
/// ```
pub struct IngressBuilder {
    identity: Identity,
    window: ThreadWindow,
    allowed_bots: Vec<String>,
    bot_turn_cap: u32,
    judge: Option<Box<dyn DynFastModel>>,
    judge_timeout: Duration,
    budget: SharedBudget,
    ledger: Option<Ledger>,
    agent: Option<String>,
}

impl fmt::Debug for IngressBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IngressBuilder")
            .field("identity", &self.identity)
            .field("window", &self.window)
            .field("allowed_bots", &self.allowed_bots.len())
            .field("bot_turn_cap", &self.bot_turn_cap)
            .field("judge", &self.judge.is_some())
            .field("judge_timeout", &self.judge_timeout)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl IngressBuilder {
    pub(crate) fn new(identity: Identity) -> Self {
        Self {
            identity,
            window: ThreadWindow::default(),
            allowed_bots: Vec::new(),
            bot_turn_cap: DEFAULT_BOT_TURN_CAP,
            judge: None,
            judge_timeout: DEFAULT_FAST_TIMEOUT,
            budget: SharedBudget::default(),
            ledger: None,
            agent: None,
        }
    }

    /// How long a thread we answered in stays ours (default [`ThreadWindow::default`]).
    pub fn thread_window(mut self, window: ThreadWindow) -> Self {
        self.window = window;
        self
    }

    /// Lets messages from the bot `id` (its user id on the surface, or its handle) through the
    /// rules like a person's, up to the bot-to-bot cap. Other bots are ignored.
    pub fn allow_bot(mut self, id: impl Into<String>) -> Self {
        self.allowed_bots.push(id.into());
        self
    }

    /// How many consecutive turns we take on allow-listed bots' messages in one conversation
    /// before ignoring them until a person writes (default 3): two
    /// agents in one thread otherwise acknowledge each other for ever
    /// (NousResearch/hermes-agent#14117).
    pub fn bot_turn_cap(mut self, turns: u32) -> Self {
        self.bot_turn_cap = turns;
        self
    }

    /// The fast model that judges ambiguous messages (none by default: they are observed).
    pub fn judge<C: ModelConnector + 'static>(mut self, router: Router<C>) -> Self {
        self.judge = Some(Box::new(FastModel::new(router)));
        self
    }

    /// The judge's hard time bound (default the gate's, 800 ms).
    pub fn judge_timeout(mut self, bound: Duration) -> Self {
        self.judge_timeout = bound;
        self
    }

    /// The per-agent judge budget (default unlimited), accounted by this classifier alone.
    pub fn judge_budget(mut self, budget: JudgeBudget) -> Self {
        self.budget = SharedBudget::new(budget);
        self
    }

    /// The per-agent judge budget shared with every other holder of a clone, the gate's judge
    /// among them (`QualityGateBuilder::shared_budget`): one budget for the agent's fast-model
    /// calls in both directions. Replaces [`judge_budget`](Self::judge_budget).
    pub fn shared_budget(mut self, budget: SharedBudget) -> Self {
        self.budget = budget;
        self
    }

    /// The ledger every decision is recorded on (default a fresh in-memory one; a long-running
    /// bot gives a durable or bounded store).
    pub fn ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The agent id decisions are attributed to and the budget is charged to (default the
    /// bot's name, or `ingress` for a bot without one; give the gate's agent id to share its
    /// budget).
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Compiles the matchers once.
    ///
    /// # Errors
    ///
    /// [`IngressConfigError::JudgeTimeout`] when the judge time bound is zero,
    /// [`IngressConfigError::Window`] when the thread window allows no message or no time, and
    /// [`IngressConfigError::Compile`] when the matchers do not compile.
    pub fn build(self) -> Result<Ingress, IngressConfigError> {
        if self.judge_timeout.is_zero() {
            return Err(IngressConfigError::JudgeTimeout);
        }
        if self.window.messages() == 0 || self.window.age().is_zero() {
            return Err(IngressConfigError::Window);
        }
        let names = Names::new(self.identity.names()).map_err(IngressConfigError::Compile)?;
        let gauge = Gauge::new().map_err(IngressConfigError::Compile)?;
        let room = Rules::compile_room().map_err(IngressConfigError::Compile)?;
        let agent = self.agent.unwrap_or_else(|| match self.identity.name() {
            "" => "ingress".to_owned(),
            name => name.to_owned(),
        });
        let judge = self.judge.map(|fast| IngressJudge {
            fast,
            timeout: self.judge_timeout,
            budget: self.budget,
        });
        Ok(Ingress {
            inner: std::sync::Arc::new(Inner {
                rules: Rules {
                    identity: self.identity,
                    names,
                    gauge,
                    room,
                    window: self.window,
                    allowed_bots: self.allowed_bots,
                    bot_turn_cap: self.bot_turn_cap,
                },
                state: Mutex::new(State::new()),
                judge,
                ledger: self.ledger.unwrap_or_else(Ledger::in_memory),
                agent,
            }),
        })
    }
}
