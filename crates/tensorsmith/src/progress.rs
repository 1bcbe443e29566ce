//! How far a long operation has got, for a caller that shows it (the CLI's progress bars):
//! writers, `verify`, the content hash and value diffs add the bytes they expect to handle
//! and advance as they handle them. Process-wide counters, so no signature changes through
//! every layer; cheap relaxed atomics, read from another thread by [`snapshot`].

use std::sync::atomic::{AtomicU64, Ordering};

static DONE: AtomicU64 = AtomicU64::new(0);
static TOTAL: AtomicU64 = AtomicU64::new(0);

/// Starts counting again from nothing (the caller, before an operation it shows).
pub fn reset() {
    DONE.store(0, Ordering::Relaxed);
    TOTAL.store(0, Ordering::Relaxed);
}

/// `bytes` more to handle (a writer starting, a check planned).
pub fn expect(bytes: u64) {
    TOTAL.fetch_add(bytes, Ordering::Relaxed);
}

/// `bytes` handled.
pub fn advance(bytes: u64) {
    DONE.fetch_add(bytes, Ordering::Relaxed);
}

/// (handled, expected) so far.
pub fn snapshot() -> (u64, u64) {
    (DONE.load(Ordering::Relaxed), TOTAL.load(Ordering::Relaxed))
}
