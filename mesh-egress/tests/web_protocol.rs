//! The `web` example's wire, read strictly as the AI SDK's UI message stream v1 (our own
//! reader, `web_support::read_stream`: headers, one `data:` line per event, camelCase fields
//! only, `start` first, text parts paired by id, `finish` last, `[DONE]` after it), for the
//! four replies a provider can cause: healthy, a mid-stream fallback, a total outage and a
//! gate block. What the person reads is the answer or Layer C's line, never a cause; a kept
//! promise is replayed by the resume endpoint and listed by the messages endpoint.
//! `cargo test` builds the example before it runs this file.

mod web_support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use web_support::{ANSWER, QUESTION, Visitor, WebServer, assert_no_cause, read_stream};

/// How long a promise may take to be kept (the example's is 2.5 s).
const FOLLOW_UP_BOUND: Duration = Duration::from_secs(15);

#[tokio::test]
async fn a_healthy_reply_is_the_answer_in_paired_text_parts() {
    let server = WebServer::start("healthy");
    let mut visitor = Visitor::new(&server);
    let streamed = read_stream(&visitor.say("healthy1", "healthy", QUESTION).await);
    assert_eq!(streamed.text(), ANSWER.join("\n\n"));
    assert!(streamed.message_id.starts_with("msg-"), "{streamed:?}");
    assert_eq!(streamed.types.first().map(String::as_str), Some("start"));
    assert_eq!(streamed.types.last().map(String::as_str), Some("finish"));
    assert_eq!(streamed.metadata, None, "no promise is open");
    assert_eq!(streamed.error, None);
}

#[tokio::test]
async fn a_burst_of_server_errors_is_retried_invisibly() {
    let server = WebServer::start("burst");
    let mut visitor = Visitor::new(&server);
    let streamed = read_stream(&visitor.say("burst1", "burst", QUESTION).await);
    assert_eq!(streamed.text(), ANSWER.join("\n\n"));
}

#[tokio::test]
async fn a_mid_stream_fallback_continues_without_repeating_a_word() {
    let server = WebServer::start("stall");
    let mut visitor = Visitor::new(&server);
    let streamed = read_stream(&visitor.say("stall1", "stall", QUESTION).await);
    // The first paragraph streamed before the primary stalled; the fallback's answer was
    // joined after it: the whole answer, each paragraph once.
    assert!(streamed.texts.len() >= 2, "{streamed:?}");
    assert_eq!(streamed.texts[0], ANSWER[0]);
    assert_eq!(streamed.text(), ANSWER.join("\n\n"));
    assert!(
        server.logs().contains("model fallback started"),
        "the fallback route answered"
    );
}

/// Polls the resume endpoint until it replays a reply, bounded.
async fn resumed(visitor: &mut Visitor, chat: &str) -> web_support::Reply {
    let deadline = Instant::now() + FOLLOW_UP_BOUND;
    loop {
        let reply = visitor.get(&format!("/api/chat/{chat}/stream")).await;
        if reply.status != 204 || Instant::now() > deadline {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_total_outage_is_a_holding_line_whose_promise_is_kept() {
    let server = WebServer::start("outage");
    let mut visitor = Visitor::new(&server);
    let held = read_stream(&visitor.say("outage1", "outage", QUESTION).await);
    assert_eq!(held.texts.len(), 1, "{held:?}");
    assert!(!held.texts[0].is_empty());
    assert_no_cause(&held.text());
    assert_eq!(held.metadata, Some(json!({"followUp": true})));
    assert_eq!(
        held.error, None,
        "Layer C's line is ordinary text, not an error"
    );

    // Read to its end, the reply is seen: nothing to resume until the worker keeps the promise.
    let follow_up = read_stream(&resumed(&mut visitor, "outage1").await);
    assert_ne!(
        follow_up.message_id, held.message_id,
        "a message of its own"
    );
    assert_eq!(follow_up.text(), ANSWER.join("\n\n"));
    assert_eq!(
        visitor.get("/api/chat/outage1/stream").await.status,
        204,
        "replayed once"
    );

    let listed = visitor.get("/api/chat/outage1/messages").await;
    assert_eq!(listed.status, 200);
    let messages: Value = serde_json::from_slice(&listed.body).expect("JSON");
    let roles: Vec<&str> = messages
        .as_array()
        .expect("a list")
        .iter()
        .map(|m| m["role"].as_str().expect("a role"))
        .collect();
    assert_eq!(roles, ["user", "assistant", "assistant"]);
    assert_eq!(messages[0]["parts"][0]["text"], QUESTION);
    assert_eq!(messages[1]["id"], held.message_id.as_str());
    assert_eq!(messages[1]["parts"][0]["text"], held.texts[0].as_str());
    assert_eq!(messages[1].get("metadata"), None, "the promise is kept");
    assert_eq!(messages[2]["id"], follow_up.message_id.as_str());
    assert_eq!(
        messages[2]["parts"][0]["text"],
        ANSWER.join("\n\n").as_str()
    );
    assert_no_cause(&listed.text());
}

#[tokio::test]
async fn a_blocked_block_never_streams_and_the_rest_is_promised() {
    let server = WebServer::start("leak");
    let mut visitor = Visitor::new(&server);
    let streamed = read_stream(&visitor.say("leak1", "leak", QUESTION).await);
    // The first paragraph passed the gate; the model's echoed error did not, nor anything
    // after it; Layer C's holding line took its place.
    assert_eq!(streamed.texts.len(), 2, "{streamed:?}");
    assert_eq!(streamed.texts[0], ANSWER[0]);
    assert_no_cause(&streamed.text());
    assert!(!streamed.text().contains("Trying again later"));
    assert_eq!(streamed.metadata, Some(json!({"followUp": true})));
    assert!(server.logs().contains("\"verdict\":\"blocked\""));

    let rest = read_stream(&resumed(&mut visitor, "leak1").await);
    assert_eq!(rest.text(), ANSWER[1..].join("\n\n"), "only what follows");
}
