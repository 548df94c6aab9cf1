//! [`QualityGateBuilder`]: how a gate is configured, and [`GateConfigError`].

use std::fmt;
use std::time::Duration;

use crate::gate::heuristics::Heuristics;
use crate::gate::judge::DynJudge;
use crate::gate::overlap::{self, PromptOverlap};
use crate::gate::{DEFAULT_JUDGE_TIMEOUT, GateInner, Judge, QualityGate};
use crate::model::JudgeBudget;
use crate::model::fast::SharedBudget;

/// A configuration mistake in [`QualityGateBuilder`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateConfigError {
    /// The overlap threshold must be in `(0, 1]`.
    #[error("the system-prompt overlap threshold must be in (0, 1], got {0}")]
    Threshold(f64),
    /// The n-gram length must be 1 to 32 words.
    #[error("the system-prompt n-gram length must be 1 to 32 words, got {0}")]
    Ngram(usize),
    /// A canary token was empty or whitespace.
    #[error("a canary token must not be empty")]
    EmptyCanary,
    /// The judge time bound must be positive.
    #[error("the judge time bound must be positive")]
    JudgeTimeout,
    /// The heuristics did not compile.
    #[error("{0}")]
    Compile(String),
}

/// Builds a [`QualityGate`] that is on (unless [`enabled(false)`](Self::enabled)).
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::gate::QualityGate;
/// use mesh_egress::model::JudgeBudget;
/// let gate = QualityGate::builder()
///     .system_prompt("You are Atlas. Answer questions about shipments only.", 0.5)
///     .canary("cnry-51d2a9")
///     .judge_timeout(Duration::from_millis(400))
///     .judge_budget(JudgeBudget::per_agent(200, Duration::from_secs(3600)))
///     .build()
///     .expect("valid configuration");
/// assert!(gate.is_on());
/// assert!(QualityGate::builder().system_prompt("x", 1.5).build().is_err());
/// ```
pub struct QualityGateBuilder {
    enabled: bool,
    system_prompt: Option<(String, f64)>,
    ngram: usize,
    canaries: Vec<String>,
    judge: Option<Box<dyn DynJudge>>,
    judge_timeout: Duration,
    budget: SharedBudget,
}

impl Default for QualityGateBuilder {
    fn default() -> Self {
        Self {
            enabled: true,
            system_prompt: None,
            ngram: overlap::DEFAULT_NGRAM,
            canaries: Vec::new(),
            judge: None,
            judge_timeout: DEFAULT_JUDGE_TIMEOUT,
            budget: SharedBudget::default(),
        }
    }
}

impl fmt::Debug for QualityGateBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QualityGateBuilder")
            .field("enabled", &self.enabled)
            .field("system_prompt", &self.system_prompt.is_some())
            .field("ngram", &self.ngram)
            .field("canaries", &self.canaries.len())
            .field("judge", &self.judge.is_some())
            .field("judge_timeout", &self.judge_timeout)
            .field("budget", &self.budget.budget())
            .finish()
    }
}

impl QualityGateBuilder {
    /// Whether the built gate runs (`false` builds [`QualityGate::off`], e.g. for `--gate off`).
    pub fn enabled(mut self, on: bool) -> Self {
        self.enabled = on;
        self
    }

    /// The agent's system prompt, for the verbatim-fragment check, and the overlap threshold in
    /// `(0, 1]` (0.5 is a good start): the fraction of a window of up to 16 consecutive
    /// candidate n-grams that must also occur in the prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>, threshold: f64) -> Self {
        self.system_prompt = Some((prompt.into(), threshold));
        self
    }

    /// The n-gram length of the system-prompt check, in words (default 6, at most 32).
    pub fn ngram(mut self, words: usize) -> Self {
        self.ngram = words;
        self
    }

    /// A canary token planted in the system prompt: any reply containing it is blocked.
    pub fn canary(mut self, token: impl Into<String>) -> Self {
        self.canaries.push(token.into());
        self
    }

    /// The judge that rules on flagged candidates (none by default: low findings are then sent
    /// and flagged, high ones fail closed).
    pub fn judge(mut self, judge: impl Judge) -> Self {
        self.judge = Some(Box::new(judge));
        self
    }

    /// The judge's hard time bound (default 800 ms).
    pub fn judge_timeout(mut self, bound: Duration) -> Self {
        self.judge_timeout = bound;
        self
    }

    /// The per-agent judge budget (default unlimited), accounted by this gate alone.
    pub fn judge_budget(mut self, budget: JudgeBudget) -> Self {
        self.budget = SharedBudget::new(budget);
        self
    }

    /// The per-agent judge budget and its accounting, shared with every other holder of a
    /// clone (the ingress classifier's judge, another gate): a call any of them makes counts
    /// for all. Replaces [`judge_budget`](Self::judge_budget).
    pub fn shared_budget(mut self, budget: SharedBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Compiles the heuristics once.
    ///
    /// # Errors
    ///
    /// [`GateConfigError::Ngram`] when the n-gram length is not 1 to 32 words,
    /// [`GateConfigError::JudgeTimeout`] when the judge time bound is zero,
    /// [`GateConfigError::EmptyCanary`] when a canary is empty or whitespace,
    /// [`GateConfigError::Threshold`] when the overlap threshold is outside `(0, 1]`, and (for a
    /// gate that is on) [`GateConfigError::Compile`] when the heuristics do not compile.
    pub fn build(self) -> Result<QualityGate, GateConfigError> {
        if !(1..=overlap::MAX_NGRAM).contains(&self.ngram) {
            return Err(GateConfigError::Ngram(self.ngram));
        }
        if self.judge_timeout.is_zero() {
            return Err(GateConfigError::JudgeTimeout);
        }
        if self.canaries.iter().any(|c| c.trim().is_empty()) {
            return Err(GateConfigError::EmptyCanary);
        }
        let prompt = match &self.system_prompt {
            Some((_, threshold)) if !(*threshold > 0.0 && *threshold <= 1.0) => {
                return Err(GateConfigError::Threshold(*threshold));
            }
            Some((prompt, threshold)) => PromptOverlap::new(prompt, self.ngram, *threshold),
            None => None,
        };
        if !self.enabled {
            return Ok(QualityGate::off());
        }
        let heuristics = Heuristics::compile(&self.canaries, prompt)
            .map_err(|e| GateConfigError::Compile(e.to_string()))?;
        Ok(QualityGate::on(GateInner {
            heuristics,
            judge: self.judge,
            judge_timeout: self.judge_timeout,
            budget: self.budget,
        }))
    }
}
