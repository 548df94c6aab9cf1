//! [`DurableLedger`]: the run ledger written to the store, and read back per conversation and
//! run ([`Store::ledger_entries`]).

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sqlx::Row;
use tokio::sync::{mpsc, oneshot};

use super::{Store, StoreError, on_pool};
use crate::ledger::{LedgerEntry, LedgerStore};

/// How many queued rows one write transaction takes at most.
const BATCH: usize = 256;

/// A [`LedgerStore`] on the store: every row is written to the `mesh_ledger` table, the same
/// rows the in-memory ledger keeps (never a cause, never a request body: the ledger's records
/// carry none), readable afterwards per conversation and run with [`Store::ledger_entries`].
///
/// [`LedgerStore::record`] is synchronous and layers call it mid-turn, so a row is queued and
/// written by a background task, in order, several rows to a transaction. Call
/// [`flush`](Self::flush) to wait until every row recorded so far is durable (before a
/// process exits, say); a row that could not be written is logged at `error` on target
/// `mesh_egress::store` and counted, and the next `flush` reports it.
///
/// Memory is bounded, so a worker that runs for months keeps a flat footprint: the queue holds
/// at most [`QUEUE`](Self::QUEUE) rows not yet written (past that, while the database cannot
/// keep up, a row is counted as lost and logged, never held without bound), and
/// [`entries`](LedgerStore::entries) answers from the last [`WINDOW`](Self::WINDOW) rows
/// recorded through this handle (and its clones) in this process. Every row is on the store:
/// read a conversation's with [`Store::ledger_entries`].
///
/// ```no_run
/// use mesh_egress::ledger::Ledger;
/// use mesh_egress::store::Store;
/// use mesh_egress::{Attribution, Turn};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Store::open("sqlite:/var/lib/mesh/outbox.db").await?;
/// let sink = store.durable_ledger()?;
/// let turn = Turn::new(Attribution::new("ops", "c1", "r1")).with_ledger(Ledger::new(sink.clone()));
/// // … the turn runs, every layer records on its ledger …
/// # let _ = turn;
/// sink.flush().await?;
/// let rows = store.ledger_entries("c1", Some("r1")).await?;
/// # let _ = rows; Ok(()) }
/// ```
#[derive(Clone)]
pub struct DurableLedger {
    inner: Arc<Inner>,
}

struct Inner {
    /// The last [`DurableLedger::WINDOW`] rows recorded.
    rows: Mutex<VecDeque<LedgerEntry>>,
    queue: mpsc::Sender<Job>,
    /// Rows the writer could not write (or the full queue could not take) since the last flush.
    lost: Arc<AtomicU64>,
    /// Whether a full queue was logged since the last flush (once, not once per row).
    overflow_logged: AtomicBool,
}

enum Job {
    Row(PendingRow),
    Flush(oneshot::Sender<()>),
}

/// One row, encoded where it was recorded.
struct PendingRow {
    conversation: String,
    agent: String,
    run: String,
    kind: String,
    entry: String,
}

impl Store {
    /// A ledger sink writing to this store (see [`DurableLedger`]). It starts its writer on
    /// the current Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoRuntime`] when called outside a Tokio runtime.
    pub fn durable_ledger(&self) -> Result<DurableLedger, StoreError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StoreError::NoRuntime)?;
        let (queue, jobs) = mpsc::channel(DurableLedger::QUEUE);
        let lost = Arc::new(AtomicU64::new(0));
        runtime.spawn(write_rows(self.clone(), jobs, Arc::clone(&lost)));
        Ok(DurableLedger {
            inner: Arc::new(Inner {
                rows: Mutex::new(VecDeque::with_capacity(DurableLedger::WINDOW)),
                queue,
                lost,
                overflow_logged: AtomicBool::new(false),
            }),
        })
    }

    /// The ledger rows recorded for `conversation` (only those of `run`, when given), oldest
    /// first.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when the database fails, and [`StoreError::Corrupt`] for a row
    /// that is not a ledger entry.
    pub async fn ledger_entries(
        &self,
        conversation: &str,
        run: Option<&str>,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        let sql = &self.inner.sql.ledger_rows;
        let texts: Vec<String> = on_pool!(&self.inner.pool, pool => {
            let rows = sqlx::query(sql)
                .bind(conversation)
                .bind(run)
                .fetch_all(pool)
                .await
                .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| row.try_get::<String, _>("entry").map_err(StoreError::database))
                .collect::<Result<_, _>>()?
        });
        texts
            .iter()
            .map(|text| {
                serde_json::from_str(text)
                    .map_err(|e| StoreError::Corrupt(format!("ledger row: {e}")))
            })
            .collect()
    }
}

impl DurableLedger {
    /// How many recorded rows [`entries`](LedgerStore::entries) answers from at most: the
    /// newest ones.
    pub const WINDOW: usize = 1024;
    /// How many rows may wait for the writer at most.
    pub const QUEUE: usize = 8192;

    /// How many rows wait for the writer now (at most [`QUEUE`](Self::QUEUE)).
    pub fn queued(&self) -> usize {
        Self::QUEUE.saturating_sub(self.inner.queue.capacity())
    }

    /// Waits until every row recorded so far is written.
    ///
    /// # Errors
    ///
    /// [`StoreError::LedgerRowsLost`] when rows could not be written since the last flush (or
    /// when the writer is gone).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (done, written) = oneshot::channel();
        let gone = self.inner.queue.send(Job::Flush(done)).await.is_err() || written.await.is_err();
        self.inner.overflow_logged.store(false, Ordering::Release);
        let lost = self.inner.lost.swap(0, Ordering::AcqRel);
        if gone {
            return Err(StoreError::LedgerRowsLost { rows: lost.max(1) });
        }
        if lost > 0 {
            return Err(StoreError::LedgerRowsLost { rows: lost });
        }
        Ok(())
    }
}

impl LedgerStore for DurableLedger {
    fn record(&self, entry: LedgerEntry) {
        let attribution = entry.attribution();
        let encoded = serde_json::to_value(&entry).and_then(|value| {
            let kind = value
                .get("record")
                .and_then(|r| r.get("kind"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("unknown")
                .to_owned();
            serde_json::to_string(&value).map(|text| (kind, text))
        });
        match encoded {
            Ok((kind, text)) => {
                let row = PendingRow {
                    conversation: attribution.conversation().to_owned(),
                    agent: attribution.agent().to_owned(),
                    run: attribution.run().to_owned(),
                    kind,
                    entry: text,
                };
                match self.inner.queue.try_send(Job::Row(row)) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        self.inner.lost.fetch_add(1, Ordering::AcqRel);
                        if !self.inner.overflow_logged.swap(true, Ordering::AcqRel) {
                            tracing::error!(target: "mesh_egress::store", queued = DurableLedger::QUEUE, "ledger rows not written: the store cannot keep up and the queue is full (counted until the next flush)");
                        }
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        self.inner.lost.fetch_add(1, Ordering::AcqRel);
                        tracing::error!(target: "mesh_egress::store", "ledger row not written: the writer is gone");
                    }
                }
            }
            Err(error) => {
                self.inner.lost.fetch_add(1, Ordering::AcqRel);
                tracing::error!(target: "mesh_egress::store", error = %error, "ledger row not written: it could not be encoded");
            }
        }
        let mut rows = self
            .inner
            .rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if rows.len() == Self::WINDOW {
            rows.pop_front();
        }
        rows.push_back(entry);
    }

    fn entries(&self) -> Vec<LedgerEntry> {
        self.inner
            .rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

impl fmt::Debug for DurableLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DurableLedger").finish_non_exhaustive()
    }
}

/// The writer: takes what is queued, writes it in one transaction, answers the flushes that
/// were queued behind it. Ends when every handle is dropped.
async fn write_rows(store: Store, mut jobs: mpsc::Receiver<Job>, lost: Arc<AtomicU64>) {
    let mut batch = Vec::with_capacity(BATCH);
    while jobs.recv_many(&mut batch, BATCH).await > 0 {
        let mut rows = Vec::new();
        let mut flushes = Vec::new();
        for job in batch.drain(..) {
            match job {
                Job::Row(row) => rows.push(row),
                Job::Flush(done) => flushes.push(done),
            }
        }
        if !rows.is_empty()
            && let Err(error) = insert(&store, &rows).await
        {
            lost.fetch_add(
                u64::try_from(rows.len()).unwrap_or(u64::MAX),
                Ordering::AcqRel,
            );
            tracing::error!(target: "mesh_egress::store", rows = rows.len(), error = %error, "ledger rows not written");
        }
        for done in flushes {
            // A flusher that stopped waiting does not need the answer.
            let _ = done.send(());
        }
    }
}

async fn insert(store: &Store, rows: &[PendingRow]) -> Result<(), StoreError> {
    let sql = &store.inner.sql;
    on_pool!(&store.inner.pool, pool => {
        let mut tx = pool.begin_with(sql.begin).await.map_err(StoreError::database)?;
        for row in rows {
            sqlx::query(&sql.insert_ledger)
                .bind(&row.conversation)
                .bind(&row.agent)
                .bind(&row.run)
                .bind(&row.kind)
                .bind(&row.entry)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::database)?;
        }
        tx.commit().await.map_err(StoreError::database)
    })
}
