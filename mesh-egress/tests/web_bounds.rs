//! The web surface's bounds, in process (a `WebChat` served on 127.0.0.1 with an agent of our
//! own, real time, short deadlines): a turn ends at its deadline whatever its agent does, a
//! body that trickles is refused at its time, and the message count and sizes are the
//! application's own [`RequestLimits`]. Each bound is set small here so breaking it fails fast.

mod web_support;

use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use mesh_egress::BoxFuture;
use mesh_egress::EgressError;
use mesh_egress::store::Store;
use mesh_egress::stream::{ChunkSource, TextSource};
use mesh_egress::web::{Answered, ChatAgent, ChatTurn, NoOptions, Owner, RequestLimits, WebChat};
use serde_json::json;
use web_support::{Reply, assert_no_cause, read_stream};

/// The turn timeout the served chat runs with.
const TURN_TIMEOUT: Duration = Duration::from_millis(600);
/// How long the body of a request may take here.
const BODY_TIME: Duration = Duration::from_millis(400);
/// The most any request here may take: a broken bound fails at this, not never.
const REQUEST_BOUND: Duration = Duration::from_secs(10);
/// The first paragraph every stalling agent sends.
const FIRST: &str = "The first paragraph made it out before the stall.";

/// Who is asking: the `x-visitor` header.
struct Visitor(Owner);

impl<S: Send + Sync> FromRequestParts<S> for Visitor {
    type Rejection = ();
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ()> {
        let id = parts
            .headers
            .get("x-visitor")
            .and_then(|v| v.to_str().ok())
            .ok_or(())?;
        Owner::new(id).map(Visitor).map_err(drop)
    }
}

impl From<Visitor> for Owner {
    fn from(visitor: Visitor) -> Owner {
        visitor.0
    }
}

/// A text source that yields its chunks and then never another (a hung provider that ignores
/// the turn's deadline).
struct Stalls(Vec<String>);

impl TextSource for Stalls {
    type Error = EgressError;
    async fn next(&mut self) -> Option<Result<String, EgressError>> {
        if self.0.is_empty() {
            std::future::pending::<()>().await;
        }
        Some(Ok(self.0.remove(0)))
    }
    fn mark_delivered(&mut self, _text: &str) {}
}

/// The agents the bounds are tried with, picked by the person's text.
struct Bounded;

impl ChatAgent for Bounded {
    type Options = NoOptions;
    fn answer<'a>(&'a self, chat: ChatTurn<'a, NoOptions>) -> BoxFuture<'a, Answered> {
        Box::pin(async move {
            match chat.input().text() {
                // Never begins to answer (a tool that hangs before the model is called).
                "hang" => std::future::pending().await,
                // Begins, then its source stalls for ever.
                "stall" => chat.stream(Stalls(vec![format!("{FIRST}\n\n")])).await,
                other => {
                    let echo = format!("You said: {other}");
                    chat.stream(ChunkSource::<EgressError>::new([echo])).await
                }
            }
        })
    }
}

/// A `WebChat` on its own SQLite file, served on a free loopback port.
struct Served {
    base: String,
    store: Store,
    _dir: TempDir,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.server.abort();
    }
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn serve(name: &str, limits: RequestLimits) -> Served {
    let dir = std::env::temp_dir().join(format!("mesh-web-bounds-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let store = Store::open(&format!("sqlite:{}", dir.join("store.db").display()))
        .await
        .expect("store");
    let chat = WebChat::new(store.clone(), Bounded)
        .with_turn_timeout(TURN_TIMEOUT)
        .with_limits(limits);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let app = chat.router::<Visitor>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serves");
    });
    Served {
        base,
        store,
        _dir: TempDir(dir),
        server,
    }
}

fn limits() -> RequestLimits {
    let mut limits = RequestLimits::default();
    limits.body_time = BODY_TIME;
    limits.messages = 3;
    limits.message_bytes = 64;
    limits.body_bytes = 4 << 10;
    limits
}

fn request(chat: &str, texts: &[&str]) -> Vec<u8> {
    let messages: Vec<_> = texts
        .iter()
        .enumerate()
        .map(|(n, text)| json!({"id": format!("u{n}"), "role": "user", "parts": [{"type": "text", "text": text}]}))
        .collect();
    serde_json::to_vec(&json!({"id": chat, "trigger": "submit-message", "messages": messages}))
        .expect("json")
}

async fn post(served: &Served, body: Vec<u8>) -> Reply {
    let client = reqwest::Client::builder()
        .timeout(REQUEST_BOUND)
        .build()
        .expect("client");
    let response = client
        .post(format!("{}/api/chat", served.base))
        .header("x-visitor", "visitor-1")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answered");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .expect("the whole reply within the bound: the turn ended")
        .to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

#[tokio::test]
async fn a_stalled_answer_ends_at_the_turns_deadline_with_the_holding_line() {
    let served = serve("stall", limits()).await;
    let started = Instant::now();
    let reply = post(&served, request("stalled1", &["stall"])).await;
    let took = started.elapsed();
    let streamed = read_stream(&reply);
    assert!(took >= TURN_TIMEOUT, "ended before its deadline: {took:?}");
    assert!(
        took < TURN_TIMEOUT + Duration::from_secs(3),
        "ended long after it: {took:?}"
    );
    assert_eq!(
        streamed.texts.first().map(String::as_str),
        Some(FIRST),
        "{streamed:?}"
    );
    assert_eq!(
        streamed.texts.len(),
        2,
        "the first paragraph, then Layer C's line: {streamed:?}"
    );
    assert!(!streamed.texts[1].is_empty());
    assert_eq!(streamed.error, None, "an ordinary line, not an error chunk");
    assert_eq!(
        streamed.metadata,
        Some(json!({"followUp": true})),
        "a promise is open"
    );
    assert_no_cause(&streamed.text());
    assert!(!streamed.text().contains("deadline"), "{streamed:?}");
    let stored = served
        .store
        .commitments("web:stalled1")
        .await
        .expect("commitments");
    assert_eq!(stored.len(), 1, "the promise is stored: {stored:?}");
}

#[tokio::test]
async fn an_agent_that_never_begins_is_answered_at_the_deadline() {
    let served = serve("hang", limits()).await;
    let started = Instant::now();
    let reply = post(&served, request("hung1", &["hang"])).await;
    let took = started.elapsed();
    let streamed = read_stream(&reply);
    assert!(took >= TURN_TIMEOUT, "{took:?}");
    assert!(took < TURN_TIMEOUT + Duration::from_secs(3), "{took:?}");
    assert_eq!(
        streamed.texts.len(),
        1,
        "Layer C's holding line: {streamed:?}"
    );
    assert!(!streamed.texts[0].is_empty());
    assert_eq!(streamed.error, None);
    assert_eq!(streamed.metadata, Some(json!({"followUp": true})));
    assert_no_cause(&streamed.text());
    // The chat is free again: the next message is answered.
    let next = read_stream(&post(&served, request("hung1", &["hello"])).await);
    assert_eq!(next.text(), "You said: hello");
}

#[tokio::test]
async fn a_body_that_trickles_is_refused_at_its_time() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let served = serve("trickle", limits()).await;
    let address = served.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connects");
    let head = format!(
        "POST /api/chat HTTP/1.1\r\nhost: {address}\r\nx-visitor: visitor-1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"id\":"
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).await.expect("writes");
    let mut answer = vec![0u8; 512];
    let read = tokio::time::timeout(REQUEST_BOUND, stream.read(&mut answer))
        .await
        .expect("refused within the bound, not held open")
        .expect("reads");
    let took = started.elapsed();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("That message took too long to arrive."),
        "{answer}"
    );
    assert!(took >= BODY_TIME, "{took:?}");
    assert!(took < BODY_TIME + Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn the_applications_limits_bound_the_history_the_message_and_the_body() {
    let served = serve("limits", limits()).await;
    // Three messages are within the bound, four are not.
    let within = read_stream(&post(&served, request("limits1", &["a", "b", "c"])).await);
    assert_eq!(within.text(), "You said: c");
    let cases: [(&str, Vec<u8>); 3] = [
        ("four messages", request("limits1", &["a", "b", "c", "d"])),
        ("a 65-byte message", request("limits1", &[&"m".repeat(65)])),
        ("a 5 KiB body", {
            let mut body = request("limits1", &["x"]);
            body.splice(
                1..1,
                format!("\"pad\":\"{}\",", "p".repeat(5 << 10)).into_bytes(),
            );
            body
        }),
    ];
    for (what, body) in cases {
        let reply = post(&served, body).await;
        assert_eq!(reply.status, 413, "{what}: {}", reply.text());
        assert_eq!(reply.text(), "That message is too long to send.", "{what}");
    }
    let exact = read_stream(&post(&served, request("limits1", &[&"m".repeat(64)])).await);
    assert_eq!(exact.text(), format!("You said: {}", "m".repeat(64)));
}
