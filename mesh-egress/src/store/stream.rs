//! Streamed replies through the outbox: [`Durable`] as a [`StreamingChannel`], whose streams
//! carry a journal that records each part's life on the surface's stream (see the
//! [streamed parts](super#streamed-parts) rules), and how [`Store::resend`] settles a streamed
//! part its sender left behind.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use super::outbox::{Durable, report_uncertain};
use super::{Store, StoreError, UnknownOutcome, on_pool};
use crate::address::Surface;
use crate::channel::Channel;
use crate::channel::stream::{
    CallRefused, MessageUpdate, PartRef, ReplyStream, StreamMode, StreamObserver, StreamOpenError,
    StreamProgress, StreamingChannel,
};
use crate::egress::Attribution;
use crate::ledger::Ledger;
use crate::outbound::CommittedPart;
use crate::ownership::Fence;

/// Why a handed-back part is pending again, for operators reading the row.
const HANDED_BACK: &str =
    "the surface's stream did not confirm it; sent again as a message of its own";

/// The stream's journal in the outbox: `pending → sending` before a call may show a part,
/// `sending → sent` (with the message that holds it) once the surface confirmed it, and
/// `sending → pending` for what the stream handed back when it stopped.
struct Journal {
    store: Store,
    attribution: Attribution,
    surface: Surface,
    ledger: Option<Ledger>,
    state: Mutex<Marks>,
}

/// Why a streamed part is `uncertain`, for operators reading the row.
const UNANSWERED: &str = "its stream call may have been applied, and the surface cannot dedupe a repeat: maybe shown, not sent again";

#[derive(Default)]
struct Marks {
    /// Parts marked `sending` and not confirmed yet.
    sending: HashSet<PartRef>,
    /// Calls after which the surface had confirmed something: the crash point waits for one.
    confirming_calls: usize,
}

impl Journal {
    fn conversation(&self) -> &str {
        self.attribution.conversation()
    }

    fn marks(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `parts` `sending`, all or none, each fenced on the lease it was committed under.
    async fn mark_sending(&self, parts: &[PartRef]) -> Result<bool, sqlx::Error> {
        let rows: Vec<Row<'_>> = parts.iter().map(|p| Row::new(p, None)).collect();
        let changed = self
            .store
            .execute_each(&self.store.inner.sql.stream_sending, &rows, false, true)
            .await?;
        Ok(changed == Some(rows.len() as u64))
    }

    /// Marks `parts` `uncertain`: their call got no answer on a surface where repeating it
    /// could post twice, so they may be shown and are never sent again (the stream's session
    /// does not re-send them either). Reported on the channel's ledger like any other.
    async fn mark_uncertain(&self, parts: &[PartRef]) {
        let rows: Vec<Row<'_>> = parts
            .iter()
            .map(|p| Row::new(p, Some(UNANSWERED)))
            .collect();
        let sql = &self.store.inner.sql.stream_uncertain;
        match self.store.execute_each(sql, &rows, true, false).await {
            Ok(_) => {
                let mut marks = self.marks();
                for part in parts {
                    marks.sending.remove(part);
                }
                drop(marks);
                for part in parts {
                    let delivery = part.delivery_id().to_string();
                    tracing::warn!(target: "mesh_egress::store", conversation = %self.conversation(), %delivery, index = part.index(), "streamed part uncertain: its call got no answer; not sent again");
                    report_uncertain(
                        self.ledger.as_ref(),
                        self.surface,
                        &self.attribution,
                        &delivery,
                        part.index(),
                        false,
                    );
                }
            }
            // Left `sending`: a restart settles them by the knob.
            Err(error) => {
                tracing::error!(target: "mesh_egress::store", error = %error, "the outbox could not mark streamed parts uncertain")
            }
        }
    }

    /// Refuses the call: the stream stops before it, and what was not confirmed comes back
    /// to the caller, still `pending` in the outbox for whoever holds the conversation.
    fn refuse(&self, parts: &[PartRef], why: &str) -> Result<(), CallRefused> {
        let conversation = self.conversation();
        tracing::warn!(target: "mesh_egress::store", conversation, parts = parts.len(), why, "stream stopped before its call: the outbox refused its parts");
        Err(CallRefused::new(why))
    }

    /// Refuses the call because the outbox could not write: not a lost ownership. The
    /// stream stops; what it had marked and not shown is handed back when the session says
    /// it stopped (best effort: the store may still fail), and a worker sends what is
    /// `pending` once the store answers again.
    fn store_failed(&self, parts: &[PartRef], error: &sqlx::Error) -> Result<(), CallRefused> {
        let conversation = self.conversation();
        tracing::error!(target: "mesh_egress::store", conversation, parts = parts.len(), error = %error, "stream stopped before its call: the outbox could not record it");
        Err(CallRefused::store_failed(
            "the outbox could not record the call",
        ))
    }

    /// Hands `parts` back (`sending → pending`, fenced on their commit lease) with
    /// `statement`: best effort. When the store cannot write even that, the rows stay
    /// `sending` and a resend settles them by the unknown-outcome knob (`uncertain` by
    /// default): never sent twice, though a part that was never shown may be kept from the
    /// person (reported on the ledger).
    async fn hand_back(&self, parts: &[PartRef], statement: &str) {
        if parts.is_empty() {
            return;
        }
        let rows: Vec<Row<'_>> = parts
            .iter()
            .map(|p| Row::new(p, Some(HANDED_BACK)))
            .collect();
        match self.store.execute_each(statement, &rows, true, false).await {
            Ok(changed) => {
                tracing::info!(target: "mesh_egress::store", conversation = %self.conversation(), handed_back = rows.len(), reopened = changed.unwrap_or(0), "the surface's stream stopped; its unconfirmed parts are pending again")
            }
            // Left `sending`: the in-process re-send cannot claim them and stops; a restart
            // settles them by the knob.
            Err(error) => {
                tracing::error!(target: "mesh_egress::store", error = %error, "the outbox could not hand streamed parts back")
            }
        }
    }
}

impl StreamObserver for Journal {
    fn before_call<'a>(
        &'a self,
        parts: &'a [PartRef],
    ) -> crate::BoxFuture<'a, Result<(), CallRefused>> {
        Box::pin(async move {
            let fresh: Vec<PartRef> = {
                let marks = self.marks();
                parts
                    .iter()
                    .filter(|p| !marks.sending.contains(p))
                    .copied()
                    .collect()
            };
            if fresh.is_empty() {
                return Ok(());
            }
            if self.marks().confirming_calls > 0 {
                // The black-box tests' point: the store stops answering mid-reply.
                self.store.inject_failure_at("journal_unwritable");
            }
            match self.mark_sending(&fresh).await {
                Ok(true) => {
                    let earlier_calls = {
                        let mut marks = self.marks();
                        marks.sending.extend(fresh.iter().copied());
                        marks.confirming_calls
                    };
                    if earlier_calls > 0 {
                        // The crash tests' point: a call confirmed earlier parts, these are
                        // marked `sending`, and the next call has not gone yet.
                        crate::failpoint::hit("between_stream_calls").await;
                    }
                    Ok(())
                }
                Ok(false) => self.refuse(
                    &fresh,
                    "a part is not pending in the outbox or its lease moved on",
                ),
                Err(error) => self.store_failed(&fresh, &error),
            }
        })
    }

    fn after_call<'a>(&'a self, progress: &'a StreamProgress<'a>) -> crate::BoxFuture<'a, ()> {
        Box::pin(async move {
            if progress.confirmed().is_empty()
                && progress.updates().iter().any(MessageUpdate::is_preview)
            {
                // The crash tests' point: the reply is on screen as a draft only, and nothing
                // of it is `sending`.
                crate::failpoint::hit("drafts_only").await;
            }
            let confirmed = progress.newly_confirmed();
            if !confirmed.is_empty() {
                let rows: Vec<Row<'_>> = confirmed
                    .iter()
                    .map(|(part, message)| Row::new(part, *message))
                    .collect();
                let sql = &self.store.inner.sql.stream_confirmed;
                if let Err(error) = self.store.execute_each(sql, &rows, true, false).await {
                    // Confirmed but not recorded: the rows stay `sending`, which a restart
                    // settles by the unknown-outcome knob; never a second post by default.
                    tracing::error!(target: "mesh_egress::store", error = %error, parts = rows.len(), "streamed parts confirmed, but the outbox could not record it");
                }
                let mut marks = self.marks();
                for (part, _) in confirmed {
                    marks.sending.remove(part);
                }
                marks.confirming_calls += 1;
            }
            if progress.stopped() && !progress.uncertain().is_empty() {
                self.mark_uncertain(progress.uncertain()).await;
            }
            if progress.stopped() {
                let handed_back: Vec<PartRef> = self.marks().sending.drain().collect();
                // Parts a call may have shown, where a message of their own dedupes them:
                // pending again, marked maybe delivered (the dedupe rules of a resend).
                let (maybe, plain): (Vec<PartRef>, Vec<PartRef>) = handed_back
                    .into_iter()
                    .partition(|p| progress.maybe_delivered().contains(p));
                let sql = &self.store.inner.sql;
                self.hand_back(&maybe, &sql.stream_hand_back_maybe).await;
                self.hand_back(&plain, &sql.stream_hand_back).await;
            }
        })
    }
}

/// One row a journal statement changes: `$1` delivery, `$2` index, `$3` the text if any.
struct Row<'a> {
    delivery: String,
    index: i64,
    text: Option<&'a str>,
}

impl<'a> Row<'a> {
    fn new(part: &PartRef, text: Option<&'a str>) -> Self {
        Self {
            delivery: part.delivery_id().to_string(),
            index: i64::try_from(part.index()).unwrap_or(i64::MAX),
            text,
        }
    }
}

impl Store {
    /// Runs `statement` once per row in one transaction; with `bind_text` the row's text is
    /// `$3`. With `all_or_nothing`, a row it does not change rolls every row back and the
    /// answer is `None`; otherwise the rows it changed.
    async fn execute_each(
        &self,
        statement: &str,
        rows: &[Row<'_>],
        bind_text: bool,
        all_or_nothing: bool,
    ) -> Result<Option<u64>, sqlx::Error> {
        if self.take_injected_failure() {
            // Test-only (feature `failpoints`): as a pool that cannot give a connection.
            return Err(sqlx::Error::PoolTimedOut);
        }
        let begin = self.inner.sql.begin;
        on_pool!(&self.inner.pool, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let mut changed = 0u64;
            for row in rows {
                let query = sqlx::query(statement).bind(&row.delivery).bind(row.index);
                let query = if bind_text { query.bind(row.text) } else { query };
                let done = query.execute(&mut *tx).await?.rows_affected();
                if done != 1 && all_or_nothing {
                    tx.rollback().await?;
                    return Ok(None);
                }
                changed += done;
            }
            tx.commit().await?;
            Ok(Some(changed))
        })
    }

    /// Settles a streamed part found `sending` by [`Store::resend`]: its sender died while a
    /// surface's stream had it in a call, so it may be inside a growing message, and the
    /// appends and edits that carry it have neither Slack's metadata nor Discord's nonce.
    /// Neither a lookup nor a re-send can tell, so `channel`'s [`UnknownOutcome`] decides:
    /// `uncertain` (reported like any other), or `pending` again to go as a message of its
    /// own. `Ok(true)`: send it now; `Ok(false)`: it is `uncertain`.
    pub(super) async fn settle_streamed<C: Channel>(
        &self,
        channel: &Durable<C>,
        part: &CommittedPart,
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        let delivery = part.delivery_id().to_string();
        let index = i64::try_from(part.index()).unwrap_or(i64::MAX);
        let sql = &self.inner.sql;
        let conversation = part.attribution().conversation();
        let send_again = channel.unknown_outcome() == UnknownOutcome::SendAgain;
        let changed = if send_again {
            tracing::warn!(target: "mesh_egress::store", conversation, %delivery, index = part.index(), surface = channel.surface().as_str(), "streamed part's outcome unknown after a restart: sent again as a message of its own (UnknownOutcome::SendAgain)");
            self.execute_fenced(&sql.reopen_not_found, &delivery, index, None, fence)
                .await?
        } else {
            let why = "a surface's stream had it in a call whose outcome is unknown: maybe shown inside a growing message, which no lookup or nonce can tell";
            self.execute_fenced(&sql.mark_uncertain, &delivery, index, Some(why), fence)
                .await?
        };
        if changed != 1 {
            return Err(StoreError::LeaseLost {
                conversation: conversation.to_owned(),
            });
        }
        if !send_again {
            tracing::warn!(target: "mesh_egress::store", conversation, %delivery, index = part.index(), surface = channel.surface().as_str(), "streamed part uncertain after a restart: not re-sent");
            channel.report_uncertain(Some(part.attribution()), &delivery, part.index(), true);
        }
        Ok(send_again)
    }
}

/// A durable channel streams on its inner channel's stream, with the outbox's journal attached
/// before anything the caller attaches (the boundary's observer hears of a call after the
/// outbox has recorded it). Each block
/// is committed through [`Durable`] as usual (its parts `pending`); the journal marks them as
/// the stream shows and confirms them. Parts the stream hands back are `pending` again, so the
/// boundary's re-send through [`Channel::send`] claims, sends and records each exactly once.
impl<C: StreamingChannel> StreamingChannel for Durable<C> {
    fn stream_mode(&self) -> StreamMode {
        self.inner().stream_mode()
    }

    fn streams_natively(&self) -> bool {
        self.inner().streams_natively()
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        let mut stream = self.inner().open_stream(attribution)?;
        stream.observe_with(Arc::new(Journal {
            store: self.store().clone(),
            attribution: attribution.clone(),
            surface: self.surface(),
            ledger: self.ledger().cloned(),
            state: Mutex::new(Marks::default()),
        }));
        Ok(stream)
    }
}
