//! `turn --stream`: the streamed turn through `boundary::stream` (or `stream_live` onto a
//! surface's own stream), then the follow-up for the
//! rest when Layer C promised one and `--follow-up` asks for it.

use std::future::Future;
use std::process::ExitCode;

use mesh_egress::boundary::{StreamPlan, StreamReceipt, rest_after};
use mesh_egress::channel::stream::StreamingChannel;
use mesh_egress::channel::{BoxedChannel, Channel, DeliveryError, PartReceipt, Render, SendError};
#[allow(deprecated)]
use mesh_egress::degrade::{FollowUpRunner, Mode};
use mesh_egress::model::{ChatRequest, OpenAiCompatible, Router};
use mesh_egress::{AgentMessage, CommittedPart, EgressError, Turn};

use crate::cli::{Surface, delivery_failed};

/// A surface's format with nothing behind it: what `--stream` prints to stdout through (the
/// printing [`Tee`](crate::cli::Tee) around it does the printing).
#[derive(Clone)]
pub(crate) struct Rendering(pub(crate) std::sync::Arc<dyn Render>);

impl Channel for Rendering {
    type Renderer = std::sync::Arc<dyn Render>;

    fn renderer(&self) -> &std::sync::Arc<dyn Render> {
        &self.0
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}

/// What the streamed turn needs from the command line.
pub(crate) struct Streamed<'a> {
    pub(crate) turn: &'a Turn,
    pub(crate) mode: Mode,
    pub(crate) plan: &'a StreamPlan<'a>,
    pub(crate) router: &'a Router<OpenAiCompatible>,
    pub(crate) request: &'a ChatRequest,
    pub(crate) target: Surface,
    pub(crate) follow_up: bool,
}

/// Runs the streamed turn block by block (each block a message of its own, through
/// `boundary::stream`); `answer` re-asks the model for a follow-up.
pub(crate) async fn run<F, Fut>(run: Streamed<'_>, channel: &BoxedChannel, answer: F) -> ExitCode
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<AgentMessage, EgressError>>,
{
    let source = run.router.stream(run.turn, run.request);
    let streamed = mesh_egress::boundary::stream(run.turn, run.plan, channel, source).await;
    after(run, streamed, channel, answer).await
}

/// Runs the streamed turn onto the surface's own stream (`boundary::stream_live`).
pub(crate) async fn run_live<C, F, Fut>(run: Streamed<'_>, channel: &C, answer: F) -> ExitCode
where
    C: StreamingChannel,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<AgentMessage, EgressError>>,
{
    let source = run.router.stream(run.turn, run.request);
    let streamed = mesh_egress::boundary::stream_live(run.turn, run.plan, channel, source).await;
    if let Ok(receipt) = &streamed
        && let Some(surface) = receipt.surface()
    {
        tracing::info!(
            target: "mesh_egress::channel",
            mode = surface.mode().as_str(),
            messages = surface.messages().len(),
            calls = surface.calls(),
            previews = surface.previews(),
            rollovers = surface.rollovers(),
            fell_back = surface.fell_back(),
            "surface stream ended"
        );
    }
    after(run, streamed, channel, answer).await
}

/// Logs how the streamed turn ended and keeps Layer C's promise for the rest when asked to.
async fn after<C, F, Fut>(
    run: Streamed<'_>,
    streamed: Result<StreamReceipt, DeliveryError>,
    channel: &C,
    answer: F,
) -> ExitCode
where
    C: Channel,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<AgentMessage, EgressError>>,
{
    let Streamed {
        turn,
        mode,
        plan,
        target,
        follow_up,
        ..
    } = run;
    let mut receipt = match streamed {
        Ok(receipt) => receipt,
        Err(error) => return delivery_failed(target, &error),
    };
    tracing::info!(
        target: "mesh_egress::degrade",
        end = ?receipt.end(),
        blocks = receipt.blocks().len(),
        delivered_bytes = receipt.delivered().len(),
        mode = mode.as_str(),
        "streamed turn ended"
    );
    let Some(commitment) = receipt.take_rest() else {
        return ExitCode::SUCCESS;
    };
    let delivered = receipt.delivered().to_owned();
    if !follow_up {
        tracing::info!(
            target: "mesh_egress::degrade",
            commitment = %commitment.id(),
            first_delay_ms = u64::try_from(commitment.first_delay().as_millis()).unwrap_or(u64::MAX),
            attempts = commitment.attempts(),
            delivered_bytes = delivered.len(),
            "holding line sent; follow-up not run (no --follow-up)"
        );
        let _kept_on_the_ledger = commitment;
        return ExitCode::SUCCESS;
    }
    #[allow(deprecated)]
    let runner = FollowUpRunner::new(plan.policy().clone()).with_ledger(turn.ledger().clone());
    let mut answer = answer;
    let rest = || {
        let answer = answer();
        let delivered = delivered.as_str();
        async move { rest_after(delivered, answer.await?) }
    };
    match runner.run(commitment, channel, rest).await {
        Ok(outcome) => {
            tracing::info!(target: "mesh_egress::degrade", outcome = ?outcome, "follow-up ended");
            ExitCode::SUCCESS
        }
        Err(error) => delivery_failed(target, &error),
    }
}
