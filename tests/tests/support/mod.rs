//! Shared helpers for the end-to-end tests.
#![allow(dead_code, unreachable_pub)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, Once, PoisonError};

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

// Why one global subscriber with thread-local sinks, rather than `set_default` per test:
// `tracing` caches each callsite's interest process-wide, and a test thread with no subscriber
// can cache "never" while another thread installs its own, silently dropping that test's events.
// A global subscriber that is always interested, routing to whichever sink the current thread
// installed, has no such race.
thread_local! {
    static JSON_SINK: RefCell<Option<LogCapture>> = const { RefCell::new(None) };
    static EVENT_SINK: RefCell<Option<Captured>> = const { RefCell::new(None) };
}

fn install_global() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let json = tracing_subscriber::fmt::layer()
            .json()
            .with_writer(ThreadSink);
        let subscriber = tracing_subscriber::registry()
            .with(json)
            .with(Capture)
            .with(tracing_subscriber::filter::LevelFilter::TRACE);
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
    });
}

/// Removes this thread's sinks when dropped.
pub struct CaptureGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        JSON_SINK.with(|s| s.borrow_mut().take());
        EVENT_SINK.with(|s| s.borrow_mut().take());
    }
}

struct ThreadSink;

impl<'a> MakeWriter<'a> for ThreadSink {
    type Writer = Box<dyn io::Write>;

    fn make_writer(&'a self) -> Self::Writer {
        match JSON_SINK.with(|s| s.borrow().clone()) {
            Some(capture) => Box::new(CaptureWriter(capture.buf)),
            None => Box::new(io::sink()),
        }
    }
}

impl LogCapture {
    /// Captures this thread's events as JSON lines for as long as the guard lives.
    pub fn install(&self) -> CaptureGuard {
        install_global();
        JSON_SINK.with(|s| *s.borrow_mut() = Some(self.clone()));
        CaptureGuard {
            _not_send: std::marker::PhantomData,
        }
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

struct Capture;

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut captured = Event {
            target: event.metadata().target().to_owned(),
            message: String::new(),
            fields: BTreeMap::new(),
        };
        event.record(&mut Visitor(&mut captured));
        EVENT_SINK.with(|sink| {
            if let Some(sink) = &*sink.borrow() {
                sink.0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(captured);
            }
        });
    }
}

/// Captures every event on this thread until the guard drops.
pub fn capture() -> (Captured, CaptureGuard) {
    install_global();
    let captured = Captured::default();
    EVENT_SINK.with(|s| *s.borrow_mut() = Some(captured.clone()));
    (
        captured,
        CaptureGuard {
            _not_send: std::marker::PhantomData,
        },
    )
}
