//! Unit tests of the renderers and the chunker.
