//! What the classifier remembers across events, every part bounded: deliveries seen (for
//! duplicates), threads we answered in (for follow-ups), each conversation's last message of
//! ours and its run of bot-to-bot turns, and the last few messages of each conversation (for
//! the judge's prompt). Time is the events' own.
//!
//! Keys are 64-bit hashes under a per-process random key (`RandomState`), so memory per entry
//! is small and an id someone chose (Slack's `client_msg_id` is the client's) cannot be made
//! to collide with another message's on purpose.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

use crate::address::{Address, Surface};
use crate::ingress::inbound::{Inbound, InboundId};

/// How many delivery ids are remembered (a retry or a second event type arrives within
/// seconds to minutes; Slack retries three times over about an hour).
pub(crate) const DELIVERY_MEMORY: usize = 16_384;

/// How many threads and conversations are remembered, each.
pub(crate) const CONVERSATION_MEMORY: usize = 4_096;

/// How many messages of each conversation the judge sees.
pub(crate) const HISTORY_LINES: usize = 6;

/// How much of each remembered message the judge sees, in bytes.
pub(crate) const HISTORY_TEXT: usize = 280;

/// The maps' own hasher: their keys are already keyed SipHash outputs (uniform, and not
/// choosable by whoever writes a message), so hashing them again would only cost time.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; fold anything else in rather than panic.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

type Keyed = BuildHasherDefault<KeyHasher>;

/// What a key is of, hashed in with the ids so the kinds never collide.
#[derive(Clone, Copy, Hash)]
enum Kind {
    Conversation,
    Thread,
    Author,
    Delivery,
}

/// Who wrote a remembered message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Speaker {
    Us,
    Person(u64),
    Bot(u64),
}

/// One remembered message.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    pub(crate) speaker: Speaker,
    pub(crate) text: String,
}

/// A thread we answered in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadMemory {
    /// When we last answered there (event time, ms).
    pub(crate) ours_at: u64,
    /// The person we answered, if we answered someone (not when we spoke first).
    pub(crate) partner: Option<u64>,
    /// Messages from others since.
    pub(crate) since: u32,
}

/// One conversation.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConversationMemory {
    /// When we last spoke or engaged there (event time, ms).
    pub(crate) ours_at: Option<u64>,
    /// Consecutive bot messages we engaged on since the last person wrote.
    pub(crate) bot_turns: u32,
}

/// The keys one message touches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keys {
    pub(crate) conversation: u64,
    /// The thread the message is in.
    pub(crate) thread: Option<u64>,
    /// The thread an answer to it lands in (Slack answers in the message's thread, Telegram
    /// replies start a reply thread at the message).
    pub(crate) answer_thread: Option<u64>,
    /// Where its context (history) is kept: its thread, else its conversation.
    pub(crate) context: u64,
    pub(crate) author: u64,
}

/// Everything remembered.
#[derive(Debug)]
pub(crate) struct State {
    hasher: RandomState,
    seen: Fifo,
    pub(crate) threads: Lru<ThreadMemory>,
    pub(crate) conversations: Lru<ConversationMemory>,
    pub(crate) history: Lru<VecDeque<Line>>,
}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            hasher: RandomState::new(),
            seen: Fifo::new(DELIVERY_MEMORY),
            threads: Lru::new(CONVERSATION_MEMORY),
            conversations: Lru::new(CONVERSATION_MEMORY),
            history: Lru::new(CONVERSATION_MEMORY),
        }
    }

    fn key(&self, value: impl Hash) -> u64 {
        self.hasher.hash_one(value)
    }

    /// The keys of `inbound`.
    pub(crate) fn keys(&self, inbound: &Inbound) -> Keys {
        let surface = inbound.surface();
        let conversation = match inbound.address() {
            // A Slack thread is a thread of its channel's conversation.
            Address::Slack(slack) => self.key((Kind::Conversation, surface, slack.channel())),
            other => self.key((Kind::Conversation, other)),
        };
        let thread_key = |thread: &str| self.key((Kind::Thread, conversation, thread));
        let thread = inbound.thread().map(thread_key);
        let answer_thread = match surface {
            Surface::Discord => thread,
            _ => Some(thread.unwrap_or_else(|| thread_key(inbound.message_id()))),
        };
        Keys {
            conversation,
            thread,
            answer_thread,
            context: thread.unwrap_or(conversation),
            author: self.key((Kind::Author, surface, inbound.author().id())),
        }
    }

    /// Whether any of `deliveries` was seen before; remembers them all either way.
    pub(crate) fn seen_before(&mut self, surface: Surface, deliveries: &[InboundId]) -> bool {
        let mut seen = false;
        for delivery in deliveries {
            let key = self.key((Kind::Delivery, surface, delivery));
            seen |= !self.seen.insert(key);
        }
        seen
    }

    /// Remembers `inbound` in its conversation's history (truncated; never logged).
    pub(crate) fn remember(&mut self, keys: &Keys, inbound: &Inbound) {
        let speaker = if inbound.author().is_us() {
            Speaker::Us
        } else if inbound.author().is_bot() {
            Speaker::Bot(keys.author)
        } else {
            Speaker::Person(keys.author)
        };
        let mut end = inbound.text().len().min(HISTORY_TEXT);
        while !inbound.text().is_char_boundary(end) {
            end -= 1;
        }
        let lines = self.history.entry(keys.context, VecDeque::new);
        if lines.len() >= HISTORY_LINES {
            lines.pop_front();
        }
        lines.push_back(Line {
            speaker,
            text: inbound.text()[..end].to_owned(),
        });
    }
}

/// A set that forgets its oldest member past `capacity`.
#[derive(Debug)]
struct Fifo {
    capacity: usize,
    members: HashSet<u64, Keyed>,
    order: VecDeque<u64>,
}

impl Fifo {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            members: HashSet::default(),
            order: VecDeque::new(),
        }
    }

    /// `false` when `key` was already a member.
    fn insert(&mut self, key: u64) -> bool {
        if !self.members.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.members.remove(&oldest);
        }
        true
    }
}

/// A map that forgets its least recently used entry past `capacity`.
///
/// Every use pushes a (key, stamp) onto the order; eviction pops the oldest and removes the
/// entry only if that was its latest use. The order is rebuilt when stale pairs pile up, so it
/// stays within a small multiple of `capacity`.
#[derive(Debug)]
pub(crate) struct Lru<V> {
    capacity: usize,
    stamp: u64,
    entries: HashMap<u64, (V, u64), Keyed>,
    order: VecDeque<(u64, u64)>,
}

impl<V> Lru<V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            stamp: 0,
            entries: HashMap::default(),
            order: VecDeque::new(),
        }
    }

    /// The entry at `key`, if any, without counting as a use.
    pub(crate) fn peek(&self, key: u64) -> Option<&V> {
        self.entries.get(&key).map(|(v, _)| v)
    }

    /// The entry at `key` as a use, made by `make` when missing.
    pub(crate) fn entry(&mut self, key: u64, make: impl FnOnce() -> V) -> &mut V {
        self.stamp += 1;
        let stamp = self.stamp;
        if !self.entries.contains_key(&key) {
            self.evict_for_one();
        }
        // After eviction, so the order always holds every entry's latest use.
        self.order.push_back((key, stamp));
        if self.order.len() > self.capacity.saturating_mul(4).max(16) {
            self.compact();
        }
        let slot = self.entries.entry(key).or_insert_with(|| (make(), stamp));
        slot.1 = stamp;
        &mut slot.0
    }

    /// Forgets least recently used entries until one more fits.
    fn evict_for_one(&mut self) {
        while self.entries.len() >= self.capacity.max(1) {
            let Some((key, stamp)) = self.order.pop_front() else {
                return;
            };
            if self.entries.get(&key).is_some_and(|(_, s)| *s == stamp) {
                self.entries.remove(&key);
            }
        }
    }

    fn compact(&mut self) {
        let entries = &self.entries;
        self.order
            .retain(|(key, stamp)| entries.get(key).is_some_and(|(_, s)| s == stamp));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fifo_forgets_the_oldest_past_its_capacity() {
        let mut seen = Fifo::new(2);
        assert!(seen.insert(1));
        assert!(!seen.insert(1));
        assert!(seen.insert(2));
        assert!(seen.insert(3));
        assert!(seen.insert(1), "1 was forgotten");
        assert_eq!(seen.members.len(), 2);
    }

    #[test]
    fn the_lru_keeps_what_is_used_and_stays_bounded() {
        let mut lru: Lru<u32> = Lru::new(3);
        for key in 0..3 {
            *lru.entry(key, || 0) += 1;
        }
        for _ in 0..100 {
            *lru.entry(0, || 0) += 1;
        }
        lru.entry(9, || 0);
        assert_eq!(lru.len(), 3);
        assert_eq!(lru.peek(0), Some(&101), "used most recently, kept");
        assert_eq!(lru.peek(1), None, "least recently used, forgotten");
        assert!(lru.order.len() <= 16, "stale uses are compacted");
    }
}
