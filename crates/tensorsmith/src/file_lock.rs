//! Exclusive `flock` locks on lock files, serializing the writers of one output (a dataset's
//! commit, a zTensor append, a sharded checkpoint). The kernel drops a lock when its holder
//! dies, so a killed writer never blocks the next one. A filesystem that cannot lock is
//! refused with advice: writers never go on unlocked in silence.

use crate::error::{Error, Result};
use rustix::fs::{flock, FlockOperation};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a writer waits for a lock unless told otherwise.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(600);

/// An exclusive lock on a lock file, held until dropped (or [`FileLock::release_and_remove`]).
#[derive(Debug)]
pub struct FileLock {
    /// Held open for the lock's lifetime: closing it drops the lock.
    #[allow(dead_code)]
    file: File,
    path: PathBuf,
}

fn cannot_lock(path: &Path, e: rustix::io::Errno) -> Error {
    Error::from(io::Error::other(format!(
        "this filesystem cannot lock files (flock: {e}), and tensorsmith does not write an output \
         other writers may share without a lock: write on a local disk, or mount the share with \
         locking (NFSv4 with lockd, Lustre with -o flock, a FUSE filesystem that supports flock)"
    )))
    .in_file(path)
}

/// The `path` of a lock file beside `output`: `.NAME.lock` in the same folder.
pub fn beside(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!(".{name}.lock"))
}

impl FileLock {
    /// Takes the exclusive lock on `path` (created if missing), waiting up to `timeout`
    /// (polling: a waiter never hangs past its timeout). A lock file removed by its last
    /// holder while this one waited is opened again, so two writers never hold locks on two
    /// different files of one name.
    pub fn acquire(path: &Path, timeout: Duration) -> Result<FileLock> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| crate::error::creating_internal(e, path))?;
            loop {
                match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                    Ok(()) => break,
                    Err(e)
                        if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR =>
                    {
                        if start.elapsed() >= timeout {
                            return Err(Error::from(io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!(
                                    "another writer has held this lock for longer than the {:.1} s timeout (a live process: the kernel drops the lock of a dead one); try again later or wait longer",
                                    timeout.as_secs_f64()
                                ),
                            ))
                            .in_file(path));
                        }
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(50));
                    }
                    Err(e) => return Err(cannot_lock(path, e)),
                }
            }
            // Locked; but if the name now points at another file (the holder before us removed
            // it after its write), our lock guards nothing: start again.
            if same_file(&file, path) {
                return Ok(FileLock {
                    file,
                    path: path.to_path_buf(),
                });
            }
        }
    }

    /// Checks that the filesystem of `path` supports `flock`: takes and drops a lock on it
    /// (`Ok` too when another writer holds it: locking works).
    pub fn probe(path: &Path) -> Result<()> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| crate::error::creating_internal(e, path))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                let _ = flock(&file, FlockOperation::Unlock);
                Ok(())
            }
            Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => Ok(()),
            Err(e) => Err(cannot_lock(path, e)),
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the lock file, then drops the lock (the order that lets a waiter see the
    /// file is gone and open a new one).
    pub fn release_and_remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_until_its_timeout() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lock");
        let held = FileLock::acquire(&p, Duration::from_secs(1)).unwrap();
        let t = Instant::now();
        let e = FileLock::acquire(&p, Duration::from_millis(100)).unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(100));
        assert!(e.to_string().contains("timeout"), "{e}");
        drop(held);
        FileLock::acquire(&p, Duration::from_millis(100)).unwrap();
    }

    #[test]
    fn a_removed_lock_file_is_opened_again() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".out.lock");
        let held = FileLock::acquire(&p, Duration::from_secs(1)).unwrap();
        let waiter = {
            let p = p.clone();
            std::thread::spawn(move || FileLock::acquire(&p, Duration::from_secs(5)).unwrap())
        };
        std::thread::sleep(Duration::from_millis(50));
        held.release_and_remove();
        let l = waiter.join().unwrap();
        assert!(same_file(&l.file, &p));
        FileLock::probe(&p).unwrap();
    }

    #[test]
    fn lock_files_sit_beside_their_output() {
        assert_eq!(
            beside(Path::new("a/b/model.zt")),
            Path::new("a/b/.model.zt.lock")
        );
    }
}
