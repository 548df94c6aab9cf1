//! Log capture shared by the crate's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::cell::RefCell;
use std::io;
use std::sync::{Arc, Mutex, Once, PoisonError};

use tracing_subscriber::fmt::MakeWriter;

// Why one global subscriber with thread-local sinks, rather than `set_default` per test:
// `tracing` caches each callsite's interest process-wide. When another test thread registers a
// callsite while this thread installs its subscriber, the stale "never" can win the race and
// this test's events are dropped (seen in CI: one of three expected lines). A global subscriber
// that is always interested, routing to whichever sink the current thread installed, has no
// such race. Every test using it must run on one thread (`current_thread` runtimes do).
thread_local! {
    static SINK: RefCell<Option<Logs>> = const { RefCell::new(None) };
}

/// Every JSON log line written on the thread that installed it.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

/// Stops this thread's capture when dropped.
pub struct Guard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        SINK.with(|s| s.borrow_mut().take());
    }
}

impl Logs {
    /// Captures this thread's events at every level, as JSON lines, while the guard lives.
    pub fn install(&self) -> Guard {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .json()
                .with_max_level(tracing::Level::TRACE)
                .with_writer(ThreadSink)
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber");
        });
        SINK.with(|s| *s.borrow_mut() = Some(self.clone()));
        Guard {
            _not_send: std::marker::PhantomData,
        }
    }

    /// The raw text of everything captured.
    pub fn text(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

struct ThreadSink;

impl<'a> MakeWriter<'a> for ThreadSink {
    type Writer = Box<dyn io::Write>;

    fn make_writer(&'a self) -> Self::Writer {
        match SINK.with(|s| s.borrow().clone()) {
            Some(logs) => Box::new(logs),
            None => Box::new(io::sink()),
        }
    }
}

impl io::Write for Logs {
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
