//! [`Durable`]: the outbox commit boundary around any [`Channel`], and [`Store::resend`].

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use super::commitments::Seal;
use super::{PartRetry, Store, StoreError, address_text, millis, on_pool};
use crate::address::{Address, Surface};
use crate::channel::{Channel, PartLookup, PartReceipt, SendError};
use crate::egress::Attribution;
use crate::ledger::{Ledger, LedgerRecord, OutboxRecord};
use crate::outbound::{CommitError, CommitRecord, CommittedPart};
use crate::ownership::Ownership;

/// How long after a part's first attempt Discord still drops a re-send with the same nonce, as
/// far as we rely on it (Discord documents "a few minutes").
const DEFAULT_DEDUPE_WINDOW: Duration = Duration::from_secs(120);
/// The longest error text kept in a row: errors can quote hostile response bodies.
const MAX_ERROR_TEXT: usize = 500;

/// A [`Channel`] whose commit boundary is the store's outbox: committing writes every rendered
/// part in one transaction with the lease check, and each send is claimed and recorded (see
/// the [state table](super#part-states)). Built by [`Store::channel`].
///
/// Rendering is the inner channel's; so is the wire, and so is the destination: every part is
/// stored with the inner channel's [`address`](Channel::address) (read once, when the durable
/// channel is built), and its surface decides the duplicate rules. The inner channel's own
/// [`commit`](Channel::commit) runs first.
#[derive(Clone)]
pub struct Durable<C> {
    store: Store,
    pub(super) inner: C,
    /// Where the parts go: the inner channel's address.
    pub(super) address: Address,
    pub(super) dedupe_window: Duration,
    pub(super) unknown_outcome: UnknownOutcome,
    pub(super) retry: PartRetry,
    ledger: Option<Ledger>,
}

/// What a [`Durable`] channel does with a part whose send may have reached a surface that
/// cannot dedupe a re-send and cannot be asked (Telegram, a plain channel, Slack without the
/// history scope): the policy knob of the [duplicate rules](super#duplicates-per-surface).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownOutcome {
    /// Mark it `uncertain`: never sent again, never dropped, reported for operators (at most
    /// once). The default.
    #[default]
    Uncertain,
    /// Send it again (at least once): the person may see it twice, but never miss it. For
    /// surfaces where a repeated line costs less than a missing one.
    SendAgain,
}

/// What happened to one send, for [`Store::resend`] to decide whether to go on.
pub(super) enum SendStep {
    Sent,
    Retry,
    Uncertain,
    Failed,
    NotClaimed,
}

impl<C: Channel> Durable<C> {
    pub(super) fn new(store: Store, inner: C) -> Self {
        Self {
            store,
            address: inner.address(),
            inner,
            dedupe_window: DEFAULT_DEDUPE_WINDOW,
            unknown_outcome: UnknownOutcome::default(),
            retry: PartRetry::default(),
            ledger: None,
        }
    }

    /// When a part this channel could not send is tried again, and after how many attempts it
    /// is given up (default [`PartRetry::default`]: 1 s doubling to 5 min, 12 attempts).
    pub fn with_retry(mut self, retry: PartRetry) -> Self {
        self.retry = retry;
        self
    }

    /// Its per-part retries (see [`with_retry`](Self::with_retry)).
    pub fn retry(&self) -> PartRetry {
        self.retry
    }

    /// Reports every part this channel marks `uncertain` on `ledger` too
    /// ([`OutboxRecord::Uncertain`]: delivery id, part, surface; never its text), besides the
    /// `warn` on `mesh_egress::store`. A [`DurableLedger`](super::DurableLedger) keeps those rows
    /// on the store for operators.
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Puts an `uncertain` part on the ledger, if one is attached.
    pub(super) fn report_uncertain(
        &self,
        attribution: Option<&Attribution>,
        delivery: &str,
        part: usize,
        after_restart: bool,
    ) {
        if let Some(attribution) = attribution {
            report_uncertain(
                self.ledger.as_ref(),
                self.surface(),
                attribution,
                delivery,
                part,
                after_restart,
            );
        }
    }

    /// What to do with a part whose outcome is unknown where the surface can neither dedupe a
    /// re-send nor say whether it holds the part (default [`UnknownOutcome::Uncertain`]).
    pub fn with_unknown_outcome(mut self, policy: UnknownOutcome) -> Self {
        self.unknown_outcome = policy;
        self
    }

    /// How long after its first attempt a part whose outcome is unknown may still be re-sent
    /// on a surface that dedupes (Discord; default 2 minutes). Older ones become `uncertain`.
    pub fn with_dedupe_window(mut self, window: Duration) -> Self {
        self.dedupe_window = window;
        self
    }

    /// The ledger `uncertain` parts are reported on, if one is attached.
    pub(super) fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref()
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// The surface the parts are recorded for: the address's.
    pub fn surface(&self) -> Surface {
        self.address.surface()
    }

    /// What it does with a part whose outcome cannot be settled (see
    /// [`with_unknown_outcome`](Self::with_unknown_outcome)).
    pub fn unknown_outcome(&self) -> UnknownOutcome {
        self.unknown_outcome
    }

    /// The store behind it.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Writes `record`'s parts in one transaction with the lease check and, when `seal` is
    /// given (a follow-up's [`Sealing`](super::Sealing)), ends its commitment in the same
    /// transaction: both or neither.
    pub(super) async fn commit_parts(
        &self,
        record: &CommitRecord<'_>,
        seal: Option<&Seal>,
    ) -> Result<(), CommitError> {
        Channel::commit(&self.inner, record).await?;
        let fence = record.ownership.and_then(Ownership::fence);
        let conversation = record.attribution.conversation();
        // A row no worker could read back is never written.
        let address = address_text(conversation, &self.address)
            .map_err(|error| CommitError::Store(Box::new(error)))?;
        let surface = self.surface().as_str();
        if fence.is_some_and(|f| f.conversation != conversation) {
            // A lease on another conversation proves nothing about this one.
            return Err(CommitError::OwnershipLost);
        }
        let delivery = record.delivery.to_string();
        let total = i64::try_from(record.parts.len()).unwrap_or(i64::MAX);
        let sql = &self.store.inner.sql;
        let store_error = |e: sqlx::Error| CommitError::Store(Box::new(StoreError::database(e)));
        on_pool!(&self.store.inner.pool, pool => {
            let mut tx = pool.begin_with(sql.begin).await.map_err(store_error)?;
            if let Some(lock) = &sql.lock_conversation {
                sqlx::query(lock).bind(conversation).execute(&mut *tx).await.map_err(store_error)?;
            }
            if let Some(fence) = fence {
                let live = sqlx::query(&sql.check_fence)
                    .bind(conversation)
                    .bind(&fence.holder)
                    .bind(fence.token)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                if live.is_none() {
                    tx.rollback().await.map_err(store_error)?;
                    tracing::warn!(
                        target: "mesh_egress::store",
                        conversation,
                        holder = %fence.holder,
                        token = fence.token,
                        "commit refused: the lease moved on"
                    );
                    return Err(CommitError::OwnershipLost);
                }
            }
            for (index, text) in record.parts.iter().enumerate() {
                sqlx::query(&sql.insert_part)
                    .bind(&delivery)
                    .bind(i64::try_from(index).unwrap_or(i64::MAX))
                    .bind(total)
                    .bind(conversation)
                    .bind(record.attribution.agent())
                    .bind(record.attribution.run())
                    .bind(surface)
                    .bind(text)
                    .bind(format!("{delivery}-{index}"))
                    .bind(fence.map(|f| f.holder.as_str()))
                    .bind(fence.map(|f| f.token))
                    .bind(&address)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            if let Some(seal) = seal {
                let ended = sqlx::query(&seal.statement)
                    .bind(&seal.id)
                    .bind(&seal.holder)
                    .bind(seal.token)
                    .bind(seal.state)
                    .bind(&delivery)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?
                    .rows_affected();
                if ended != 1 {
                    tx.rollback().await.map_err(store_error)?;
                    tracing::warn!(target: "mesh_egress::store", conversation, commitment = %seal.id, "follow-up refused: the commitment's claim expired or moved on");
                    return Err(CommitError::OwnershipLost);
                }
            }
            tx.commit().await.map_err(store_error)?;
        });
        tracing::debug!(target: "mesh_egress::store", conversation, %delivery, parts = total, "committed to the outbox");
        crate::failpoint::hit("after_commit").await;
        Ok(())
    }

    /// Claims, sends and records one part. Every mark after the send is fenced on the lease
    /// the part is sent under (its holder and token still the conversation's latest), so a
    /// sender whose lease moved on never overwrites what the new holder does with the row.
    pub(super) async fn send_tracked(
        &self,
        part: CommittedPart,
    ) -> (Result<PartReceipt, SendError>, SendStep) {
        if !part.is_owned() {
            // In memory, before any database round trip: a revoked or expired lease starts
            // nothing.
            return (Err(SendError::ownership_lost(part)), SendStep::NotClaimed);
        }
        let delivery = part.delivery_id().to_string();
        let index = part.index();
        let index_i64 = i64::try_from(index).unwrap_or(i64::MAX);
        let fence = fence_of(&part);
        let sender = Sender::of(fence.as_ref());
        let claimed = self
            .claim(&delivery, index_i64, sender.holder, sender.token)
            .await;
        match claimed {
            Ok(Some(attempts)) => self.send_claimed(part, attempts).await,
            Ok(None) => {
                let refused = StoreError::NotClaimable { delivery, index };
                (
                    Err(SendError::new(part, refused).with_retryable(false)),
                    SendStep::NotClaimed,
                )
            }
            Err(error) => {
                // Nothing was sent and the row is unchanged: trying again later is safe.
                (
                    Err(SendError::new(part, StoreError::database(error))),
                    SendStep::Retry,
                )
            }
        }
    }

    /// Sends and records one part already claimed (`sending`), its `attempts`-th attempt.
    pub(super) async fn send_claimed(
        &self,
        part: CommittedPart,
        attempts: u32,
    ) -> (Result<PartReceipt, SendError>, SendStep) {
        let delivery = part.delivery_id().to_string();
        let index = part.index();
        let index_i64 = i64::try_from(index).unwrap_or(i64::MAX);
        // Every mark after the send is fenced on the lease the part was claimed under.
        let fence = fence_of(&part);
        let sender = Sender::of(fence.as_ref());
        let total = part.total();
        let started = SystemTime::now();
        match self.inner.send(part).await {
            Ok(receipt) => {
                crate::failpoint::hit("after_send_before_mark").await;
                self.record_sent(&delivery, index, receipt.id(), sender)
                    .await;
                if index + 1 < total {
                    crate::failpoint::hit("between_parts").await;
                }
                (Ok(receipt), SendStep::Sent)
            }
            Err(error) => {
                let mut text = error_text(&error);
                // Once a try may have reached the surface, no later answer of the same send
                // (a "not now", a lost ownership) makes it a plain pending part again.
                let maybe = error.maybe_delivered();
                let unknown = maybe || (error.retryable() && error.retry_after().is_none());
                let (mark, outcome) = if error.is_ownership_lost() {
                    // Not tried (again): back to pending for whoever holds the conversation
                    // (fenced: a new holder's claim is never overwritten).
                    (
                        Mark::Retry {
                            maybe_delivered: maybe,
                        },
                        SendStep::NotClaimed,
                    )
                } else if !error.retryable() {
                    (Mark::Failed, SendStep::Failed)
                } else if maybe && error.retry_after().is_some() {
                    // Maybe delivered, then "not now": the lookup or the dedupe waits for the
                    // next attempt, which the maybe-delivered flag sends through them.
                    (
                        Mark::Retry {
                            maybe_delivered: true,
                        },
                        SendStep::Retry,
                    )
                } else if !unknown {
                    // The surface answered "not now": it did not post.
                    (
                        Mark::Retry {
                            maybe_delivered: false,
                        },
                        SendStep::Retry,
                    )
                } else if self.surface().dedupes() {
                    (
                        Mark::Retry {
                            maybe_delivered: true,
                        },
                        SendStep::Retry,
                    )
                } else {
                    // The surface cannot dedupe a re-send: ask it whether the part is there.
                    let lookup = match error.part() {
                        Some(part) => self.inner.look_up(part, started).await,
                        None => PartLookup::unknown("the send error holds no part to look up"),
                    };
                    match lookup {
                        PartLookup::Found(receipt) => {
                            tracing::info!(target: "mesh_egress::store", %delivery, index, surface = self.surface().as_str(), "reconciled: the surface holds the part; not sent again");
                            self.record_sent(&delivery, index, receipt.id(), sender)
                                .await;
                            return (Ok(receipt), SendStep::Sent);
                        }
                        PartLookup::NotFound => (
                            Mark::Retry {
                                maybe_delivered: false,
                            },
                            SendStep::Retry,
                        ),
                        PartLookup::Unknown { reason } => {
                            text = bounded(format!("{text}; lookup: {reason}"));
                            match self.unknown_outcome {
                                UnknownOutcome::Uncertain => (Mark::Uncertain, SendStep::Uncertain),
                                // At least once, as configured: a later send may duplicate it.
                                UnknownOutcome::SendAgain => (
                                    Mark::Retry {
                                        maybe_delivered: false,
                                    },
                                    SendStep::Retry,
                                ),
                            }
                        }
                    }
                };
                // A part to try again waits for its backoff, or is given up after its last
                // attempt. Not one handed back for lost ownership: that is not the surface's
                // answer, and the renewed lease or the next holder tries it at once (its
                // maybe-delivered flag kept); nor is it ever given up for it.
                let (mark, outcome) = match mark {
                    Mark::Retry { maybe_delivered } if !matches!(outcome, SendStep::NotClaimed) => {
                        match self
                            .retry
                            .next_wait(attempts, error.retry_after(), fastrand::f64())
                        {
                            Some(wait) => (
                                Mark::RetryAt {
                                    maybe_delivered,
                                    at_ms: self.store.clock_ms().saturating_add(millis(wait)),
                                },
                                outcome,
                            ),
                            None => (Mark::GaveUp, SendStep::Failed),
                        }
                    }
                    other => (other, outcome),
                };
                let recorded = self.record(mark, &delivery, index_i64, &text, sender).await;
                match recorded {
                    // The lease it was sent under moved on: the new holder settles the row (it
                    // finds it `sending`: the unknown-outcome rules), and nothing is reported
                    // here as settled (nor as given up).
                    Ok(0) => {
                        tracing::warn!(target: "mesh_egress::store", %delivery, index, "the send's result was not recorded: the lease moved on, the new holder settles the part");
                        return (Err(error.with_retryable(false)), SendStep::NotClaimed);
                    }
                    Ok(_) => {}
                    Err(ref store_error) => {
                        tracing::error!(target: "mesh_egress::store", %delivery, index, error = %store_error, "the outbox could not record a failed send");
                    }
                }
                match outcome {
                    SendStep::Uncertain => {
                        tracing::warn!(target: "mesh_egress::store", %delivery, index, surface = self.surface().as_str(), "part uncertain: it may have reached the surface, which cannot dedupe a re-send");
                        self.report_uncertain(
                            error.part().map(CommittedPart::attribution),
                            &delivery,
                            index,
                            false,
                        );
                        (Err(error.with_retryable(false)), outcome)
                    }
                    SendStep::Failed if matches!(mark, Mark::GaveUp) => {
                        // Only once the row is `failed`: a mark the database did not take
                        // leaves it `sending`, for the next resend's unknown-outcome rules.
                        if recorded.is_ok() {
                            self.report_gave_up(&error, &delivery, index, attempts, &text);
                        }
                        (Err(error.with_retryable(false)), outcome)
                    }
                    SendStep::Failed => {
                        tracing::warn!(target: "mesh_egress::store", %delivery, index, "part failed: the surface refused it; the rest of its message is failed with it");
                        (Err(error), outcome)
                    }
                    _ => (Err(error), outcome),
                }
            }
        }
    }

    /// Claims a part for a send (`pending → sending`, fenced): how many attempts it has had
    /// with this one, or `None` when it was not claimable. (A part a surface's stream handed
    /// back is `pending` again already: the session tells its observers whenever it stops
    /// short, and the journal hands the part back.)
    async fn claim(
        &self,
        delivery: &str,
        index: i64,
        holder: Option<&str>,
        token: Option<i64>,
    ) -> Result<Option<u32>, sqlx::Error> {
        use sqlx::Row;
        let sql = &self.store.inner.sql;
        on_pool!(&self.store.inner.pool, pool => {
            let row = sqlx::query(&sql.claim)
                .bind(delivery)
                .bind(index)
                .bind(holder)
                .bind(token)
                .fetch_optional(pool)
                .await?;
            row.map(|row| row.try_get::<i64, _>("attempts").map(attempts_count))
                .transpose()
        })
    }

    /// Puts a part given up after its last attempt on the ledger and on the one error event.
    fn report_gave_up(
        &self,
        error: &SendError,
        delivery: &str,
        index: usize,
        attempts: u32,
        text: &str,
    ) {
        let surface = self.surface().as_str();
        let Some(attribution) = error.part().map(CommittedPart::attribution) else {
            return;
        };
        // The one event that carries the cause; never the part's text.
        tracing::error!(
            target: "mesh_egress::egress",
            conversation = attribution.conversation(),
            agent = attribution.agent(),
            run = attribution.run(),
            delivery,
            index,
            surface,
            attempts,
            error = text,
            "part failed after its last attempt; the rest of its message is failed with it"
        );
        if let Some(ledger) = &self.ledger {
            ledger.record(
                attribution,
                LedgerRecord::Outbox(OutboxRecord::AttemptsExhausted {
                    delivery: delivery.to_owned(),
                    part: index,
                    surface: surface.to_owned(),
                    attempts,
                }),
            );
        }
    }

    /// Marks a part the surface accepted `sent` with its id.
    async fn record_sent(&self, delivery: &str, index: usize, id: &str, sender: Sender<'_>) {
        let index_i64 = i64::try_from(index).unwrap_or(i64::MAX);
        // Sent but not recorded (the database failed, or the lease moved on and the new holder
        // has the row): it stays as the new holder left it, or `sending`, which a resend treats
        // as an unknown outcome (deduped on Discord, looked up on Slack, `uncertain`
        // elsewhere). Never a second post where the surface can prevent it.
        match self
            .record(Mark::Sent, delivery, index_i64, id, sender)
            .await
        {
            Ok(0) => {
                tracing::warn!(target: "mesh_egress::store", %delivery, index, "sent, but the lease moved on before it was recorded");
            }
            Ok(_) => {}
            Err(error) => {
                tracing::error!(target: "mesh_egress::store", %delivery, index, error = %error, "sent, but the outbox could not record it");
            }
        }
    }

    /// Records what a send came to, fenced on `sender`'s lease: `$1` delivery, `$2` index,
    /// `$3` the message id or error text, `$4`/`$5` the lease, then what the statement needs
    /// besides. The rows it changed.
    async fn record(
        &self,
        mark: Mark,
        delivery: &str,
        index: i64,
        text: &str,
        sender: Sender<'_>,
    ) -> Result<u64, sqlx::Error> {
        let sql = &self.store.inner.sql;
        let statement = match mark {
            Mark::Sent => &sql.mark_sent,
            Mark::Retry { .. } | Mark::RetryAt { .. } => &sql.mark_retry,
            Mark::Uncertain => &sql.mark_uncertain,
            Mark::Failed | Mark::GaveUp => &sql.mark_failed,
        };
        on_pool!(&self.store.inner.pool, pool => {
            let query = sqlx::query(statement)
                .bind(delivery)
                .bind(index)
                .bind(text)
                .bind(sender.holder)
                .bind(sender.token);
            let query = match mark {
                Mark::Retry { maybe_delivered } => {
                    query.bind(i64::from(maybe_delivered)).bind(0_i64)
                }
                Mark::RetryAt {
                    maybe_delivered,
                    at_ms,
                } => query.bind(i64::from(maybe_delivered)).bind(at_ms),
                Mark::Uncertain | Mark::Sent | Mark::Failed | Mark::GaveUp => query,
            };
            query.execute(pool).await.map(|done| done.rows_affected())
        })
    }
}

/// The lease a part is sent under, as its marks are fenced on (`None`: sent without a lease).
#[derive(Clone, Copy)]
struct Sender<'a> {
    holder: Option<&'a str>,
    token: Option<i64>,
}

impl<'a> Sender<'a> {
    fn of(fence: Option<&'a (String, i64)>) -> Self {
        Self {
            holder: fence.map(|f| f.0.as_str()),
            token: fence.map(|f| f.1),
        }
    }
}

/// The holder and token of the lease `part` is sent under, if any.
fn fence_of(part: &CommittedPart) -> Option<(String, i64)> {
    part.ownership()
        .and_then(Ownership::fence)
        .map(|f| (f.holder.clone(), f.token))
}

/// Puts an `uncertain` part on `ledger`, if there is one: delivery id, part, surface, never
/// its text (an [`OutboxRecord::Uncertain`]).
pub(super) fn report_uncertain(
    ledger: Option<&Ledger>,
    surface: Surface,
    attribution: &Attribution,
    delivery: &str,
    part: usize,
    after_restart: bool,
) {
    if let Some(ledger) = ledger {
        ledger.record(
            attribution,
            LedgerRecord::Outbox(OutboxRecord::Uncertain {
                delivery: delivery.to_owned(),
                part,
                surface: surface.as_str().to_owned(),
                after_restart,
            }),
        );
    }
}

/// The row update a send's result calls for.
#[derive(Clone, Copy)]
enum Mark {
    Sent,
    /// Back to `pending`, to be tried at once.
    Retry {
        maybe_delivered: bool,
    },
    /// Back to `pending`, to be tried at `at_ms` (the store clock): after the part's backoff.
    RetryAt {
        maybe_delivered: bool,
        at_ms: i64,
    },
    Uncertain,
    Failed,
    /// `failed` after the part's last allowed attempt.
    GaveUp,
}

/// An attempt count as the store holds it.
pub(super) fn attempts_count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

fn error_text(error: &SendError) -> String {
    let mut text = error.to_string();
    if let Some(source) = std::error::Error::source(error) {
        text.push_str(": ");
        text.push_str(&source.to_string());
    }
    bounded(text)
}

/// `text` cut to [`MAX_ERROR_TEXT`] bytes at a character boundary.
pub(super) fn bounded(mut text: String) -> String {
    if text.len() > MAX_ERROR_TEXT {
        let mut cut = MAX_ERROR_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

impl<C: Channel> Channel for Durable<C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        self.inner.renderer()
    }

    fn address(&self) -> Address {
        self.address.clone()
    }

    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        self.commit_parts(record, None)
    }

    async fn send(&self, part: CommittedPart) -> Result<PartReceipt, SendError> {
        self.send_tracked(part).await.0
    }

    fn look_up(
        &self,
        part: &CommittedPart,
        since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        self.inner.look_up(part, since)
    }
}

impl<C> fmt::Debug for Durable<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Durable")
            .field("address", &self.address)
            .field("dedupe_window", &self.dedupe_window)
            .field("unknown_outcome", &self.unknown_outcome)
            .field("retry", &self.retry)
            .field("ledger", &self.ledger.is_some())
            .finish_non_exhaustive()
    }
}
