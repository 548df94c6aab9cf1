//! The `web` example as a black box for the web tests: started on a free port with a store of
//! its own, a visitor that keeps its cookie like a browser, and a strict reader of the UI
//! message stream that fails on anything the AI SDK's protocol does not allow.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

#[path = "../example_binary/mod.rs"]
mod example_binary;

/// How long the example may take to say it listens.
const START_BOUND: Duration = Duration::from_secs(20);
/// How long one request may take.
pub const REQUEST_BOUND: Duration = Duration::from_secs(20);
/// A cookie key of the length the example asks for.
pub const COOKIE_KEY: &str = "web-tests-cookie-key-0123456789abcdef0123456789";

/// The person's message every test sends, and the scripted answer's three paragraphs as the
/// web renderer writes them.
pub const QUESTION: &str = "Is the release green?";
pub const ANSWER: [&str; 3] = [
    "You asked: *Is the release green?* Here is where the release stands, from the pipeline and the canary.",
    "Release 2.4 is **green**: all 412 tests passed, the canary has been healthy for an hour, and nothing blocks the deploy.",
    "The rollout starts at 14:00; the on-call engineer watches the error budget until it completes.",
];
/// Words of the faults the scripted provider plays: none may reach a person.
pub const CAUSES: [&str; 9] = [
    "503",
    "Service Unavailable",
    "upstream",
    "LLM request failed",
    "retries_exhausted",
    "model provider",
    "HTTP",
    "recovery",
    "Error:",
];

/// A running `web` example, killed when dropped.
pub struct WebServer {
    child: Child,
    pub base: String,
    dir: PathBuf,
}

impl WebServer {
    /// Starts the example on a free port with its own SQLite store.
    pub fn start(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mesh-web-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let stderr = std::fs::File::create(dir.join("stderr.log")).expect("log file");
        let mut command = Command::new(example_binary::example_binary("web"));
        command
            .arg("--port")
            .arg("0")
            .arg("--store")
            .arg(format!("sqlite:{}", dir.join("store.db").display()))
            .env("MESH_WEB_COOKIE_KEY", COOKIE_KEY)
            .env("RUST_LOG", "info")
            .env_remove("MESH_MODEL_BASE_URL")
            .env_remove("MESH_FOLLOW_UP_DELAY_MS")
            .env_remove("MESH_FOLLOW_UP_ATTEMPTS")
            .env_remove("MESH_WORKER_LEASE_MS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = command.spawn().expect("the web example starts");
        let stdout = child.stdout.take().expect("stdout");
        let (lines, first) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = lines.send(line);
            // Keep reading, so the child never blocks on a full pipe.
            let mut rest = String::new();
            while reader.read_line(&mut rest).is_ok_and(|n| n > 0) {
                rest.clear();
            }
        });
        let line = match first.recv_timeout(START_BOUND) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("the web example did not say it listens within {START_BOUND:?}");
            }
        };
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        Self { child, base, dir }
    }

    /// Whether the process is still running (it never panics on hostile input).
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// What the example logged (JSON lines).
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One person's browser: it keeps the cookie the server sets.
pub struct Visitor {
    client: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

/// A response read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Visitor {
    pub fn new(server: &WebServer) -> Self {
        Self {
            client: reqwest::Client::builder()
                .timeout(REQUEST_BOUND)
                .build()
                .expect("client"),
            base: server.base.clone(),
            cookie: None,
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Reply {
        let request = match &self.cookie {
            Some(cookie) => request.header("cookie", cookie),
            None => request,
        };
        let response = request.send().await.expect("the server answers");
        if let Some(set) = response.headers().get("set-cookie") {
            let set = set.to_str().expect("ascii cookie");
            self.cookie = Some(set.split(';').next().unwrap_or_default().to_owned());
        }
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await.expect("a whole body").to_vec();
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&mut self, path: &str) -> Reply {
        let request = self.client.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    pub async fn post(&mut self, path: &str, content_type: &str, body: Vec<u8>) -> Reply {
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .body(body);
        self.send(request).await
    }

    /// `POST /api/chat` with the AI SDK's request for `text` in `chat`, under `fault`.
    pub async fn say(&mut self, chat: &str, fault: &str, text: &str) -> Reply {
        let body = serde_json::json!({
            "id": chat,
            "trigger": "submit-message",
            "messageId": null,
            "fault": fault,
            "messages": [{"id": format!("u-{chat}-{}", text.len()), "role": "user", "parts": [{"type": "text", "text": text}]}],
        });
        self.post(
            "/api/chat",
            "application/json",
            serde_json::to_vec(&body).expect("json"),
        )
        .await
    }
}

/// What a strictly read UI message stream held.
#[derive(Debug)]
pub struct Streamed {
    pub message_id: String,
    /// Each text part's text, in order.
    pub texts: Vec<String>,
    /// The chunk types, in order.
    pub types: Vec<String>,
    /// The `finish` chunk's `messageMetadata`, if any.
    pub metadata: Option<Value>,
    /// The `error` chunk's text, if the stream ended in one.
    pub error: Option<String>,
}

impl Streamed {
    pub fn text(&self) -> String {
        self.texts.join("\n\n")
    }
}

/// Reads `reply` as the AI SDK's UI message stream v1, failing on anything the protocol does
/// not allow: the headers, one `data:` line per event, known chunk types with exactly their
/// camelCase fields, `start` first, text parts opened before their deltas and closed with
/// their id, `finish` (or `error`) last, then `data: [DONE]` and nothing after it.
pub fn read_stream(reply: &Reply) -> Streamed {
    assert_eq!(reply.status, 200, "{}", reply.text());
    for (name, value) in [
        ("content-type", "text/event-stream"),
        ("cache-control", "no-cache"),
        ("x-vercel-ai-ui-message-stream", "v1"),
        ("x-accel-buffering", "no"),
    ] {
        assert_eq!(reply.header(name), Some(value), "header {name}");
    }
    let body = reply.text();
    assert!(
        body.ends_with("\n\n"),
        "the last event ends with a blank line"
    );
    let events: Vec<&str> = body
        .strip_suffix("\n\n")
        .unwrap_or(&body)
        .split("\n\n")
        .filter(|event| !event.starts_with(':'))
        .collect();
    let (done, chunks) = events.split_last().expect("at least one event");
    assert_eq!(*done, "data: [DONE]", "[DONE] is last");
    let mut out = Streamed {
        message_id: String::new(),
        texts: Vec::new(),
        types: Vec::new(),
        metadata: None,
        error: None,
    };
    let mut open: Option<String> = None;
    let mut ids = HashSet::new();
    let mut ended = false;
    for (at, event) in chunks.iter().enumerate() {
        assert!(!ended, "nothing after finish/error but [DONE]: {event}");
        assert!(!event.contains('\n'), "one line per event: {event:?}");
        let json = event
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("not a data event: {event:?}"));
        let chunk: Value = serde_json::from_str(json).expect("each event is JSON");
        let object = chunk.as_object().expect("an object");
        let kind = object["type"].as_str().expect("a string type").to_owned();
        let allowed: &[&str] = match kind.as_str() {
            "start" => &["type", "messageId"],
            "text-start" | "text-end" => &["type", "id"],
            "text-delta" => &["type", "id", "delta"],
            "finish" => &["type", "messageMetadata"],
            "error" => &["type", "errorText"],
            other => panic!("a chunk type we never send: {other}"),
        };
        for key in object.keys() {
            assert!(allowed.contains(&key.as_str()), "{kind} has field {key}");
        }
        let id = || object["id"].as_str().expect("an id").to_owned();
        match kind.as_str() {
            "start" => {
                assert_eq!(at, 0, "start is first");
                out.message_id = object["messageId"].as_str().expect("messageId").to_owned();
            }
            "text-start" => {
                assert!(open.is_none(), "a part opens after the last one closed");
                assert!(ids.insert(id()), "text part ids are unique");
                open = Some(id());
                out.texts.push(String::new());
            }
            "text-delta" => {
                assert_eq!(
                    open.as_deref(),
                    Some(id().as_str()),
                    "delta of the open part"
                );
                out.texts
                    .last_mut()
                    .expect("open")
                    .push_str(object["delta"].as_str().expect("a delta"));
            }
            "text-end" => {
                assert_eq!(
                    open.take().as_deref(),
                    Some(id().as_str()),
                    "end of the open part"
                );
            }
            "finish" => {
                assert!(open.is_none(), "no part left open");
                out.metadata = object.get("messageMetadata").cloned();
                ended = true;
            }
            "error" => {
                out.error = Some(object["errorText"].as_str().expect("text").to_owned());
                ended = true;
            }
            _ => unreachable!(),
        }
        out.types.push(kind);
    }
    assert!(ended, "the stream ends with finish or error before [DONE]");
    assert!(!out.message_id.is_empty(), "start names the message");
    out
}

/// Fails if any fault's word is in `text`.
pub fn assert_no_cause(text: &str) {
    for cause in CAUSES {
        assert!(
            !text.contains(cause),
            "{cause:?} reached the person: {text}"
        );
    }
}
