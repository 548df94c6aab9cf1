//! The seam between a streamed model call and the cutter, and the reader that joins them with
//! an idle flush.
//!
//! The source is generic over its error so this module stays free of the layers: Layer A's
//! routed stream implements it with `Error = EgressError` (wired at merge, issue 13).

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::cutter::BlockCutter;

/// Text deltas from a streamed model call, already deduplicated.
///
/// `next` must be cancel-safe (dropping its future loses no text), as
/// `tokio::sync::mpsc::Receiver::recv` is: the reader races it against the idle timer.
pub trait TextSource: Send {
    /// What a failed stream reports.
    type Error: Send;
    /// The next text delta; `None` at a clean end.
    fn next(&mut self) -> impl Future<Output = Option<Result<String, Self::Error>>> + Send;
    /// Records that `text` reached the person, so a continuation starts after it.
    fn mark_delivered(&mut self, text: &str);

    /// Asked after each item [`next`](Self::next) yields: whether the source began its
    /// answer again before that item, so everything it yielded since the last
    /// [`mark_delivered`](Self::mark_delivered) is void (never shown) and the item starts the
    /// whole answer. A routed stream does this when an attempt fails before anything was
    /// shown and another attempt answers afresh. The default never restarts.
    fn restarted(&mut self) -> bool {
        false
    }
}

/// An in-memory source for tests and docs: chunks, each after its own delay (measured on
/// `tokio::time`, so paused-time tests see exact instants), then an optional error.
#[derive(Debug)]
pub struct ChunkSource<E> {
    chunks: VecDeque<(Duration, String)>,
    end: Option<E>,
    due: Option<Instant>,
    delivered: String,
}

impl<E> ChunkSource<E> {
    /// Chunks that arrive at once, then a clean end.
    pub fn new<I, S>(chunks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::delayed(chunks.into_iter().map(|c| (Duration::ZERO, c)))
    }

    /// Chunks that each arrive `delay` after the previous one.
    pub fn delayed<I, S>(chunks: I) -> Self
    where
        I: IntoIterator<Item = (Duration, S)>,
        S: Into<String>,
    {
        Self {
            chunks: chunks.into_iter().map(|(d, c)| (d, c.into())).collect(),
            end: None,
            due: None,
            delivered: String::new(),
        }
    }

    /// The stream fails with `error` after its chunks instead of ending cleanly.
    pub fn then_fail(mut self, error: E) -> Self {
        self.end = Some(error);
        self
    }

    /// Everything marked delivered so far.
    pub fn delivered(&self) -> &str {
        &self.delivered
    }
}

impl<E: Send> TextSource for ChunkSource<E> {
    type Error = E;

    async fn next(&mut self) -> Option<Result<String, E>> {
        let Some((delay, _)) = self.chunks.front() else {
            return self.end.take().map(Err);
        };
        // The deadline is kept across calls, so a call cancelled by the idle timer does not
        // restart the chunk's delay (cancel safety).
        let due = *self.due.get_or_insert_with(|| Instant::now() + *delay);
        tokio::time::sleep_until(due).await;
        self.due = None;
        self.chunks.pop_front().map(|(_, chunk)| Ok(chunk))
    }

    fn mark_delivered(&mut self, text: &str) {
        self.delivered.push_str(text);
    }
}

/// Reads blocks from a source: the cutter's blocks as they complete, an idle flush when the
/// stream is quiet for `idle` (a slow stream still shows progress), the rest at the end.
// Read by the streaming boundary (features `gate` and `markdown`).
#[cfg_attr(not(feature = "markdown"), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct BlockReader<S> {
    source: S,
    cutter: BlockCutter,
    idle: Option<Duration>,
    ready: VecDeque<String>,
    done: bool,
    /// Where a block's undecided end starts (see [`with_hold`](Self::with_hold)).
    hold: Option<fn(&str) -> Option<usize>>,
    /// The undecided end of the last block, shown with the next one.
    held: String,
}

/// The most a block's undecided end is held back: past it, the block goes whole to its check.
pub(crate) const MAX_HELD: usize = 1024;

#[cfg_attr(not(feature = "markdown"), allow(dead_code))]
impl<S: TextSource> BlockReader<S> {
    /// A reader; `idle: None` turns the idle flush off.
    pub(crate) fn new(source: S, cutter: BlockCutter, idle: Option<Duration>) -> Self {
        Self {
            source,
            cutter,
            idle,
            ready: VecDeque::new(),
            done: false,
            hold: None,
            held: String::new(),
        }
    }

    /// Holds back a block's end from where `hold` says it is undecided (a tool-call marker
    /// whose payload has not arrived), whatever cut the block (a safe boundary, the idle
    /// flush, the size cap): it goes out with the next block, once what follows decides it,
    /// or at the stream's end; never more than [`MAX_HELD`] bytes.
    pub(crate) fn with_hold(mut self, hold: fn(&str) -> Option<usize>) -> Self {
        self.hold = Some(hold);
        self
    }

    /// `block` after what was held, less its own undecided end; `None` when all of it waits.
    fn release(&mut self, block: String) -> Option<String> {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(&block);
        if let Some(at) = self.hold.and_then(|hold| hold(&text))
            && text.len() - at <= MAX_HELD
        {
            self.held = text.split_off(at);
        }
        (!text.is_empty()).then_some(text)
    }

    /// The source, to mark what was delivered.
    pub(crate) fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// The next block; an error ends the stream (text pending in the cutter is dropped, it was
    /// never shown); `None` once everything was given out.
    pub(crate) async fn next_block(&mut self) -> Option<Result<String, S::Error>> {
        loop {
            if let Some(block) = self.ready.pop_front() {
                if self.done && self.ready.is_empty() {
                    // The last block: nothing more can decide its end.
                    let mut text = std::mem::take(&mut self.held);
                    text.push_str(&block);
                    return Some(Ok(text));
                }
                match self.release(block) {
                    Some(block) => return Some(Ok(block)),
                    None => continue,
                }
            }
            if self.done {
                return (!self.held.is_empty()).then(|| Ok(std::mem::take(&mut self.held)));
            }
            let next = match self.idle {
                Some(idle) if !self.cutter.pending().is_empty() => {
                    match tokio::time::timeout(idle, self.source.next()).await {
                        Ok(next) => next,
                        Err(_quiet) => {
                            if let Some(block) = self.cutter.flush_idle() {
                                match self.release(block) {
                                    Some(block) => return Some(Ok(block)),
                                    None => continue,
                                }
                            }
                            // Nothing safe to flush (inside a fence): keep waiting.
                            self.source.next().await
                        }
                    }
                }
                _ => self.source.next().await,
            };
            if matches!(next, Some(Ok(_))) && self.source.restarted() {
                // Nothing cut so far was shown: the source's whole answer starts again here.
                self.ready.clear();
                self.held.clear();
                self.cutter.reset();
            }
            match next {
                Some(Ok(delta)) => self.ready.extend(self.cutter.push(&delta)),
                Some(Err(error)) => {
                    self.done = true;
                    // What was held was never shown, like the cutter's pending text.
                    self.held.clear();
                    return Some(Err(error));
                }
                None => {
                    self.done = true;
                    self.ready.extend(self.cutter.finish());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
