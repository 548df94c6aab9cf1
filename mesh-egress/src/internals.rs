//! Internal parsers and checks that the crate's own benchmarks (`benches/stream.rs`,
//! `benches/tool_text.rs`) and fuzz targets (`fuzz/`) drive directly, below any public entry
//! point. Not public API: hidden from the documentation, outside semver, changed whenever the
//! crate needs to. Their tests live beside them in the crate.

#[cfg(feature = "gate")]
pub use crate::gate::normalise::Projection;
#[cfg(feature = "http")]
pub use crate::model::sse::{SseDecoder, SseEvent, decode_chunk};

/// Whether `tokens` change `text` (a whole reply): the silence check the boundary runs on every
/// reply, for the `tool_text` bench's healthy-path figure.
pub fn silence_changes(tokens: &crate::silence::SilenceTokens, text: &str) -> bool {
    !matches!(tokens.apply(text), crate::silence::Silenced::Untouched)
}
