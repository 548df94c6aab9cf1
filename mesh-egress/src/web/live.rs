//! The live side of a web chat: each reply's UI message stream as it is written, kept so a
//! page that reconnects (`GET /api/chat/{id}/stream`) replays it from `start`.
//!
//! A [`LiveReply`] is a log of encoded SSE events, appended by the web channel as the outbox
//! sends each part and read by any number of responses, each from the first event. The
//! [`Replies`] map keeps, per chat, the reply being written and the last finished one that no
//! page has read to its end. It is memory only: the outbox is the record (a restart loses the
//! replay, never a delivered word, which `GET /api/chat/{id}/messages` lists).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use tokio::sync::watch;

use super::protocol::{DONE, Interruption, MessageMetadata, UiChunk};
use crate::outbound::CommittedPart;

/// How many chats the map keeps a finished, unread reply for; past it the oldest goes (its
/// text stays listed by `GET /api/chat/{id}/messages`).
const MAX_UNSEEN: usize = 4_096;

/// One reply's stream as it is written.
pub(crate) struct LiveReply {
    message_id: String,
    log: Mutex<Log>,
    /// The number of events so far, for readers waiting on more.
    length: watch::Sender<usize>,
}

#[derive(Default)]
struct Log {
    events: Vec<Bytes>,
    /// Text parts opened so far: the next part's id is `t{count}`.
    text_parts: usize,
    finished: bool,
    /// A response read it to its end (or the chat's messages were listed after it ended).
    seen: bool,
    /// Part of a follow-up's own detached reply: it finishes with its delivery's last part.
    finish_with_delivery: bool,
}

impl LiveReply {
    /// A reply whose message is `message_id`, its `start` event written.
    pub(crate) fn new(message_id: impl Into<String>) -> Arc<Self> {
        let message_id = message_id.into();
        let mut log = Log::default();
        log.push(&UiChunk::Start {
            message_id: &message_id,
        });
        let (length, _) = watch::channel(log.events.len());
        Arc::new(Self {
            message_id,
            log: Mutex::new(log),
            length,
        })
    }

    /// The message's id.
    pub(crate) fn message_id(&self) -> &str {
        &self.message_id
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `part` as a text part of its own (`text-start`, one `text-delta`, `text-end`):
    /// each outbox part is one delivered piece of the message. Nothing is written after the end.
    /// Returns whether `part` is the last of a follow-up's detached reply: the caller ends the
    /// reply once the outbox has marked the part sent (see `WebChannel::send`).
    #[must_use = "a detached reply's last part asks its caller to end the reply"]
    pub(crate) fn append(&self, part: &CommittedPart) -> bool {
        let ends = {
            let mut log = self.log();
            if log.finished {
                return false;
            }
            let id = format!("t{}", log.text_parts);
            log.text_parts += 1;
            log.push(&UiChunk::TextStart { id: &id });
            log.push(&UiChunk::TextDelta {
                id: &id,
                delta: part.text(),
            });
            log.push(&UiChunk::TextEnd { id: &id });
            log.finish_with_delivery && part.index() + 1 == part.total()
        };
        self.announce();
        ends
    }

    /// Ends the message: `finish` (with `metadata`), then `[DONE]`.
    pub(crate) fn finish(&self, metadata: Option<MessageMetadata>) {
        self.end(UiChunk::Finish {
            message_metadata: metadata,
        });
    }

    /// Ends the message short: the `error` chunk with `why`'s fixed sentence, then `[DONE]`.
    pub(crate) fn fail(&self, why: Interruption) {
        self.end(UiChunk::Error { error_text: why });
    }

    fn end(&self, last: UiChunk<'_>) {
        {
            let mut log = self.log();
            if log.finished {
                return;
            }
            log.push(&last);
            log.events.push(Bytes::from_static(DONE.as_bytes()));
            log.finished = true;
        }
        self.announce();
    }

    fn announce(&self) {
        let length = self.log().events.len();
        self.length.send_replace(length);
    }

    /// Whether the message has ended.
    pub(crate) fn is_finished(&self) -> bool {
        self.log().finished
    }

    /// Whether a response read it to its end.
    pub(crate) fn is_seen(&self) -> bool {
        self.log().seen
    }

    /// Marks it read.
    pub(crate) fn mark_seen(&self) {
        self.log().seen = true;
    }

    /// The events from `from` on, and whether they reach the end.
    pub(crate) fn events_from(&self, from: usize) -> (Vec<Bytes>, bool) {
        let log = self.log();
        let events = log.events.get(from..).unwrap_or_default().to_vec();
        (events, log.finished)
    }

    /// A receiver that wakes when events are added.
    pub(crate) fn subscribe(&self) -> watch::Receiver<usize> {
        self.length.subscribe()
    }
}

impl Log {
    fn push(&mut self, chunk: &UiChunk<'_>) {
        let mut event = Vec::with_capacity(64);
        chunk.write_sse(&mut event);
        self.events.push(Bytes::from(event));
    }
}

/// What a chat has live.
#[derive(Default)]
struct ChatReplies {
    /// The reply a turn is writing (and, once it ended, until it is seen or replaced).
    current: Option<Arc<LiveReply>>,
    /// The order this entry last held an unseen finished reply in (for eviction).
    since: u64,
}

/// Every chat's live replies (see the [module docs](self)).
#[derive(Default)]
pub(crate) struct Replies {
    chats: Mutex<Chats>,
}

#[derive(Default)]
struct Chats {
    map: HashMap<String, ChatReplies>,
    clock: u64,
}

/// A turn is already writing a reply in this chat.
#[derive(Debug)]
pub(crate) struct Busy;

impl Replies {
    fn chats(&self) -> MutexGuard<'_, Chats> {
        self.chats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the reply a turn writes in `chat`, or [`Busy`] while another is being written.
    pub(crate) fn begin(&self, chat: &str, message_id: &str) -> Result<Arc<LiveReply>, Busy> {
        let mut chats = self.chats();
        if chats
            .map
            .get(chat)
            .and_then(|c| c.current.as_ref())
            .is_some_and(|r| !r.is_finished())
        {
            return Err(Busy);
        }
        let reply = LiveReply::new(message_id);
        chats.put(chat, Arc::clone(&reply));
        Ok(reply)
    }

    /// The reply a follow-up (a delivery no turn is writing: a kept promise, or a part a
    /// worker sends after a restart) goes into: the chat's unfinished reply if a turn is
    /// writing one, else a reply of its own named `message_id` that ends with the delivery.
    pub(crate) fn detached(&self, chat: &str, message_id: &str) -> Arc<LiveReply> {
        let mut chats = self.chats();
        if let Some(current) = chats.map.get(chat).and_then(|c| c.current.as_ref())
            && !current.is_finished()
        {
            return Arc::clone(current);
        }
        let reply = LiveReply::new(message_id);
        reply.log().finish_with_delivery = true;
        chats.put(chat, Arc::clone(&reply));
        reply
    }

    /// The reply a reconnecting page replays: the one being written, or the last finished
    /// one no page has read to its end.
    pub(crate) fn resumable(&self, chat: &str) -> Option<Arc<LiveReply>> {
        let chats = self.chats();
        let current = chats.map.get(chat)?.current.as_ref()?;
        (!current.is_finished() || !current.is_seen()).then(|| Arc::clone(current))
    }

    /// The chat's messages were listed: a finished reply counts as read.
    pub(crate) fn listed(&self, chat: &str) {
        let mut chats = self.chats();
        let finished = chats
            .map
            .get(chat)
            .and_then(|c| c.current.as_ref())
            .is_some_and(|r| r.is_finished());
        if finished {
            chats.map.remove(chat);
        }
    }
}

impl Chats {
    fn put(&mut self, chat: &str, reply: Arc<LiveReply>) {
        self.clock += 1;
        let since = self.clock;
        self.map.insert(
            chat.to_owned(),
            ChatReplies {
                current: Some(reply),
                since,
            },
        );
        if self.map.len() > MAX_UNSEEN {
            self.evict();
        }
    }

    /// Drops finished replies, the oldest first, until the map is back under its bound. A reply
    /// being written is never dropped (its turn holds it and ends it).
    fn evict(&mut self) {
        let mut finished: Vec<(u64, String)> = self
            .map
            .iter()
            .filter(|(_, c)| c.current.as_ref().is_none_or(|r| r.is_finished()))
            .map(|(chat, c)| (c.since, chat.clone()))
            .collect();
        finished.sort_unstable();
        let excess = self.map.len().saturating_sub(MAX_UNSEEN);
        for (_, chat) in finished.into_iter().take(excess.max(MAX_UNSEEN / 8)) {
            self.map.remove(&chat);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(events: &[Bytes]) -> String {
        events
            .iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }

    #[test]
    fn a_second_turn_in_one_chat_waits_for_the_first() {
        let replies = Replies::default();
        let first = replies.begin("c1", "m1").unwrap();
        assert!(replies.begin("c1", "m2").is_err());
        assert!(replies.begin("c2", "m3").is_ok());
        first.finish(None);
        assert!(replies.begin("c1", "m4").is_ok());
    }

    #[test]
    fn a_finished_reply_is_resumable_until_read() {
        let replies = Replies::default();
        assert!(replies.resumable("c1").is_none());
        let reply = replies.begin("c1", "m1").unwrap();
        assert!(replies.resumable("c1").is_some(), "in progress");
        reply.finish(None);
        assert!(replies.resumable("c1").is_some(), "finished, unread");
        reply.mark_seen();
        assert!(replies.resumable("c1").is_none());
        let again = replies.begin("c1", "m2").unwrap();
        again.finish(None);
        replies.listed("c1");
        assert!(replies.resumable("c1").is_none(), "listed counts as read");
    }

    #[test]
    fn nothing_is_written_after_the_end_and_done_is_last() {
        let reply = LiveReply::new("m1");
        reply.fail(Interruption::Interrupted);
        reply.finish(None);
        let (events, finished) = reply.events_from(0);
        assert!(finished);
        let text = text(&events);
        assert!(text.starts_with("data: {\"type\":\"start\",\"messageId\":\"m1\"}\n\n"));
        assert!(text.ends_with("data: [DONE]\n\n"));
        assert_eq!(text.matches("[DONE]").count(), 1);
        assert!(!text.contains("finish"));
    }

    #[test]
    fn finished_replies_are_evicted_past_the_bound_and_live_ones_kept() {
        let replies = Replies::default();
        let live = replies.begin("live", "m").unwrap();
        for n in 0..MAX_UNSEEN + 10 {
            replies.begin(&format!("c{n}"), "m").unwrap().finish(None);
        }
        assert!(replies.chats().map.len() <= MAX_UNSEEN);
        assert!(replies.resumable("live").is_some());
        assert!(replies.resumable(&format!("c{}", MAX_UNSEEN + 9)).is_some());
        live.finish(None);
    }
}
