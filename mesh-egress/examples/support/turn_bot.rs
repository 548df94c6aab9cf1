//! `turn` on the front door ([`Bot`]): the model's answer (whole, or streamed with
//! `--stream`) from an `#[egress_boundary]` handler, delivered on the bot's one path (gate →
//! render first → commit → send or stream). With `--follow-up` the handler is a registered
//! route, so the bot's in-memory keeper keeps a holding line's promise by re-running **the same
//! handler** (a stream's follow-up delivers only what follows what was shown), and the process
//! waits for it ([`Bot::promises_kept`]). With `--store` the same route's promise is stored
//! (its typed input, [`Asked`], with it) for `worker`, which registers the same route name with
//! the same input type (`turn_store`).

// Shared by `turn` and `worker`: each uses some of it.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;

use mesh_egress::bot::Promise;
use mesh_egress::bot::Sendable;
use mesh_egress::degrade::Mode;
use mesh_egress::model::{Provider, Router};
use mesh_egress::{AgentMessage, AnswerStream, Bot, EgressError, Reply, StreamedReply, Turn};
use mesh_egress::{Attribution, egress_boundary};

use crate::cli::{Surface, chat_request, delivery_failed};

/// The route `turn` registers for a promise it keeps (or stores, with `--store`), and `worker`
/// registers to keep the stored ones: its input is an [`Asked`].
pub(crate) const ROUTE: &str = "turn-example.ask";

/// The route's input, stored with a promise: what the person asked and how the turn was set
/// up, so a follow-up (in this process or in `worker`) asks the model the same request and
/// checks the answer with the same gate.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Asked {
    /// The person's message.
    pub(crate) prompt: String,
    /// `--system-prompt`'s text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) system_prompt: Option<String>,
    /// `--gate on`'s settings (`None`: the gate was off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gate: Option<GateSettings>,
}

/// The gate settings a turn ran with (the stored shape of `turn --store --gate on` since
/// before the front door: `{"judge_model": ...}`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct GateSettings {
    /// `MESH_GATE_JUDGE_MODEL` of the turn (`None`: heuristics only).
    #[serde(default)]
    pub(crate) judge_model: Option<String>,
}

/// The model the handlers ask: the router, cheap to clone.
#[derive(Clone)]
pub(crate) struct Model {
    pub(crate) router: Arc<Router<Provider>>,
}

impl Model {
    /// Layer A's completion of what was asked. A tool-only or empty completion is an
    /// `EgressError` (this turn offers no tools), never an empty body.
    pub(crate) async fn complete(
        &self,
        turn: &Turn,
        asked: &Asked,
    ) -> Result<AgentMessage, EgressError> {
        let request = chat_request(asked.system_prompt.as_deref(), &asked.prompt);
        self.router
            .complete(turn, &request)
            .await
            .and_then(|completion| completion.into_message(turn))
    }

    /// Layer A's routed stream of what was asked, owned.
    fn stream(&self, turn: &Turn, asked: &Asked) -> AnswerStream {
        let request = chat_request(asked.system_prompt.as_deref(), &asked.prompt);
        self.router.answer_stream(turn, request)
    }
}

#[egress_boundary(interactive)]
async fn ask(turn: &Turn, model: &Model, asked: &Asked) -> Result<AgentMessage, EgressError> {
    model.complete(turn, asked).await
}

#[egress_boundary(proactive)]
async fn digest(turn: &Turn, model: &Model, asked: &Asked) -> Result<AgentMessage, EgressError> {
    model.complete(turn, asked).await
}

#[egress_boundary(interactive)]
async fn ask_streamed(
    turn: &Turn,
    model: &Model,
    asked: &Asked,
) -> Result<AnswerStream, EgressError> {
    Ok(model.stream(turn, asked))
}

#[egress_boundary(proactive)]
async fn digest_streamed(
    turn: &Turn,
    model: &Model,
    asked: &Asked,
) -> Result<AnswerStream, EgressError> {
    Ok(model.stream(turn, asked))
}

/// The handler for a whole answer, in the turn's mode (a follow-up turn carries the mode of
/// the turn that made the promise).
pub(crate) fn whole(
    model: Model,
) -> impl Fn(Turn, Asked) -> std::pin::Pin<Box<dyn Future<Output = Reply> + Send>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |turn: Turn, asked: Asked| {
        let model = model.clone();
        Box::pin(async move {
            match turn.mode() {
                Mode::Interactive => ask(&turn, &model, &asked).await,
                Mode::Proactive => digest(&turn, &model, &asked).await,
            }
        })
    }
}

/// The handler for a streamed answer, in the turn's mode.
pub(crate) fn streamed(
    model: Model,
) -> impl Fn(Turn, Asked) -> std::pin::Pin<Box<dyn Future<Output = StreamedReply> + Send>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |turn: Turn, asked: Asked| {
        let model = model.clone();
        Box::pin(async move {
            match turn.mode() {
                Mode::Interactive => ask_streamed(&turn, &model, &asked).await,
                Mode::Proactive => digest_streamed(&turn, &model, &asked).await,
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
    asked: Asked,
    follow_up: bool,
    target: Surface,
) -> ExitCode
where
    H: Fn(Turn, Asked) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
    O: Sendable,
{
    if !follow_up {
        let reply = handler(turn.clone(), asked).await;
        let delivery = match bot.send(turn, reply).await {
            Ok(delivery) => delivery,
            Err(error) => return delivery_failed(target, &error),
        };
        tracing::info!(target: "mesh_egress::degrade", outcome = ?delivery.outcome(), mode = turn.mode().as_str(), "turn ended");
        if let Some(commitment) = delivery.promise().map(Promise::commitment) {
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
    match bot.run(turn, &route, asked).await {
        Ok(delivery) => {
            tracing::info!(target: "mesh_egress::degrade", outcome = ?delivery.outcome(), kept = matches!(delivery.promise(), Some(Promise::Bot(_))), mode = turn.mode().as_str(), "turn ended");
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

#[egress_boundary(interactive)]
async fn ask_checked(
    turn: &Turn,
    model: &Model,
    asked: &Asked,
    gate: Option<&mesh_egress::gate::QualityGate>,
) -> Result<AgentMessage, EgressError> {
    let answer = model.complete(turn, asked).await;
    match gate {
        Some(gate) => gate.check(turn, &asked.prompt, answer).await,
        None => answer,
    }
}

#[egress_boundary(proactive)]
async fn digest_checked(
    turn: &Turn,
    model: &Model,
    asked: &Asked,
    gate: Option<&mesh_egress::gate::QualityGate>,
) -> Result<AgentMessage, EgressError> {
    let answer = model.complete(turn, asked).await;
    match gate {
        Some(gate) => gate.check(turn, &asked.prompt, answer).await,
        None => answer,
    }
}

/// The handler `worker` registers under [`ROUTE`]: [`whole`]'s answer, checked by the gate the
/// promise's turn ran, rebuilt from the stored settings ([`Asked::gate`]). The worker's bot has
/// no gate of its own (each stored promise carries its turn's), so the check is the handler's.
/// A streamed turn's promise is kept with a whole answer too: the bot delivers only what
/// follows what was shown.
pub(crate) fn checked(
    model: Model,
    models: crate::cli::Models,
) -> impl Fn(Turn, Asked) -> std::pin::Pin<Box<dyn Future<Output = Reply> + Send>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |turn: Turn, asked: Asked| {
        let model = model.clone();
        let gate = asked.gate.as_ref().map(|gate| {
            crate::cli::stored_gate(
                &models,
                asked.system_prompt.as_deref(),
                gate.judge_model.clone(),
            )
        });
        Box::pin(async move {
            match turn.mode() {
                Mode::Interactive => ask_checked(&turn, &model, &asked, gate.as_ref()).await,
                Mode::Proactive => digest_checked(&turn, &model, &asked, gate.as_ref()).await,
            }
        })
    }
}
