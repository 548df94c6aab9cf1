//! The web example's agent: the release assistant, an `#[egress_boundary]` handler streaming
//! Layer A's routed answer, against the scripted fake provider (a fault chosen per message on
//! the page) or, with `MESH_MODEL_BASE_URL`, a real OpenAI-compatible endpoint.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mesh_egress::model::{ChatMessage, ChatRequest, Jitter, Provider, RetryConfig, Router};
use mesh_egress::testing::{ScriptedConnector, Step};
use mesh_egress::web::{ChatInput, ChatRole};
use mesh_egress::{AnswerStream, EgressError, Turn, egress_boundary};
use serde::{Deserialize, Serialize};

const SYSTEM_PROMPT: &str = "You are the release assistant for the payments team. Answer in a \
few short paragraphs of Markdown.";

/// What the scripted provider does to one message, as the page's fault picker names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Fault {
    /// Answers at once.
    #[default]
    Healthy,
    /// Two 503s, then the answer: Layer A retries, invisibly.
    Burst,
    /// The primary stalls after the first paragraph; the fallback continues after it.
    Stall,
    /// Every route is down: Layer C's holding line, and the promise is kept a few seconds
    /// later by the worker.
    Outage,
    /// The model's second paragraph is an internal error message: the gate blocks it, the
    /// first paragraph stays, a holding line promises the rest.
    Leak,
}

/// The page's options: its fault picker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Options {
    #[serde(default)]
    pub(crate) fault: Fault,
}

/// Which model answers.
pub(crate) enum Model {
    /// The scripted fake provider, in memory.
    Scripted(Scripted),
    /// The endpoint the `MESH_MODEL_*` variables name.
    Real(Arc<Router<Provider>>),
}

/// The release assistant's answer to one message of the chat: the model's stream. A promise
/// its holding line makes is kept by the bot re-running this same handler.
#[egress_boundary(interactive)]
pub(crate) async fn answer(
    turn: &Turn,
    model: &Model,
    input: ChatInput<Options>,
) -> Result<AnswerStream, EgressError> {
    let request = request_of(&input);
    Ok(match model {
        Model::Real(router) => router.answer_stream(turn, request),
        Model::Scripted(scripted) => {
            let router = scripted.router(turn.attribution().run(), &input);
            Arc::new(router).answer_stream(turn, request)
        }
    })
}

/// The model request: the system prompt, the chat so far (from the store), the new message.
fn request_of(input: &ChatInput<Options>) -> ChatRequest {
    let mut messages = vec![ChatMessage::system(SYSTEM_PROMPT)];
    for line in input.history() {
        messages.push(match line.role() {
            ChatRole::User => ChatMessage::user(line.text().to_owned()),
            ChatRole::Assistant => ChatMessage::assistant(line.text().to_owned()),
        });
    }
    messages.push(ChatMessage::user(input.text().to_owned()));
    ChatRequest::new(messages).with_max_tokens(crate::cli::max_tokens().unwrap_or(4096))
}

/// The scripted provider: per turn, a script for the fault the page chose. A turn's promise
/// is kept by re-running the same turn (the same run id): the provider has recovered by then.
#[derive(Default)]
pub(crate) struct Scripted {
    faulted: Mutex<HashSet<String>>,
}

/// How many runs the provider remembers having failed (past it, it forgets them all).
const REMEMBERED_RUNS: usize = 10_000;

impl Scripted {
    /// The Layer A settings at demo scale: a fault plays out in about a second.
    pub(crate) fn retry_config() -> RetryConfig {
        RetryConfig::default()
            .with_attempts(3)
            .with_base_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_millis(200))
            .with_attempt_timeout(Some(Duration::from_secs(2)))
            .with_total_deadline(Duration::from_secs(8))
            .with_stream_first_token_timeout(Some(Duration::from_secs(2)))
            .with_stream_idle_timeout(Some(Duration::from_millis(600)))
            .with_fallback_models(["fallback"])
    }

    /// The router for one run of a turn.
    fn router(&self, run: &str, input: &ChatInput<Options>) -> Router<ScriptedConnector> {
        let fault = {
            let mut faulted = self.faulted.lock().unwrap_or_else(PoisonError::into_inner);
            if faulted.len() >= REMEMBERED_RUNS {
                faulted.clear();
            }
            // The first run of a turn meets the fault; its follow-up does not.
            if faulted.insert(run.to_owned()) {
                input.options().fault
            } else {
                Fault::Healthy
            }
        };
        let answer = Answer::to(input.text());
        let connector = match fault {
            Fault::Healthy => ScriptedConnector::new().on("primary", [answer.stream()]),
            Fault::Burst => ScriptedConnector::new().on(
                "primary",
                [Step::status(503), Step::status(503), answer.stream()],
            ),
            Fault::Stall => ScriptedConnector::new()
                .on(
                    "primary",
                    [answer.stream().stall_after(answer.first_paragraph)],
                )
                .on("fallback", [answer.stream()]),
            Fault::Outage => ScriptedConnector::new().otherwise(Step::status(503)),
            Fault::Leak => ScriptedConnector::new().on("primary", [answer.leaking()]),
        };
        Router::new(connector, "primary", Self::retry_config()).with_jitter(Jitter::fixed(0.0))
    }
}

/// The scripted answer to one message, as the chunks a provider streams.
struct Answer {
    chunks: Vec<String>,
    /// How many chunks the first paragraph and its break take.
    first_paragraph: usize,
}

impl Answer {
    fn to(prompt: &str) -> Self {
        // The person's words come back inside the model's text: the renderer escapes them.
        let topic: String = prompt
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(80)
            .collect();
        // The first paragraph is past the cutter's minimum block, so it streams on its own.
        let mut chunks = vec![
            "You asked: ".to_owned(),
            format!("*{}*", topic.trim()),
            " Here is where the release stands, ".to_owned(),
            "from the pipeline and the canary.".to_owned(),
            "\n\n".to_owned(),
        ];
        let first_paragraph = chunks.len() + 1;
        for word in "Release 2.4 is **green**: all 412 tests passed, the canary has been healthy \
                     for an hour, and nothing blocks the deploy.\n\nThe rollout starts at 14:00; \
                     the on-call engineer watches the error budget until it completes."
            .split_inclusive(' ')
        {
            chunks.push(word.to_owned());
        }
        Self {
            chunks,
            first_paragraph,
        }
    }

    fn stream(&self) -> Step {
        Step::chunks(self.chunks.clone()).chunk_delay(Duration::from_millis(15))
    }

    /// The answer with its second paragraph replaced by an internal error the model echoed.
    fn leaking(&self) -> Step {
        let mut chunks: Vec<String> = self.chunks[..self.first_paragraph - 1].to_vec();
        chunks.push(
            "Error: LLM request failed: 503 Service Unavailable (upstream connect error) "
                .to_owned(),
        );
        chunks.push("\n\nTrying again later.".to_owned());
        Step::chunks(chunks).chunk_delay(Duration::from_millis(15))
    }
}
