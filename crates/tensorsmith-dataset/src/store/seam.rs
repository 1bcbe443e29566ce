//! The seam between the object-store commit protocol and where a dataset's files live: named
//! objects under the dataset's location (`part-….safetensors`, `_tensorsmith/versions/…`,
//! `dataset_manifest.json`), read whole when small or by range, written whole, created
//! exclusively (the commit point), listed, deleted. An object store has no rename and no
//! lock, so the protocol over this seam uses only what S3 gives: a put that fails when the
//! name exists (`If-None-Match: *`). Implemented by a local folder (`store_local.rs`, where
//! the exclusive create is a hard link), S3 and Azure prefixes (`store_object.rs`:
//! `If-None-Match: *` on both) and a GCS prefix (`store_gcs.rs`:
//! `ifGenerationMatch=0`).

use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tensorsmith::bytes::ReadAt;
use tensorsmith::index::TensorIndex;

/// One object of a listing.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The name below the dataset's location (`_tensorsmith/versions/00000001.json`).
    pub key: String,
    pub size: u64,
    /// Last modification (ms since the epoch; 0 when the store does not say).
    pub modified_ms: u64,
}

/// An upload started and never completed (a multipart upload of a killed writer).
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    pub key: String,
    pub id: String,
    pub started_ms: u64,
}

/// What a conditional replace expects to find under the key.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect<'a> {
    /// No object (`If-None-Match: *`).
    Absent,
    /// The object as read, by its tag (`If-Match: <ETag>`).
    Tag(&'a str),
}

pub(crate) trait Store: Send + Sync {
    /// The dataset's location as errors and reports show it (no credentials).
    fn location(&self) -> String;
    /// How many uploads to run at once (the store's transfer setting).
    fn concurrency(&self) -> usize {
        1
    }
    /// `key` as errors show it.
    fn show(&self, key: &str) -> String {
        format!("{}/{key}", self.location().trim_end_matches('/'))
    }
    /// The whole object, `None` when there is none.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Writes `bytes` as `key`, replacing what is there.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;
    /// Creates `key` only if no object has that name: `false` when one has (another writer
    /// created it first).
    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool>;
    /// The whole object and its tag (an ETag: what [`Store::replace`] expects), `None` when
    /// there is none. A store without tags gives `None` for the tag.
    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        Ok(self.get(key)?.map(|b| (b, None)))
    }
    /// Writes `bytes` as `key` only if the object is still as `expect` says: `false` when
    /// another writer changed it since it was read (or created it, or removed it). A store
    /// without conditional replaces writes unconditionally.
    fn replace(&self, key: &str, bytes: &[u8], expect: Expect<'_>) -> Result<bool> {
        let _ = expect;
        self.put(key, bytes)?;
        Ok(true)
    }
    /// Uploads the local file `from` as `key` (streamed; replaces what is there).
    fn put_file(&self, key: &str, from: &Path) -> Result<()>;
    /// Moves the local file `from` in as `key` (a write's finished shard: `from` is gone
    /// afterwards, also when this fails). A store on the local disk renames it.
    fn adopt(&self, key: &str, from: &Path) -> Result<()> {
        let r = self.put_file(key, from);
        let _ = std::fs::remove_file(from);
        r
    }
    /// Every object whose name starts with `prefix`, in name order.
    /// The local file holding `key`, for a store that is a local folder (store_local.rs):
    /// read in place rather than copied down first. `None` for a remote store.
    fn local_file(&self, _key: &str) -> Option<PathBuf> {
        None
    }
    fn list(&self, prefix: &str) -> Result<Vec<Entry>>;
    /// Removes `key` (no error when it is already gone).
    fn delete(&self, key: &str) -> Result<()>;
    /// `key` opened for ranged reads.
    fn open(&self, key: &str) -> Result<Box<dyn ReadAt>>;
    /// As [`Store::open`], fetching `first` bytes at open (what a reader reads first: a
    /// shard's header) where the store fetches a prefix at all.
    fn open_head(&self, key: &str, _first: u64) -> Result<Box<dyn ReadAt>> {
        self.open(key)
    }
    /// Uploads started under `prefix` and never completed.
    fn uploads(&self, prefix: &str) -> Result<Vec<Upload>>;
    /// Abandons an upload (its parts are freed).
    fn abort(&self, upload: &Upload) -> Result<()>;
}

/// A conditional write's outcome as the seam gives it: `true` when written, `false` when the
/// condition failed (another writer created or changed the object, or removed what was to
/// be replaced).
pub(crate) fn written<T>(r: tensorsmith::error::Result<T>) -> Result<bool> {
    use tensorsmith::error::ErrorKind;
    match r {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::PreconditionFailed(_) | ErrorKind::RemoteNotFound(_)
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The safetensors header of the object `key` (read by range), errors naming the object.
pub(crate) fn header(store: &dyn Store, key: &str) -> Result<TensorIndex> {
    let r = store.open(key)?;
    tensorsmith::safetensors::read_index(&*r, &tensorsmith::OpenOptions::new())
        .map_err(|e| e.in_file(&PathBuf::from(store.show(key))).into())
}

/// The headers of `keys` in their order, `store.concurrency()` read at once (a dataset's
/// shards: one round trip each).
pub(crate) fn headers(store: &dyn Store, keys: &[&str]) -> Vec<Result<TensorIndex>> {
    let out: Vec<Mutex<Option<Result<TensorIndex>>>> =
        keys.iter().map(|_| Mutex::new(None)).collect();
    at_once(store.concurrency(), keys.len(), |i| {
        *out[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(header(store, keys[i]));
        true
    });
    out.into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every key was read")
        })
        .collect()
}

/// Runs `step(i)` for every `i < n` on up to `threads` threads (the store's requests at
/// once), each taking the next index; a step that returns false stops every thread before
/// its next index.
pub(crate) fn at_once(threads: usize, n: usize, step: impl Fn(usize) -> bool + Sync) {
    let next = AtomicUsize::new(0);
    let stopped = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || stopped.load(Ordering::Relaxed) {
                    return;
                }
                if !step(i) {
                    stopped.store(true, Ordering::Relaxed);
                    return;
                }
            });
        }
    });
}
