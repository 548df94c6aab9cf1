//! [`ScriptedConnector`]: a [`ModelConnector`] that plays a script of outcomes, one per call.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::{ChatRequest, Completion, ModelConnector, ModelError};

type MakeError = Arc<dyn Fn() -> ModelError + Send + Sync>;

#[derive(Clone)]
pub(super) enum Action {
    Answer(Completion),
    Fail(MakeError),
    Stall,
}

/// One scripted outcome: answer, fail, or never answer, optionally after a delay
/// (`tokio::time`, so paused-time tests see exact instants).
///
/// The one scripting vocabulary for model-provider fakes: a `Step` also converts into the
/// loopback [`FakeResponse`](super::FakeResponse) that plays the same outcome over HTTP (an
/// answer as a chat completion, a failure as its status, code and `retry-after-ms`, a reset
/// as a connection closed mid-response, a stall as a request never answered).
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::testing::Step;
/// let script = [
///     Step::status(503),
///     Step::rate_limited(Duration::from_secs(2)),
///     Step::stall(),
///     Step::answer("hello").after(Duration::from_millis(300)),
/// ];
/// # let _ = script;
/// ```
#[derive(Clone)]
pub struct Step {
    pub(super) delay: Option<Duration>,
    pub(super) action: Action,
}

impl Step {
    fn new(action: Action) -> Self {
        Self {
            delay: None,
            action,
        }
    }

    /// Answers with `text`.
    pub fn answer(text: impl Into<String>) -> Self {
        Self::new(Action::Answer(Completion::text("scripted", text)))
    }

    /// Answers with `completion` (e.g. one with tool calls, or an empty one).
    pub fn completion(completion: Completion) -> Self {
        Self::new(Action::Answer(completion))
    }

    /// Answers with no text and no tool call (an empty completion).
    pub fn empty() -> Self {
        Self::new(Action::Answer(Completion {
            model: "scripted".to_owned(),
            content: None,
            tool_calls: Vec::new(),
            finish_reason: Some("stop".to_owned()),
        }))
    }

    /// Fails with the error `make` builds (called each time the step plays).
    pub fn fail(make: impl Fn() -> ModelError + Send + Sync + 'static) -> Self {
        Self::new(Action::Fail(Arc::new(make)))
    }

    /// Fails with HTTP `status`.
    pub fn status(status: u16) -> Self {
        Self::fail(move || ModelError::status(status))
    }

    /// Fails with HTTP `status` and the provider error `code`.
    pub fn status_with_code(status: u16, code: &'static str) -> Self {
        Self::fail(move || ModelError::status(status).with_code(code))
    }

    /// Fails with a 429 asking to wait `retry_after`.
    pub fn rate_limited(retry_after: Duration) -> Self {
        Self::fail(move || ModelError::status(429).with_retry_after(retry_after))
    }

    /// Fails as if the connection were reset.
    pub fn connection_reset() -> Self {
        Self::fail(|| ModelError::connection("connection reset by peer (scripted)"))
    }

    /// Never answers: the call stalls until the Router's bound drops it.
    pub fn stall() -> Self {
        Self::new(Action::Stall)
    }

    /// Plays this step after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    async fn play(self, model: &str) -> Result<Completion, ModelError> {
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        match self.action {
            Action::Answer(mut completion) => {
                model.clone_into(&mut completion.model);
                Ok(completion)
            }
            Action::Fail(make) => Err(make()),
            Action::Stall => std::future::pending().await,
        }
    }
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let action = match &self.action {
            Action::Answer(_) => "answer",
            Action::Fail(_) => "fail",
            Action::Stall => "stall",
        };
        f.debug_struct("Step")
            .field("delay", &self.delay)
            .field("action", &action)
            .finish()
    }
}

/// One call the connector received.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The model asked.
    pub model: String,
    /// When the call started (`tokio::time`).
    pub at: Instant,
    /// How many messages the request carried.
    pub messages: usize,
}

#[derive(Default)]
struct Script {
    per_model: HashMap<String, VecDeque<Step>>,
    any: VecDeque<Step>,
    otherwise: Option<Step>,
    calls: Vec<Call>,
}

/// A [`ModelConnector`] that plays scripted [`Step`]s: first the model's own script, then the
/// shared one, then the `otherwise` step; with none left the call fails with a terminal
/// `invalid_request` error, so a test that runs off its script notices. Every call is recorded
/// with its instant.
///
/// ```
/// use mesh_egress::model::{ChatRequest, ModelConnector};
/// use mesh_egress::testing::{ScriptedConnector, Step};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let connector = ScriptedConnector::new().on("m", [Step::status(503), Step::answer("ok")]);
/// assert!(connector.complete("m", &ChatRequest::default()).await.is_err());
/// assert!(connector.complete("m", &ChatRequest::default()).await.is_ok());
/// assert_eq!(connector.calls().len(), 2);
/// # }
/// ```
#[derive(Clone, Default)]
pub struct ScriptedConnector {
    script: Arc<Mutex<Script>>,
}

impl ScriptedConnector {
    /// A connector with an empty script.
    pub fn new() -> Self {
        Self::default()
    }

    fn edit(self, f: impl FnOnce(&mut Script)) -> Self {
        f(&mut self.lock());
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends `steps` to `model`'s script.
    pub fn on(self, model: &str, steps: impl IntoIterator<Item = Step>) -> Self {
        self.edit(|s| {
            s.per_model
                .entry(model.to_owned())
                .or_default()
                .extend(steps);
        })
    }

    /// Appends `steps` to the script shared by every model (played in call order).
    pub fn then(self, steps: impl IntoIterator<Item = Step>) -> Self {
        self.edit(|s| s.any.extend(steps))
    }

    /// Plays `step` whenever the scripts are exhausted.
    pub fn otherwise(self, step: Step) -> Self {
        self.edit(|s| s.otherwise = Some(step))
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls made to `model`.
    pub fn calls_to(&self, model: &str) -> Vec<Call> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.model == model)
            .cloned()
            .collect()
    }

    fn next_step(&self, model: &str, request: &ChatRequest) -> Option<Step> {
        let mut script = self.lock();
        script.calls.push(Call {
            model: model.to_owned(),
            at: Instant::now(),
            messages: request.messages.len(),
        });
        script
            .per_model
            .get_mut(model)
            .and_then(VecDeque::pop_front)
            .or_else(|| script.any.pop_front())
            .or_else(|| script.otherwise.clone())
    }
}

impl std::fmt::Debug for ScriptedConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedConnector")
            .field("calls", &self.lock().calls.len())
            .finish_non_exhaustive()
    }
}

impl ModelConnector for ScriptedConnector {
    fn complete(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<Completion, ModelError>> + Send {
        let step = self.next_step(model, request);
        let model = model.to_owned();
        async move {
            match step {
                Some(step) => step.play(&model).await,
                None => Err(ModelError::invalid_request(format!(
                    "scripted connector has no step left for model {model}"
                ))),
            }
        }
    }
}
