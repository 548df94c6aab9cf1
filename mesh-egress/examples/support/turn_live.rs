//! `turn --stream --deliver slack|discord|telegram`: the streamed turn onto the surface's own
//! stream (the front door streaming onto a channel that streams natively), printing each message as the surface confirms it, every
//! later change as an edit with the message's full current text.

use std::future::Future;
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use mesh_egress::CommittedPart;
use mesh_egress::channel::stream::{
    MessageUpdate, ReplyStream, StreamMode, StreamOpenError, StreamProgress, StreamingChannel,
};
use mesh_egress::channel::{Channel, PartReceipt, SendError};
use mesh_egress::{Attribution, CommitError, CommitRecord};

/// What `turn` printed for each part number so far: streamed messages take the numbers of
/// their place in the reply, parts sent afterwards (Layer C's line, a re-sent block) the next.
pub(crate) struct LivePrinter {
    json: bool,
    started: Instant,
    printed: Mutex<Vec<String>>,
}

impl LivePrinter {
    pub(crate) fn new(json: bool, started: Instant) -> Arc<Self> {
        Arc::new(Self {
            json,
            started,
            printed: Mutex::new(Vec::new()),
        })
    }

    /// Prints what the surface now shows: a new message as a part, a changed one as an edit
    /// (`"edit": true` with the full current text; without `--json`, only what was added).
    pub(crate) fn progress(&self, progress: &StreamProgress<'_>) {
        for update in progress.updates() {
            self.update(update);
        }
    }

    fn update(&self, update: &MessageUpdate) {
        let number = update.message() + 1;
        let before = {
            let mut printed = self.printed.lock().unwrap_or_else(PoisonError::into_inner);
            if printed.len() < number {
                printed.resize(number, String::new());
            }
            std::mem::replace(&mut printed[number - 1], update.text().to_owned())
        };
        let line = if self.json {
            self.json_line(
                number,
                update.text(),
                update.id(),
                update.is_edit(),
                update.is_preview(),
            )
        } else {
            // The person reads the message grow: print what it gained (all of it when it was
            // rewritten rather than extended).
            let added = update
                .text()
                .strip_prefix(before.as_str())
                .map_or(update.text(), |rest| rest.trim_start_matches('\n'));
            if added.is_empty() {
                return;
            }
            format!("{added}\n")
        };
        print(&line);
    }

    /// Prints a part sent as a message of its own after the stream.
    fn sent(&self, text: &str, id: &str) {
        let number = {
            let mut printed = self.printed.lock().unwrap_or_else(PoisonError::into_inner);
            printed.push(text.to_owned());
            printed.len()
        };
        let line = if self.json {
            self.json_line(number, text, Some(id), false, false)
        } else {
            format!("{text}\n")
        };
        print(&line);
    }

    /// Field by field, in the contract's order: `part`, `text`, `id`, `t_ms`, then `edit`.
    fn json_line(
        &self,
        part: usize,
        text: &str,
        id: Option<&str>,
        edit: bool,
        preview: bool,
    ) -> String {
        let mut line = format!(
            "{{\"part\":{part},\"text\":{}",
            serde_json::Value::from(text)
        );
        if let Some(id) = id {
            line.push_str(&format!(",\"id\":{}", serde_json::Value::from(id)));
        }
        let t_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        line.push_str(&format!(",\"t_ms\":{t_ms}"));
        if edit {
            line.push_str(",\"edit\":true");
        }
        if preview {
            line.push_str(",\"preview\":true");
        }
        line.push_str("}\n");
        line
    }
}

/// The shown text went: a closed stdout cannot undo that, so it fails nothing.
fn print(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
}

/// A surface's connector whose streams and sends are printed by a [`LivePrinter`]. Clones share
/// the printer.
#[derive(Clone)]
pub(crate) struct Live<C> {
    inner: C,
    printer: Arc<LivePrinter>,
}

impl<C: StreamingChannel> Live<C> {
    pub(crate) fn new(inner: C, printer: Arc<LivePrinter>) -> Self {
        Self { inner, printer }
    }
}

impl<C: StreamingChannel> Channel for Live<C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        self.inner.renderer()
    }

    fn address(&self) -> mesh_egress::Address {
        self.inner.address()
    }

    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        self.inner.commit(record)
    }

    // Under `--store`, a part whose send's outcome is unknown is looked up on the surface
    // (Slack's metadata) before the outbox decides: the wrapper must not hide the lookup.
    fn look_up(
        &self,
        part: &CommittedPart,
        since: std::time::SystemTime,
    ) -> impl Future<Output = mesh_egress::channel::PartLookup> + Send {
        self.inner.look_up(part, since)
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let text = part.text().to_owned();
        let sent = self.inner.send(part);
        async move {
            let receipt = sent.await?;
            self.printer.sent(&text, receipt.id());
            Ok(receipt)
        }
    }
}

impl<C: StreamingChannel> StreamingChannel for Live<C> {
    fn stream_mode(&self) -> StreamMode {
        self.inner.stream_mode()
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        let mut stream = self.inner.open_stream(attribution)?;
        let printer = Arc::clone(&self.printer);
        stream.observe(move |progress: &StreamProgress<'_>| {
            printer.progress(progress);
        });
        Ok(stream)
    }

    fn streams_natively(&self) -> bool {
        self.inner.streams_natively()
    }
}
