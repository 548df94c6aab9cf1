//! [`ScriptedConnector`]: a [`ModelConnector`] that plays a script of outcomes, one per call.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::{
    ChatRequest, ChunkTransport, Completion, ModelConnector, ModelError, ModelStream, StreamChunk,
};

type MakeError = Arc<dyn Fn() -> ModelError + Send + Sync>;

#[derive(Clone)]
pub(super) enum Action {
    Answer(Completion),
    Fail(MakeError),
    Stall,
    Stream(StreamScript),
}

/// A streamed answer: its chunks, the delay before each event, and what goes wrong after how
/// many chunks.
#[derive(Clone)]
pub(super) struct StreamScript {
    pub(super) chunks: Vec<String>,
    pub(super) delay: Duration,
    pub(super) fault: Option<(usize, Fault)>,
    pub(super) keep_alive: bool,
    pub(super) line_ending: SseLineEnding,
}

/// How the [`FakeProvider`](super::FakeProvider) ends the lines of a scripted stream's
/// server-sent events: the WHATWG standard allows all three, and gateways send each.
///
/// ```
/// use mesh_egress::testing::{SseLineEnding, Step};
/// let step = Step::chunks(["a", "b"]).line_ending(SseLineEnding::Cr);
/// # let _ = step;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SseLineEnding {
    /// `\n`, as OpenAI sends them.
    #[default]
    Lf,
    /// `\r\n`.
    CrLf,
    /// A lone `\r`.
    Cr,
}

impl SseLineEnding {
    /// The bytes that end a line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lf => "\n",
            Self::CrLf => "\r\n",
            Self::Cr => "\r",
        }
    }
}

/// What breaks a scripted stream.
#[derive(Clone)]
pub(super) enum Fault {
    /// The stream goes silent (the connection stays open).
    Stall,
    /// An error event inside the stream.
    Error(MakeError),
    /// The connection is reset.
    Reset,
    /// A chunk that is not JSON.
    Malformed,
}

impl Fault {
    fn error(&self) -> Option<ModelError> {
        match self {
            Self::Stall => None,
            Self::Error(make) => Some(make()),
            Self::Reset => Some(ModelError::connection(
                "connection reset mid-stream (scripted)",
            )),
            Self::Malformed => Some(ModelError::invalid_response(
                "malformed stream chunk (scripted)",
            )),
        }
    }
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

    /// Streams `chunks` (each a text delta), then a last chunk with `finish_reason: "stop"`.
    /// Played whole by `complete` (the chunks joined), chunk by chunk by `stream`, and as
    /// server-sent events by the [`FakeProvider`](super::FakeProvider). The modifiers below
    /// shape it; on a step that does not stream they change nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mesh_egress::testing::Step;
    /// let drip = Step::chunks(["The ", "build ", "is ", "green."])
    ///     .chunk_delay(Duration::from_millis(20))
    ///     .stall_after(2);
    /// # let _ = drip;
    /// ```
    pub fn chunks<I, S>(chunks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(Action::Stream(StreamScript {
            chunks: chunks.into_iter().map(Into::into).collect(),
            delay: Duration::ZERO,
            fault: None,
            keep_alive: false,
            line_ending: SseLineEnding::Lf,
        }))
    }

    fn edit_stream(mut self, f: impl FnOnce(&mut StreamScript)) -> Self {
        if let Action::Stream(script) = &mut self.action {
            f(script);
        }
        self
    }

    /// Waits `delay` before each event of the stream (chunks and the fault alike).
    pub fn chunk_delay(self, delay: Duration) -> Self {
        self.edit_stream(|s| s.delay = delay)
    }

    /// Goes silent after `n` chunks, the connection left open.
    pub fn stall_after(self, n: usize) -> Self {
        self.edit_stream(|s| s.fault = Some((n, Fault::Stall)))
    }

    /// Sends an error event after `n` chunks: the error `make` builds (over HTTP, an OpenAI
    /// `{"error": {...}}` event with its code, type and message; a bare status as its number).
    pub fn fail_after(
        self,
        n: usize,
        make: impl Fn() -> ModelError + Send + Sync + 'static,
    ) -> Self {
        self.edit_stream(|s| s.fault = Some((n, Fault::Error(Arc::new(make)))))
    }

    /// Resets the connection after `n` chunks.
    pub fn reset_after(self, n: usize) -> Self {
        self.edit_stream(|s| s.fault = Some((n, Fault::Reset)))
    }

    /// Sends a chunk that is not JSON after `n` chunks.
    pub fn malformed_after(self, n: usize) -> Self {
        self.edit_stream(|s| s.fault = Some((n, Fault::Malformed)))
    }

    /// Over HTTP, sends a `: ping` keep-alive comment before every event (in memory there is
    /// nothing to send: comments never reach a connector's caller).
    pub fn keep_alive(self) -> Self {
        self.edit_stream(|s| s.keep_alive = true)
    }

    /// Over HTTP, ends every line of the stream's events with `ending` (in memory there are
    /// no lines, so nothing changes).
    pub fn line_ending(self, ending: SseLineEnding) -> Self {
        self.edit_stream(|s| s.line_ending = ending)
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
            Action::Stream(script) => {
                let mut text = String::new();
                for (i, chunk) in script.chunks.iter().enumerate() {
                    if let Some(fault) = script.fault_at(i) {
                        tokio::time::sleep(script.delay).await;
                        return match fault.error() {
                            Some(error) => Err(error),
                            None => std::future::pending().await,
                        };
                    }
                    tokio::time::sleep(script.delay).await;
                    text.push_str(chunk);
                }
                if let Some(fault) = script.fault_at(script.chunks.len()) {
                    tokio::time::sleep(script.delay).await;
                    return match fault.error() {
                        Some(error) => Err(error),
                        None => std::future::pending().await,
                    };
                }
                Ok(Completion::text(model, text))
            }
        }
    }

    async fn open(self, model: &str) -> Result<ModelStream, ModelError> {
        match self.action {
            Action::Stream(script) => {
                if let Some(delay) = self.delay {
                    tokio::time::sleep(delay).await;
                }
                Ok(ModelStream::new(ScriptedStream {
                    script,
                    sent: 0,
                    finished: false,
                    due: None,
                }))
            }
            _ => self.play(model).await.map(ModelStream::from_completion),
        }
    }
}

impl StreamScript {
    fn fault_at(&self, sent: usize) -> Option<&Fault> {
        self.fault
            .as_ref()
            .filter(|(n, _)| *n == sent)
            .map(|(_, fault)| fault)
    }
}

/// A scripted stream in flight.
struct ScriptedStream {
    script: StreamScript,
    sent: usize,
    finished: bool,
    /// When the next event is due: kept across calls, so a read cancelled by a racing timer
    /// does not restart the event's delay (cancel safety, as `ChunkTransport` asks).
    due: Option<tokio::time::Instant>,
}

impl ScriptedStream {
    async fn next(&mut self) -> Option<Result<StreamChunk, ModelError>> {
        if self.finished {
            return None;
        }
        if !self.script.delay.is_zero() {
            let delay = self.script.delay;
            let due = *self
                .due
                .get_or_insert_with(|| tokio::time::Instant::now() + delay);
            tokio::time::sleep_until(due).await;
            self.due = None;
        }
        if let Some(fault) = self.script.fault_at(self.sent) {
            return match fault.error() {
                Some(error) => {
                    self.finished = true;
                    Some(Err(error))
                }
                // Still stalled on the next call: a read cancelled by a racing timer (the
                // block reader's idle flush) must not turn a stall into a clean end.
                None => std::future::pending().await,
            };
        }
        let Some(text) = self.script.chunks.get(self.sent) else {
            self.finished = true;
            return Some(Ok(StreamChunk {
                finish_reason: Some("stop".to_owned()),
                ..StreamChunk::default()
            }));
        };
        self.sent += 1;
        Some(Ok(StreamChunk::text(text.clone())))
    }
}

impl ChunkTransport for ScriptedStream {
    fn next_chunk(&mut self) -> crate::BoxFuture<'_, Option<Result<StreamChunk, ModelError>>> {
        Box::pin(self.next())
    }
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let action = match &self.action {
            Action::Answer(_) => "answer",
            Action::Fail(_) => "fail",
            Action::Stall => "stall",
            Action::Stream(_) => "stream",
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
    /// The text of the request's last message when it is the assistant's (a prefill: the
    /// partial answer a route is asked to continue).
    pub prefill: Option<String>,
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
            prefill: request
                .messages
                .last()
                .filter(|m| m.role == crate::model::Role::Assistant)
                .and_then(|m| m.content.clone()),
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

    /// Plays the next step as a stream: a [`Step::chunks`] step chunk by chunk (its delay, if
    /// any, is the time to the response headers), any other step as one chunk.
    fn stream(
        &self,
        model: &str,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ModelStream, ModelError>> + Send {
        let step = self.next_step(model, request);
        let model = model.to_owned();
        async move {
            match step {
                Some(step) => step.open(&model).await,
                None => Err(ModelError::invalid_request(format!(
                    "scripted connector has no step left for model {model}"
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::ChatMessage;

    /// A stalled stream stays stalled when a read of it is cancelled (the block reader races
    /// every read against its idle flush): before, the cancelled read had marked the stream
    /// finished, and the next read ended it cleanly, so a stall looked like a short answer.
    #[tokio::test(start_paused = true)]
    async fn a_stall_outlives_a_cancelled_read() {
        let connector = ScriptedConnector::new().on(
            "m",
            [Step::chunks(["one ", "two"])
                .chunk_delay(Duration::from_millis(10))
                .stall_after(1)],
        );
        let request = ChatRequest::new(vec![ChatMessage::user("hi")]);
        let mut stream = connector.stream("m", &request).await.expect("opens");
        let first = stream.next().await.expect("a chunk").expect("no failure");
        assert_eq!(first.text, "one ");
        for _ in 0..3 {
            let read = tokio::time::timeout(Duration::from_millis(500), stream.next()).await;
            assert!(read.is_err(), "still stalled, not ended: {:?}", read.ok());
        }
    }
}
