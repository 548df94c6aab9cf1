//! [`ReplyStream`]: the per-reply session, an inbox the caller fills and a worker task that
//! drains it into the surface's [`Driver`].

use std::error::Error as StdError;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::observe::{CallRefused, PartRef, Seen, StreamObserver, StreamProgress, holders};
use super::{
    BLOCK_SEPARATOR, StreamMode, StreamOpenError, StreamedMessage, SurfaceStreamError,
    SurfaceStreamReceipt,
};
use crate::egress::Attribution;
use crate::outbound::CommittedPart;

/// Every part of the reply the worker has taken from the inbox, in order. A driver reads the
/// texts; a driver that sends through [`Channel::send`](crate::channel::Channel::send) takes
/// the part (and puts it back if the send handed it back).
#[derive(Default)]
pub(crate) struct Parts {
    parts: Vec<Option<CommittedPart>>,
    texts: Vec<String>,
    keys: Vec<PartRef>,
}

impl Parts {
    fn push(&mut self, part: CommittedPart) {
        self.texts.push(part.text().to_owned());
        self.keys
            .push(PartRef::new(part.delivery_id(), part.index()));
        self.parts.push(Some(part));
    }

    /// How many parts have arrived.
    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    /// The text of part `index`.
    pub(crate) fn text(&self, index: usize) -> &str {
        self.texts.get(index).map_or("", String::as_str)
    }

    /// The texts of parts `from..`.
    pub(crate) fn texts_from(&self, from: usize) -> &[String] {
        self.texts.get(from..).unwrap_or(&[])
    }

    /// The idempotency key of part `index`, while it is held.
    pub(crate) fn idempotency_key(&self, index: usize) -> Option<String> {
        self.parts
            .get(index)
            .and_then(Option::as_ref)
            .map(CommittedPart::idempotency_key)
    }

    /// Fails with [`OwnershipLost`](super::OwnershipLost) unless every part from `from` on may
    /// still be sent: what each driver checks before a call.
    pub(crate) fn check_owned_from(&self, from: usize) -> Result<(), DriverError> {
        if self.owned(from, self.len()) {
            Ok(())
        } else {
            Err(DriverError::new(Box::new(super::OwnershipLost)))
        }
    }

    /// The ownerships of the parts from `from` on, each once: what every call that may show
    /// them re-checks before each try.
    #[cfg(feature = "http")]
    pub(crate) fn owners_from(&self, from: usize) -> Vec<crate::ownership::Ownership> {
        let mut owners: Vec<crate::ownership::Ownership> = Vec::new();
        for ownership in self
            .parts
            .get(from..)
            .unwrap_or(&[])
            .iter()
            .flatten()
            .filter_map(CommittedPart::ownership)
        {
            if !owners.iter().any(|o| o.same_as(ownership)) {
                owners.push(ownership.clone());
            }
        }
        owners
    }

    /// Whether every part in `from..to` may still be sent (its ownership holds).
    pub(crate) fn owned(&self, from: usize, to: usize) -> bool {
        self.parts
            .get(from..to)
            .unwrap_or(&[])
            .iter()
            .flatten()
            .all(CommittedPart::is_owned)
    }

    /// Takes part `index` to send it.
    pub(crate) fn take(&mut self, index: usize) -> Option<CommittedPart> {
        self.parts.get_mut(index).and_then(Option::take)
    }

    /// Puts back a part a send handed back.
    pub(crate) fn put_back(&mut self, index: usize, part: CommittedPart) {
        if let Some(slot) = self.parts.get_mut(index) {
            *slot = Some(part);
        }
    }

    /// The keys of parts `from..to`.
    fn keys(&self, from: usize, to: usize) -> &[PartRef] {
        self.keys.get(from..to.min(self.keys.len())).unwrap_or(&[])
    }

    /// The parts from `from` on that are still held, in order.
    fn unconfirmed(&mut self, from: usize) -> Vec<CommittedPart> {
        self.parts
            .get_mut(from..)
            .unwrap_or(&mut [])
            .iter_mut()
            .filter_map(Option::take)
            .collect()
    }
}

/// Groups `texts` into messages: consecutive texts joined by [`BLOCK_SEPARATOR`] while the
/// joined text `fits`; a text that does not fit even alone is a message of its own (the
/// renderer's limit already keeps every part within the surface's). Returns each message's
/// part count and text.
pub(crate) fn pack(texts: &[String], fits: impl Fn(&str) -> bool) -> Vec<(usize, String)> {
    let mut messages: Vec<(usize, String)> = Vec::new();
    for text in texts {
        if let Some((count, joined)) = messages.last_mut() {
            let candidate = format!("{joined}{BLOCK_SEPARATOR}{text}");
            if fits(&candidate) {
                *joined = candidate;
                *count += 1;
                continue;
            }
        }
        messages.push((1, text.clone()));
    }
    messages
}

/// Why a driver stopped.
#[derive(Debug)]
pub(crate) struct DriverError {
    source: Box<dyn StdError + Send + Sync>,
}

impl DriverError {
    pub(crate) fn new(source: Box<dyn StdError + Send + Sync>) -> Self {
        Self { source }
    }
}

/// How far a driver's calls may have shown parts past the ones the surface confirmed: parts in
/// a call whose outcome is unknown (no answer, a 5xx, `internal_error`, an unreadable answer),
/// or in a call the surface applied and did not answer (a Discord edit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MaybeShown {
    /// The parts before this index may be on the surface.
    upto: usize,
    /// Whether each of those parts, sent again as a message of its own with its idempotency
    /// key, is deduped by the surface (a Discord create of that one part, its key as nonce):
    /// then they are handed back, marked maybe delivered; otherwise they are
    /// [uncertain](super::SurfaceStreamError::uncertain) and never sent again.
    deduped: bool,
}

impl MaybeShown {
    /// A call that carried parts `from..to` (`from` the confirmed offset when it went) may
    /// have been applied; `deduped` as on [`MaybeShown`].
    pub(crate) fn note(&mut self, from: usize, to: usize, deduped: bool) {
        // A region that began before `from` and is still unsettled stays so: it is deduped
        // only if every call in it is.
        self.deduped = if self.upto <= from {
            deduped
        } else {
            self.deduped && deduped
        };
        self.upto = self.upto.max(to);
    }

    /// How many parts past `confirmed` may be shown.
    fn past(self, confirmed: usize) -> usize {
        self.upto.saturating_sub(confirmed)
    }
}

/// The mode a stream opens in when `asked` for: a growing message
/// ([`Stream`](StreamMode::Stream)) where the surface has no `native` way to show one here
/// falls back to [`Blocks`](StreamMode::Blocks), and says so (`true`, what the receipt reports).
pub(crate) fn opening_mode(asked: StreamMode, native: bool) -> (StreamMode, bool) {
    match asked {
        StreamMode::Stream if !native => (StreamMode::Blocks, true),
        mode => (mode, false),
    }
}

/// Sends what `driver` has not confirmed yet, in its current [`mode`](Driver::mode); `done`
/// when no part will follow. The one place a stream's mode picks how parts go out:
/// [`Stream`](StreamMode::Stream) grows the one message ([`Driver::grow`]),
/// [`Blocks`](StreamMode::Blocks) posts what queued as messages ([`Driver::post_queued`]), and
/// [`Final`](StreamMode::Final) waits for the whole reply, then posts it like `Blocks`.
pub(crate) async fn flush<D: Driver>(
    driver: &mut D,
    parts: &mut Parts,
    done: bool,
) -> Result<(), DriverError> {
    driver.before_flush(parts)?;
    match driver.mode() {
        StreamMode::Stream => driver.grow(parts, done).await,
        StreamMode::Final if !done => Ok(()),
        StreamMode::Blocks | StreamMode::Final => driver.post_queued(parts).await,
    }
}

/// One surface's way of showing a reply. The worker calls [`flush`] with every part so far
/// whenever new parts arrived (and once more with `done`); the driver sends what is beyond
/// [`confirmed`](Self::confirmed), in as few calls as its surface and budget allow, with the
/// primitive of its [`mode`](Self::mode). A driver that waits for its rate budget should do so
/// before it reads `parts` past `confirmed`, through [`ready`](Self::ready), so what arrives
/// meanwhile goes in the same call.
pub(crate) trait Driver: Send + Sync + 'static {
    /// The mode the reply is shown in now: the one it opened in, or
    /// [`Blocks`](StreamMode::Blocks) after the surface's own stream failed mid-reply.
    fn mode(&self) -> StreamMode;

    /// What every [`flush`] does first, whatever the mode (forget a pending retry, re-check
    /// that the parts past the confirmed ones may still be sent). The default: nothing.
    fn before_flush(&mut self, parts: &Parts) -> Result<(), DriverError> {
        let _ = parts;
        Ok(())
    }

    /// [`Stream`](StreamMode::Stream): shows the parts past the confirmed ones in the one
    /// growing message; `done` when no part will follow. The default, for a surface without a
    /// native stream: they go as messages ([`post_queued`](Self::post_queued)).
    fn grow<'a>(
        &'a mut self,
        parts: &'a mut Parts,
        done: bool,
    ) -> impl Future<Output = Result<(), DriverError>> + Send + 'a {
        let _ = done;
        self.post_queued(parts)
    }

    /// [`Blocks`](StreamMode::Blocks), and [`Final`](StreamMode::Final) once the reply is
    /// complete: sends the parts past the confirmed ones as messages, those that queued behind
    /// the rate budget together (as many as fit in one), so a reply that outpaces the surface
    /// coalesces instead of queueing message by message.
    fn post_queued<'a>(
        &'a mut self,
        parts: &'a mut Parts,
    ) -> impl Future<Output = Result<(), DriverError>> + Send + 'a;

    /// Waits until the next call may go (the rate budget), without spending it.
    fn ready(&self, done: bool) -> impl Future<Output = ()> + Send + '_ {
        let _ = done;
        std::future::ready(())
    }

    /// How many leading parts the surface confirmed.
    fn confirmed(&self) -> usize;

    /// How many of the parts past the confirmed ones the next flush (or refresh) may show in a
    /// message; the observers are told of those before it. The default: all of them. A driver
    /// that shows the rest as a preview only (a Telegram draft, which confirms nothing and is
    /// no message) says how many may reach a message.
    fn showing(&self, parts: &Parts, done: bool) -> usize {
        let _ = done;
        parts.len().saturating_sub(self.confirmed())
    }

    /// How far the calls made so far may have shown parts past the confirmed ones (see
    /// [`MaybeShown`]). The default: not past them.
    fn maybe_shown(&self) -> MaybeShown {
        MaybeShown::default()
    }

    /// The messages the surface confirmed so far, each with its current text.
    fn messages(&self) -> &[StreamedMessage];

    /// The text of a preview on screen past the confirmed messages (a Telegram draft).
    fn preview(&self) -> Option<&str> {
        None
    }

    /// When the driver wants a call although no part arrived (a preview about to lapse).
    fn deadline(&self) -> Option<Instant> {
        None
    }

    /// Called at [`deadline`](Self::deadline).
    fn refresh<'a>(
        &'a mut self,
        parts: &'a mut Parts,
    ) -> impl Future<Output = Result<(), DriverError>> + Send + 'a {
        let _ = parts;
        std::future::ready(Ok(()))
    }

    /// Called once at the end, after the last flush was reported to the observers (or the
    /// session stopped): closes whatever the surface keeps open (a Slack stream). Nothing it
    /// does confirms text.
    fn close(&mut self) -> impl Future<Output = ()> + Send + '_ {
        std::future::ready(())
    }

    /// What was confirmed, in `mode` (the mode the stream was opened in; the driver reports a
    /// fallback itself).
    fn receipt(&mut self, mode: StreamMode) -> SurfaceStreamReceipt;
}

#[derive(Default)]
struct Inbox {
    parts: Vec<CommittedPart>,
    done: bool,
}

struct Shared {
    inbox: Mutex<Inbox>,
    wake: Notify,
    observers: Mutex<Vec<Arc<dyn StreamObserver>>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn observers(&self) -> Vec<Arc<dyn StreamObserver>> {
        self.observers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One reply being streamed onto one surface.
///
/// [`append`](Self::append) hands over the reply's next committed part and returns at once;
/// a worker task sends it (coalesced with whatever else arrived while the surface's rate
/// budget made it wait). [`finish`](Self::finish) sends the rest and returns the
/// [`SurfaceStreamReceipt`]. Dropping a stream without finishing it stops the worker: nothing more is
/// sent, and no task is left behind.
pub struct ReplyStream {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<Result<SurfaceStreamReceipt, SurfaceStreamError>>>,
}

impl ReplyStream {
    /// Starts the worker for `driver`.
    pub(crate) fn spawn<D: Driver>(
        driver: D,
        mode: StreamMode,
        attribution: &Attribution,
    ) -> Result<Self, StreamOpenError> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| StreamOpenError::NoRuntime)?;
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox::default()),
            wake: Notify::new(),
            observers: Mutex::new(Vec::new()),
        });
        let conversation = attribution.conversation().to_owned();
        let worker = runtime.spawn(run(driver, mode, Arc::clone(&shared), conversation));
        Ok(Self {
            shared,
            worker: Some(worker),
        })
    }

    /// Adds `observer`, told after each call (or the calls of one flush) what the surface now
    /// shows. It runs on the stream's worker and is awaited before the next call. Attach it
    /// before the first [`append`](Self::append) to see every call.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use mesh_egress::channel::stream::{StreamProgress, StreamingChannel};
    /// use mesh_egress::channel::{PlainText, Recorder};
    /// use mesh_egress::{AgentMessage, Attribution, Outbound, Ownership};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let shown = Arc::new(Mutex::new(Vec::new()));
    /// let seen = Arc::clone(&shown);
    /// let attribution = Attribution::new("a", "c", "r");
    /// let mut stream = Recorder::new().open_stream(&attribution)?;
    /// stream.observe(move |progress: &StreamProgress<'_>| {
    ///     for update in progress.updates() {
    ///         seen.lock().unwrap().push(update.text().to_owned());
    ///     }
    /// });
    /// let message = AgentMessage::new("Hello.", attribution.clone());
    /// let committed = Outbound::new(message).render(&PlainText::new())?.commit(&Ownership::held()).await?;
    /// committed.into_parts().for_each(|part| stream.append(part));
    /// stream.finish().await?;
    /// assert_eq!(*shown.lock().unwrap(), ["Hello."]);
    /// # Ok(()) }
    /// ```
    pub fn observe(&mut self, observer: impl Fn(&StreamProgress<'_>) + Send + Sync + 'static) {
        self.observe_with(Arc::new(observer));
    }

    /// Adds an observer that is also told before each call which parts it may show (the
    /// durable outbox's journal).
    pub(crate) fn observe_with(&mut self, observer: Arc<dyn StreamObserver>) {
        self.shared
            .observers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(observer);
    }

    /// Hands over the reply's next part. Never waits on the surface.
    pub fn append(&mut self, part: CommittedPart) {
        self.shared.lock().parts.push(part);
        self.shared.wake.notify_one();
    }

    /// Whether the worker has stopped early (a failure it could not recover from); the parts
    /// appended since come back in [`finish`](Self::finish)'s error.
    pub fn has_stopped(&self) -> bool {
        self.worker.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Sends what is left, closes the surface's stream, and returns what it confirmed.
    ///
    /// # Errors
    ///
    /// A [`SurfaceStreamError`] when the stream stopped before every part was confirmed: the
    /// surface refused a call or could not be reached, an observer refused the next call
    /// ([`is_refused`](SurfaceStreamError::is_refused)), or the stream's worker had stopped. It
    /// carries what the surface confirmed and the parts it did not.
    pub async fn finish(mut self) -> Result<SurfaceStreamReceipt, SurfaceStreamError> {
        self.shared.lock().done = true;
        self.shared.wake.notify_one();
        let Some(worker) = self.worker.take() else {
            return Err(stopped(Vec::new()));
        };
        let result = match worker.await {
            Ok(result) => result,
            Err(_) => Err(stopped(Vec::new())),
        };
        result.map_err(|mut error| {
            // Parts appended after the worker stopped were never taken from the inbox.
            error.push_unconfirmed(std::mem::take(&mut self.shared.lock().parts));
            error
        })
    }
}

impl Drop for ReplyStream {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            worker.abort();
        }
    }
}

impl std::fmt::Debug for ReplyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyStream")
            .field("stopped", &self.has_stopped())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the stream's worker stopped")]
struct WorkerStopped;

#[derive(Debug, thiserror::Error)]
#[error("the surface did not confirm every part of the reply")]
struct Unconfirmed;

fn stopped(unconfirmed: Vec<CommittedPart>) -> SurfaceStreamError {
    SurfaceStreamError::new(
        SurfaceStreamReceipt::default(),
        unconfirmed,
        Box::new(WorkerStopped),
    )
}

/// The worker: waits for parts (or the driver's deadline), lets the driver send them, and
/// tells the observers before and after.
async fn run<D: Driver>(
    mut driver: D,
    mode: StreamMode,
    shared: Arc<Shared>,
    conversation: String,
) -> Result<SurfaceStreamReceipt, SurfaceStreamError> {
    let mut parts = Parts::default();
    let mut seen = Seen::default();
    loop {
        let done = shared.lock().done;
        let arrived = !shared.lock().parts.is_empty();
        // In `Final` mode nothing is shown until the whole reply is there.
        let due = done || (arrived && mode != StreamMode::Final);
        let (result, done) = if due {
            driver.ready(done).await;
            let done = {
                let mut inbox = shared.lock();
                for part in inbox.parts.drain(..) {
                    parts.push(part);
                }
                inbox.done
            };
            let before = driver.confirmed();
            let showing = driver.showing(&parts, done);
            if let Err(refused) = before_call(&shared, &parts, before, showing).await {
                return Err(refuse(driver, mode, &shared, &mut seen, &mut parts, refused).await);
            }
            let result = flush(&mut driver, &mut parts, done).await;
            after_call(&shared, &mut seen, &driver, &parts, before, &result).await;
            (result, done)
        } else {
            let deadline = driver.deadline();
            tokio::select! {
                () = shared.wake.notified() => continue,
                () = sleep_until(deadline) => {}
            }
            let before = driver.confirmed();
            let showing = driver.showing(&parts, false);
            if let Err(refused) = before_call(&shared, &parts, before, showing).await {
                return Err(refuse(driver, mode, &shared, &mut seen, &mut parts, refused).await);
            }
            let result = driver.refresh(&mut parts).await;
            after_call(&shared, &mut seen, &driver, &parts, before, &result).await;
            (result, false)
        };
        if let Err(error) = result {
            tracing::warn!(target: "mesh_egress::channel", conversation, confirmed = driver.confirmed(), "reply stream stopped");
            driver.close().await;
            return Err(stop_error(&mut driver, mode, &mut parts, error.source));
        }
        if done {
            driver.close().await;
            let confirmed = driver.confirmed();
            if confirmed < parts.len() {
                // A driver must confirm everything at the end or fail: never report a reply
                // complete that is not. The observers hear that it stopped (the durable outbox
                // hands the parts back for the re-send).
                let stopped = Err(DriverError::new(Box::new(Unconfirmed)));
                after_call(&shared, &mut seen, &driver, &parts, confirmed, &stopped).await;
                return Err(stop_error(
                    &mut driver,
                    mode,
                    &mut parts,
                    Box::new(Unconfirmed),
                ));
            }
            return Ok(driver.receipt(mode));
        }
    }
}

/// The error of a stream that stopped: what the surface confirmed, the parts that may be shown
/// without a way to dedupe a re-send ([uncertain](SurfaceStreamError::uncertain), never sent again by
/// the session), and the rest, to send again as messages.
fn stop_error<D: Driver>(
    driver: &mut D,
    mode: StreamMode,
    parts: &mut Parts,
    source: Box<dyn StdError + Send + Sync>,
) -> SurfaceStreamError {
    let confirmed = driver.confirmed();
    let maybe = driver.maybe_shown();
    let mut unconfirmed = parts.unconfirmed(confirmed);
    let uncertain = if maybe.deduped {
        0
    } else {
        maybe.past(confirmed).min(unconfirmed.len())
    };
    let rest = unconfirmed.split_off(uncertain);
    SurfaceStreamError::new(driver.receipt(mode), rest, source).with_uncertain(unconfirmed)
}

/// An observer refused the next call: the stream stops before it, nothing after the
/// confirmed parts goes. The observers hear that it stopped (the durable outbox hands back
/// what it had marked for earlier calls and the surface did not confirm).
async fn refuse<D: Driver>(
    mut driver: D,
    mode: StreamMode,
    shared: &Shared,
    seen: &mut Seen,
    parts: &mut Parts,
    refused: CallRefused,
) -> SurfaceStreamError {
    tracing::warn!(target: "mesh_egress::channel", error = %refused, confirmed = driver.confirmed(), "reply stream stopped before its call");
    driver.close().await;
    let confirmed = driver.confirmed();
    let stopped = Err(DriverError::new(Box::new(Unconfirmed)));
    after_call(shared, seen, &driver, parts, confirmed, &stopped).await;
    let store_failed = refused.is_store_failure();
    let error = stop_error(&mut driver, mode, parts, Box::new(refused)).refused();
    if store_failed {
        error.store_failed()
    } else {
        error
    }
}

/// Tells the observers which parts the next call may show in a message: the first `showing`
/// of those not confirmed yet.
async fn before_call(
    shared: &Shared,
    parts: &Parts,
    confirmed: usize,
    showing: usize,
) -> Result<(), CallRefused> {
    let observers = shared.observers();
    let pending = parts.keys(confirmed, confirmed.saturating_add(showing));
    if observers.is_empty() || pending.is_empty() {
        return Ok(());
    }
    for observer in &observers {
        observer.before_call(pending).await?;
    }
    Ok(())
}

/// Tells the observers what the surface shows now, when anything changed (or it stopped).
async fn after_call<D: Driver>(
    shared: &Shared,
    seen: &mut Seen,
    driver: &D,
    parts: &Parts,
    before: usize,
    result: &Result<(), DriverError>,
) {
    let stopped = result.is_err();
    let observers = shared.observers();
    if observers.is_empty() {
        return;
    }
    let messages = driver.messages();
    let updates = seen.updates(messages, driver.preview());
    let confirmed = driver.confirmed().min(parts.len());
    let newly_confirmed = confirmed.saturating_sub(before);
    if updates.is_empty() && newly_confirmed == 0 && !stopped {
        return;
    }
    let holders = holders(&parts.texts, confirmed, messages);
    let confirmed: Vec<(PartRef, Option<&str>)> = parts.keys.iter().copied().zip(holders).collect();
    let (uncertain, maybe_delivered) = if stopped {
        let maybe = driver.maybe_shown();
        let from = confirmed.len();
        let shown = parts.keys(from, from.saturating_add(maybe.past(from)));
        if maybe.deduped {
            (&[][..], shown)
        } else {
            (shown, &[][..])
        }
    } else {
        (&[][..], &[][..])
    };
    let progress = StreamProgress {
        updates: &updates,
        messages,
        confirmed: &confirmed,
        newly_confirmed,
        stopped,
        uncertain,
        maybe_delivered,
    };
    for observer in &observers {
        observer.after_call(&progress).await;
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{BLOCK_SEPARATOR, BudgetConfig, CallKind, RateBudget, StreamedMessage};
    use super::*;
    use crate::channel::PlainText;
    use crate::egress::{AgentMessage, Attribution};
    use crate::outbound::Outbound;
    use crate::ownership::Ownership;

    /// The instant and text of every call an [`Editing`] surface received.
    type Calls = Arc<Mutex<Vec<(Duration, String)>>>;

    /// An in-memory surface that edits one message, one call per budget slot, recording the
    /// instant and text of every call.
    struct Editing {
        budget: RateBudget,
        start: Instant,
        calls: Calls,
        confirmed: usize,
        message: StreamedMessage,
    }

    impl Editing {
        /// One edit of the message with every part so far, once the budget allows.
        async fn edit(&mut self, parts: &Parts, done: bool) -> Result<(), DriverError> {
            if parts.len() == self.confirmed {
                return Ok(());
            }
            let kind = if done {
                CallKind::Final
            } else {
                CallKind::Preview
            };
            self.budget.acquire(kind).await;
            for text in parts.texts_from(self.confirmed) {
                self.message.push_block(text);
            }
            self.confirmed = parts.len();
            let at = self.start.elapsed();
            self.calls
                .lock()
                .unwrap()
                .push((at, self.message.text().to_owned()));
            Ok(())
        }
    }

    impl Driver for Editing {
        fn mode(&self) -> StreamMode {
            StreamMode::Stream
        }

        fn ready(&self, done: bool) -> impl Future<Output = ()> + Send + '_ {
            let kind = if done {
                CallKind::Final
            } else {
                CallKind::Preview
            };
            self.budget.ready(kind)
        }

        async fn grow(&mut self, parts: &mut Parts, done: bool) -> Result<(), DriverError> {
            self.edit(parts, done).await
        }

        async fn post_queued(&mut self, parts: &mut Parts) -> Result<(), DriverError> {
            self.edit(parts, true).await
        }

        fn confirmed(&self) -> usize {
            self.confirmed
        }

        fn messages(&self) -> &[StreamedMessage] {
            std::slice::from_ref(&self.message)
        }

        fn receipt(&mut self, mode: StreamMode) -> SurfaceStreamReceipt {
            let calls = self.calls.lock().unwrap().len();
            SurfaceStreamReceipt::new(mode, vec![self.message.clone()], calls)
        }
    }

    async fn part(text: &str) -> CommittedPart {
        let message = AgentMessage::new(text, Attribution::new("a", "c", "r"));
        let rendered = Outbound::new(message).render(&PlainText::new()).unwrap();
        rendered
            .commit(&Ownership::held())
            .await
            .unwrap()
            .into_parts()
            .next()
            .unwrap()
    }

    fn editing(interval: Duration) -> (Editing, Calls) {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let driver = Editing {
            budget: RateBudget::new(BudgetConfig::new(interval)),
            start: Instant::now(),
            calls: Arc::clone(&calls),
            confirmed: 0,
            message: StreamedMessage::new("m1", ""),
        };
        (driver, calls)
    }

    #[tokio::test(start_paused = true)]
    async fn blocks_that_arrive_while_the_budget_waits_go_in_one_coalesced_call() {
        let (driver, calls) = editing(Duration::from_secs(1));
        let attribution = Attribution::new("a", "c", "r");
        let mut stream = ReplyStream::spawn(driver, StreamMode::Stream, &attribution).unwrap();
        stream.append(part("one").await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Three blocks in the next second: the budget allows one call at 1 s, which carries all.
        for text in ["two", "three", "four"] {
            stream.append(part(text).await);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        stream.append(part("five").await);
        let receipt = stream.finish().await.unwrap();
        let calls = calls.lock().unwrap().clone();
        let at: Vec<Duration> = calls.iter().map(|(at, _)| *at).collect();
        assert_eq!(
            at,
            [
                Duration::ZERO,
                Duration::from_secs(1),
                Duration::from_millis(2700)
            ]
        );
        assert_eq!(
            calls[1].1,
            ["one", "two", "three", "four"].join(BLOCK_SEPARATOR)
        );
        assert_eq!(
            receipt.confirmed_text(),
            ["one", "two", "three", "four", "five"].join(BLOCK_SEPARATOR)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn final_mode_sends_nothing_until_the_reply_is_complete() {
        let (driver, calls) = editing(Duration::ZERO);
        let attribution = Attribution::new("a", "c", "r");
        let mut stream = ReplyStream::spawn(driver, StreamMode::Final, &attribution).unwrap();
        stream.append(part("one").await);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(calls.lock().unwrap().is_empty());
        stream.append(part("two").await);
        let receipt = stream.finish().await.unwrap();
        assert_eq!(calls.lock().unwrap().len(), 1);
        assert_eq!(receipt.confirmed_text(), "one\n\ntwo");
    }

    #[test]
    fn packing_joins_blocks_while_they_fit_and_keeps_an_oversized_one_alone() {
        let texts: Vec<String> = ["aaaa", "bb", "cccccccc", "d"].map(String::from).into();
        let packed = pack(&texts, |t| t.chars().count() <= 8);
        assert_eq!(
            packed,
            [
                (2, "aaaa\n\nbb".to_owned()),
                (1, "cccccccc".to_owned()),
                (1, "d".to_owned())
            ]
        );
    }

    #[test]
    fn what_may_be_shown_is_deduped_only_while_every_call_in_it_is() {
        let mut maybe = MaybeShown::default();
        assert_eq!(maybe.past(0), 0);
        // A one-part Discord create under the part's own key: deduped.
        maybe.note(2, 3, true);
        assert_eq!((maybe.past(2), maybe.deduped), (1, true));
        // An edit adding two more while that is unsettled: the region is no longer deduped.
        maybe.note(2, 5, false);
        assert_eq!((maybe.past(2), maybe.deduped), (3, false));
        // Confirmed past it, a new region starts afresh.
        assert_eq!(maybe.past(5), 0);
        maybe.note(5, 6, true);
        assert_eq!((maybe.past(5), maybe.deduped), (1, true));
    }

    #[tokio::test]
    async fn opening_outside_a_runtime_is_an_error_not_a_panic() {
        let (driver, _) = editing(Duration::ZERO);
        let attribution = Attribution::new("a", "c", "r");
        let result = std::thread::spawn(move || {
            ReplyStream::spawn(driver, StreamMode::Stream, &attribution).map(drop)
        })
        .join()
        .unwrap();
        assert!(matches!(result, Err(StreamOpenError::NoRuntime)));
    }
}
