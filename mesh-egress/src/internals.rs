//! Internal parsers that the crate's own benchmarks (`benches/stream.rs`) and fuzz targets
//! (`fuzz/`) drive directly, below any public entry point. Not public API: hidden from the
//! documentation, outside semver, changed whenever the crate needs to. Their tests live beside
//! them in the crate.

#[cfg(feature = "gate")]
pub use crate::gate::normalise::Projection;
#[cfg(feature = "http")]
pub use crate::model::sse::{SseDecoder, SseEvent, decode_chunk};
