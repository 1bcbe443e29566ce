//! An object written as a stream ([`std::io::Write`]) in parts, in bounded memory, whatever
//! the store: bytes gather in one part-sized buffer; each full part goes to one of up to
//! `max_concurrency` uploader threads (the store's "send part N", retried by its client)
//! while the next one fills. The hand-over waits for a free uploader, so memory stays within
//! about (`max_concurrency` + 1) × `part_size`. The stores differ only in their
//! [`PartTarget`]: S3 (multipart upload, `s3_upload.rs`), Azure (blocks and a block list,
//! `store_upload.rs` streams Azure blobs), Cloud Storage (a resumable upload, one chunk after another,
//! `gcs_upload.rs`); the threads, the buffer and the abort-on-drop live here once.
//!
//! Nothing is visible until [`PartUpload::commit`]; an output smaller than one part goes up
//! at commit in one request and starts nothing. An upload dropped without a commit, or whose
//! commit fails, is aborted (once the parts in flight are done), so no object appears unless
//! complete.

use crate::bytes::storage_options::Transfer;
use crate::error::{Error, ErrorKind, Result};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What one store does with the parts of an upload. Implementations are shared by the
/// uploader threads.
pub trait PartTarget: Send + Sync + 'static {
    /// The URL errors name (no secrets).
    fn url(&self) -> String;
    /// Part sizes and concurrency (a store that takes parts only in order asks for one
    /// uploader).
    fn transfer(&self) -> Transfer;
    /// The most parts an upload may have.
    fn max_parts(&self) -> u64;
    /// The size of part `i` (from 0).
    fn part_len(&self, i: u32) -> usize;
    /// Starts the multipart upload, before the first part is sent.
    fn begin(&mut self) -> Result<()>;
    /// Sends part `number` (from 1), the bytes at `offset` of the object: its id for the commit.
    fn put_part(&self, number: u32, offset: u64, bytes: &[u8]) -> Result<String>;
    /// Writes the whole object in one request (no upload was begun).
    fn put_whole(&self, body: &[u8]) -> Result<String>;
    /// Makes the object visible from its parts (ids in order). A target that
    /// [`PartTarget::tail_at_commit`] gets the bytes not sent yet (`tail`, at `offset`).
    fn complete(&self, parts: &[(u32, String)], tail: &[u8], offset: u64) -> Result<String>;
    /// Abandons a begun upload (best effort: errors are not reported).
    fn abort(&self);
    /// Whether the last, possibly short, part goes with the commit rather than as a part.
    fn tail_at_commit(&self) -> bool {
        false
    }
}

/// An object upload as the sink holds it, whatever the store.
pub trait ObjectUpload: Write + Send + std::fmt::Debug {
    /// Bytes written so far.
    fn written(&self) -> u64;
    /// Cuts the output back to `pos` (within the part still in memory).
    fn rewind_to(&mut self, pos: u64) -> io::Result<()>;
    /// Completes the upload: the object appears whole, now.
    fn commit(self: Box<Self>) -> Result<String>;
}

/// A part handed to an uploader: its number (from 1), offset and bytes.
type Part = (u32, u64, Vec<u8>);

/// The uploader threads of a begun upload.
struct Started {
    /// Hands a part to a free uploader; `None` once closed.
    tx: Option<SyncSender<Part>>,
    workers: Vec<JoinHandle<()>>,
    ids: Arc<Mutex<Vec<(u32, String)>>>,
    /// The first failure of an uploader.
    error: Arc<Mutex<Option<Error>>>,
    failed: Arc<AtomicBool>,
}

/// An object being written; invisible until [`PartUpload::commit`].
pub struct PartUpload<T: PartTarget> {
    target: Arc<T>,
    buf: Vec<u8>,
    /// Bytes handed to uploaders (they can no longer be cut back).
    sent: u64,
    /// Parts handed to uploaders.
    parts: u32,
    started: Option<Started>,
    done: bool,
}

impl<T: PartTarget> std::fmt::Debug for PartUpload<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Upload({})", self.target.url())
    }
}

impl<T: PartTarget> PartUpload<T> {
    /// Starts writing to `target`; nothing is sent before the first full part.
    pub(crate) fn with_target(target: T) -> PartUpload<T> {
        PartUpload {
            target: Arc::new(target),
            buf: Vec::new(),
            sent: 0,
            parts: 0,
            started: None,
            done: false,
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.sent + self.buf.len() as u64
    }

    pub(crate) fn part_len(&self, i: u32) -> usize {
        self.target.part_len(i)
    }

    fn err(&self, kind: ErrorKind) -> Error {
        Error::new(kind).in_file(Path::new(&self.target.url()))
    }

    /// The upload and its uploader threads, started at the first full part.
    fn start(&mut self) -> Result<&mut Started> {
        if self.started.is_none() {
            Arc::get_mut(&mut self.target)
                .expect("no uploader holds the target before the start")
                .begin()?;
            let (tx, rx) = sync_channel::<Part>(0);
            let rx = Arc::new(Mutex::new(rx));
            let ids = Arc::new(Mutex::new(Vec::new()));
            let error = Arc::new(Mutex::new(None));
            let failed = Arc::new(AtomicBool::new(false));
            let workers = (0..self.target.transfer().max_concurrency.max(1))
                .map(|_| {
                    let job = Uploader {
                        target: self.target.clone(),
                        rx: rx.clone(),
                        ids: ids.clone(),
                        error: error.clone(),
                        failed: failed.clone(),
                    };
                    std::thread::spawn(move || job.run())
                })
                .collect();
            self.started = Some(Started {
                tx: Some(tx),
                workers,
                ids,
                error,
                failed,
            });
        }
        Ok(self.started.as_mut().expect("just started"))
    }

    /// Hands the buffer to an uploader as the next part, waiting for a free one.
    fn send_part(&mut self) -> Result<()> {
        let max = self.target.max_parts();
        if self.parts as u64 >= max {
            return Err(self.err(ErrorKind::Unsupported(format!(
                "an upload of more than {max} parts (raise the part_size storage option)"
            ))));
        }
        let next_len = self.part_len(self.parts + 1);
        let part = std::mem::replace(&mut self.buf, Vec::with_capacity(next_len));
        let len = part.len() as u64;
        let (number, offset) = (self.parts + 1, self.sent);
        let s = self.start()?;
        if let Some(e) = take_error(s) {
            return Err(e);
        }
        let handed =
            s.tx.as_ref()
                .is_some_and(|tx| tx.send((number, offset, part)).is_ok());
        if !handed {
            // Every uploader has stopped: one failed.
            return Err(take_error(s).unwrap_or_else(|| {
                Error::new(ErrorKind::Http("the uploader threads stopped".into()))
            }));
        }
        self.parts = number;
        self.sent += len;
        Ok(())
    }

    /// Cuts the output back to `pos` bytes, which must not be before the bytes already
    /// handed to uploaders (the part being filled can be cut back; parts sent cannot).
    pub fn rewind_to(&mut self, pos: u64) -> io::Result<()> {
        cut_back(&mut self.buf, self.sent, pos)
    }

    /// Completes the upload: the object appears whole, now (when the store's condition
    /// allows). Its ETag, or the store's id of the version.
    pub fn commit(mut self) -> Result<String> {
        let result = self.finish();
        self.done = result.is_ok();
        result
    }

    fn finish(&mut self) -> Result<String> {
        if self.started.is_none() {
            let body = std::mem::take(&mut self.buf);
            return self.target.put_whole(&body);
        }
        let tail_at_commit = self.target.tail_at_commit();
        if !self.buf.is_empty() && !tail_at_commit {
            self.send_part()?;
        }
        let s = self.started.as_mut().expect("started");
        drop(s.tx.take());
        for w in s.workers.drain(..) {
            let _ = w.join();
        }
        if let Some(e) = take_error(s) {
            return Err(e);
        }
        let mut ids = std::mem::take(&mut *s.ids.lock().unwrap_or_else(|p| p.into_inner()));
        ids.sort_unstable_by_key(|(n, _)| *n);
        if ids.len() != self.parts as usize {
            return Err(self.err(ErrorKind::Http(format!(
                "{} of {} parts were uploaded",
                ids.len(),
                self.parts
            ))));
        }
        let tail = std::mem::take(&mut self.buf);
        self.target.complete(&ids, &tail, self.sent)
    }
}

/// The first uploader failure, if any.
fn take_error(s: &Started) -> Option<Error> {
    if !s.failed.load(Ordering::Acquire) {
        return None;
    }
    s.error.lock().unwrap_or_else(|p| p.into_inner()).take()
}

impl<T: PartTarget> Write for PartUpload<T> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = self.part_len(self.parts) - self.buf.len();
        let n = data.len().min(room);
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(self.part_len(self.parts));
        }
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == self.part_len(self.parts) {
            self.send_part().map_err(io::Error::other)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<T: PartTarget> ObjectUpload for PartUpload<T> {
    fn written(&self) -> u64 {
        PartUpload::written(self)
    }

    fn rewind_to(&mut self, pos: u64) -> io::Result<()> {
        PartUpload::rewind_to(self, pos)
    }

    fn commit(self: Box<Self>) -> Result<String> {
        PartUpload::commit(*self)
    }
}

impl<T: PartTarget> Drop for PartUpload<T> {
    /// Not committed, or the commit failed: the parts in flight finish, then the upload is
    /// aborted, so no object appears.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(mut s) = self.started.take() {
            s.failed.store(true, Ordering::Release);
            drop(s.tx.take());
            for w in s.workers.drain(..) {
                let _ = w.join();
            }
            self.target.abort();
        }
    }
}

/// One uploader thread: takes parts until the channel closes or a part fails.
struct Uploader<T: PartTarget> {
    target: Arc<T>,
    rx: Arc<Mutex<Receiver<Part>>>,
    ids: Arc<Mutex<Vec<(u32, String)>>>,
    error: Arc<Mutex<Option<Error>>>,
    failed: Arc<AtomicBool>,
}

impl<T: PartTarget> Uploader<T> {
    fn run(self) {
        loop {
            let next = self.rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            let Ok((number, offset, part)) = next else {
                return;
            };
            if self.failed.load(Ordering::Acquire) {
                continue; // drain: the upload is abandoned
            }
            match self.target.put_part(number, offset, &part) {
                Ok(id) => self
                    .ids
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((number, id)),
                Err(e) => {
                    self.error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                    self.failed.store(true, Ordering::Release);
                }
            }
        }
    }
}

/// Part `i`'s size (from 0): `base`, doubled after every `per_size` parts, at most `max`.
pub(crate) fn doubling_part_len(base: u64, i: u32, per_size: u32, max: u64) -> usize {
    let doublings = (i / per_size).min(20);
    (base << doublings).min(max) as usize
}

/// Cuts an upload's output back to byte `pos`: `buf` holds the bytes after the `sent` ones
/// already handed to the store (those cannot be cut back).
pub(crate) fn cut_back(buf: &mut Vec<u8>, sent: u64, pos: u64) -> io::Result<()> {
    if pos < sent || pos > sent + buf.len() as u64 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("cannot cut an upload back to byte {pos}: {sent} bytes are uploaded already"),
        ));
    }
    buf.truncate((pos - sent) as usize);
    Ok(())
}

#[cfg(test)]
impl<T: PartTarget> PartUpload<T> {
    pub(crate) fn target_for_tests(&self) -> &T {
        &self.target
    }
}
