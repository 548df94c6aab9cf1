//! Shared helpers of the store tests (`store_*.rs`): where a store lives on each backend, a
//! scripted channel, and a macro running one test body on both backends.
#![allow(dead_code, unreachable_pub)]

#[path = "../support/postgres.rs"]
mod postgres;

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mesh_egress::address::{DiscordAddress, SlackAddress, TelegramAddress};
use mesh_egress::channel::{
    BoxedChannel, Channel, PartReceipt, PlainText, SendError, SurfaceClient, UnservedAddress,
};
use mesh_egress::store::{PartRetry, PartState, Store};
use mesh_egress::{Address, AgentMessage, AnswerStream, Attribution, CommittedPart, Surface, Turn};

/// What a [`Scripted`] channel does with the next send.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    Accept,
    /// A retryable error without `Retry-After`: the outcome is unknown.
    Unknown,
    /// A non-retryable refusal.
    Refuse,
    /// "Not now": the surface answered and did not post.
    RetryAfter,
    /// The sender dies mid-send (the task panics after the claim).
    Die,
}

pub(crate) const SCRIPTED: &str = "scripted failure";

/// A plain-text channel that follows a script, then accepts, recording what it accepted.
#[derive(Clone)]
pub(crate) struct Scripted {
    renderer: PlainText,
    pub(crate) script: Arc<Mutex<VecDeque<Step>>>,
    sent: Arc<Mutex<Vec<String>>>,
    /// Where it stands in for (the outbox applies that surface's duplicate rules).
    address: Address,
}

/// The address a test double stands in for on `surface`: one chat of that surface.
pub(crate) fn stand_in(surface: Surface) -> Address {
    match surface {
        Surface::Slack => SlackAddress::new("C024BE91L").into(),
        Surface::Discord => DiscordAddress::new("1100000000000000001").into(),
        Surface::Telegram => TelegramAddress::new("-1001234567890").into(),
        _ => Address::Plain,
    }
}

impl Scripted {
    pub(crate) fn new(limit: usize, script: &[Step]) -> Self {
        Self {
            renderer: PlainText::new().with_limit(limit),
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            sent: Arc::default(),
            address: Address::Plain,
        }
    }

    /// Stands in for a channel to `address`.
    pub(crate) fn with_address(mut self, address: impl Into<Address>) -> Self {
        self.address = address.into();
        self
    }

    pub(crate) fn sent(&self) -> Vec<String> {
        self.sent.lock().unwrap().clone()
    }
}

impl Channel for Scripted {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn address(&self) -> Address {
        self.address.clone()
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let step = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Step::Accept);
        let result = match step {
            Step::Accept => {
                let mut sent = self.sent.lock().unwrap();
                sent.push(part.text().to_owned());
                Ok(PartReceipt::new(format!("m{}", sent.len())))
            }
            Step::Unknown => Err(SendError::new(part, SCRIPTED)),
            Step::Refuse => Err(SendError::new(part, SCRIPTED).with_retryable(false)),
            Step::RetryAfter => {
                Err(SendError::new(part, SCRIPTED).with_retry_after(Duration::from_secs(1)))
            }
            Step::Die => panic!("scripted sender death"),
        };
        std::future::ready(result)
    }
}

/// A scripted channel serves the one address it stands in for (its clones share the script).
impl SurfaceClient for Scripted {
    fn surface(&self) -> Surface {
        self.address.surface()
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        if *address == self.address {
            Ok(BoxedChannel::new(self.clone()))
        } else {
            Err(UnservedAddress::new(self.surface(), address.clone()))
        }
    }
}

/// Per-part retries with no wait: for tests of what the outbox does, not of when.
pub(crate) fn at_once() -> PartRetry {
    PartRetry::new(Duration::ZERO, Duration::ZERO, PartRetry::DEFAULT_ATTEMPTS)
}

/// Where each test's store lives: a fresh SQLite file, or a fresh PostgreSQL database.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// A store URL plus whatever must outlive it (the SQLite temp dir).
pub(crate) struct Place {
    pub(crate) url: String,
    _dir: Option<TempDir>,
}

pub(crate) struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

static NEXT_DIR: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Backend {
    pub(crate) fn place(self) -> Place {
        match self {
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!(
                    "mesh-store-{}-{}",
                    std::process::id(),
                    NEXT_DIR.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&dir).unwrap();
                Place {
                    url: format!("sqlite:{}", dir.join("outbox.db").display()),
                    _dir: Some(TempDir(dir)),
                }
            }
            Backend::Postgres => Place {
                url: postgres::fresh_database_url(),
                _dir: None,
            },
        }
    }
}

pub(crate) const LONG: Duration = Duration::from_secs(60);

pub(crate) fn message(conversation: &str, body: &str) -> AgentMessage {
    AgentMessage::new(body, Attribution::new("ops", conversation, "r1"))
}

/// Five parts of at most 10 code points each.
pub(crate) const BODY: &str = "alpha one. bravo two. charlie 3. delta 4. echo five.";

pub(crate) fn parts_of(body: &str) -> Vec<String> {
    use mesh_egress::channel::Render;
    PlainText::new()
        .with_limit(10)
        .render(&mesh_egress::Markdown::new(body))
        .unwrap()
}

pub(crate) async fn states(store: &Store, conversation: &str) -> Vec<PartState> {
    store
        .parts(conversation)
        .await
        .unwrap()
        .iter()
        .map(|p| p.state)
        .collect()
}

/// Runs each named `async fn(Backend)` as a test on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::store_support::Backend::Sqlite).await })*
        }
        mod pg {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::store_support::Backend::Postgres).await })*
        }
    };
}

/// `blocks` as a model streams them: each a paragraph of its own, `gap` after the one before
/// (the first `gap` after the start), into an answer of `turn`'s.
pub(crate) fn paced(turn: &Turn, blocks: &'static [&'static str], gap: Duration) -> AnswerStream {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        for block in blocks {
            tokio::time::sleep(gap).await;
            if tx.send(Ok(format!("{block}\n\n"))).await.is_err() {
                return;
            }
        }
    });
    AnswerStream::from_receiver(turn, rx)
}
