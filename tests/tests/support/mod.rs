//! Shared helpers for the end-to-end tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, SubscriberExt as _};

/// A distinctive cause text, different in every test run, so "it never appears" means something.
pub fn marker(label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("CAUSE-{label}-{nanos:x}")
}

/// Captures every `tracing` event as a JSON line.
#[derive(Clone, Default)]
pub struct LogCapture {
    buf: Arc<Mutex<Vec<u8>>>,
}

impl LogCapture {
    /// Installs the capture as the thread's default subscriber for as long as the guard lives.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(self.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Every captured event, parsed.
    pub fn events(&self) -> Vec<serde_json::Value> {
        let buf = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&buf)
            .lines()
            .map(|l| serde_json::from_str(l).expect("each log line is JSON"))
            .collect()
    }

    /// The raw text of everything logged.
    pub fn text(&self) -> String {
        let buf = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

pub struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

impl io::Write for CaptureWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogCapture {
    type Writer = CaptureWriter;

    fn make_writer(&'a self) -> Self::Writer {
        CaptureWriter(self.buf.clone())
    }
}

/// One captured event: its target, message and fields (as text).
#[derive(Clone, Debug)]
pub struct Event {
    pub target: String,
    pub message: String,
    pub fields: BTreeMap<String, String>,
}

impl Event {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<Event>>>);

impl Captured {
    pub fn events(&self) -> Vec<Event> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn with_message(&self, message: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.message == message)
            .collect()
    }
}

struct Visitor<'a>(&'a mut Event);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.0.message = text;
        } else {
            self.0.fields.insert(field.name().to_owned(), text);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.message = value.to_owned();
        } else {
            self.0
                .fields
                .insert(field.name().to_owned(), value.to_owned());
        }
    }
}

struct Capture(Captured);

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut captured = Event {
            target: event.metadata().target().to_owned(),
            message: String::new(),
            fields: BTreeMap::new(),
        };
        event.record(&mut Visitor(&mut captured));
        self.0
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(captured);
    }
}

/// Captures every event on this thread until the guard drops.
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(Capture(captured.clone()));
    let guard = tracing::subscriber::set_default(subscriber);
    (captured, guard)
}
