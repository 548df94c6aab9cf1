//! Time from the first block's arrival from the model to its first `text-delta` on the wire
//! of `POST /api/chat`: a small timed harness (not criterion: each run streams a reply in real
//! time), median and max of 10 runs.
//!
//! A `WebChat` on an SQLite file (synchronous FULL, so each block's outbox commit reaches the
//! disk before it streams) is served on 127.0.0.1; its agent streams `Router::stream` from the
//! loopback fake provider, 100 tokens at 50 tokens/s with a paragraph break every 25, and notes
//! when the delta that completes the first block reaches it. The client (reqwest over loopback)
//! notes when the first `text-delta` event arrives. Between the two: the block cutter, the
//! renderer, the outbox commit, the live reply, hyper and the loopback socket. The gate is off,
//! as in `ttfp`.
//!
//! `cargo bench -p mesh-egress --all-features --bench web_first_delta`

#[path = "support/paced.rs"]
mod paced;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use mesh_egress::BoxFuture;
use mesh_egress::model::{ChatMessage, ChatRequest, OpenAiCompatible, Router};
use mesh_egress::store::Store;
use mesh_egress::stream::TextSource;
use mesh_egress::web::{Answered, ChatAgent, ChatTurn, NoOptions, Owner, WebChat};
use paced::{PARAGRAPH, PER_TOKEN, paced_router};
use tokio::time::Instant;

const TOKENS: usize = 100;
const RUNS: usize = 10;

/// Everyone is the same visitor.
struct Bench;

impl<S: Send + Sync> FromRequestParts<S> for Bench {
    type Rejection = ();
    async fn from_request_parts(_: &mut Parts, _: &S) -> Result<Self, ()> {
        Ok(Self)
    }
}

impl From<Bench> for Owner {
    fn from(_: Bench) -> Owner {
        Owner::new("bench").expect("a valid identity")
    }
}

/// The routed stream, noting when the delta that completes the first block reached the agent.
struct Watched<S> {
    inner: S,
    chat: String,
    arrived: Arc<Mutex<HashMap<String, Instant>>>,
}

impl<S: TextSource> TextSource for Watched<S> {
    type Error = S::Error;

    async fn next(&mut self) -> Option<Result<String, S::Error>> {
        let next = self.inner.next().await;
        if let Some(Ok(delta)) = &next
            && delta.contains("\n\n")
        {
            let mut arrived = self.arrived.lock().expect("not poisoned");
            arrived
                .entry(self.chat.clone())
                .or_insert_with(Instant::now);
        }
        next
    }

    fn mark_delivered(&mut self, text: &str) {
        self.inner.mark_delivered(text);
    }
}

/// The current run's router (each run has its own fake provider).
type RouterSlot = Mutex<Option<Arc<Router<OpenAiCompatible>>>>;

/// The agent: the current run's router, watched.
struct Streams {
    router: Arc<RouterSlot>,
    arrived: Arc<Mutex<HashMap<String, Instant>>>,
}

impl ChatAgent for Streams {
    type Options = NoOptions;

    fn answer<'a>(&'a self, chat: ChatTurn<'a, NoOptions>) -> BoxFuture<'a, Answered> {
        Box::pin(async move {
            let router = self
                .router
                .lock()
                .expect("not poisoned")
                .clone()
                .expect("a router for this run");
            let (turn, input) = (chat.turn(), chat.input());
            let request = ChatRequest::new(vec![ChatMessage::user(input.text().to_owned())]);
            let source = Watched {
                inner: router.stream(turn, &request),
                chat: input.chat().to_owned(),
                arrived: Arc::clone(&self.arrived),
            };
            chat.stream(source).await
        })
    }
}

/// When the first `text-delta` event of the reply to a message in `chat` arrived.
async fn first_delta(client: &reqwest::Client, base: &str, chat: &str) -> Instant {
    let body = serde_json::json!({
        "id": chat,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "status?"}]}],
    });
    let mut response = client
        .post(format!("{base}/api/chat"))
        .json(&body)
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 200);
    let mut seen = Vec::new();
    let mut first = None;
    // Read to the end, so the next run starts on a quiet server.
    while let Some(bytes) = response.chunk().await.expect("the stream") {
        seen.extend_from_slice(&bytes);
        if first.is_none() && contains(&seen, b"\"type\":\"text-delta\"") {
            first = Some(Instant::now());
        }
    }
    first.expect("a text-delta")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = std::env::temp_dir().join(format!("mesh-web-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let store = Store::open(&format!("sqlite:{}", dir.join("store.db").display()))
        .await
        .expect("store");
    let arrived = Arc::new(Mutex::new(HashMap::new()));
    let slot: Arc<RouterSlot> = Arc::new(Mutex::new(None));
    let agent = Streams {
        router: Arc::clone(&slot),
        arrived: Arc::clone(&arrived),
    };
    let chat = WebChat::new(store, agent);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let app = chat.router::<Bench>();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    println!(
        "{TOKENS} tokens at {} tokens/s; the first block is complete on the wire at {} ms",
        1000 / PER_TOKEN.as_millis(),
        (PER_TOKEN * u32::try_from(PARAGRAPH).expect("small")).as_millis()
    );
    let mut gaps = Vec::new();
    for run in 0..RUNS {
        let (_provider, router) = paced_router(TOKENS).await;
        *slot.lock().expect("not poisoned") = Some(Arc::new(router));
        let id = format!("bench-{run}");
        let wire = first_delta(&client, &base, &id).await;
        let block = *arrived
            .lock()
            .expect("not poisoned")
            .get(&id)
            .expect("the first block arrived");
        gaps.push(wire.saturating_duration_since(block));
    }
    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
    gaps.sort();
    let median = (gaps[RUNS / 2 - 1] + gaps[RUNS / 2]) / 2;
    println!(
        "first text-delta on the wire after the first block's arrival: median {:.2} ms, min {:.2} ms, max {:.2} ms ({RUNS} runs)",
        median.as_secs_f64() * 1e3,
        gaps[0].as_secs_f64() * 1e3,
        gaps[RUNS - 1].as_secs_f64() * 1e3
    );
}
