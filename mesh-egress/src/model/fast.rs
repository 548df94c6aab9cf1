//! The fast-model plumbing that the egress gate's judge and the ingress classifier share, so
//! neither stands up a parallel stack: one per-agent budget ([`JudgeBudget`], accounted in a
//! [`SharedBudget`] that both may hold), one bounded call ([`bounded_call`]: the budget, a hard
//! time bound and the turn's stop signals), one fenced prompt ([`Fence`]), one strict reading
//! of a one-word answer ([`one_word`]) and one call through Layer A's [`Router`]
//! ([`FastModel`]).
//!
//! A budget spent by one user is spent for the other: give the gate and the ingress classifier
//! clones of the same [`SharedBudget`], and a judge call either makes counts against the agent
//! for both (`clones_draw_on_one_budget_and_fresh_accounts_on_their_own`, below).

// Only the gate's judge and the ingress classifier make fast-model calls.
#![cfg_attr(not(any(feature = "gate", feature = "ingress")), allow(dead_code))]
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::egress::EgressError;
#[cfg(feature = "ingress")]
use crate::future::BoxFuture;
use crate::model::{ChatMessage, ChatRequest, ModelConnector, Router};
use crate::turn::Turn;

/// The default time bound of a fast-model judgement: the specification's "last 200–800 ms" an
/// operator trades for quality.
pub(crate) const DEFAULT_FAST_TIMEOUT: Duration = Duration::from_millis(800);

/// How many judge calls each agent may make: at most `calls` in each `period`-long window. A
/// window opens at the agent's first call and the count resets when it closes (on `tokio::time`'s
/// clock).
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::model::JudgeBudget;
/// let budget = JudgeBudget::per_agent(100, Duration::from_secs(3600));
/// assert_eq!(budget.calls(), Some(100));
/// assert_eq!(JudgeBudget::unlimited().calls(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JudgeBudget {
    limit: Option<(u32, Duration)>,
}

impl JudgeBudget {
    /// At most `calls` judge calls per agent in each `period`.
    pub fn per_agent(calls: u32, period: Duration) -> Self {
        Self {
            limit: Some((calls, period)),
        }
    }

    /// No limit (the default; heuristics already keep the judge off most traffic).
    pub fn unlimited() -> Self {
        Self { limit: None }
    }

    /// The calls allowed per window, if limited.
    pub fn calls(&self) -> Option<u32> {
        self.limit.map(|(calls, _)| calls)
    }

    /// The window length, if limited.
    pub fn period(&self) -> Option<Duration> {
        self.limit.map(|(_, period)| period)
    }
}

impl Default for JudgeBudget {
    fn default() -> Self {
        Self::unlimited()
    }
}

/// How many agents' windows are remembered before all are forgotten (bounds memory).
const BUDGET_MEMORY: usize = 10_000;

/// A [`JudgeBudget`] and what each agent has spent of it, shared by every clone: the gate
/// (`QualityGateBuilder::shared_budget`) and the ingress classifier (`IngressBuilder::shared_budget`)
/// holding clones of one value draw on one budget.
#[derive(Clone, Default)]
pub struct SharedBudget {
    budget: JudgeBudget,
    spent: Arc<Mutex<HashMap<String, (Instant, u32)>>>,
}

impl SharedBudget {
    /// A fresh account for `budget`, nothing spent.
    pub fn new(budget: JudgeBudget) -> Self {
        Self {
            budget,
            spent: Arc::default(),
        }
    }

    /// The budget this account enforces.
    pub fn budget(&self) -> JudgeBudget {
        self.budget
    }

    /// Charges one call to `agent`; `false` when the agent's budget for this window is spent.
    pub fn try_charge(&self, agent: &str) -> bool {
        let Some((calls, period)) = self.budget.limit else {
            return true;
        };
        let now = Instant::now();
        // A panic elsewhere while the lock was held leaves counts that are still counts.
        let mut windows = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        if windows.len() >= BUDGET_MEMORY && !windows.contains_key(agent) {
            windows.clear();
        }
        let window = windows.entry(agent.to_owned()).or_insert((now, 0));
        if now >= window.0 + period {
            *window = (now, 0);
        }
        if window.1 >= calls {
            return false;
        }
        window.1 += 1;
        true
    }
}

impl fmt::Debug for SharedBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBudget")
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// How a [`bounded_call`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Bounded<T> {
    /// The call finished within its bound, with this output.
    Answered(T),
    /// The call did not finish within its time bound (it was dropped, which cancels it).
    Timeout,
    /// The agent's budget was spent; the call was not made.
    BudgetExhausted,
    /// The turn stopped (cancelled, ownership lost, deadline) before or while the call ran.
    TurnStopped,
}

/// Makes one fast-model call the way both judges do: not at all when the turn has already
/// stopped or the agent's budget is spent (the call is charged to
/// `turn.attribution().agent()` before it starts), otherwise `call()` under a hard `timeout`,
/// abandoned the moment the turn stops. The call is only built (`call()` runs) once it is
/// charged.
pub(crate) async fn bounded_call<F, Fut>(
    turn: &Turn,
    budget: &SharedBudget,
    timeout: Duration,
    call: F,
) -> Bounded<Fut::Output>
where
    F: FnOnce() -> Fut,
    Fut: Future,
{
    if turn.is_stopped() {
        return Bounded::TurnStopped;
    }
    if !budget.try_charge(turn.attribution().agent()) {
        return Bounded::BudgetExhausted;
    }
    let call = tokio::time::timeout(timeout, call());
    tokio::select! {
        biased;
        _ = turn.stopped() => Bounded::TurnStopped,
        answer = call => match answer {
            Ok(output) => Bounded::Answered(output),
            Err(_) => Bounded::Timeout,
        },
    }
}

/// How many fresh boundaries are drawn before giving up on one the texts do not contain (a
/// 128-bit random value collides with a given text only by astronomical chance, but a draw
/// a text happens to contain must not be used).
const BOUNDARY_DRAWS: usize = 8;

/// A per-request random boundary that fences untrusted text inside a judge's prompt: each block
/// opens with `BEGIN-<LABEL>-<boundary>` and closes with `END-<LABEL>-<boundary>`, and a text
/// cannot close its block early because it cannot know the boundary.
#[derive(Clone, Copy)]
pub(crate) struct Fence {
    boundary: u128,
}

impl Fence {
    /// Draws 128 random bits that none of `texts` contains as 32 lowercase hex digits.
    pub(crate) fn draw(texts: &[&str]) -> Self {
        let mut boundary = fastrand::u128(..);
        for _ in 1..BOUNDARY_DRAWS {
            let hex = format!("{boundary:032x}");
            if !texts.iter().any(|text| text.contains(&hex)) {
                break;
            }
            boundary = fastrand::u128(..);
        }
        Self { boundary }
    }

    /// The boundary: 32 lowercase hex digits.
    pub(crate) fn boundary(&self) -> String {
        format!("{:032x}", self.boundary)
    }

    /// Appends `text` fenced as a `label` block (`BEGIN-label-b`, the text, `END-label-b`).
    pub(crate) fn push(&self, out: &mut String, label: &str, text: &str) {
        let b = self.boundary();
        for (edge, body) in [("BEGIN-", None), ("END-", Some(text))] {
            if let Some(body) = body {
                out.push_str(body);
                out.push('\n');
            }
            out.push_str(edge);
            out.push_str(label);
            out.push('-');
            out.push_str(&b);
            out.push('\n');
        }
    }
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The boundary is what keeps fenced text in its block; it stays out of logs.
        f.debug_struct("Fence").finish_non_exhaustive()
    }
}

/// The word a judge answered, or `None` when the answer is not exactly one word: surrounding
/// whitespace, Markdown emphasis (`*`, `_`, `` ` ``) and quotes are removed, then one full stop.
/// Anything else (two words, a sentence, a word and a reason) is not an answer, so text that
/// steered a judge into rambling cannot win by its first word.
pub(crate) fn one_word(answer: &str) -> Option<&str> {
    let wrap = |c: char| matches!(c, '*' | '_' | '`' | '"' | '\'') || c.is_whitespace();
    let word = answer.trim_matches(wrap);
    let word = word.strip_suffix('.').unwrap_or(word).trim_matches(wrap);
    let clean = !word.is_empty() && word.chars().all(char::is_alphanumeric);
    clean.then_some(word)
}

/// The most tokens a judge may answer with: one word, with room for a tokenizer that splits it.
const MAX_ANSWER_TOKENS: u32 = 4;

/// One fast-model question through Layer A's [`Router`]: a system instruction and a user
/// prompt, at temperature 0, answered in a few tokens. It rides the same plumbing as every
/// other model call (retries, deadlines, fallback, the ledger's recovery report); its failure
/// is the router's [`EgressError`], which each judge turns into its own defined fallback.
pub(crate) struct FastModel<C> {
    router: Router<C>,
    max_tokens: u32,
}

impl<C: ModelConnector + 'static> FastModel<C> {
    /// Asks `router`'s models.
    pub(crate) fn new(router: Router<C>) -> Self {
        Self {
            router,
            max_tokens: MAX_ANSWER_TOKENS,
        }
    }

    /// The router asked (the gate's model judge reads it).
    #[cfg_attr(not(feature = "gate"), allow(dead_code))]
    pub(crate) fn router(&self) -> &Router<C> {
        &self.router
    }

    /// Asks one question: `instruction` as the system message, `prompt` as the user message.
    /// The answer's text (empty when the model sent none).
    pub(crate) async fn ask(
        &self,
        turn: &Turn,
        instruction: &str,
        prompt: String,
    ) -> Result<String, EgressError> {
        let request = ChatRequest::new(vec![
            ChatMessage::system(instruction),
            ChatMessage::user(prompt),
        ])
        .with_temperature(0.0)
        .with_max_tokens(self.max_tokens);
        let completion = self.router.complete(turn, request).await?;
        Ok(completion.content.unwrap_or_default())
    }
}

impl<C> fmt::Debug for FastModel<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FastModel")
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

/// The dyn-compatible face of [`FastModel`], so a holder needs no connector type parameter.
#[cfg(feature = "ingress")]
pub(crate) trait DynFastModel: Send + Sync {
    fn ask_boxed<'a>(
        &'a self,
        turn: &'a Turn,
        instruction: &'a str,
        prompt: String,
    ) -> BoxFuture<'a, Result<String, EgressError>>;
}

#[cfg(feature = "ingress")]
impl<C: ModelConnector + 'static> DynFastModel for FastModel<C> {
    fn ask_boxed<'a>(
        &'a self,
        turn: &'a Turn,
        instruction: &'a str,
        prompt: String,
    ) -> BoxFuture<'a, Result<String, EgressError>> {
        Box::pin(self.ask(turn, instruction, prompt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::Attribution;

    fn turn(agent: &str) -> Turn {
        Turn::new(Attribution::new(agent, "c", "r"))
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_resets_exactly_one_period_after_the_first_call() {
        let budget = SharedBudget::new(JudgeBudget::per_agent(2, Duration::from_secs(60)));
        assert!(budget.try_charge("a"));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(budget.try_charge("a"));
        assert!(!budget.try_charge("a"));
        assert!(budget.try_charge("b"), "budgets are per agent");
        tokio::time::sleep(Duration::from_millis(49_999)).await;
        assert!(!budget.try_charge("a"), "still inside the window");
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(budget.try_charge("a"), "a new window at exactly 60 s");
    }

    #[test]
    fn a_zero_budget_never_calls_the_judge() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let budget = SharedBudget::new(JudgeBudget::per_agent(0, Duration::from_secs(1)));
            assert!(!budget.try_charge("a"));
        });
    }

    #[tokio::test(start_paused = true)]
    async fn clones_draw_on_one_budget_and_fresh_accounts_on_their_own() {
        let one = SharedBudget::new(JudgeBudget::per_agent(1, Duration::from_secs(60)));
        let clone = one.clone();
        let other = SharedBudget::new(one.budget());
        assert!(clone.try_charge("a"));
        assert!(!one.try_charge("a"), "the clone spent it");
        assert!(other.try_charge("a"), "a fresh account has its own");
    }

    #[tokio::test(start_paused = true)]
    async fn a_bounded_call_ends_at_its_time_bound_exactly() {
        let start = Instant::now();
        let outcome = bounded_call(
            &turn("a"),
            &SharedBudget::default(),
            Duration::from_millis(800),
            std::future::pending::<()>,
        )
        .await;
        assert_eq!(outcome, Bounded::Timeout);
        assert_eq!(Instant::now() - start, Duration::from_millis(800));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_turn_or_a_spent_budget_never_builds_the_call() {
        let stopped = turn("a");
        stopped.cancellation().cancel();
        let built = std::cell::Cell::new(false);
        let outcome = bounded_call(
            &stopped,
            &SharedBudget::default(),
            DEFAULT_FAST_TIMEOUT,
            || {
                built.set(true);
                async {}
            },
        )
        .await;
        assert_eq!(outcome, Bounded::TurnStopped);
        let spent = SharedBudget::new(JudgeBudget::per_agent(0, Duration::from_secs(1)));
        let outcome = bounded_call(&turn("a"), &spent, DEFAULT_FAST_TIMEOUT, || {
            built.set(true);
            async {}
        })
        .await;
        assert_eq!(outcome, Bounded::BudgetExhausted);
        assert!(!built.get());
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_cancelled_mid_call_stops_the_call_at_once() {
        let t = turn("a");
        let cancel = t.cancellation().clone();
        let start = Instant::now();
        let budget = SharedBudget::default();
        let call = bounded_call(&t, &budget, Duration::from_secs(5), || {
            std::future::pending::<()>()
        });
        let stop = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        };
        let (outcome, ()) = tokio::join!(call, stop);
        assert_eq!(outcome, Bounded::TurnStopped);
        assert_eq!(Instant::now() - start, Duration::from_millis(100));
    }

    #[test]
    fn one_word_takes_only_a_clean_single_word() {
        for (answer, word) in [
            ("YES", "YES"),
            ("no.", "no"),
            ("**Allow**", "Allow"),
            ("  `BLOCK`\n", "BLOCK"),
            ("\"yes\"", "yes"),
        ] {
            assert_eq!(one_word(answer), Some(word), "{answer:?}");
        }
        for answer in [
            "",
            "yes, it is",
            "YES NO",
            "NO\nYES",
            "yes!!",
            "I think yes.",
        ] {
            assert_eq!(one_word(answer), None, "{answer:?}");
        }
    }

    #[test]
    fn a_fence_avoids_a_boundary_the_texts_contain_and_fences_with_it() {
        let one = Fence::draw(&["text"]);
        let two = Fence::draw(&["text"]);
        assert_eq!(one.boundary().len(), 32);
        assert!(one.boundary().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(one.boundary(), two.boundary());
        let mut out = String::new();
        one.push(&mut out, "X", "body");
        assert_eq!(out.matches(one.boundary().as_str()).count(), 2);
        assert!(!format!("{one:?}").contains(&one.boundary()));
    }
}
