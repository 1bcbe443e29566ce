//! An S3 object written as a stream ([`std::io::Write`]), in bounded memory: bytes gather in
//! one part-sized buffer; each full part goes to one of up to `max_concurrency` uploader
//! threads (UploadPart, retried per the transfer settings) while the next one fills. The
//! hand-over waits for a free uploader, so memory stays within about
//! (`max_concurrency` + 1) × `part_size`.
//!
//! Nothing is visible under the key until [`S3Upload::commit`] completes the upload
//! (CompleteMultipartUpload, conditional when asked); an output smaller than one part goes up
//! at commit as one PutObject and starts no upload. An upload dropped without a commit, or
//! one whose commit fails, is aborted (AbortMultipartUpload, once the parts in flight are
//! done), so no object ever appears unless complete. A process killed mid-upload leaves an
//! open multipart upload (no object): `S3Client::list_uploads` finds it, and a bucket
//! lifecycle rule or `abort_upload` removes it.
//!
//! Parts are `part_size` bytes, doubled after every 1,000 parts (S3 allows 10,000 parts of
//! at most 5 GiB), so a stream of unknown length fits: 8 MiB parts hold 7.8 GiB before the
//! first doubling.

use super::s3_client::{PutCondition, S3Client, MAX_PARTS};
use crate::error::{Error, ErrorKind, Result};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A part handed to an uploader: its number (from 1) and bytes.
type Part = (u32, Vec<u8>);

/// The largest part S3 takes.
const MAX_PART: u64 = 5 << 30;
/// Parts of one size before the size doubles.
const PARTS_PER_SIZE: u32 = 1000;

/// A multipart upload under way, with its uploader threads.
struct Started {
    upload_id: String,
    /// Hands a part (number, bytes) to a free uploader; `None` once closed.
    tx: Option<SyncSender<Part>>,
    workers: Vec<JoinHandle<()>>,
    etags: Arc<Mutex<Vec<(u32, String)>>>,
    /// The first failure of an uploader.
    error: Arc<Mutex<Option<Error>>>,
    failed: Arc<AtomicBool>,
}

/// An object being written to S3; invisible until [`S3Upload::commit`].
pub struct S3Upload {
    client: S3Client,
    key: String,
    cond: PutCondition,
    buf: Vec<u8>,
    /// Bytes handed to uploaders (they can no longer be cut back).
    sent: u64,
    /// Parts handed to uploaders.
    parts: u32,
    started: Option<Started>,
    done: bool,
}

impl std::fmt::Debug for S3Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Upload({})", self.client.key_url(&self.key))
    }
}

impl S3Upload {
    /// Starts writing what will become `key`, written at commit when `cond` allows.
    pub fn new(client: S3Client, key: &str, cond: PutCondition) -> S3Upload {
        S3Upload {
            client,
            key: key.to_owned(),
            cond,
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

    /// The size of part `i` (from 0).
    fn part_len(&self, i: u32) -> usize {
        let base = self.client.transfer().part_size;
        let doublings = (i / PARTS_PER_SIZE).min(20);
        (base << doublings).min(MAX_PART) as usize
    }

    fn err(&self, kind: ErrorKind) -> Error {
        Error::new(kind).in_file(Path::new(&self.client.key_url(&self.key)))
    }

    /// The uploader threads and the multipart upload, started at the first full part.
    fn start(&mut self) -> Result<&mut Started> {
        if self.started.is_none() {
            let upload_id = self.client.create_upload(&self.key)?;
            let (tx, rx) = sync_channel::<Part>(0);
            let rx = Arc::new(Mutex::new(rx));
            let etags = Arc::new(Mutex::new(Vec::new()));
            let error = Arc::new(Mutex::new(None));
            let failed = Arc::new(AtomicBool::new(false));
            let workers = (0..self.client.transfer().max_concurrency)
                .map(|_| {
                    let job = Uploader {
                        client: self.client.clone(),
                        key: self.key.clone(),
                        upload_id: upload_id.clone(),
                        rx: rx.clone(),
                        etags: etags.clone(),
                        error: error.clone(),
                        failed: failed.clone(),
                    };
                    std::thread::spawn(move || job.run())
                })
                .collect();
            self.started = Some(Started {
                upload_id,
                tx: Some(tx),
                workers,
                etags,
                error,
                failed,
            });
        }
        Ok(self.started.as_mut().expect("just started"))
    }

    /// Hands the buffer to an uploader as the next part, waiting for a free one.
    fn send_part(&mut self) -> Result<()> {
        if self.parts as u64 >= MAX_PARTS {
            return Err(self.err(ErrorKind::Unsupported(format!(
                "an upload of more than {MAX_PARTS} parts (raise the part_size storage option)"
            ))));
        }
        let next_len = self.part_len(self.parts + 1);
        let part = std::mem::replace(&mut self.buf, Vec::with_capacity(next_len));
        let len = part.len() as u64;
        let number = self.parts + 1;
        let s = self.start()?;
        if let Some(e) = take_error(s) {
            return Err(e);
        }
        let handed =
            s.tx.as_ref()
                .is_some_and(|tx| tx.send((number, part)).is_ok());
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
        if pos < self.sent || pos > self.written() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "cannot cut an upload back to byte {pos}: {} bytes are uploaded already",
                    self.sent
                ),
            ));
        }
        self.buf.truncate((pos - self.sent) as usize);
        Ok(())
    }

    /// Completes the upload: the object appears whole under its key, now (when the
    /// condition allows). Its ETag.
    pub fn commit(mut self) -> Result<String> {
        let result = self.finish();
        self.done = result.is_ok();
        result
    }

    fn finish(&mut self) -> Result<String> {
        if self.started.is_none() {
            let body = std::mem::take(&mut self.buf);
            return self.client.put(&self.key, &body, self.cond.clone());
        }
        if !self.buf.is_empty() {
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
        let mut etags = std::mem::take(&mut *s.etags.lock().unwrap_or_else(|p| p.into_inner()));
        etags.sort_unstable_by_key(|(n, _)| *n);
        if etags.len() != self.parts as usize {
            return Err(self.err(ErrorKind::Http(format!(
                "{} of {} parts were uploaded",
                etags.len(),
                self.parts
            ))));
        }
        let id = s.upload_id.clone();
        self.client
            .complete_upload(&self.key, &id, &etags, self.cond.clone())
    }
}

/// The first uploader failure, if any.
fn take_error(s: &Started) -> Option<Error> {
    if !s.failed.load(Ordering::Acquire) {
        return None;
    }
    s.error.lock().unwrap_or_else(|p| p.into_inner()).take()
}

impl Write for S3Upload {
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

impl Drop for S3Upload {
    /// Not committed, or the commit failed: the parts in flight finish, then the upload is
    /// aborted, so no object appears and no parts stay stored.
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
            let _ = self.client.abort_upload(&self.key, &s.upload_id);
        }
    }
}

/// One uploader thread: takes parts until the channel closes or a part fails.
struct Uploader {
    client: S3Client,
    key: String,
    upload_id: String,
    rx: Arc<Mutex<Receiver<Part>>>,
    etags: Arc<Mutex<Vec<(u32, String)>>>,
    error: Arc<Mutex<Option<Error>>>,
    failed: Arc<AtomicBool>,
}

impl Uploader {
    fn run(self) {
        loop {
            let next = self.rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            let Ok((number, part)) = next else { return };
            if self.failed.load(Ordering::Acquire) {
                continue; // drain: the upload is abandoned
            }
            match self
                .client
                .upload_part(&self.key, &self.upload_id, number, &part)
            {
                Ok(etag) => self
                    .etags
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((number, etag)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::StorageOptions;

    #[test]
    fn part_sizes_grow_and_the_unsent_part_cuts_back() {
        let mut o = StorageOptions::new();
        o.set("endpoint_url", "http://127.0.0.1:1").unwrap();
        o.set("part_size", "5MiB").unwrap();
        let (c, key) = S3Client::for_url("s3://b/k", &o).unwrap();
        let mut u = S3Upload::new(c, &key, PutCondition::Always);
        assert_eq!(u.part_len(0), 5 << 20);
        assert_eq!(u.part_len(999), 5 << 20);
        assert_eq!(u.part_len(1000), 10 << 20);
        assert_eq!(u.part_len(9999), 5 << 29);
        // 10,000 parts hold far more than 10,000 × 5 MiB.
        let total: u64 = (0..MAX_PARTS as u32).map(|i| u.part_len(i) as u64).sum();
        assert!(total > 1 << 40, "{total}");
        u.write_all(b"0123456789").unwrap();
        u.rewind_to(4).unwrap();
        assert_eq!(u.written(), 4);
        assert!(u.rewind_to(5).is_err());
        u.write_all(b"xy").unwrap();
        assert_eq!(u.buf, b"0123xy");
        // Dropped before any part went up: nothing was started, nothing to abort.
    }
}
