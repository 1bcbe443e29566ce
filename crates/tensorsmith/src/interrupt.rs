//! Interruption by the user (SIGINT, SIGTERM) handled as a failed write. A program that takes
//! the signals (the CLI) calls [`request`]; every [`AtomicFile`](crate::sink::AtomicFile)
//! being written holds a [`Guard`] meanwhile, and writers call [`check`] between chunks, so
//! the write fails at its next chunk with an error saying so and its temporary files go
//! with it, as with any failed write. With no write in progress there is nothing to clean
//! up: `request` says so, and the program may end at once.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Held while an output is being written.
pub struct Guard(());

/// Marks a write in progress until the guard is dropped.
pub fn guard() -> Guard {
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    Guard(())
}

impl Drop for Guard {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Asks every write in progress to stop at its next chunk. Returns whether any is in
/// progress (false: nothing to wait for).
pub fn request() -> bool {
    REQUESTED.store(true, Ordering::SeqCst);
    ACTIVE.load(Ordering::SeqCst) > 0
}

/// Whether writes are still in progress.
pub fn in_progress() -> bool {
    ACTIVE.load(Ordering::SeqCst) > 0
}

/// The error of a write stopped by [`request`].
pub fn interrupted() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "interrupted (SIGINT or SIGTERM): the write was stopped and what it had started removed",
    )
}

/// Fails once [`request`] has been called.
pub fn check() -> Result<()> {
    if REQUESTED.load(Ordering::Relaxed) {
        return Err(Error::from(interrupted()));
    }
    Ok(())
}

/// [`check`] for `std::io::Write` implementations.
pub fn check_io() -> std::io::Result<()> {
    if REQUESTED.load(Ordering::Relaxed) {
        return Err(interrupted());
    }
    Ok(())
}
