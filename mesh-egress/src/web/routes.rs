//! The three endpoints: `POST /api/chat`, `GET /api/chat/{id}/stream`,
//! `GET /api/chat/{id}/messages`. Each asks the application's extractor who is asking, and a
//! chat that is not that identity's is "not found", whoever owns it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::agent::ChatInput;
use super::live::LiveReply;
use super::messages::{history, ui_messages};
use super::owner::Owner;
use super::protocol::{KEEP_ALIVE, STREAM_HEADERS};
use super::request::{Refusal, Trigger, read};
use super::turn::{Accepted, conversation_of, run};
use super::{Inner, MAX_TURNS, PageOptions};
use crate::address::WebAddress;
use crate::store::{ChatAccess, StoreError};

/// How long a request waits for a conversation another process (a worker keeping a promise)
/// is speaking in, before it is refused as busy.
const LEASE_WAIT: Duration = Duration::from_secs(2);
/// How often it asks again meanwhile.
const LEASE_RETRY: Duration = Duration::from_millis(50);
/// How long a stream stays quiet before it sends a keep-alive comment.
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);

/// The router (see [`WebChat::router`](super::WebChat::router)).
pub(super) fn router<O, I>(inner: Arc<Inner<O>>) -> axum::Router
where
    O: PageOptions,
    I: FromRequestParts<()> + Into<Owner> + Send + 'static,
{
    axum::Router::new()
        .route("/api/chat", post(post_chat::<O, I>))
        .route("/api/chat/{id}/stream", get(resume::<O, I>))
        .route("/api/chat/{id}/messages", get(messages::<O, I>))
        .with_state(inner)
}

/// Who is asking, from the application's extractor; its refusal is ours, with no detail.
async fn identify<I>(parts: &mut Parts) -> Result<Owner, Refusal>
where
    I: FromRequestParts<()> + Into<Owner>,
{
    I::from_request_parts(parts, &())
        .await
        .map(Into::into)
        .map_err(|_| Refusal::Unidentified)
}

/// Whether `identity` may use `chat`; a store failure is "unavailable".
async fn open_chat<O>(
    inner: &Inner<O>,
    chat: &WebAddress,
    identity: &Owner,
    create: bool,
) -> Result<ChatAccess, Refusal> {
    let access = inner
        .store
        .open_web_chat(chat.chat(), identity.as_str(), create)
        .await
        .map_err(unavailable)?;
    match access {
        ChatAccess::Denied => Err(Refusal::NotFound),
        granted => Ok(granted),
    }
}

fn unavailable(error: StoreError) -> Refusal {
    tracing::error!(target: "mesh_egress::web", error = %error, "the web chat's store failed");
    Refusal::Unavailable
}

/// A chat id from the path: an id no chat can have is not found.
fn chat_from_path(id: String) -> Result<WebAddress, Refusal> {
    WebAddress::parse(id).map_err(|_| Refusal::NotFound)
}

async fn post_chat<O, I>(State(inner): State<Arc<Inner<O>>>, request: Request) -> Response
where
    O: PageOptions,
    I: FromRequestParts<()> + Into<Owner> + Send + 'static,
{
    match accept::<O, I>(&inner, request).await {
        Ok(accepted) => {
            let reply = Arc::clone(&accepted.reply);
            // The turn runs on its own task: a page that goes away does not stop the reply,
            // which is committed and can be resumed.
            tokio::spawn(run(Arc::clone(&inner), accepted));
            stream_response(reply)
        }
        Err(refusal) => refusal.into_response(),
    }
}

/// Checks a `POST /api/chat` and readies its turn: who asks, the body, the chat, the lease,
/// the recorded turn and the live reply, in that order.
async fn accept<O, I>(inner: &Arc<Inner<O>>, request: Request) -> Result<Accepted<O>, Refusal>
where
    O: PageOptions,
    I: FromRequestParts<()> + Into<Owner> + Send + 'static,
{
    let (mut parts, body) = request.into_parts();
    let identity = identify::<I>(&mut parts).await?;
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json {
        return Err(Refusal::NotJson);
    }
    let limits = inner.limits;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.body_bytes as u64) {
        return Err(Refusal::TooLarge);
    }
    // Past the limit the read stops: a body is never held whole beyond it, nor waited for
    // past its time.
    let bytes = tokio::time::timeout(
        limits.body_time,
        axum::body::to_bytes(body, limits.body_bytes),
    )
    .await
    .map_err(|_| Refusal::TooSlow)?
    .map_err(|_| Refusal::TooLarge)?;
    let request = read::<O>(&bytes, limits)?;
    let chat = request.chat;
    open_chat(inner, &chat, &identity, true).await?;
    let conversation = conversation_of(&chat);
    let transcript = inner
        .store
        .web_transcript(chat.chat(), &conversation, MAX_TURNS)
        .await
        .map_err(unavailable)?;
    let (message_id, text) = match (request.trigger, request.message) {
        (Trigger::SubmitMessage, Some((id, text))) => (Some(id), text),
        (Trigger::RegenerateMessage, _) => {
            let last = transcript.turns.iter().rev().find_map(|t| t.body.clone());
            (None, last.ok_or(Refusal::Unreadable)?)
        }
        (Trigger::SubmitMessage, None) => return Err(Refusal::Unreadable),
    };
    let run = inner.new_run();
    let holder = format!("{}/{run}", inner.holder);
    let lease = acquire(inner, &conversation, &holder).await?;
    let Ok(reply) = inner.replies.begin(chat.chat(), &run) else {
        let _ = inner.store.release(lease).await;
        return Err(Refusal::Busy);
    };
    if let Err(error) = inner
        .store
        .record_web_turn(chat.chat(), &run, message_id.as_deref(), Some(&text))
        .await
    {
        reply.fail(super::protocol::Interruption::Interrupted);
        let _ = inner.store.release(lease).await;
        return Err(unavailable(error));
    }
    let renewal = inner.store.keep_renewed(&lease, inner.lease_ttl);
    let input = ChatInput::new(
        chat.chat().to_owned(),
        text,
        history(&transcript),
        request.options,
    );
    Ok(Accepted {
        chat,
        run,
        input,
        lease,
        renewal,
        reply,
    })
}

/// Takes the conversation's lease, waiting a little for a worker that holds it.
async fn acquire<O>(
    inner: &Inner<O>,
    conversation: &str,
    holder: &str,
) -> Result<crate::store::Lease, Refusal> {
    let deadline = tokio::time::Instant::now() + LEASE_WAIT;
    loop {
        match inner
            .store
            .acquire(conversation, holder, inner.lease_ttl)
            .await
        {
            Ok(lease) => return Ok(lease),
            Err(StoreError::LeaseHeld { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(LEASE_RETRY).await;
            }
            Err(StoreError::LeaseHeld { .. }) => return Err(Refusal::Busy),
            Err(error) => return Err(unavailable(error)),
        }
    }
}

async fn resume<O, I>(
    State(inner): State<Arc<Inner<O>>>,
    Path(id): Path<String>,
    request: Request,
) -> Response
where
    O: PageOptions,
    I: FromRequestParts<()> + Into<Owner> + Send + 'static,
{
    let found = async {
        let (mut parts, _) = request.into_parts();
        let identity = identify::<I>(&mut parts).await?;
        let chat = chat_from_path(id)?;
        open_chat(&inner, &chat, &identity, false).await?;
        Ok::<_, Refusal>(inner.replies.resumable(chat.chat()))
    };
    match found.await {
        Ok(Some(reply)) => stream_response(reply),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refusal.into_response(),
    }
}

async fn messages<O, I>(
    State(inner): State<Arc<Inner<O>>>,
    Path(id): Path<String>,
    request: Request,
) -> Response
where
    O: PageOptions,
    I: FromRequestParts<()> + Into<Owner> + Send + 'static,
{
    let listed = async {
        let (mut parts, _) = request.into_parts();
        let identity = identify::<I>(&mut parts).await?;
        let chat = chat_from_path(id)?;
        open_chat(&inner, &chat, &identity, false).await?;
        let transcript = inner
            .store
            .web_transcript(chat.chat(), &conversation_of(&chat), MAX_TURNS)
            .await
            .map_err(unavailable)?;
        inner.replies.listed(chat.chat());
        Ok::<_, Refusal>(ui_messages(&transcript))
    };
    match listed.await {
        Ok(messages) => match serde_json::to_vec(&messages) {
            Ok(body) => (
                [
                    (
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    ),
                    (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                ],
                body,
            )
                .into_response(),
            Err(_) => Refusal::Unavailable.into_response(),
        },
        Err(refusal) => refusal.into_response(),
    }
}

/// The UI message stream of `reply`, from its `start`.
fn stream_response(reply: Arc<LiveReply>) -> Response {
    let mut response = Response::new(Body::from_stream(events(reply)));
    let headers = response.headers_mut();
    for (name, value) in STREAM_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// What a response reads: every event of `reply` from the first, as they are written, with a
/// keep-alive comment when it is quiet. The reply counts as seen once its last event is out.
fn events(
    reply: Arc<LiveReply>,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send {
    struct Reader {
        reply: Arc<LiveReply>,
        changed: tokio::sync::watch::Receiver<usize>,
        next: usize,
        done: bool,
    }
    let changed = reply.subscribe();
    let reader = Reader {
        reply,
        changed,
        next: 0,
        done: false,
    };
    futures_util::stream::unfold(reader, |mut reader| async move {
        loop {
            if reader.done {
                return None;
            }
            // Seen before reading, so an event written after the read wakes the wait below.
            reader.changed.borrow_and_update();
            let (events, finished) = reader.reply.events_from(reader.next);
            if !events.is_empty() {
                reader.next += events.len();
                if finished {
                    reader.reply.mark_seen();
                    reader.done = true;
                }
                return Some((Ok(events.concat().into()), reader));
            }
            if finished {
                reader.reply.mark_seen();
                return None;
            }
            match tokio::time::timeout(KEEP_ALIVE_EVERY, reader.changed.changed()).await {
                Ok(Ok(())) => {}
                // The reply's sender lives as long as the reply this reader holds.
                Ok(Err(_)) => return None,
                Err(_quiet) => {
                    return Some((Ok(Bytes::from_static(KEEP_ALIVE.as_bytes())), reader));
                }
            }
        }
    })
}
