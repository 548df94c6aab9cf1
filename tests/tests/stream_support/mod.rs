//! Shared helpers for the streaming boundary tests.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mesh_egress::CommittedPart;
use mesh_egress::channel::{Channel, PartReceipt, PlainText, SendError};
use tokio::time::Instant;

/// A plain-text channel that records each part with the instant it was sent, and can run a
/// hook after a given send (to cancel the turn or revoke its ownership mid-stream).
#[derive(Clone)]
pub struct Timed {
    renderer: PlainText,
    start: Instant,
    sent: Arc<Mutex<Vec<(Duration, String)>>>,
    after_first: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Timed {
    pub fn new() -> Self {
        Self {
            renderer: PlainText::new(),
            start: Instant::now(),
            sent: Arc::default(),
            after_first: None,
        }
    }

    pub fn after_first_send(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.after_first = Some(Arc::new(hook));
        self
    }

    /// Time since the channel was made.
    pub fn elapsed(&self) -> Duration {
        Instant::now() - self.start
    }

    pub fn texts(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|(_, t)| t.clone())
            .collect()
    }

    pub fn times(&self) -> Vec<Duration> {
        self.sent.lock().unwrap().iter().map(|(t, _)| *t).collect()
    }
}

impl Channel for Timed {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let mut sent = self.sent.lock().unwrap();
        sent.push((Instant::now() - self.start, part.text().to_owned()));
        if sent.len() == 1
            && let Some(hook) = &self.after_first
        {
            hook();
        }
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}
