//! Fuzzes every renderer and the chunker, deep nesting included: any input, limit and nesting
//! either renders into parts that fit, stay within the part budget, are non-blank, keep
//! Telegram's tags balanced and carry no control character or forbidden live link, or fails
//! with a typed error; it never panics, overflows its stack or hangs. The check itself is
//! `src/render_check.rs`, which the workspace tests also run over the seed corpus.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/render_check.rs"]
mod render_check;

fuzz_target!(|data: &[u8]| render_check::run(data));
