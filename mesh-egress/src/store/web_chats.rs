//! Web chats on the store (migration 0007): who owns each chat, the person's side of its turns,
//! and the delivered side read back from the outbox. Only the web surface
//! (`mesh_egress::web`, feature `web`) uses it.
//!
//! A chat's answers are never stored twice: what the model said is the outbox's `sent` parts
//! of the chat's conversation; this module stores only what the outbox has no place for (the
//! owner, and what the person typed).

use std::collections::{HashMap, HashSet};

use sqlx::Row;

use super::commitments::sql;
use super::{Store, StoreError, on_pool};

/// Who may use a chat, as the store sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChatAccess {
    /// The chat did not exist and is now this identity's.
    Created,
    /// The chat is this identity's.
    Owner,
    /// The chat belongs to someone else, or (when not created) does not exist.
    Denied,
}

/// One turn of a chat: the person's message (none for a regenerated answer) and the run whose
/// delivered parts are the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TurnRow {
    pub(crate) run: String,
    pub(crate) message_id: Option<String>,
    pub(crate) body: Option<String>,
}

/// One delivered part of a chat's answers, in commit order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeliveredRow {
    pub(crate) delivery: String,
    pub(crate) run: String,
    pub(crate) body: String,
}

/// What a chat holds, read in one go: its turns, its delivered parts, which deliveries kept a
/// promise (each a message of its own), and the runs whose promise is still open.
#[derive(Clone, Debug, Default)]
pub(crate) struct Transcript {
    pub(crate) turns: Vec<TurnRow>,
    pub(crate) delivered: Vec<DeliveredRow>,
    pub(crate) follow_ups: HashSet<String>,
    pub(crate) open_promises: HashSet<String>,
}

const INSERT_CHAT: &str = "INSERT INTO mesh_web_chats (chat, owner, created_ms) \
     VALUES ($1, $2, {now}) ON CONFLICT (chat) DO NOTHING";

const CHAT_OWNER: &str = "SELECT owner FROM mesh_web_chats WHERE chat = $1";

const INSERT_TURN: &str = "INSERT INTO mesh_web_turns (chat, run, message_id, body, created_ms) \
     VALUES ($1, $2, $3, $4, {now})";

// The latest turns first, so a bounded read keeps the recent end of a long chat.
const TURNS: &str = "SELECT run, message_id, body FROM mesh_web_turns \
     WHERE chat = $1 ORDER BY seq DESC LIMIT $2";

const DELIVERED: &str = "SELECT delivery, run, body FROM mesh_outbox_parts \
     WHERE conversation = $1 AND state = 'sent' ORDER BY seq";

const PROMISES: &str = "SELECT run, state, delivery FROM mesh_commitments WHERE conversation = $1";

const FOLLOW_UP_DELIVERY: &str = "SELECT 1 AS kept FROM mesh_commitments WHERE delivery = $1";

impl Store {
    /// Opens `chat` for `owner`: creates it as theirs when `create` and it does not exist
    /// yet, and says whether they may use it.
    pub(crate) async fn open_web_chat(
        &self,
        chat: &str,
        owner: &str,
        create: bool,
    ) -> Result<ChatAccess, StoreError> {
        let pool = &self.inner.pool;
        let created = if create {
            let insert = sql(pool, INSERT_CHAT);
            on_pool!(pool, pool => sqlx::query(&insert)
                .bind(chat)
                .bind(owner)
                .execute(pool)
                .await
                .map_err(StoreError::database)?
                .rows_affected())
                == 1
        } else {
            false
        };
        if created {
            return Ok(ChatAccess::Created);
        }
        let stored: Option<String> = on_pool!(pool, pool => sqlx::query(CHAT_OWNER)
            .bind(chat)
            .fetch_optional(pool)
            .await
            .map_err(StoreError::database)?
            .map(|row| row.try_get("owner"))
            .transpose()
            .map_err(StoreError::database)?);
        Ok(match stored {
            Some(stored) if stored == owner => ChatAccess::Owner,
            _ => ChatAccess::Denied,
        })
    }

    /// Records a turn of `chat`: the person's message `body` (with its id) that run `run`
    /// answers, or none for a regenerated answer.
    pub(crate) async fn record_web_turn(
        &self,
        chat: &str,
        run: &str,
        message_id: Option<&str>,
        body: Option<&str>,
    ) -> Result<(), StoreError> {
        let pool = &self.inner.pool;
        let insert = sql(pool, INSERT_TURN);
        on_pool!(pool, pool => sqlx::query(&insert)
            .bind(chat)
            .bind(run)
            .bind(message_id)
            .bind(body)
            .execute(pool)
            .await
            .map(drop)
            .map_err(StoreError::database))
    }

    /// Reads `chat`'s last `max_turns` turns (oldest first) and what `conversation` (the
    /// chat's conversation in the outbox) delivered.
    pub(crate) async fn web_transcript(
        &self,
        chat: &str,
        conversation: &str,
        max_turns: u32,
    ) -> Result<Transcript, StoreError> {
        let pool = &self.inner.pool;
        let db = StoreError::database;
        let mut transcript = Transcript::default();
        on_pool!(pool, pool => {
            for row in sqlx::query(TURNS)
                .bind(chat)
                .bind(i64::from(max_turns))
                .fetch_all(pool)
                .await
                .map_err(db)?
            {
                transcript.turns.push(TurnRow {
                    run: row.try_get("run").map_err(db)?,
                    message_id: row.try_get("message_id").map_err(db)?,
                    body: row.try_get("body").map_err(db)?,
                });
            }
            for row in sqlx::query(DELIVERED)
                .bind(conversation)
                .fetch_all(pool)
                .await
                .map_err(db)?
            {
                transcript.delivered.push(DeliveredRow {
                    delivery: row.try_get("delivery").map_err(db)?,
                    run: row.try_get("run").map_err(db)?,
                    body: row.try_get("body").map_err(db)?,
                });
            }
            for row in sqlx::query(PROMISES)
                .bind(conversation)
                .fetch_all(pool)
                .await
                .map_err(db)?
            {
                let run: String = row.try_get("run").map_err(db)?;
                let state: String = row.try_get("state").map_err(db)?;
                if let Some(delivery) = row.try_get::<Option<String>, _>("delivery").map_err(db)? {
                    transcript.follow_ups.insert(delivery);
                }
                if matches!(state.as_str(), "pending" | "claimed") {
                    transcript.open_promises.insert(run);
                }
            }
        });
        transcript.turns.reverse();
        Ok(transcript)
    }

    /// Whether `delivery` is the follow-up that kept a promise.
    pub(crate) async fn is_follow_up_delivery(&self, delivery: &str) -> Result<bool, StoreError> {
        on_pool!(&self.inner.pool, pool => sqlx::query(FOLLOW_UP_DELIVERY)
            .bind(delivery)
            .fetch_optional(pool)
            .await
            .map(|row| row.is_some())
            .map_err(StoreError::database))
    }
}

impl Transcript {
    /// The delivered parts of each run, grouped by delivery in commit order.
    pub(crate) fn deliveries_by_run(&self) -> HashMap<&str, Vec<(&str, Vec<&str>)>> {
        let mut runs: HashMap<&str, Vec<(&str, Vec<&str>)>> = HashMap::new();
        for row in &self.delivered {
            let deliveries = runs.entry(row.run.as_str()).or_default();
            match deliveries.last_mut() {
                Some((delivery, parts)) if *delivery == row.delivery => parts.push(&row.body),
                _ => deliveries.push((&row.delivery, vec![&row.body])),
            }
        }
        runs
    }
}
