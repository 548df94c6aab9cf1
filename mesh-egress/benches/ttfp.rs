//! Time to the first delivered part, streaming vs not: a small timed harness (not criterion:
//! one run takes up to 12 s of wall time by design), median and max of 10 runs each.
//!
//! The fake provider streams 600 tokens at 50 tokens/s over loopback HTTP (one SSE event per
//! token, 20 ms apart, a paragraph break every 25 tokens). Streamed: `Router::stream`'s deltas
//! as an `#[egress_boundary]` handler's `AnswerStream`, sent by the front door (`Bot::send_to`,
//! block by block), the first block shown when it completes (token 25, 500 ms in). Not
//! streamed: the same stream read to its end, then the whole answer delivered
//! (`Bot::send_to`): the first part waits for the last token.
//!
//! `cargo bench -p mesh-egress --bench ttfp`

#[path = "support/paced.rs"]
mod paced;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mesh_egress::channel::{BoxedChannel, Channel, PartReceipt, PlainText, SendError};
use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
use mesh_egress::model::{ChatMessage, ChatRequest, OpenAiCompatible, Router};
use mesh_egress::{
    AgentMessage, AnswerStream, Attribution, Bot, Cancellation, CommittedPart, EgressError, Turn,
    egress_boundary,
};
use paced::{PARAGRAPH, PER_TOKEN, paced_router};
use tokio::time::Instant;

const TOKENS: usize = 600;
const RUNS: usize = 10;

/// Records when the first part went, and stops the turn there (the rest is not measured).
struct First {
    renderer: PlainText,
    start: Instant,
    first: Arc<Mutex<Option<Duration>>>,
    stop: Cancellation,
}

impl Channel for First {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let mut first = self.first.lock().expect("not poisoned");
        if first.is_none() {
            *first = Some(self.start.elapsed());
            self.stop.cancel();
        }
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}

/// The routed stream's deltas as an answer stream, noting when the delta that completes the
/// first block (the first paragraph break) reached the client: the floor for the first part,
/// since the drip's timer is itself a little late on every token.
fn watched(
    router: Arc<Router<OpenAiCompatible>>,
    turn: &Turn,
    request: ChatRequest,
    start: Instant,
    arrived: Arc<Mutex<Option<Duration>>>,
) -> AnswerStream {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let owned = turn.clone();
    tokio::spawn(async move {
        let mut source = router.stream(&owned, &request);
        while let Some(next) = source.next().await {
            if let Ok(delta) = &next
                && delta.contains("\n\n")
            {
                let mut arrived = arrived.lock().expect("not poisoned");
                arrived.get_or_insert(start.elapsed());
            }
            if tx.send(next).await.is_err() {
                // The turn stopped after its first part: nothing more is read.
                return;
            }
        }
    });
    AnswerStream::from_receiver(turn, rx)
}

/// A person is waiting on the streamed answer.
#[egress_boundary(interactive)]
async fn streamed(_turn: &Turn, stream: AnswerStream) -> Result<AnswerStream, EgressError> {
    Ok(stream)
}

/// When the first part went, and (streamed) when the first block had arrived.
async fn one_run(streaming: bool) -> (Duration, Option<Duration>) {
    let (_provider, router) = paced_router(TOKENS).await;
    let router = Arc::new(router);
    let stop = Cancellation::new();
    let turn = Turn::new(Attribution::new("bench", "c", "r"))
        .with_mode(Mode::Interactive)
        .with_cancellation(stop.clone());
    let policy = DegradationPolicy::default();
    let request = ChatRequest::new(vec![ChatMessage::user("status?")]);
    let channel = First {
        renderer: PlainText::new(),
        start: Instant::now(),
        first: Arc::new(Mutex::new(None)),
        stop,
    };
    let first = Arc::clone(&channel.first);
    let arrived = Arc::new(Mutex::new(None));
    if streaming {
        let source = watched(
            Arc::clone(&router),
            &turn,
            request,
            channel.start,
            Arc::clone(&arrived),
        );
        let reply = streamed(&turn, source).await;
        let channel = BoxedChannel::new(channel);
        let _stopped_after_the_first_part = Bot::new()
            .with_policy(policy)
            .send_to(&turn, &channel, reply)
            .await
            .expect("delivered");
    } else {
        let mut source = router.stream(&turn, &request);
        let mut whole = String::new();
        while let Some(delta) = source.next().await {
            let delta = delta.expect("healthy stream");
            source.mark_delivered(&delta);
            whole.push_str(&delta);
        }
        drop(source);
        let reply = Reply::Answer(AgentMessage::new(whole, turn.attribution().clone()));
        let channel = BoxedChannel::new(channel);
        let _delivery = Bot::new()
            .with_policy(policy)
            .send_to(&turn, &channel, reply)
            .await
            .expect("delivered");
    }
    let first = first.lock().expect("not poisoned").take();
    let arrived = arrived.lock().expect("not poisoned").take();
    (first.expect("a part was delivered"), arrived)
}

fn summary(label: &str, mut runs: Vec<Duration>) {
    runs.sort();
    let median = (runs[RUNS / 2 - 1] + runs[RUNS / 2]) / 2;
    let max = runs[RUNS - 1];
    println!(
        "{label:<15} time to first delivered part: median {:>8.1} ms, max {:>8.1} ms ({RUNS} runs)",
        median.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let first_block = PER_TOKEN * u32::try_from(PARAGRAPH).expect("small");
    println!(
        "{TOKENS} tokens at {} tokens/s; the first block is complete on the wire at {} ms",
        1000 / PER_TOKEN.as_millis(),
        first_block.as_millis()
    );
    let mut streamed = Vec::new();
    let mut overhead = Vec::new();
    for _ in 0..RUNS {
        let (first, arrived) = one_run(true).await;
        streamed.push(first);
        overhead.push(first.saturating_sub(arrived.expect("the first block arrived")));
    }
    summary("streaming", streamed);
    summary("  past arrival", overhead);
    let mut whole = Vec::new();
    for _ in 0..RUNS {
        whole.push(one_run(false).await.0);
    }
    summary("not streaming", whole);
}
