//! Unit tests of the renderers and the chunker: exact output per channel, the edge-case table,
//! and properties over arbitrary Markdown-ish input.

mod bounded;
mod edge;
mod hostile;
mod props;
mod support;
