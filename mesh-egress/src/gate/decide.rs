//! The verdict table as a pure function: findings and the judge's part in, what to do out.
//!
//! Nothing here reads text, clocks or the judge; [`QualityGate`](crate::gate::QualityGate) runs
//! the heuristics and the judge and hands their results here, so every row of the table in the
//! gate's rustdoc is one unit test below.

use crate::gate::evaluation::GateVerdict;
use crate::gate::finding::{Confidence, Finding};
use crate::gate::judge::JudgeOutcome;

/// What the table says to do with a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The final verdict: the candidate is sent as is, or blocked.
    Verdict(GateVerdict),
    /// Cut the high-confidence reasoning spans and re-gate the rest ([`decide_rest`]).
    Strip,
}

/// Whether the judge is asked at all. Not when nothing was flagged (it never sees a clean
/// reply), and not when a finding it may not downgrade is high (its answer could not change
/// the verdict, so asking would only spend budget and time).
pub(crate) fn needs_judge(findings: &[Finding]) -> bool {
    !findings.is_empty() && !findings.iter().any(judge_proof)
}

/// A high-confidence finding no judge may downgrade: a system-prompt echo, a canary, a
/// credential. See the gate's rustdoc for why this narrows the specification.
fn judge_proof(finding: &Finding) -> bool {
    finding.confidence() == Confidence::High && !finding.rule().judge_may_downgrade()
}

/// The verdict table. `judge` is `None` when the judge was not asked ([`needs_judge`]).
pub(crate) fn decide(findings: &[Finding], judge: Option<JudgeOutcome>) -> Decision {
    if findings.is_empty() {
        return Decision::Verdict(GateVerdict::Pass);
    }
    let high: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.confidence() == Confidence::High)
        .collect();
    let retryable = high.iter().all(|f| f.rule().retryable());
    if high.iter().any(|f| judge_proof(f)) {
        return Decision::Verdict(GateVerdict::Blocked { retryable });
    }
    let judge = judge.unwrap_or(JudgeOutcome::NoJudge);
    if high.is_empty() {
        return Decision::Verdict(match judge {
            JudgeOutcome::Allow => GateVerdict::Send { review: false },
            JudgeOutcome::Block => GateVerdict::Blocked { retryable: true },
            _ => GateVerdict::Send { review: true },
        });
    }
    if judge == JudgeOutcome::Allow {
        // The judge may downgrade a high-confidence block of these rules: it confirmed the
        // flagged text is what the person asked for.
        return Decision::Verdict(GateVerdict::Send { review: false });
    }
    if high.iter().all(|f| f.rule().is_sanitisable()) {
        return Decision::Strip;
    }
    Decision::Verdict(GateVerdict::Blocked { retryable })
}

/// The verdict on a stripped reply: `rest` is what the re-gate found in what is left, `empty`
/// whether nothing is left, `judge` the judge's part on the original candidate.
pub(crate) fn decide_rest(
    rest: &[Finding],
    empty: bool,
    judge: Option<JudgeOutcome>,
) -> GateVerdict {
    if empty {
        return GateVerdict::Blocked { retryable: true };
    }
    let judge = judge.unwrap_or(JudgeOutcome::NoJudge);
    let high: Vec<&Finding> = rest
        .iter()
        .filter(|f| f.confidence() == Confidence::High)
        .collect();
    if !high.is_empty() {
        return GateVerdict::Blocked {
            retryable: high.iter().all(|f| f.rule().retryable()),
        };
    }
    if !rest.is_empty() && judge == JudgeOutcome::Block {
        return GateVerdict::Blocked { retryable: true };
    }
    GateVerdict::Sanitised {
        review: judge.is_failure() || !rest.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    //! One test per row of the verdict table in the gate's rustdoc, each across every judge
    //! outcome the row names.

    use super::*;
    use crate::gate::finding::{Demotion, Rule};

    const TEXT: &str = "0123456789";

    fn high(rule: Rule) -> Finding {
        Finding::new(rule, 0..4, TEXT)
    }

    fn low(rule: Rule) -> Finding {
        let mut f = Finding::new(rule, 0..4, TEXT);
        f.demote(Demotion::QuotedFromUser);
        f
    }

    /// Every way the judge can give no ruling.
    const FAILURES: [JudgeOutcome; 5] = [
        JudgeOutcome::Timeout,
        JudgeOutcome::Error(crate::verdict::JudgeFailure::Model),
        JudgeOutcome::BudgetExhausted,
        JudgeOutcome::TurnStopped,
        JudgeOutcome::NoJudge,
    ];

    fn verdict(v: GateVerdict) -> Decision {
        Decision::Verdict(v)
    }

    #[test]
    fn row_none_is_sent_and_the_judge_is_not_asked() {
        assert!(!needs_judge(&[]));
        assert_eq!(decide(&[], None), verdict(GateVerdict::Pass));
    }

    #[test]
    fn row_low_only() {
        let f = [Finding::new(Rule::RefusalOpener, 0..4, TEXT)];
        assert!(needs_judge(&f));
        assert_eq!(
            decide(&f, Some(JudgeOutcome::Allow)),
            verdict(GateVerdict::Send { review: false })
        );
        assert_eq!(
            decide(&f, Some(JudgeOutcome::Block)),
            verdict(GateVerdict::Blocked { retryable: true })
        );
        for failure in FAILURES {
            assert_eq!(
                decide(&f, Some(failure)),
                verdict(GateVerdict::Send { review: true }),
                "{failure:?}"
            );
        }
    }

    #[test]
    fn row_high_all_reasoning_blocks() {
        for rule in [
            Rule::ReasoningBlock,
            Rule::ReasoningUnclosed,
            Rule::ReasoningStrayClose,
        ] {
            let f = [high(rule), low(Rule::ToneMarker)];
            assert!(needs_judge(&f));
            assert_eq!(
                decide(&f, Some(JudgeOutcome::Allow)),
                verdict(GateVerdict::Send { review: false })
            );
            assert_eq!(decide(&f, Some(JudgeOutcome::Block)), Decision::Strip);
            for failure in FAILURES {
                assert_eq!(decide(&f, Some(failure)), Decision::Strip, "{failure:?}");
            }
        }
    }

    #[test]
    fn row_high_system_prompt_credential_or_canary_is_blocked_whatever_the_judge() {
        for rule in [
            Rule::SystemPromptOverlap,
            Rule::Canary,
            Rule::ApiKey,
            Rule::BotToken,
            Rule::PrivateKey,
        ] {
            // Alone, with reasoning (which alone could be stripped), and with failure text.
            for f in [
                vec![high(rule)],
                vec![high(Rule::ReasoningBlock), high(rule)],
                vec![high(rule), high(Rule::LlmRequestFailed)],
            ] {
                assert!(!needs_judge(&f), "{rule:?}: the judge is not asked");
                for judge in [None, Some(JudgeOutcome::Allow), Some(JudgeOutcome::Block)]
                    .into_iter()
                    .chain(FAILURES.map(Some))
                {
                    assert_eq!(
                        decide(&f, judge),
                        verdict(GateVerdict::Blocked { retryable: false }),
                        "{rule:?} {judge:?}: an allow never downgrades it"
                    );
                }
            }
        }
    }

    #[test]
    fn a_demoted_prompt_echo_or_credential_is_an_ordinary_low_finding() {
        let f = [low(Rule::SystemPromptOverlap), low(Rule::ApiKey)];
        assert!(needs_judge(&f));
        assert_eq!(
            decide(&f, Some(JudgeOutcome::Allow)),
            verdict(GateVerdict::Send { review: false })
        );
    }

    #[test]
    fn row_high_other() {
        for rule in [
            Rule::LlmRequestFailed,
            Rule::StackTrace,
            Rule::ClientError,
            Rule::BareError,
        ] {
            let f = [high(rule), high(Rule::ReasoningBlock)];
            assert!(needs_judge(&f));
            assert_eq!(
                decide(&f, Some(JudgeOutcome::Allow)),
                verdict(GateVerdict::Send { review: false })
            );
            assert_eq!(
                decide(&f, Some(JudgeOutcome::Block)),
                verdict(GateVerdict::Blocked { retryable: true })
            );
            for failure in FAILURES {
                assert_eq!(
                    decide(&f, Some(failure)),
                    verdict(GateVerdict::Blocked { retryable: true }),
                    "{failure:?}"
                );
            }
        }
    }

    #[test]
    fn a_stripped_reply_with_nothing_left_goes_to_layer_c() {
        assert_eq!(
            decide_rest(&[], true, Some(JudgeOutcome::NoJudge)),
            GateVerdict::Blocked { retryable: true }
        );
    }

    #[test]
    fn a_stripped_reply_whose_rest_still_leaks_goes_to_layer_c() {
        assert_eq!(
            decide_rest(
                &[high(Rule::StackTrace)],
                false,
                Some(JudgeOutcome::Timeout)
            ),
            GateVerdict::Blocked { retryable: true }
        );
        assert_eq!(
            decide_rest(&[high(Rule::ApiKey)], false, Some(JudgeOutcome::Block)),
            GateVerdict::Blocked { retryable: false }
        );
    }

    #[test]
    fn a_clean_rest_is_sent_flagged_only_when_the_judge_gave_no_ruling_or_the_rest_has_lows() {
        assert_eq!(
            decide_rest(&[], false, Some(JudgeOutcome::Block)),
            GateVerdict::Sanitised { review: false }
        );
        for failure in FAILURES {
            assert_eq!(
                decide_rest(&[], false, Some(failure)),
                GateVerdict::Sanitised { review: true }
            );
        }
        assert_eq!(
            decide_rest(&[low(Rule::ToneMarker)], false, Some(JudgeOutcome::Block)),
            GateVerdict::Blocked { retryable: true }
        );
        assert_eq!(
            decide_rest(&[low(Rule::ToneMarker)], false, Some(JudgeOutcome::Timeout)),
            GateVerdict::Sanitised { review: true }
        );
    }
}
