//! [`Store::resend`]: what a crashed or replaced worker left in the outbox, sent in order by
//! the conversation's current holder, each part settled by the
//! [duplicate rules](super#duplicates-per-surface).

use std::time::{Duration, UNIX_EPOCH};

use sqlx::Row;

use super::outbox::{Durable, SendStep, attempts_count, bounded};
use super::{Store, StoreError, UnknownOutcome, address_text, millis, on_pool, to_usize};
use crate::channel::{Channel, PartLookup, PartReceipt, SendError};
use crate::egress::Attribution;
use crate::outbound::{CommittedPart, DeliveryId};
use crate::ownership::Fence;
use crate::store::lease::Lease;

/// What [`Store::resend`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResendReport {
    /// Parts sent and recorded `sent`.
    pub sent: usize,
    /// Parts marked `uncertain` (not sent again: the surface cannot dedupe, and a lookup
    /// could not tell whether an earlier attempt posted them).
    pub uncertain: usize,
    /// Parts an earlier attempt had posted, found by a lookup ([`Channel::look_up`]: Slack's
    /// metadata search) and marked `sent` without a re-send.
    pub reconciled: usize,
    /// Parts the surface refused for good (with the rest of their messages).
    pub failed: usize,
    /// Whether it stopped at a part to try later (the surface said "not now", or the outcome
    /// was unknown on a deduping surface, or it waits for its backoff); the parts after it
    /// were left, to keep the order.
    pub stopped: bool,
    /// When it stopped at a part that waits for its backoff: how long until that part may be
    /// tried again.
    pub retry_in: Option<Duration>,
}

impl ResendReport {
    /// How many parts it settled (sent, reconciled, uncertain or failed).
    fn settled(&self) -> usize {
        self.sent + self.uncertain + self.reconciled + self.failed
    }
}

/// One open part, as the resend loop reads it.
struct OpenPart {
    delivery: String,
    index: usize,
    total: usize,
    agent: String,
    run: String,
    text: String,
    sending: bool,
    maybe_delivered: bool,
    streamed: bool,
    first_attempt_ms: Option<i64>,
    /// When it may be tried again (the store clock).
    next_attempt_ms: i64,
    now_ms: i64,
}

impl Store {
    /// Sends the parts of `lease`'s conversation that are still open in the outbox for
    /// `channel`'s address, oldest first, as its current holder: after a restart, or on the
    /// worker that took the conversation over. Parts the conversation committed for another
    /// destination are left for a channel to that one, and parts stored without an address
    /// (before migration 0004) are never sent (see
    /// [rows without an address](super#rows-without-an-address)).
    ///
    /// A part found `sending` or marked maybe-delivered had an attempt whose outcome is
    /// unknown: it is re-sent where the surface dedupes and within the window. Elsewhere the
    /// channel is asked to look it up ([`Channel::look_up`]): found, it is marked `sent` with
    /// the surface's id; not found, it is sent; when the channel cannot tell (no lookup, no
    /// history scope), it becomes `uncertain` and the next part goes. The first part to try
    /// later stops the resend, so nothing is ever sent out of order; so does a part whose
    /// next attempt is not due yet ([`PartRetry`](super::PartRetry): its backoff), and
    /// [`ResendReport::retry_in`] says when it will be.
    ///
    /// Cost, for a plainly pending part: one statement that finds and claims it, the send, and
    /// one that records it; and one more to find that nothing is left.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] when `lease` is lost before or during the resend (nothing more
    /// is sent); [`StoreError::BadAddress`] when `channel`'s address is not a valid one;
    /// [`StoreError::Database`] or [`StoreError::Corrupt`] when the store fails or holds a row it
    /// cannot read. A part the surface refuses is not an error: the [`ResendReport`] counts it.
    pub async fn resend<C: Channel>(
        &self,
        channel: &Durable<C>,
        lease: &Lease,
    ) -> Result<ResendReport, StoreError> {
        self.resend_up_to(channel, lease, usize::MAX).await
    }

    /// [`resend`](Self::resend), stopping once `limit` parts are settled: a worker that
    /// counted a destination's open parts sends those and leaves what was committed since to
    /// its next pass, without a last statement to find that nothing is left.
    pub(crate) async fn resend_up_to<C: Channel>(
        &self,
        channel: &Durable<C>,
        lease: &Lease,
        limit: usize,
    ) -> Result<ResendReport, StoreError> {
        let mut report = ResendReport::default();
        let conversation = lease.conversation();
        let fence: &Fence = lease_fence(lease);
        let address = address_text(conversation, &channel.address)?;
        let surface = channel.surface().as_str();
        loop {
            if !lease.is_held() {
                return Err(StoreError::LeaseLost {
                    conversation: conversation.to_owned(),
                });
            }
            if report.settled() >= limit {
                return Ok(report);
            }
            // The healthy path: the next part is plainly pending and due, found and claimed in
            // one statement.
            if let Some((part, attempts)) = self.claim_next(conversation, &address, lease).await? {
                let attribution = part.attribution().clone();
                let (delivery, index) = (part.delivery_id().to_string(), part.index());
                let (sent, outcome) = channel.send_claimed(part, attempts).await;
                match outcome {
                    SendStep::Sent => {
                        report.sent += 1;
                        report_plain_text(channel, &attribution, &delivery, index, &sent);
                    }
                    SendStep::Uncertain => report.uncertain += 1,
                    SendStep::Failed => report.failed += 1,
                    SendStep::Retry => {
                        report.stopped = true;
                        return Ok(report);
                    }
                    SendStep::NotClaimed => {
                        return Err(StoreError::LeaseLost {
                            conversation: conversation.to_owned(),
                        });
                    }
                }
                continue;
            }
            let Some(open) = self.next_open(conversation, &address).await? else {
                return Ok(report);
            };
            let wait_ms = open.next_attempt_ms.saturating_sub(self.clock_ms());
            if !open.sending && wait_ms > 0 {
                // Its backoff runs: the rest of the conversation waits behind it, in order.
                report.stopped = true;
                report.retry_in = Some(Duration::from_millis(
                    u64::try_from(wait_ms).unwrap_or(u64::MAX),
                ));
                return Ok(report);
            }
            let index_i64 = i64::try_from(open.index).unwrap_or(i64::MAX);
            let part = CommittedPart::restored(
                stored_delivery(&open.delivery)?,
                open.index,
                open.total,
                open.text,
                Attribution::new(open.agent, conversation, open.run),
                Some(lease.ownership()),
            );
            if open.sending && open.streamed {
                // A surface's stream had it when its sender died: the knob, never a lookup or
                // a nonce (see `settle_streamed`).
                if !self.settle_streamed(channel, &part, fence).await? {
                    report.uncertain += 1;
                    continue;
                }
            } else if open.sending || open.maybe_delivered {
                let age = open.first_attempt_ms.map(|t| open.now_ms.saturating_sub(t));
                let within = channel.surface().dedupes()
                    && age.is_some_and(|age| age <= millis(channel.dedupe_window));
                let sql = &self.inner.sql;
                let settled = if within {
                    if open.sending {
                        self.execute_fenced(
                            &sql.reopen_sending,
                            &open.delivery,
                            index_i64,
                            None,
                            fence,
                        )
                        .await?
                    } else {
                        1
                    }
                } else {
                    let lookup = match open.first_attempt_ms {
                        Some(first) => {
                            let first = u64::try_from(first).unwrap_or(0);
                            let since = UNIX_EPOCH
                                .checked_add(Duration::from_millis(first))
                                .unwrap_or(UNIX_EPOCH);
                            channel.inner.look_up(&part, since).await
                        }
                        None => PartLookup::unknown("no first attempt recorded"),
                    };
                    match lookup {
                        PartLookup::Found(receipt) => {
                            let changed = self
                                .execute_fenced(
                                    &sql.mark_found,
                                    &open.delivery,
                                    index_i64,
                                    Some(receipt.id()),
                                    fence,
                                )
                                .await?;
                            if changed == 1 {
                                tracing::info!(target: "mesh_egress::store", conversation, delivery = %open.delivery, index = open.index, surface, "reconciled after a restart: the surface holds the part; not sent again");
                                report.reconciled += 1;
                                continue;
                            }
                            changed
                        }
                        // The surface answered that it does not hold the part: a re-send
                        // cannot duplicate it.
                        PartLookup::NotFound => {
                            self.execute_fenced(
                                &sql.reopen_not_found,
                                &open.delivery,
                                index_i64,
                                None,
                                fence,
                            )
                            .await?
                        }
                        // At least once, as configured: sent again, and may duplicate.
                        PartLookup::Unknown { .. }
                            if channel.unknown_outcome == UnknownOutcome::SendAgain =>
                        {
                            tracing::warn!(target: "mesh_egress::store", conversation, delivery = %open.delivery, index = open.index, surface, "outcome unknown after a restart: sent again (UnknownOutcome::SendAgain)");
                            self.execute_fenced(
                                &sql.reopen_not_found,
                                &open.delivery,
                                index_i64,
                                None,
                                fence,
                            )
                            .await?
                        }
                        PartLookup::Unknown { reason } => {
                            let why = bounded(format!(
                                "outcome of an earlier attempt unknown; the surface cannot dedupe a re-send (lookup: {reason})"
                            ));
                            let changed = self
                                .execute_fenced(
                                    &sql.mark_uncertain,
                                    &open.delivery,
                                    index_i64,
                                    Some(&why),
                                    fence,
                                )
                                .await?;
                            if changed == 1 {
                                tracing::warn!(target: "mesh_egress::store", conversation, delivery = %open.delivery, index = open.index, surface, "part uncertain after a restart: not re-sent");
                                channel.report_uncertain(
                                    Some(part.attribution()),
                                    &open.delivery,
                                    open.index,
                                    true,
                                );
                                report.uncertain += 1;
                                continue;
                            }
                            changed
                        }
                    }
                };
                if settled != 1 {
                    return Err(StoreError::LeaseLost {
                        conversation: conversation.to_owned(),
                    });
                }
            }
            let attribution = part.attribution().clone();
            let (sent, outcome) = channel.send_tracked(part).await;
            match outcome {
                SendStep::Sent => {
                    report.sent += 1;
                    report_plain_text(channel, &attribution, &open.delivery, open.index, &sent);
                }
                SendStep::Uncertain => report.uncertain += 1,
                SendStep::Failed => report.failed += 1,
                SendStep::Retry => {
                    report.stopped = true;
                    return Ok(report);
                }
                SendStep::NotClaimed => {
                    return Err(StoreError::LeaseLost {
                        conversation: conversation.to_owned(),
                    });
                }
            }
        }
    }

    async fn next_open(
        &self,
        conversation: &str,
        address: &str,
    ) -> Result<Option<OpenPart>, StoreError> {
        let sql = &self.inner.sql.next_open;
        on_pool!(&self.inner.pool, pool => {
            let Some(row) = sqlx::query(sql)
                .bind(conversation)
                .bind(address)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::database)?
            else {
                return Ok(None);
            };
            let get_i64 = |name: &str| row.try_get::<i64, _>(name).map_err(StoreError::database);
            let get_text = |name: &str| row.try_get::<String, _>(name).map_err(StoreError::database);
            Ok(Some(OpenPart {
                delivery: get_text("delivery")?,
                index: to_usize(get_i64("part_index")?)?,
                total: to_usize(get_i64("total")?)?,
                agent: get_text("agent")?,
                run: get_text("run")?,
                text: get_text("body")?,
                sending: get_text("state")? == "sending",
                maybe_delivered: get_i64("maybe_delivered")? != 0,
                streamed: get_i64("streamed")? != 0,
                first_attempt_ms: row.try_get("first_attempt_ms").map_err(StoreError::database)?,
                next_attempt_ms: get_i64("next_attempt_ms")?,
                now_ms: get_i64("now_ms")?,
            }))
        })
    }

    /// Finds and claims the destination's next part (`address`, stored text) when it is plainly
    /// pending and due, fenced on `lease`: the part, ready to send, and its attempt count with
    /// this one. `None` when the next part is not such a part, or there is none.
    async fn claim_next(
        &self,
        conversation: &str,
        address: &str,
        lease: &Lease,
    ) -> Result<Option<(CommittedPart, u32)>, StoreError> {
        let sql = &self.inner.sql.claim_next;
        let fence = lease.fence();
        let now = self.clock_ms();
        let row = on_pool!(&self.inner.pool, pool => {
            let Some(row) = sqlx::query(sql)
                .bind(conversation)
                .bind(address)
                .bind(now)
                .bind(fence.holder.as_str())
                .bind(fence.token)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::database)?
            else {
                return Ok(None);
            };
            let get_i64 = |name: &str| row.try_get::<i64, _>(name).map_err(StoreError::database);
            let get_text = |name: &str| row.try_get::<String, _>(name).map_err(StoreError::database);
            (
                get_text("delivery")?,
                to_usize(get_i64("part_index")?)?,
                to_usize(get_i64("total")?)?,
                get_text("agent")?,
                get_text("run")?,
                get_text("body")?,
                attempts_count(get_i64("attempts")?),
            )
        });
        let (delivery, index, total, agent, run, text, attempts) = row;
        let part = CommittedPart::restored(
            stored_delivery(&delivery)?,
            index,
            total,
            text,
            Attribution::new(agent, conversation, run),
            Some(lease.ownership()),
        );
        Ok(Some((part, attempts)))
    }

    /// Runs `reopen_sending`/`reopen_not_found` (`$3` holder, `$4` token) or
    /// `mark_uncertain`/`mark_found` (`$3` text, `$4` holder, `$5` token) under `fence`; the
    /// rows it changed.
    pub(super) async fn execute_fenced(
        &self,
        statement: &str,
        delivery: &str,
        index: i64,
        text: Option<&str>,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        on_pool!(&self.inner.pool, pool => {
            let query = sqlx::query(statement).bind(delivery).bind(index);
            let query = match text {
                Some(text) => query.bind(text),
                None => query,
            };
            query
                .bind(fence.holder.as_str())
                .bind(fence.token)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
                .map_err(StoreError::database)
        })
    }
}

/// Puts a part that went as plain text (its surface refused the formatting) on the channel's
/// ledger: a resend has no boundary above it to do so.
fn report_plain_text<C: Channel>(
    channel: &Durable<C>,
    attribution: &Attribution,
    delivery: &str,
    index: usize,
    sent: &Result<PartReceipt, SendError>,
) {
    if let (Some(ledger), Ok(receipt)) = (channel.ledger(), sent)
        && receipt.is_plain_text_fallback()
    {
        ledger.sent_as_plain_text(
            attribution,
            channel.surface(),
            receipt.id(),
            Some(delivery.to_owned()),
            Some(index),
        );
    }
}

/// A delivery id as the outbox stores it (hex), read back.
fn stored_delivery(text: &str) -> Result<DeliveryId, StoreError> {
    u64::from_str_radix(text, 16)
        .map(DeliveryId::from_stored)
        .map_err(|_| StoreError::Corrupt(format!("delivery id {text:?}")))
}

fn lease_fence(lease: &Lease) -> &Fence {
    lease.fence()
}
