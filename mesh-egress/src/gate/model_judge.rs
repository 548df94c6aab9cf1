//! [`ModelJudge`]: the judge as one fast-model call through Layer A's [`Router`].

use std::fmt;
use std::future::Future;

use super::judge::{Judge, JudgeError, JudgeRequest, JudgeVerdict};
use crate::model::fast::FastModel;
use crate::model::{ModelConnector, Router};
use crate::turn::Turn;

/// Asks a fast model, through a [`Router`], whether a flagged candidate is fit to send.
///
/// It rides the same plumbing as every other model call: the router's retries, deadlines,
/// fallback and ledger report. Its failures (an [`EgressError`](crate::EgressError) from the
/// router, an answer that is neither `ALLOW` nor `BLOCK`) become a [`JudgeError`], which the
/// gate turns into its defined judge-failure behaviour — never a user-facing error.
///
/// ```
/// use mesh_egress::gate::{ModelJudge, QualityGate};
/// use mesh_egress::model::{RetryConfig, Router};
/// use mesh_egress::testing::{ScriptedConnector, Step};
/// let fast = Router::new(
///     ScriptedConnector::new().otherwise(Step::answer("BLOCK")),
///     "judge-model",
///     RetryConfig::default(),
/// );
/// let gate = QualityGate::builder().judge(ModelJudge::new(fast)).build().unwrap();
/// assert!(gate.is_on());
/// ```
pub struct ModelJudge<C> {
    fast: FastModel<C>,
}

impl<C: ModelConnector + 'static> ModelJudge<C> {
    /// A judge asking `router`'s models.
    pub fn new(router: Router<C>) -> Self {
        Self {
            fast: FastModel::new(router),
        }
    }

    /// The router the judge asks.
    pub fn router(&self) -> &Router<C> {
        self.fast.router()
    }
}

impl<C> fmt::Debug for ModelJudge<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelJudge").finish_non_exhaustive()
    }
}

impl<C: ModelConnector + 'static> Judge for ModelJudge<C> {
    fn judge(
        &self,
        turn: &Turn,
        request: &JudgeRequest<'_>,
    ) -> impl Future<Output = Result<JudgeVerdict, JudgeError>> + Send {
        let prompt = request.prompt();
        async move {
            let answer = self
                .fast
                .ask(turn, JudgeRequest::instruction(), prompt)
                .await?;
            JudgeVerdict::parse(&answer)
        }
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::egress::Attribution;
    use crate::gate::{Finding, QualityGate};
    use crate::model::RetryConfig;
    use crate::testing::{ScriptedConnector, Step};

    fn judge_answering(step: Step) -> (ModelJudge<ScriptedConnector>, ScriptedConnector) {
        let connector = ScriptedConnector::new().otherwise(step);
        let router = Router::new(
            connector.clone(),
            "judge-model",
            RetryConfig::default().with_attempts(1),
        );
        (ModelJudge::new(router), connector)
    }

    fn findings() -> Vec<Finding> {
        QualityGate::builder()
            .build()
            .expect("gate")
            .scan("<thinking>plan the reply</thinking>Here you go.", "hi")
    }

    #[tokio::test(start_paused = true)]
    async fn the_model_answer_becomes_the_verdict() {
        let turn = Turn::new(Attribution::new("a", "c", "r"));
        let found = findings();
        let request = JudgeRequest::new("Here you go.", &found, "hi", turn.attribution());
        for (answer, verdict) in [
            ("ALLOW", JudgeVerdict::Allow),
            ("BLOCK", JudgeVerdict::Block),
        ] {
            let (judge, connector) = judge_answering(Step::answer(answer));
            assert_eq!(
                judge.judge(&turn, &request).await.expect("verdict"),
                verdict
            );
            let calls = connector.calls();
            assert_eq!(calls.len(), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_router_failure_is_a_judge_error_not_a_verdict() {
        let turn = Turn::new(Attribution::new("a", "c", "r"));
        let found = findings();
        let request = JudgeRequest::new("Here you go.", &found, "hi", turn.attribution());
        let (judge, _) = judge_answering(Step::status(401));
        assert!(judge.judge(&turn, &request).await.is_err());
        let (judge, _) = judge_answering(Step::answer("maybe?"));
        assert!(judge.judge(&turn, &request).await.is_err());
    }
}
