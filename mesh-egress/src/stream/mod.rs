//! Block streaming: a model's text deltas cut into blocks that each render on their own.
//!
//! A leaf module (it imports nothing of ours; the source's error is generic), so the cutter can be read, tested and
//! benchmarked without any layer. The streaming boundary that checks, renders and sends each
//! block lives in `boundary` (issue 13, item 4).

mod cutter;
mod source;

pub use cutter::{BlockCutter, CutterConfig};
#[cfg(feature = "markdown")]
pub(crate) use source::{BlockReader, MAX_HELD};
pub use source::{ChunkSource, TextSource};
