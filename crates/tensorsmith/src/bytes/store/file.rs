//! `StoreFile`: an object of any `object_store` store (S3, Azure Blob) as a [`ReadAt`]. The
//! open fetches the first bytes and pins the version (its ETag); every later read is a ranged
//! GET conditional on it (`if_match`), so an object replaced mid-read fails the read with
//! [`ErrorKind::ChangedDuringRead`] instead of mixing two versions. Reads inside the first
//! bytes are served from memory; a read larger than a part, and `copy_to`, are parallel ranged
//! GETs (`parts::copy_parallel`, `max_concurrency` at once). Errors are worded by the store
//! (`StoreWords`) and name the object's URL.

use crate::bytes::resumed_get::get_resumed;
use crate::bytes::runtime::{block_on, run};
use crate::bytes::storage_options::Transfer;
use crate::bytes::store::error::classify;
use crate::bytes::store::parts::copy_parallel;
use crate::bytes::{check_range, checked_end, ReadAt};
use crate::error::{Error, ErrorKind, Result};
use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// How a store words its failures: `e` on `key`.
pub(crate) trait StoreWords: Send + Sync {
    fn error(&self, e: &object_store::Error, key: &str, write: bool) -> ErrorKind;
    /// The error of the bucket (S3) or container (Azure) missing.
    fn missing_bucket(&self) -> ErrorKind;
}

/// The error of a failed open. A 404 without the store's code in its body (some servers, and
/// answers whose body is lost) does not say whether the bucket or the object is missing: a
/// listing of the key tells them apart, since a listing answers 404 only for a missing bucket
/// or container (a missing key lists nothing), with or without the code. A listing that got
/// no answer at all is tried once more.
fn missing_what(
    store: &dyn ObjectStore,
    path: &StorePath,
    words: &dyn StoreWords,
    key: &str,
    e: &object_store::Error,
) -> ErrorKind {
    let kind = words.error(e, key, false);
    if !matches!(e, object_store::Error::NotFound { .. }) || !classify(e).code.is_empty() {
        return kind;
    }
    for _ in 0..2 {
        let le = match block_on(store.list_with_delimiter(Some(path))) {
            Ok(_) => return kind,
            Err(le) => le,
        };
        match classify(&le).status {
            Some(404) => return words.missing_bucket(),
            Some(_) => return kind,
            None if matches!(le, object_store::Error::NotFound { .. }) => {
                return words.missing_bucket()
            }
            None => {}
        }
    }
    kind
}

/// Whether `e` is a 416 (Range Not Satisfiable: byte 0 of an empty object was asked for).
fn is_range_refused(e: &object_store::Error) -> bool {
    let f = classify(e);
    let text = e.to_string();
    f.status == Some(416)
        || f.code == "InvalidRange"
        || text.contains("Range Not Satisfiable")
        || text.contains("InvalidRange")
}

/// An object opened for reading, its version pinned.
pub struct StoreFile {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    /// The URL errors name (`az://container/blob`).
    name: String,
    words: Arc<dyn StoreWords>,
    len: u64,
    /// The ETag opened; every later read is conditional on it.
    etag: Option<String>,
    first: Vec<u8>,
    transfer: Transfer,
}

/// Where a GET's body lands: the caller's buffer, written by the task [`run`] drives while
/// the caller waits. A raw address because the task must be `'static`; [`run`] returns only
/// once the task is done (the runtime is never shut down, the task never cancelled), so the
/// borrow of the buffer outlives every write.
struct Dest(*mut u8);

// SAFETY: the address is written by one task at a time (the one GET it was made for), and
// the buffer behind it is borrowed mutably by the waiting caller for the task's whole life.
unsafe impl Send for Dest {}
// SAFETY: shared only inside that one task (its body callback borrows it), never between
// threads that write at once.
unsafe impl Sync for Dest {}

impl Dest {
    /// Copies `bytes` to `at` bytes past the start. The caller keeps `at + bytes.len()`
    /// within the buffer.
    fn write(&self, at: usize, bytes: &[u8]) {
        // SAFETY: in bounds (checked by the caller against the buffer's length) and no one
        // else touches the buffer while the task runs (see the type's documentation).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.0.add(at), bytes.len()) }
    }
}

impl std::fmt::Debug for StoreFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreFile({:?}, {} bytes)", self.name, self.len)
    }
}

impl StoreFile {
    /// Opens `key` of `store`, fetching its first `first` bytes (one request; again if its
    /// body is cut short).
    pub(crate) fn open(
        store: Arc<dyn ObjectStore>,
        key: &str,
        name: String,
        words: Arc<dyn StoreWords>,
        first: u64,
        transfer: Transfer,
    ) -> Result<StoreFile> {
        let path = crate::bytes::store::key::store_path(key)?;
        let err = |e: &object_store::Error| Error::new(words.error(e, key, false));
        let opts = GetOptions {
            range: (first > 0).then_some(GetRange::Bounded(0..first)),
            ..GetOptions::default()
        };
        let got = block_on(async {
            // A body cut short is asked for again, up to `max_attempts` times (the store's
            // retries cover the request, not a body that breaks after its headers).
            let mut cuts = 0;
            loop {
                let r = store.get_opts(&path, opts.clone()).await?;
                let meta = r.meta.clone();
                match r.bytes().await {
                    Ok(bytes) => return Ok::<_, object_store::Error>((meta, bytes)),
                    Err(e) => {
                        cuts += 1;
                        if cuts >= transfer.max_attempts.max(1) {
                            return Err(e);
                        }
                    }
                }
            }
        });
        let (meta, bytes) = match got {
            Ok(g) => g,
            // An empty object has no byte 0 to ask for: its metadata alone. (By the status or
            // the code: the message's "416" also matched a port or a duration such as
            // "in 41.6ms", and sent a missing container's 404 to a HEAD, which has no body to
            // name the container in.)
            Err(e) if is_range_refused(&e) => {
                let meta =
                    block_on(store.head(&path)).map_err(|e| err(&e).in_file(Path::new(&name)))?;
                (meta, Default::default())
            }
            Err(e) => {
                let kind = missing_what(&*store, &path, &*words, key, &e);
                return Err(Error::new(kind).in_file(Path::new(&name)));
            }
        };
        Ok(StoreFile {
            len: meta.size,
            etag: meta.e_tag,
            first: bytes.to_vec(),
            store,
            path,
            name,
            words,
            transfer,
        })
    }

    fn error(&self, e: &object_store::Error) -> Error {
        let kind = match e {
            object_store::Error::Precondition { .. } => ErrorKind::ChangedDuringRead {
                what: "the ETag",
                pinned: self.etag.clone().unwrap_or_default(),
                now: "another (If-Match refused)".into(),
            },
            _ => self.words.error(e, self.path.as_ref(), false),
        };
        Error::new(kind).in_file(Path::new(&self.name))
    }

    /// The bytes of `range` (within the object) by one conditional GET into `buf` (resized
    /// to the range's length), streamed straight into it as they arrive; the buffer comes
    /// back filled (see [`StoreFile::get_into`]).
    fn get_part(&self, range: Range<u64>, mut buf: Vec<u8>) -> Result<Vec<u8>> {
        buf.resize((range.end - range.start) as usize, 0);
        self.get_into(range, &mut buf)?;
        Ok(buf)
    }

    /// The bytes of `range` (within the object, `dst.len()` long) by one conditional GET,
    /// streamed straight into `dst` as they arrive (no buffer of the part between), on the
    /// runtime's threads ([`run`]). A body cut short goes on from where it stopped
    /// (`get_resumed`), up to `max_attempts` cuts.
    fn get_into(&self, range: Range<u64>, dst: &mut [u8]) -> Result<()> {
        let want = dst.len();
        let out = Dest(dst.as_mut_ptr());
        let (store, path, etag) = (
            Arc::clone(&self.store),
            self.path.clone(),
            self.etag.clone(),
        );
        let (len, attempts, start) = (self.len, self.transfer.max_attempts, range.start);
        let got = run(async move {
            let mut at = 0usize;
            get_resumed(&*store, &path, range, len, etag, attempts, |c| {
                let end = at + c.len();
                // More than asked for: counted (by `got`), not copied (reported below).
                if end <= want {
                    out.write(at, &c);
                }
                at = end;
                std::future::ready(true)
            })
            .await
        });
        let s = got.map_err(|f| {
            f.cut_short(want as u64, &self.name)
                .unwrap_or_else(|| self.error(&f.error))
        })?;
        let (size, etag, got) = (s.size, s.etag, s.got as usize);
        if size != self.len || (self.etag.is_some() && etag.is_some() && etag != self.etag) {
            return Err(Error::new(ErrorKind::ChangedDuringRead {
                what: "the ETag and length",
                pinned: format!("{:?}, {} bytes", self.etag, self.len),
                now: format!("{etag:?}, {size} bytes"),
            })
            .in_file(Path::new(&self.name)));
        }
        if got != want {
            return Err(Error::new(ErrorKind::Http(format!(
                "asked for {want} bytes at {start}, got {got}"
            )))
            .in_file(Path::new(&self.name)));
        }
        Ok(())
    }

    /// `range` written to `out`: parallel parts of `part_size`.
    fn fetch_to(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        let fetch = |r: Range<u64>, buf: Vec<u8>| self.get_part(r, buf);
        copy_parallel(range, out, &self.transfer, &fetch)
    }
}

impl ReadAt for StoreFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn parallel_reads(&self) -> Option<usize> {
        Some(self.transfer.max_concurrency)
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        check_range(&range, self.len)?;
        let (start, end) = (range.start as usize, range.end as usize);
        if end <= self.first.len() {
            return Ok(Cow::Borrowed(&self.first[start..end]));
        }
        if range.end - range.start > self.transfer.part_size {
            let mut buf = Vec::with_capacity(end - start);
            self.fetch_to(range, &mut buf)?;
            Ok(Cow::Owned(buf))
        } else {
            Ok(Cow::Owned(self.get_part(range, Vec::new())?))
        }
    }

    /// Fills `buf` from `offset`: what the first bytes hold from memory, the rest by one GET
    /// straight into `buf` (parallel parts when it is longer than `part_size`).
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = checked_end(offset, buf.len(), self.len)?;
        let held = (self.first.len() as u64).clamp(offset, end);
        let (head, rest) = buf.split_at_mut((held - offset) as usize);
        if !head.is_empty() {
            head.copy_from_slice(&self.first[offset as usize..held as usize]);
        }
        if rest.is_empty() {
            return Ok(());
        }
        if end - held > self.transfer.part_size {
            return self.fetch_to(held..end, &mut &mut rest[..]);
        }
        self.get_into(held..end, rest)
    }

    fn copy_to(&self, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
        check_range(&range, self.len)?;
        // The part of `range` within the first bytes is served from memory; the rest fetched.
        let held = (self.first.len() as u64).clamp(range.start, range.end);
        if range.start < held {
            out.write_all(&self.first[range.start as usize..held as usize])?;
        }
        if held < range.end {
            self.fetch_to(held..range.end, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod range_tests {
    use super::is_range_refused;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::other(text.to_owned())),
        }
    }

    #[test]
    fn a_416_is_told_by_its_status_not_by_any_416_in_the_message() {
        let missing = "Error performing GET http://127.0.0.1:4166/c/m in 41.6ms, after 0 \
                       retries - Server returned non-2xx status code: 404 Not Found: \
                       <Code>ContainerNotFound</Code>";
        assert!(!is_range_refused(&generic(missing)));
        let empty = "Error performing GET http://127.0.0.1:9000/b/e in 3ms - Server returned \
                     non-2xx status code: 416 Range Not Satisfiable: <Code>InvalidRange</Code>";
        assert!(is_range_refused(&generic(empty)));
    }
}
