//! `StoreUpload`: an object of any `object_store` store written as a stream
//! ([`std::io::Write`]) in bounded memory, the [`ObjectUpload`] the sink holds: bytes gather
//! in one part-sized buffer; each full part becomes the next part of the store's multipart
//! upload (Azure: a block; numbered when handed over, so parts keep their order whatever
//! finishes first), sent on the process's runtime with at most `max_concurrency` in flight
//! (the writer waits for the oldest beyond that: memory about (`max_concurrency` + 1) ×
//! `part_size`). An output smaller than a part goes up at commit in one put, with the
//! condition asked (`PutMode::Create` for `IfNoneMatch`). A larger one created only if
//! absent goes up under a staging name beside it (`KEY.tensorsmith-upload-PID-N`: a
//! multipart commit carries no condition in object_store) and is copied to its name with
//! the store's copy-if-not-exists, then the staging object deleted. Nothing is visible
//! before the commit; an upload dropped or failed is aborted.

use crate::bytes::runtime::{block_on, handle, run};
use crate::bytes::storage_options::Transfer;
use crate::bytes::store::error::refused_condition;
use crate::bytes::store::file::StoreWords;
use crate::bytes::store::part_upload::{doubling_part_len, ObjectUpload};
use crate::error::{Error, ErrorKind, Result};
use ::bytes::Bytes;
use object_store::path::Path as StorePath;
use object_store::{MultipartUpload, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// An object being written; invisible until committed.
pub struct StoreUpload {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    name: String,
    words: Arc<dyn StoreWords>,
    transfer: Transfer,
    /// The condition of a one-put upload (a multipart one cannot carry one).
    mode: PutMode,
    buf: Vec<u8>,
    /// Bytes handed to parts (they can no longer be cut back).
    sent: u64,
    /// Parts handed over.
    parts: u32,
    upload: Option<Box<dyn MultipartUpload>>,
    in_flight: VecDeque<JoinHandle<object_store::Result<()>>>,
    /// Where the parts of a create-if-absent upload go before the copy to `path`.
    staging: Option<StorePath>,
    done: bool,
}

impl std::fmt::Debug for StoreUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Upload({})", self.name)
    }
}

impl StoreUpload {
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        path: StorePath,
        name: String,
        words: Arc<dyn StoreWords>,
        transfer: Transfer,
        mode: PutMode,
    ) -> StoreUpload {
        StoreUpload {
            store,
            path,
            name,
            words,
            transfer,
            mode,
            buf: Vec::new(),
            sent: 0,
            parts: 0,
            upload: None,
            in_flight: VecDeque::new(),
            staging: None,
            done: false,
        }
    }

    /// The size of the part being filled: `part_size`, doubled after every 1,000 parts (at
    /// most 5 GiB), so that a stream of unknown length fits in S3's 10,000 parts (8 MiB parts
    /// hold 7.8 GiB before the first doubling).
    fn part_size(&self) -> usize {
        doubling_part_len(self.transfer.part_size.max(1), self.parts, 1000, 5 << 30)
    }

    fn err(&self, e: &object_store::Error) -> Error {
        Error::new(self.words.error(e, self.path.as_ref(), true)).in_file(Path::new(&self.name))
    }

    /// The name taken, or the version changed: the condition refused.
    fn taken(&self) -> Error {
        let why = match &self.mode {
            PutMode::Update(v) => format!(
                "'{}' is no longer the version {} (If-Match)",
                self.path,
                v.e_tag
                    .as_deref()
                    .or(v.version.as_deref())
                    .unwrap_or("read")
            ),
            _ => format!("'{}' exists already (If-None-Match: *)", self.path),
        };
        Error::new(ErrorKind::PreconditionFailed(why)).in_file(Path::new(&self.name))
    }

    /// Waits for the oldest part in flight.
    fn wait_oldest(&mut self) -> Result<()> {
        if let Some(h) = self.in_flight.pop_front() {
            match block_on(h) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(self.err(&e)),
                Err(e) => {
                    return Err(
                        Error::new(ErrorKind::Http(format!("an upload task failed: {e}")))
                            .in_file(Path::new(&self.name)),
                    )
                }
            }
        }
        Ok(())
    }

    /// Hands the buffer over as the next part.
    fn send_part(&mut self) -> Result<()> {
        let part = std::mem::take(&mut self.buf);
        self.send(Bytes::from(part))
    }

    /// Uploads `data` (a file's mapped bytes, say) as the whole object and commits it: its
    /// parts are slices of `data`, never copies, so the memory it takes is `data`'s own (for
    /// a mapped file, the page cache's, which the kernel can take back), not a buffer per
    /// part in flight.
    pub(crate) fn commit_bytes(mut self, data: Bytes) -> Result<String> {
        debug_assert!(self.buf.is_empty() && self.parts == 0);
        if data.len() <= self.part_size() {
            let r = self.put_once(PutPayload::from(data));
            self.done = r.is_ok();
            return r;
        }
        let mut at = 0;
        while at < data.len() {
            let n = self.part_size().min(data.len() - at);
            self.send(data.slice(at..at + n))?;
            at += n;
        }
        self.commit()
    }

    /// One put of the whole object, with the condition asked.
    fn put_once(&self, body: PutPayload) -> Result<String> {
        let opts = PutOptions {
            mode: self.mode.clone(),
            ..PutOptions::default()
        };
        let (store, path) = (Arc::clone(&self.store), self.path.clone());
        match run(async move { store.put_opts(&path, body, opts).await }) {
            Ok(r) => Ok(r.e_tag.unwrap_or_default()),
            Err(e) if refused_condition(&e) => Err(self.taken()),
            Err(e) => Err(self.err(&e)),
        }
    }

    /// Hands `part` over as the next part of the multipart upload (begun by the first).
    fn send(&mut self, part: Bytes) -> Result<()> {
        if let PutMode::Update(_) = self.mode {
            return Err(Error::new(ErrorKind::Unsupported(
                "a replace-if-unchanged upload larger than one part (raise the part_size \
                 storage option)"
                    .into(),
            ))
            .in_file(Path::new(&self.name)));
        }
        if self.upload.is_none() {
            let target = match self.mode {
                PutMode::Create => {
                    static N: AtomicU64 = AtomicU64::new(0);
                    let n = N.fetch_add(1, Ordering::Relaxed);
                    let pid = std::process::id();
                    let staging =
                        StorePath::parse(format!("{}.tensorsmith-upload-{pid}-{n}", self.path))
                            .expect("a valid path with a suffix is one");
                    self.staging = Some(staging.clone());
                    staging
                }
                _ => self.path.clone(),
            };
            let u = block_on(self.store.put_multipart(&target)).map_err(|e| self.err(&e))?;
            self.upload = Some(u);
        }
        self.sent += part.len() as u64;
        self.parts += 1;
        let fut = self
            .upload
            .as_mut()
            .expect("begun")
            .put_part(PutPayload::from(part));
        self.in_flight.push_back(handle().spawn(fut));
        while self.in_flight.len() >= self.transfer.max_concurrency.max(1) {
            self.wait_oldest()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String> {
        if self.upload.is_none() {
            let body = PutPayload::from(std::mem::take(&mut self.buf));
            return self.put_once(body);
        }
        if !self.buf.is_empty() {
            self.send_part()?;
        }
        while !self.in_flight.is_empty() {
            self.wait_oldest()?;
        }
        let upload = self.upload.as_mut().expect("begun");
        let r = block_on(upload.complete());
        let r = r.map_err(|e| self.err(&e))?;
        self.upload = None;
        let Some(staging) = self.staging.take() else {
            return Ok(r.e_tag.unwrap_or_default());
        };
        let copied = block_on(self.store.copy_if_not_exists(&staging, &self.path));
        let _ = block_on(self.store.delete(&staging));
        match copied {
            Ok(()) => Ok(String::new()),
            Err(e) if refused_condition(&e) => Err(self.taken()),
            Err(e) => Err(self.err(&e)),
        }
    }

    /// Completes the upload: the object appears whole, now. Its ETag.
    pub fn commit(mut self) -> Result<String> {
        let r = self.finish();
        self.done = r.is_ok();
        r
    }
}

impl Write for StoreUpload {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = self.part_size() - self.buf.len();
        let n = data.len().min(room);
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(self.part_size());
        }
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == self.part_size() {
            self.send_part().map_err(io::Error::other)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ObjectUpload for StoreUpload {
    fn written(&self) -> u64 {
        self.sent + self.buf.len() as u64
    }

    fn rewind_to(&mut self, pos: u64) -> io::Result<()> {
        crate::bytes::store::part_upload::cut_back(&mut self.buf, self.sent, pos)
    }

    fn commit(self: Box<Self>) -> Result<String> {
        StoreUpload::commit(*self)
    }
}

impl Drop for StoreUpload {
    /// Not committed, or the commit failed: the parts in flight finish, then the upload is
    /// aborted, so no object appears.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let in_flight = std::mem::take(&mut self.in_flight);
        if let Some(mut u) = self.upload.take() {
            block_on(async move {
                for h in in_flight {
                    let _ = h.await;
                }
                let _ = u.abort().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Plain;
    impl StoreWords for Plain {
        fn error(&self, e: &object_store::Error, _: &str, _: bool) -> ErrorKind {
            ErrorKind::Http(e.to_string())
        }
        fn missing_bucket(&self) -> ErrorKind {
            ErrorKind::NoSuchBucket("plain".into())
        }
    }

    #[test]
    fn parts_double_every_thousand_and_the_object_appears_at_commit() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let t = Transfer {
            part_size: 1024,
            ..Transfer::default()
        };
        let new = || {
            StoreUpload::new(
                Arc::clone(&store),
                StorePath::from("k"),
                "mem://k".into(),
                Arc::new(Plain),
                t,
                PutMode::Overwrite,
            )
        };
        let mut u = new();
        assert_eq!(u.part_size(), 1024);
        u.parts = 999;
        assert_eq!(u.part_size(), 1024);
        u.parts = 1000;
        assert_eq!(u.part_size(), 2048);
        u.parts = 25_000;
        assert_eq!(u.part_size(), 1024 << 20);
        let mut u = new();
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        u.write_all(&data).unwrap();
        assert_eq!((u.parts, u.written()), (4, 5000));
        let path = StorePath::from("k");
        assert!(
            block_on(store.head(&path)).is_err(),
            "visible before commit"
        );
        u.commit().unwrap();
        let got = block_on(async { store.get(&path).await?.bytes().await }).unwrap();
        assert_eq!(&got[..], &data[..]);
    }

    #[test]
    fn a_mapped_file_goes_up_in_slices_or_one_put() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let t = Transfer {
            part_size: 1024,
            ..Transfer::default()
        };
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 239) as u8).collect();
        for (key, n, mode) in [
            ("big", 5000, PutMode::Overwrite),
            ("small", 700, PutMode::Create),
            ("created", 5000, PutMode::Create),
        ] {
            let u = StoreUpload::new(
                Arc::clone(&store),
                StorePath::from(key),
                format!("mem://{key}"),
                Arc::new(Plain),
                t,
                mode,
            );
            u.commit_bytes(Bytes::copy_from_slice(&data[..n])).unwrap();
            let path = StorePath::from(key);
            let got = block_on(async { store.get(&path).await?.bytes().await }).unwrap();
            assert_eq!(&got[..], &data[..n], "{key}");
        }
        // Create-if-absent refuses a name taken, in one put as in parts.
        for n in [700, 5000] {
            let u = StoreUpload::new(
                Arc::clone(&store),
                StorePath::from("created"),
                "mem://created".into(),
                Arc::new(Plain),
                t,
                PutMode::Create,
            );
            let e = u
                .commit_bytes(Bytes::copy_from_slice(&data[..n]))
                .unwrap_err();
            assert!(e.to_string().contains("exists already"), "{e}");
        }
    }
}
