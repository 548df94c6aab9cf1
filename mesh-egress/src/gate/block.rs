//! The block check: the gate on one block of a streamed answer, read together with what was
//! already delivered, and the only way a [`Block<Unchecked>`] becomes a [`Block<Checked>`].

use std::ops::Range;

use crate::block::{Block, Checked, Unchecked};
use crate::egress::{Attribution, EgressError};
use crate::gate::decide::{Decision, decide, decide_rest, needs_judge};
use crate::gate::evaluation::{GateBlocked, GateInput, GateVerdict};
use crate::gate::finding::{Confidence, Finding, Rule};
use crate::gate::judge::JudgeOutcome;
use crate::gate::sanitise::strip;
use crate::gate::{QualityGate, record};
use crate::turn::Turn;

/// How much of the delivered text (its end, in bytes) the block check reads before the new
/// block. A failure shape or a prompt echo that straddles a cut is seen whole, while the work
/// per block stays bounded: a hostile stream of a thousand blocks is not rescanned from its
/// start each time (that would be quadratic in the reply).
pub(crate) const BLOCK_CONTEXT: usize = 8 * 1024;

/// The gate's account of one streamed block: the verdict, the findings that touch the block,
/// the judge's part, and the checked block (unless it was blocked).
#[derive(Debug)]
pub struct BlockEvaluation {
    verdict: GateVerdict,
    findings: Vec<Finding>,
    judge: Option<JudgeOutcome>,
    checked: Option<Block<Checked>>,
    attribution: Attribution,
}

impl BlockEvaluation {
    /// What the gate decided about the block.
    pub fn verdict(&self) -> GateVerdict {
        self.verdict
    }

    /// The findings that touch the new block (spans in the text the gate read: the delivered
    /// context followed by the block).
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// How the judge's part ended, if it was asked.
    pub fn judge(&self) -> Option<JudgeOutcome> {
        self.judge
    }

    /// The block to deliver, or a semantic [`EgressError`] (cause: [`GateBlocked`]) that stops
    /// the stream: nothing after a blocked block is sent, the rest goes to Layer C. A checked
    /// block may be blank (a reasoning block stripped whole): there is nothing to send, and
    /// the stream goes on.
    ///
    /// # Errors
    ///
    /// A semantic [`EgressError`] (cause: [`GateBlocked`], naming the rules that fired) when
    /// the gate blocked the block (retryable as its verdict says) or left no checked block.
    pub fn into_result(self) -> Result<Block<Checked>, EgressError> {
        match (self.verdict, self.checked) {
            (GateVerdict::Blocked { .. }, _) | (_, None) => {
                let retryable = match self.verdict {
                    GateVerdict::Blocked { retryable } => retryable,
                    _ => true,
                };
                let mut rules: Vec<&'static str> =
                    self.findings.iter().map(Finding::rule_id).collect();
                rules.dedup();
                Err(
                    EgressError::semantic(GateBlocked { rules }, self.attribution)
                        .with_retryable(retryable),
                )
            }
            (_, Some(block)) => Ok(block),
        }
    }
}

impl QualityGate {
    /// The block check: `block` is the next block of a streamed answer, `delivered` everything
    /// of that answer that already reached the person. The gate reads the end of `delivered`
    /// (8 KiB) followed by the block, and judges the findings that touch the
    /// block with the same verdict table as [`evaluate`](Self::evaluate). A gate that is off
    /// passes the block unchanged, doing no work.
    ///
    /// # Errors
    ///
    /// A semantic [`EgressError`] (cause: [`GateBlocked`]) when the gate blocks `block`: nothing
    /// after it is sent, the rest goes to Layer C. A gate that is off never fails.
    ///
    /// ```
    /// use mesh_egress::block::Block;
    /// use mesh_egress::gate::QualityGate;
    /// use mesh_egress::{Attribution, Turn};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let gate = QualityGate::builder().build()?;
    /// let turn = Turn::new(Attribution::new("ops", "c1", "r1"));
    /// let first = Block::new("The deploy is rolling out.\n\n", turn.attribution().clone(), 0);
    /// let checked = gate.check_block(&turn, "Is the deploy done?", "", first).await;
    /// assert!(checked.is_ok());
    /// let leak = Block::new("LLM request failed: 503 Service Unavailable\n", turn.attribution().clone(), 1);
    /// let blocked = gate.check_block(&turn, "Is the deploy done?", "The deploy is rolling out.\n\n", leak).await;
    /// assert!(blocked.is_err()); // the stream stops here; the rest goes to Layer C
    /// # Ok(()) }
    /// ```
    pub async fn check_block<'a>(
        &self,
        turn: &Turn,
        input: impl Into<GateInput<'a>>,
        delivered: &str,
        block: Block<Unchecked>,
    ) -> Result<Block<Checked>, EgressError> {
        self.evaluate_block(turn, input, delivered, block)
            .await
            .into_result()
    }

    /// Runs the block check and reports everything it did (see
    /// [`check_block`](Self::check_block)).
    pub async fn evaluate_block<'a>(
        &self,
        turn: &Turn,
        input: impl Into<GateInput<'a>>,
        delivered: &str,
        block: Block<Unchecked>,
    ) -> BlockEvaluation {
        let attribution = block.attribution().clone();
        let Some(inner) = &self.inner else {
            let text = block.text().to_owned();
            return BlockEvaluation {
                verdict: GateVerdict::Pass,
                findings: Vec::new(),
                judge: None,
                checked: Some(block.into_checked(text)),
                attribution,
            };
        };
        let input = input.into();
        let context = tail(delivered, BLOCK_CONTEXT);
        let offset = context.len();
        let read = format!("{context}{}", block.text());
        let touching = |found: Vec<Finding>| -> Vec<Finding> {
            found.into_iter().filter(|f| f.span.end > offset).collect()
        };
        let mut findings = touching(inner.heuristics.scan(
            &read,
            input.user_message,
            input.canaries,
        ));
        if findings.is_empty() {
            let text = block.text().to_owned();
            return BlockEvaluation {
                verdict: GateVerdict::Pass,
                findings,
                judge: None,
                checked: Some(block.into_checked(text)),
                attribution,
            };
        }
        let judge = if needs_judge(&findings) {
            Some(inner.run_judge(turn, &read, &findings, input).await)
        } else {
            None
        };
        let (verdict, checked) = match decide(&findings, judge) {
            Decision::Verdict(verdict) => {
                let text = block.text().to_owned();
                (verdict, verdict.sends().then(|| block.into_checked(text)))
            }
            // Tool-call markup mid-stream: what was delivered stays, the rest is Layer C's.
            Decision::Strip if findings.iter().any(stops_the_stream) => {
                (GateVerdict::Blocked { retryable: true }, None)
            }
            Decision::Strip => {
                let spans: Vec<Range<usize>> = findings
                    .iter()
                    .filter(|f| f.confidence() == Confidence::High)
                    .map(|f| f.span.start.saturating_sub(offset)..f.span.end - offset)
                    .collect();
                let rest = strip(block.text(), &spans);
                let again = if rest.trim().is_empty() {
                    Vec::new()
                } else {
                    touching(inner.heuristics.scan(
                        &format!("{context}{rest}"),
                        input.user_message,
                        input.canaries,
                    ))
                };
                // Unlike a whole reply, a block stripped to nothing (a reasoning block of its
                // own) is not a failure: the answer follows in the next blocks.
                let verdict = decide_rest(&again, false, judge);
                findings.extend(again);
                (verdict, verdict.sends().then(|| block.into_checked(rest)))
            }
        };
        record(turn, verdict, &findings, judge);
        BlockEvaluation {
            verdict,
            findings,
            judge,
            checked,
            attribution,
        }
    }
}

/// A finding that ends a streamed answer even though it could be cut out of a whole one: a
/// tool call written as text (the model stopped answering to call a tool).
fn stops_the_stream(finding: &Finding) -> bool {
    finding.confidence() == Confidence::High && finding.rule() == Rule::ToolCallMarkup
}

/// The last `max` bytes of `text` (at a character boundary).
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn() -> Turn {
        Turn::new(Attribution::new("a", "c", "r"))
    }

    fn block(text: &str, index: usize) -> Block<Unchecked> {
        Block::new(text, turn().attribution().clone(), index)
    }

    #[tokio::test]
    async fn a_gate_that_is_off_passes_the_block_unchanged() {
        let text = "LLM request failed: 503\n";
        let checked = QualityGate::off()
            .check_block(&turn(), "", "", block(text, 0))
            .await
            .expect("off passes");
        assert_eq!(checked.text(), text);
        assert_eq!(checked.index(), 0);
    }

    #[tokio::test]
    async fn failure_text_in_the_block_is_blocked_and_findings_only_in_the_delivered_text_are_not_judged_again()
     {
        let gate = QualityGate::builder().build().expect("gate");
        let turn = turn();
        let blocked = gate
            .evaluate_block(
                &turn,
                "",
                "Working on it.\n\n",
                block("LLM request failed: 503\n", 1),
            )
            .await;
        assert!(matches!(blocked.verdict(), GateVerdict::Blocked { .. }));
        assert!(blocked.into_result().is_err());

        // A finding only in the delivered text was judged when its own block went: a clean next
        // block is not judged again for it.
        let clean = gate
            .evaluate_block(
                &turn,
                "",
                "Your log says: LLM request failed: 503\n\n",
                block("That means the upstream was down.\n", 2),
            )
            .await;
        assert_eq!(clean.verdict(), GateVerdict::Pass);
        assert!(clean.findings().is_empty());
    }

    #[tokio::test]
    async fn a_reasoning_block_is_stripped_whole_and_the_stream_goes_on() {
        let gate = QualityGate::builder().build().expect("gate");
        let checked = gate
            .check_block(
                &turn(),
                "",
                "",
                block("<think>The user is annoyed; keep it short.</think>\n\n", 0),
            )
            .await
            .expect("nothing left to send is not a failure");
        assert!(checked.is_blank());
    }

    #[test]
    fn the_context_is_the_end_of_the_delivered_text_at_a_char_boundary() {
        assert_eq!(tail("abc", 10), "abc");
        assert_eq!(tail("aé", 1), "");
        assert_eq!(tail("aéb", 2), "b");
    }
}
