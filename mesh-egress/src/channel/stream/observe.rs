//! Watching a [`ReplyStream`](super::ReplyStream) as it goes: `StreamObserver`, told before
//! each call which parts it may show and after it what the surface confirmed.
//!
//! The durable outbox uses it to record streamed parts as `sending`, then `sent` with the
//! surface's message id; `turn --stream --deliver` uses it to print every edit with the
//! message's full current text.

use super::{BLOCK_SEPARATOR, StreamedMessage};
use crate::future::BoxFuture;
use crate::outbound::DeliveryId;

/// An observer refused the stream's next call (the durable outbox could not record it): the
/// call does not go, and the stream stops with every part not confirmed
/// ([`SurfaceStreamError::is_refused`](super::SurfaceStreamError::is_refused)).
///
/// Two kinds: the parts are not this stream's to show any more ([`new`](Self::new): another
/// worker holds the conversation, a part is not pending), or the observer's own store failed
/// ([`store_failed`](Self::store_failed)): then the conversation is still ours, and what was not
/// shown is sent once the store answers again
/// ([`SurfaceStreamError::is_store_failure`](super::SurfaceStreamError::is_store_failure)).
#[derive(Debug, thiserror::Error)]
#[error("the stream's next call was refused: {reason}")]
pub(crate) struct CallRefused {
    reason: String,
    store_failed: bool,
}

// Only the store's observer (the durable outbox) refuses a call; without a store nothing does.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", test)),
    allow(dead_code)
)]
impl CallRefused {
    /// A refusal, and why (for logs; never shown to a person).
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            store_failed: false,
        }
    }

    /// A refusal because the observer's store could not record the call (a database that
    /// failed), not because the conversation moved on.
    pub(crate) fn store_failed(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            store_failed: true,
        }
    }

    /// Whether the observer's store failed (see [`store_failed`](Self::store_failed)).
    pub(crate) fn is_store_failure(&self) -> bool {
        self.store_failed
    }
}

/// One part of the reply, as the outbox keys it: its message's delivery id and its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PartRef {
    delivery: DeliveryId,
    index: usize,
}

impl PartRef {
    pub(crate) fn new(delivery: DeliveryId, index: usize) -> Self {
        Self { delivery, index }
    }

    /// The delivery id of the message the part belongs to.
    pub fn delivery_id(&self) -> DeliveryId {
        self.delivery
    }

    /// The part's index within its message.
    pub fn index(&self) -> usize {
        self.index
    }
}

/// One surface message that changed with the last call, as it now stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageUpdate {
    message: usize,
    id: Option<String>,
    text: String,
    edit: bool,
    preview: bool,
}

impl MessageUpdate {
    /// The message's position in the reply, from 0.
    pub fn message(&self) -> usize {
        self.message
    }

    /// The surface's id for the message; `None` for a preview no message holds yet (a
    /// Telegram draft).
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The message's full current text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the message was shown before and this call changed it (an append, an edit, a
    /// draft made permanent), rather than showing it for the first time.
    pub fn is_edit(&self) -> bool {
        self.edit
    }

    /// Whether this is a preview the surface keeps for a while only (a Telegram draft): it
    /// confirms nothing.
    pub fn is_preview(&self) -> bool {
        self.preview
    }
}

/// Where a stream stands after a call: what changed, the messages as confirmed, and which
/// parts the surface confirmed.
#[derive(Debug)]
pub struct StreamProgress<'a> {
    pub(crate) updates: &'a [MessageUpdate],
    pub(crate) messages: &'a [StreamedMessage],
    pub(crate) confirmed: &'a [(PartRef, Option<&'a str>)],
    pub(crate) newly_confirmed: usize,
    pub(crate) stopped: bool,
    pub(crate) uncertain: &'a [PartRef],
    pub(crate) maybe_delivered: &'a [PartRef],
}

impl StreamProgress<'_> {
    /// The messages that changed, in order.
    pub fn updates(&self) -> &[MessageUpdate] {
        self.updates
    }

    /// Every message of the reply, with its confirmed text.
    pub fn messages(&self) -> &[StreamedMessage] {
        self.messages
    }

    /// Every part the surface has confirmed so far, in order, with the id of the message
    /// that holds it (`None` when the messages' texts could not be matched to the parts).
    pub fn confirmed(&self) -> &[(PartRef, Option<&str>)] {
        self.confirmed
    }

    /// The parts this call confirmed: the tail of [`confirmed`](Self::confirmed).
    pub fn newly_confirmed(&self) -> &[(PartRef, Option<&str>)] {
        let from = self.confirmed.len().saturating_sub(self.newly_confirmed);
        self.confirmed.get(from..).unwrap_or(&[])
    }

    /// Whether the stream stopped after this call (a failure it could not recover from): the
    /// parts not confirmed come back to the caller of [`finish`](super::ReplyStream::finish).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// When it stopped: the parts that were in a call whose outcome is unknown (no answer, on
    /// a surface where repeating it could post twice). They may be on the surface; the session
    /// never sends them again ([`SurfaceStreamError::uncertain`](super::SurfaceStreamError::uncertain)).
    pub fn uncertain(&self) -> &[PartRef] {
        self.uncertain
    }

    /// When it stopped: parts handed back that may be on the surface, in a call whose outcome
    /// is unknown, but that a message of their own deduplicates (a Discord create of that one
    /// part, its idempotency key as nonce). They are among the parts
    /// [`finish`](super::ReplyStream::finish) hands back; whoever sends them must rely on the
    /// dedupe (the durable outbox marks them maybe delivered).
    pub fn maybe_delivered(&self) -> &[PartRef] {
        self.maybe_delivered
    }
}

/// Watches one [`ReplyStream`](super::ReplyStream), attached with
/// [`observe`](super::ReplyStream::observe) (or the durable outbox's journal, which records each
/// part before the call that may show it).
///
/// Both hooks run on the stream's worker and are awaited before it makes its next call, so an
/// observer that records [`before_call`](Self::before_call) durably knows the record is there
/// before any text of those parts can reach the surface.
///
/// Any `Fn(&StreamProgress)` is an observer of progress alone (what
/// [`ReplyStream::observe`](super::ReplyStream::observe) takes).
pub(crate) trait StreamObserver: Send + Sync + 'static {
    /// Before a call that may show `parts` in a message (every part not confirmed yet that the
    /// call may put in a message; parts it shows only as a preview, a Telegram draft, are not
    /// among them); `Err` stops the stream instead of making the call.
    fn before_call<'a>(&'a self, parts: &'a [PartRef]) -> BoxFuture<'a, Result<(), CallRefused>> {
        let _ = parts;
        Box::pin(std::future::ready(Ok(())))
    }

    /// After a call, or the calls of one flush: what the surface now shows.
    fn after_call<'a>(&'a self, progress: &'a StreamProgress<'a>) -> BoxFuture<'a, ()>;
}

impl<F> StreamObserver for F
where
    F: Fn(&StreamProgress<'_>) + Send + Sync + 'static,
{
    fn after_call<'a>(&'a self, progress: &'a StreamProgress<'a>) -> BoxFuture<'a, ()> {
        self(progress);
        Box::pin(std::future::ready(()))
    }
}

/// What the observers were last told each message held: the worker's memory for telling a
/// new message from an edit.
#[derive(Default)]
pub(crate) struct Seen {
    /// Per message: its text, and whether that was a preview.
    shown: Vec<(String, bool)>,
}

impl Seen {
    /// The messages that differ from what was last seen, and remembers them.
    pub(crate) fn updates(
        &mut self,
        messages: &[StreamedMessage],
        preview: Option<&str>,
    ) -> Vec<MessageUpdate> {
        let mut updates = Vec::new();
        let current = messages
            .iter()
            .map(|m| (Some(m.id()), m.text(), false))
            .chain(preview.map(|text| (None, text, true)));
        for (message, (id, text, preview)) in current.enumerate() {
            if text.is_empty() {
                continue;
            }
            let before = self.shown.get(message);
            if before.is_some_and(|(t, p)| t == text && *p == preview) {
                continue;
            }
            updates.push(MessageUpdate {
                message,
                id: id.map(str::to_owned),
                text: text.to_owned(),
                edit: before.is_some(),
                preview,
            });
            let entry = (text.to_owned(), preview);
            match self.shown.get_mut(message) {
                Some(slot) => *slot = entry,
                None => self.shown.push(entry),
            }
        }
        updates
    }
}

/// Which message holds each of the first `confirmed` parts: a message's text is its parts'
/// texts joined by [`BLOCK_SEPARATOR`], so they are matched in order. A message whose text is
/// not such a join (a driver that changed it) leaves its parts and the rest unmatched (`None`).
pub(crate) fn holders<'m>(
    texts: &[String],
    confirmed: usize,
    messages: &'m [StreamedMessage],
) -> Vec<Option<&'m str>> {
    let mut holders = Vec::with_capacity(confirmed);
    let mut next = 0usize;
    'messages: for message in messages.iter().filter(|m| !m.text().is_empty()) {
        let target = message.text();
        let start = next;
        let mut joined_len = 0usize;
        while next < confirmed && joined_len < target.len() {
            let text = texts.get(next).map_or("", String::as_str);
            if next > start {
                joined_len = joined_len.saturating_add(BLOCK_SEPARATOR.len());
            }
            joined_len = joined_len.saturating_add(text.len());
            next += 1;
        }
        let joined = texts
            .get(start..next)
            .map(|t| t.join(BLOCK_SEPARATOR))
            .unwrap_or_default();
        if joined != target {
            break 'messages;
        }
        holders.extend(std::iter::repeat_n(Some(message.id()), next - start));
    }
    holders.resize(confirmed, None);
    holders
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(all: &[&str]) -> Vec<String> {
        all.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn parts_are_matched_to_the_messages_that_hold_them() {
        let parts = texts(&["one", "two\n\ninner", "three", "four"]);
        let messages = [
            StreamedMessage::new("m1", "one\n\ntwo\n\ninner"),
            StreamedMessage::new("m2", "three"),
        ];
        assert_eq!(
            holders(&parts, 3, &messages),
            [Some("m1"), Some("m1"), Some("m2")]
        );
    }

    #[test]
    fn a_message_that_is_not_a_join_of_parts_leaves_the_rest_unmatched() {
        let parts = texts(&["one", "two", "three"]);
        let messages = [
            StreamedMessage::new("m1", "one"),
            StreamedMessage::new("m2", "tw0\n\nthree"),
        ];
        assert_eq!(holders(&parts, 3, &messages), [Some("m1"), None, None]);
    }

    #[test]
    fn a_new_message_is_not_an_edit_and_a_changed_one_is() {
        let mut seen = Seen::default();
        let first = seen.updates(&[StreamedMessage::new("m1", "a")], None);
        assert_eq!(first.len(), 1);
        assert!(!first[0].is_edit());
        assert!(
            seen.updates(&[StreamedMessage::new("m1", "a")], None)
                .is_empty()
        );
        let grown = seen.updates(&[StreamedMessage::new("m1", "a\n\nb")], Some("c"));
        assert_eq!(grown.len(), 2);
        assert!(grown[0].is_edit() && grown[0].text() == "a\n\nb");
        assert!(grown[1].is_preview() && !grown[1].is_edit() && grown[1].id().is_none());
        // The draft made permanent: an edit of message 1, no longer a preview.
        let kept = seen.updates(
            &[
                StreamedMessage::new("m1", "a\n\nb"),
                StreamedMessage::new("m2", "c"),
            ],
            None,
        );
        assert_eq!(kept.len(), 1);
        assert!(kept[0].is_edit() && !kept[0].is_preview());
        assert_eq!(kept[0].id(), Some("m2"));
    }
}
