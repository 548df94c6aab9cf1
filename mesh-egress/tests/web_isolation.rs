//! Whose chat is it, and hostile requests, against the `web` example: two visitors (two signed
//! cookies) cannot post to, resume or list each other's chats (404, never a word of it); a
//! forged or tampered cookie is a new visitor; a 10 MB body, a 10,000-message history, invalid
//! UTF-8, malformed JSON, a body that is not JSON and forged chat ids each get a 4xx whose
//! body is a fixed sentence, the chat they aimed at is intact, and the server keeps serving.
//! `cargo test` builds the example before it runs this file.

mod web_support;

use serde_json::{Value, json};
use web_support::{ANSWER, QUESTION, Visitor, WebServer, read_stream};

/// A visitor with a chat of its own, answered.
async fn owner_with_chat(server: &WebServer, chat: &str) -> Visitor {
    let mut owner = Visitor::new(server);
    let streamed = read_stream(&owner.say(chat, "healthy", QUESTION).await);
    assert_eq!(streamed.text(), ANSWER.join("\n\n"));
    owner
}

/// The chat's listed messages, as its owner reads them.
async fn listed(visitor: &mut Visitor, chat: &str) -> Value {
    let reply = visitor.get(&format!("/api/chat/{chat}/messages")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    serde_json::from_slice(&reply.body).expect("JSON")
}

#[tokio::test]
async fn another_identity_cannot_post_to_resume_or_list_a_chat() {
    let server = WebServer::start("isolation");
    let mut owner = owner_with_chat(&server, "private1").await;
    let before = listed(&mut owner, "private1").await;
    assert_eq!(before.as_array().map(Vec::len), Some(2));

    let mut stranger = Visitor::new(&server);
    let posted = stranger
        .say("private1", "healthy", "Show me their chat")
        .await;
    let resumed = stranger.get("/api/chat/private1/stream").await;
    let read = stranger.get("/api/chat/private1/messages").await;
    for reply in [&posted, &resumed, &read] {
        assert_eq!(reply.status, 404, "{}", reply.text());
        assert_eq!(reply.text(), "This chat was not found.");
    }
    // A chat that does not exist looks the same: no way to tell the two apart.
    let nowhere = stranger.get("/api/chat/nobody-has-this/messages").await;
    assert_eq!((nowhere.status, nowhere.text()), (404, read.text()));

    // The stranger's own chats are theirs.
    read_stream(&stranger.say("theirs1", "healthy", QUESTION).await);
    assert_eq!(owner.get("/api/chat/theirs1/messages").await.status, 404);

    assert_eq!(
        listed(&mut owner, "private1").await,
        before,
        "nothing changed"
    );
}

#[tokio::test]
async fn a_forged_cookie_is_a_new_visitor() {
    let server = WebServer::start("cookie");
    let owner = owner_with_chat(&server, "signed1").await;
    let _ = owner;
    let client = reqwest::Client::new();
    for forged in [
        "mesh_web_visitor=v0000000000000000",
        "mesh_web_visitor=AAAA%3Dv00000000000000000000000000000000",
    ] {
        let reply = client
            .get(format!("{}/api/chat/signed1/messages", server.base))
            .header("cookie", forged)
            .send()
            .await
            .expect("answers");
        assert_eq!(reply.status().as_u16(), 404);
        let set = reply
            .headers()
            .get("set-cookie")
            .expect("a new visitor's cookie");
        let set = set.to_str().expect("ascii");
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Lax"),
            "{set}"
        );
    }
}

/// The refusals a hostile request gets: status and the sentence the page would show.
async fn refused(visitor: &mut Visitor, content_type: &str, body: Vec<u8>) -> (u16, String) {
    let reply = visitor.post("/api/chat", content_type, body).await;
    assert!(
        (400..500).contains(&reply.status),
        "{} {}",
        reply.status,
        reply.text()
    );
    assert!(
        reply.text().len() < 100,
        "a fixed sentence: {}",
        reply.text()
    );
    assert!(!reply.text().contains("serde"), "{}", reply.text());
    (reply.status, reply.text())
}

/// Sends a 10 MB body over a raw connection, declared (`content-length`) or not (chunked),
/// while reading the answer: the server refuses it once the bound is passed (at once when
/// declared), without reading the rest, so a client still writing may see the connection
/// close; the status line is what counts.
async fn ten_megabytes(server: &WebServer, chunked: bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connects");
    let (mut read, mut write) = stream.into_split();
    let length = 10usize << 20;
    let head = if chunked {
        format!(
            "POST /api/chat HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )
    } else {
        format!(
            "POST /api/chat HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n"
        )
    };
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        let piece = vec![b'x'; 64 << 10];
        for _ in 0..length / piece.len() {
            if chunked {
                write
                    .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                    .await?;
                write.write_all(&piece).await?;
                write.write_all(b"\r\n").await?;
            } else {
                write.write_all(&piece).await?;
            }
        }
        Ok::<_, std::io::Error>(())
    });
    let mut answer = vec![0u8; 512];
    let read_some = tokio::time::timeout(web_support::REQUEST_BOUND, read.read(&mut answer))
        .await
        .expect("answered within the bound")
        .expect("reads");
    writer.abort();
    String::from_utf8_lossy(&answer[..read_some]).into_owned()
}

#[tokio::test]
async fn a_ten_megabyte_body_is_refused_unread() {
    let mut server = WebServer::start("huge");
    for chunked in [false, true] {
        let answer = ten_megabytes(&server, chunked).await;
        assert!(
            answer.starts_with("HTTP/1.1 413"),
            "chunked={chunked}: {answer}"
        );
        assert!(
            answer.contains("That message is too long to send."),
            "{answer}"
        );
        assert!(server.is_running());
    }
}

#[tokio::test]
async fn hostile_requests_get_a_4xx_and_lose_nothing() {
    let mut server = WebServer::start("hostile");
    let mut owner = owner_with_chat(&server, "target1").await;
    let before = listed(&mut owner, "target1").await;
    let message =
        |text: &str| json!({"id": "u9", "role": "user", "parts": [{"type": "text", "text": text}]});

    let mut history: Vec<Value> = (0..10_000).map(|n| message(&format!("m{n}"))).collect();
    history.push(message("and one more"));
    let long_history = serde_json::to_vec(
        &json!({"id": "target1", "trigger": "submit-message", "messages": history}),
    )
    .unwrap();
    assert!(
        long_history.len() < 1 << 20,
        "under the body bound: the message count refuses it"
    );
    let mut bad_utf8 = br#"{"id":"target1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"#.to_vec();
    bad_utf8.extend_from_slice(b"\"\xff\xfe\x80\"}]}]}");
    let forged_id = |id: &str| {
        serde_json::to_vec(
            &json!({"id": id, "trigger": "submit-message", "messages": [message("hi")]}),
        )
        .unwrap()
    };
    let cases: Vec<(&str, &str, Vec<u8>, u16)> = vec![
        (
            "a 10,000-message history",
            "application/json",
            long_history,
            413,
        ),
        ("invalid UTF-8", "application/json", bad_utf8, 400),
        (
            "malformed JSON",
            "application/json",
            b"{\"id\": \"target1\", ".to_vec(),
            400,
        ),
        ("not JSON", "text/plain", b"hello".to_vec(), 415),
        (
            "a path in the chat id",
            "application/json",
            forged_id("../target1"),
            400,
        ),
        (
            "a chat id with a bidi override",
            "application/json",
            forged_id("target1\u{202e}"),
            400,
        ),
        (
            "an oversized chat id",
            "application/json",
            forged_id(&"t".repeat(300)),
            400,
        ),
        (
            "an unknown trigger",
            "application/json",
            serde_json::to_vec(
                &json!({"id": "target1", "trigger": "drop", "messages": [message("x")]}),
            )
            .unwrap(),
            400,
        ),
    ];
    for (what, content_type, body, status) in cases {
        let (got, sentence) = refused(&mut owner, content_type, body).await;
        assert_eq!(got, status, "{what}: {sentence}");
        assert!(server.is_running(), "{what}: the server is still up");
    }
    for forged in ["..", "a%20b", "x%E2%80%AEy", &"z".repeat(300)] {
        let reply = owner.get(&format!("/api/chat/{forged}/messages")).await;
        assert_eq!(reply.status, 404, "{forged}");
    }
    assert_eq!(
        listed(&mut owner, "target1").await,
        before,
        "nothing lost, nothing added"
    );
    let again = read_stream(&owner.say("target1", "healthy", "Still there?").await);
    assert!(again.text().contains("Still there?"), "{again:?}");
    assert!(server.is_running());
    assert!(!server.logs().contains("panicked"), "no panic");
}
