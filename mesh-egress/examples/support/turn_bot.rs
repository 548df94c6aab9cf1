//! `turn` on the front door ([`Bot`]): the model's answer (whole, or streamed with
//! `--stream`) from an `#[egress_boundary]` handler, delivered on the bot's one path (gate →
//! render first → commit → send or stream). With `--follow-up` the handler is a registered
//! route, so the bot's in-memory keeper keeps a holding line's promise by re-running **the same
//! handler** (a stream's follow-up delivers only what follows what was shown), and the process
//! waits for it ([`Bot::promises_kept`]).

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;

use mesh_egress::bot::Sendable;
use mesh_egress::degrade::Mode;
use mesh_egress::model::{OpenAiCompatible, Router};
use mesh_egress::{AgentMessage, AnswerStream, Bot, EgressError, Reply, StreamedReply, Turn};
use mesh_egress::{Attribution, egress_boundary};

use crate::cli::{Surface, chat_request, delivery_failed};

/// The route a `--follow-up` turn registers (its input is the prompt).
const ROUTE: &str = "answer";

/// The model the handlers ask: the router and the system prompt, cheap to clone.
#[derive(Clone)]
pub(crate) struct Model {
    pub(crate) router: Arc<Router<OpenAiCompatible>>,
    pub(crate) system_prompt: Option<Arc<str>>,
}

impl Model {
    /// Layer A's completion of `prompt`. A tool-only or empty completion is an `EgressError`
    /// (this turn offers no tools), never an empty body.
    async fn complete(&self, turn: &Turn, prompt: &str) -> Result<AgentMessage, EgressError> {
        let request = chat_request(self.system_prompt.as_deref(), prompt);
        self.router
            .complete(turn, &request)
            .await
            .and_then(|completion| completion.into_message(turn))
    }

    /// Layer A's routed stream of `prompt`, owned.
    fn stream(&self, turn: &Turn, prompt: &str) -> AnswerStream {
        let request = chat_request(self.system_prompt.as_deref(), prompt);
        self.router.answer_stream(turn, request)
    }
}

#[egress_boundary(interactive)]
async fn ask(turn: &Turn, model: &Model, prompt: &str) -> Result<AgentMessage, EgressError> {
    model.complete(turn, prompt).await
}

#[egress_boundary(proactive)]
async fn digest(turn: &Turn, model: &Model, prompt: &str) -> Result<AgentMessage, EgressError> {
    model.complete(turn, prompt).await
}

#[egress_boundary(interactive)]
async fn ask_streamed(
    turn: &Turn,
    model: &Model,
    prompt: &str,
) -> Result<AnswerStream, EgressError> {
    Ok(model.stream(turn, prompt))
}

#[egress_boundary(proactive)]
async fn digest_streamed(
    turn: &Turn,
    model: &Model,
    prompt: &str,
) -> Result<AnswerStream, EgressError> {
    Ok(model.stream(turn, prompt))
}

/// The handler for a whole answer, in the turn's mode (a follow-up turn carries the mode of
/// the turn that made the promise).
pub(crate) fn whole(
    model: Model,
) -> impl Fn(Turn, String) -> std::pin::Pin<Box<dyn Future<Output = Reply> + Send>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |turn: Turn, prompt: String| {
        let model = model.clone();
        Box::pin(async move {
            match turn.mode() {
                Mode::Interactive => ask(&turn, &model, &prompt).await,
                Mode::Proactive => digest(&turn, &model, &prompt).await,
            }
        })
    }
}

/// The handler for a streamed answer, in the turn's mode.
pub(crate) fn streamed(
    model: Model,
) -> impl Fn(Turn, String) -> std::pin::Pin<Box<dyn Future<Output = StreamedReply> + Send>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |turn: Turn, prompt: String| {
        let model = model.clone();
        Box::pin(async move {
            match turn.mode() {
                Mode::Interactive => ask_streamed(&turn, &model, &prompt).await,
                Mode::Proactive => digest_streamed(&turn, &model, &prompt).await,
            }
        })
    }
}

/// The turn of the command line on `bot`: spoken as `attribution`, in `mode`, the person's
/// message (the gate's input) being the prompt.
pub(crate) fn turn(
    bot: &Bot,
    address: mesh_egress::Address,
    attribution: Attribution,
    mode: Mode,
    prompt: &str,
) -> Turn {
    bot.turn(address, attribution)
        .with_mode(mode)
        .with_input(prompt)
}

/// Runs `handler` for `prompt` on `bot` and delivers what it gave. Without `--follow-up` a
/// holding line's promise is logged and left (this process exits); with it, the handler is the
/// promise's route and the process waits until the bot's keeper has kept it. Exit 1 with one
/// `error:` line when a delivery failed (the turn's, or the follow-up's).
pub(crate) async fn run<H, Fut, O>(
    bot: &Bot,
    turn: &Turn,
    handler: H,
    prompt: String,
    follow_up: bool,
    target: Surface,
) -> ExitCode
where
    H: Fn(Turn, String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
    O: Sendable,
{
    if !follow_up {
        let reply = handler(turn.clone(), prompt).await;
        let delivery = match bot.send(turn, reply).await {
            Ok(delivery) => delivery,
            Err(error) => return delivery_failed(target, &error),
        };
        tracing::info!(target: "mesh_egress::degrade", outcome = ?delivery.outcome(), mode = turn.mode().as_str(), "turn ended");
        if let Some(commitment) = delivery.promise() {
            // The promise is on the ledger and in the log; without --follow-up this process
            // does not keep it (a long-running bot runs the turn through a route, and keeps it).
            tracing::info!(
                target: "mesh_egress::degrade",
                commitment = %commitment.id(),
                first_delay_ms = u64::try_from(commitment.first_delay().as_millis()).unwrap_or(u64::MAX),
                attempts = commitment.attempts(),
                delivered_bytes = delivery.delivered().len(),
                "holding line sent; follow-up not run (no --follow-up)"
            );
        }
        return ExitCode::SUCCESS;
    }
    let route = bot.route(ROUTE, handler);
    match bot.run(turn, &route, prompt).await {
        Ok(delivery) => {
            tracing::info!(target: "mesh_egress::degrade", outcome = ?delivery.outcome(), kept = delivery.is_kept(), mode = turn.mode().as_str(), "turn ended");
        }
        Err(error) => return delivery_failed(target, &error),
    }
    for ended in bot.promises_kept().await {
        match ended {
            Ok(outcome) => {
                tracing::info!(target: "mesh_egress::degrade", outcome = ?outcome, "follow-up ended");
            }
            Err(error) => return delivery_failed(target, &error),
        }
    }
    ExitCode::SUCCESS
}
