//! [`GateRecord`]: one quality-gate finding and the verdict on it, typed, and its ledger row.

use serde::{Deserialize, Serialize};

use crate::verdict::{Confidence, GateVerdict, JudgeFailure, JudgeOutcome, Rule};

/// A quality-gate finding and the verdict on it: never the finding's text, only which rule
/// fired, how sure it was, what the gate did, the judge's part and where in the candidate.
///
/// Its ledger row keeps the names it always had (`"rule": "reasoning.block"`,
/// `"confidence": "high"`, `"verdict": "send"`, `"review": true`, `"judge": "error"`), so rows
/// written before these fields were typed read back; a blocked row also says whether a re-run
/// could succeed (`"retryable"`), and a judge failure its kind (`"judge_failure"`).
///
/// ```
/// use mesh_egress::ledger::GateRecord;
/// use mesh_egress::verdict::{GateVerdict, Rule};
/// let row = r#"{"rule": "refusal.opener", "confidence": "low", "verdict": "send",
///               "review": true, "judge": "error", "span": [0, 4]}"#;
/// let record: GateRecord = serde_json::from_str(row).unwrap();
/// assert_eq!(record.rule(), Rule::RefusalOpener);
/// assert_eq!(record.verdict(), GateVerdict::Send { review: true });
/// assert_eq!(record.to_string(), "refusal.opener low -> send");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "GateRow", try_from = "GateRow")]
pub struct GateRecord {
    rule: Rule,
    confidence: Confidence,
    verdict: GateVerdict,
    judge: Option<JudgeOutcome>,
    span: Option<(usize, usize)>,
}

impl GateRecord {
    /// The row of one finding of `rule` at `confidence` over `span`, under `verdict`, after the
    /// judge's part `judge` (`None`: not asked).
    #[cfg_attr(not(feature = "gate"), allow(dead_code))] // written by the gate only
    pub(crate) fn new(
        rule: Rule,
        confidence: Confidence,
        verdict: GateVerdict,
        judge: Option<JudgeOutcome>,
        span: (usize, usize),
    ) -> Self {
        Self {
            rule,
            confidence,
            verdict,
            judge,
            span: Some(span),
        }
    }

    /// The heuristic rule that fired.
    pub fn rule(&self) -> Rule {
        self.rule
    }

    /// How sure the finding was (after context from the user's message).
    pub fn confidence(&self) -> Confidence {
        self.confidence
    }

    /// What the gate did with the candidate.
    pub fn verdict(&self) -> GateVerdict {
        self.verdict
    }

    /// Whether the candidate was flagged for offline review.
    pub fn review(&self) -> bool {
        self.verdict.review()
    }

    /// How the judge's part ended, if it was asked.
    pub fn judge(&self) -> Option<JudgeOutcome> {
        self.judge
    }

    /// The byte range of the finding in the candidate (never its text).
    pub fn span(&self) -> Option<(usize, usize)> {
        self.span
    }
}

/// `rule confidence -> verdict`, as an operator reads a gate row.
impl std::fmt::Display for GateRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} -> {}", self.rule, self.confidence, self.verdict)
    }
}

/// A [`GateRecord`] as the ledger stores it.
#[derive(Serialize, Deserialize)]
struct GateRow {
    rule: Rule,
    confidence: Confidence,
    verdict: String,
    review: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retryable: Option<bool>,
    #[serde(default)]
    judge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    judge_failure: Option<JudgeFailure>,
    #[serde(default)]
    span: Option<(usize, usize)>,
}

impl From<GateRecord> for GateRow {
    fn from(record: GateRecord) -> Self {
        let retryable = match record.verdict {
            GateVerdict::Blocked { retryable } => Some(retryable),
            _ => None,
        };
        let judge_failure = match record.judge {
            Some(JudgeOutcome::Error(failure)) => Some(failure),
            _ => None,
        };
        Self {
            rule: record.rule,
            confidence: record.confidence,
            verdict: record.verdict.as_str().to_owned(),
            review: record.verdict.review(),
            retryable,
            judge: record.judge.map(|judge| judge.as_str().to_owned()),
            judge_failure,
            span: record.span,
        }
    }
}

impl TryFrom<GateRow> for GateRecord {
    type Error = UnknownGateName;

    fn try_from(row: GateRow) -> Result<Self, Self::Error> {
        let review = row.review;
        // A blocked row written before `retryable` was: what its rule says.
        let retryable = row.retryable.unwrap_or_else(|| row.rule.retryable());
        let verdict = [
            GateVerdict::Pass,
            GateVerdict::Send { review },
            GateVerdict::Sanitised { review },
            GateVerdict::Blocked { retryable },
        ]
        .into_iter()
        .find(|verdict| verdict.as_str() == row.verdict)
        .ok_or_else(|| UnknownGateName::verdict(&row.verdict))?;
        let judge = match row.judge {
            None => None,
            Some(name) => {
                let failure = row.judge_failure.unwrap_or(JudgeFailure::Unrecorded);
                let judge = [
                    JudgeOutcome::Allow,
                    JudgeOutcome::Block,
                    JudgeOutcome::Timeout,
                    JudgeOutcome::Error(failure),
                    JudgeOutcome::BudgetExhausted,
                    JudgeOutcome::TurnStopped,
                    JudgeOutcome::NoJudge,
                ]
                .into_iter()
                .find(|judge| judge.as_str() == name)
                .ok_or_else(|| UnknownGateName::judge(&name))?;
                Some(judge)
            }
        };
        Ok(Self {
            rule: row.rule,
            confidence: row.confidence,
            verdict,
            judge,
            span: row.span,
        })
    }
}

/// A gate row whose verdict or judge outcome this version does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown gate {what} `{name}`")]
struct UnknownGateName {
    what: &'static str,
    name: String,
}

impl UnknownGateName {
    fn verdict(name: &str) -> Self {
        Self {
            what: "verdict",
            name: name.to_owned(),
        }
    }

    fn judge(name: &str) -> Self {
        Self {
            what: "judge outcome",
            name: name.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_verdict() -> [GateVerdict; 7] {
        [
            GateVerdict::Pass,
            GateVerdict::Send { review: false },
            GateVerdict::Send { review: true },
            GateVerdict::Sanitised { review: false },
            GateVerdict::Sanitised { review: true },
            GateVerdict::Blocked { retryable: false },
            GateVerdict::Blocked { retryable: true },
        ]
    }

    fn every_judge() -> [Option<JudgeOutcome>; 10] {
        [
            None,
            Some(JudgeOutcome::Allow),
            Some(JudgeOutcome::Block),
            Some(JudgeOutcome::Timeout),
            Some(JudgeOutcome::Error(JudgeFailure::Model)),
            Some(JudgeOutcome::Error(JudgeFailure::Unparseable)),
            Some(JudgeOutcome::Error(JudgeFailure::Unavailable)),
            Some(JudgeOutcome::BudgetExhausted),
            Some(JudgeOutcome::TurnStopped),
            Some(JudgeOutcome::NoJudge),
        ]
    }

    #[test]
    fn every_record_reads_back_as_written_under_the_names_rows_always_had() {
        for verdict in every_verdict() {
            for judge in every_judge() {
                let record = GateRecord::new(
                    Rule::ReasoningBlock,
                    Confidence::High,
                    verdict,
                    judge,
                    (3, 9),
                );
                let row = serde_json::to_value(&record).expect("serialize");
                assert_eq!(row["rule"], "reasoning.block");
                assert_eq!(row["confidence"], "high");
                assert_eq!(row["verdict"], verdict.as_str());
                assert_eq!(row["review"], verdict.review());
                assert_eq!(
                    row["judge"],
                    judge.map_or(serde_json::Value::Null, |j| j.as_str().into())
                );
                let back: GateRecord = serde_json::from_value(row).expect("deserialize");
                assert_eq!(back, record);
            }
        }
    }

    #[test]
    fn a_row_written_before_the_fields_were_typed_reads_back() {
        let row = r#"{"rule":"credential.api_key","confidence":"high","verdict":"blocked",
                      "review":false,"judge":"error","span":[1,2]}"#;
        let record: GateRecord = serde_json::from_str(row).expect("an old row");
        assert_eq!(record.rule(), Rule::ApiKey);
        assert_eq!(
            record.verdict(),
            GateVerdict::Blocked { retryable: false },
            "a credential leak is not retryable"
        );
        assert_eq!(
            record.judge(),
            Some(JudgeOutcome::Error(JudgeFailure::Unrecorded))
        );
        let bare = r#"{"rule":"tone.marker","confidence":"low","verdict":"pass","review":false}"#;
        let record: GateRecord = serde_json::from_str(bare).expect("no judge, no span");
        assert_eq!((record.judge(), record.span()), (None, None));
    }

    #[test]
    fn an_unknown_name_is_a_clear_error_not_a_guess() {
        for (row, says) in [
            (
                r#"{"rule":"no.such","confidence":"low","verdict":"pass","review":false}"#,
                "unknown gate rule `no.such`",
            ),
            (
                r#"{"rule":"tone.marker","confidence":"low","verdict":"maybe","review":false}"#,
                "unknown gate verdict `maybe`",
            ),
            (
                r#"{"rule":"tone.marker","confidence":"low","verdict":"pass","review":false,"judge":"shrug"}"#,
                "unknown gate judge outcome `shrug`",
            ),
        ] {
            let error = serde_json::from_str::<GateRecord>(row).expect_err(row);
            assert!(error.to_string().contains(says), "{error}");
        }
    }

    #[test]
    fn every_rule_reads_back_from_its_id() {
        for rule in Rule::ALL {
            assert_eq!(Rule::from_id(rule.id()), Some(*rule));
            let json = serde_json::to_string(rule).expect("serialize");
            assert_eq!(json, format!("\"{}\"", rule.id()));
            assert_eq!(serde_json::from_str::<Rule>(&json).expect("read"), *rule);
        }
    }
}
