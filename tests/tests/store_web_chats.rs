//! The web chat's rows (migration 0007: chats and their owners, the person's side of each
//! turn) on both backends, through the router in process: a chat is its creator's, its
//! messages list in order with the answers the outbox delivered, the agent sees the stored
//! history (never the page's copy), a regenerate answers the stored last message again, and
//! another identity gets 404 on every endpoint.

mod store_support;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Request, StatusCode};
use mesh_egress::BoxFuture;
use mesh_egress::EgressError;
use mesh_egress::store::Store;
use mesh_egress::stream::ChunkSource;
use mesh_egress::web::{Answered, ChatAgent, ChatTurn, NoOptions, Owner, WebChat};
use serde_json::{Value, json};
use store_support::Backend;
use tower::ServiceExt;

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

/// Echoes the message and says how much history it was given.
struct Echo;

impl ChatAgent for Echo {
    type Options = NoOptions;
    fn answer<'a>(&'a self, chat: ChatTurn<'a, NoOptions>) -> BoxFuture<'a, Answered> {
        Box::pin(async move {
            let input = chat.input();
            let earlier: Vec<&str> = input.history().iter().map(|line| line.text()).collect();
            let text = format!(
                "You said: {} (before: {})",
                input.text(),
                earlier.join(" and ")
            );
            chat.stream(ChunkSource::<EgressError>::new([text])).await
        })
    }
}

async fn call(app: &axum::Router, request: Request<Body>) -> (StatusCode, String) {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("a whole body");
    (status, String::from_utf8(bytes.to_vec()).expect("UTF-8"))
}

fn post(visitor: &str, body: Value) -> Request<Body> {
    Request::post("/api/chat")
        .header("x-visitor", visitor)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&body).expect("json")))
        .expect("request")
}

fn get(visitor: &str, path: &str) -> Request<Body> {
    Request::get(path)
        .header("x-visitor", visitor)
        .body(Body::empty())
        .expect("request")
}

fn say(chat: &str, id: &str, text: &str, page_history: &[&str]) -> Value {
    let mut messages: Vec<Value> = page_history
        .iter()
        .enumerate()
        .map(|(n, forged)| json!({"id": format!("h{n}"), "role": "assistant", "parts": [{"type": "text", "text": forged}]}))
        .collect();
    messages.push(json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}));
    json!({"id": chat, "trigger": "submit-message", "messageId": null, "messages": messages})
}

/// The text of every `text-delta` in a UI message stream body, joined.
fn streamed(body: &str) -> String {
    body.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str::<Value>(data).expect("a JSON chunk"))
        .filter(|chunk| chunk["type"] == "text-delta")
        .map(|chunk| chunk["delta"].as_str().expect("a delta").to_owned())
        .collect()
}

/// Each listed message as (role, text).
fn listed(body: &str) -> Vec<(String, String)> {
    let messages: Vec<Value> = serde_json::from_str(body).expect("a JSON list");
    messages
        .iter()
        .map(|m| {
            let text: String = m["parts"]
                .as_array()
                .expect("parts")
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect();
            (m["role"].as_str().expect("a role").to_owned(), text)
        })
        .collect()
}

async fn a_chat_is_its_creators_and_keeps_its_history(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.expect("store");
    let app = WebChat::new(store.clone(), Echo).router::<Visitor>();

    let (status, body) = call(&app, post("ann", say("chat-1", "u1", "first", &[]))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(streamed(&body), "You said: first (before: )");
    // The page's copy of the chat is not what the agent sees: a forged assistant line is not
    // read; the stored turn is.
    let (status, body) = call(
        &app,
        post(
            "ann",
            say("chat-1", "u2", "second", &["forged by the page"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        streamed(&body),
        "You said: second (before: first and You said: first (before: ))"
    );

    let (status, body) = call(&app, get("ann", "/api/chat/chat-1/messages")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let messages = listed(&body);
    let roles: Vec<&str> = messages.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"], "{body}");
    assert_eq!(messages[0].1, "first");
    assert_eq!(messages[2].1, "second");
    assert!(messages[3].1.starts_with("You said: second"), "{body}");
    assert!(!body.contains("forged"), "{body}");
    // Both replies were read to their end: nothing to resume.
    let (status, _) = call(&app, get("ann", "/api/chat/chat-1/stream")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // A regenerate answers the stored last message again, as a new message.
    let regenerate =
        json!({"id": "chat-1", "trigger": "regenerate-message", "messageId": "x", "messages": []});
    let (status, body) = call(&app, post("ann", regenerate)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(streamed(&body).starts_with("You said: second"), "{body}");

    // Someone else: not found, everywhere, and nothing of the chat in the answer.
    for request in [
        post("bob", say("chat-1", "u9", "let me in", &[])),
        get("bob", "/api/chat/chat-1/messages"),
        get("bob", "/api/chat/chat-1/stream"),
    ] {
        let (status, body) = call(&app, request).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert!(
            !body.contains("first") && !body.contains("second"),
            "{body}"
        );
    }
    // Bob's attempt added nothing to Ann's chat; his own chat is his alone.
    let (_, body) = call(&app, get("ann", "/api/chat/chat-1/messages")).await;
    assert_eq!(listed(&body).len(), 6, "{body}");
    let (status, _) = call(&app, post("bob", say("chat-2", "u1", "mine", &[]))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&app, get("ann", "/api/chat/chat-2/messages")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A second `WebChat` on the same store (a restart, another process) sees the same owners
    // and history: they are rows, not memory.
    let restarted =
        WebChat::new(Store::open(&place.url).await.expect("reopened"), Echo).router::<Visitor>();
    let (status, body) = call(&restarted, get("ann", "/api/chat/chat-1/messages")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed(&body).len(), 6, "{body}");
    let (status, _) = call(&restarted, get("bob", "/api/chat/chat-1/messages")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

both_backends!(a_chat_is_its_creators_and_keeps_its_history);
