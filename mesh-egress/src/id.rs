//! Globally unique ids without a dependency: creation time plus per-process random bits.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// 48 bits of milliseconds since the epoch (sortable by creation time), then 80 bits that differ
/// between processes and between calls: SipHash, keyed randomly per process by the standard
/// library, over a process-wide counter and the clock's nanoseconds.
pub(crate) fn unique_u128() -> u128 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(count);
    hasher.write_u128(now.as_nanos());
    let random = hasher.finish();
    let millis = now.as_millis() & ((1 << 48) - 1);
    // The counter's low 16 bits make two calls in one process distinct even if the hash collided.
    (millis << 80) | (u128::from(random) << 16) | u128::from(count & 0xffff)
}
