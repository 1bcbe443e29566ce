//! The store seam over a key prefix of an object store, whichever store: a dataset at
//! `scheme://bucket/path/to/dataset` is the objects under `path/to/dataset/`, reached through
//! the byte layer's client of that store (`BlobClient`: S3 and Azure in
//! store_object.rs, Cloud Storage in store_gcs.rs), which signs, retries and words errors
//! naming the URL without credentials. The exclusive create and the conditional replace are
//! the client's conditional put (`If-None-Match: *` / `If-Match`, or the store's own form);
//! ranged reads go through the byte layer's `open_url`.

use crate::error::{DatasetError, Result};
use crate::store::seam::{written, Entry, Expect, Store, Upload};
use std::fs::File;
use std::path::Path;
use tensorsmith::bytes::{ObjectMeta, ReadAt, StorageOptions};
use tensorsmith::error::Result as BytesResult;

/// What a write to a key requires of what is there.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cond<'a> {
    Always,
    /// Nothing there (the exclusive create).
    Absent,
    /// The version read, by the tag [`BlobClient::get_tagged`] gave.
    Tag(&'a str),
}

/// An unfinished upload, as a client lists it.
pub(crate) struct Unfinished {
    pub key: String,
    pub id: String,
    pub started_ms: u64,
}

/// A store's client, with keys relative to its bucket or container.
pub(crate) trait BlobClient: Send + Sync + Sized {
    /// The client of the bucket `location` names, and the key it names.
    fn for_url(location: &str, storage: &StorageOptions) -> BytesResult<(Self, String)>;
    /// The URL of `key`, for ranged reads and errors.
    fn key_url(&self, key: &str) -> String;
    fn concurrency(&self) -> usize;
    /// The whole object and its tag (what [`Cond::Tag`] names), `None` when there is none.
    fn get_tagged(&self, key: &str) -> BytesResult<Option<(Vec<u8>, String)>>;
    /// Writes `bytes` as `key` if `cond` holds (else `ErrorKind::PreconditionFailed`).
    fn put(&self, key: &str, bytes: &[u8], cond: Cond<'_>) -> BytesResult<()>;
    /// Uploads `from` as `key`, streamed (replacing what is there).
    fn put_file(&self, key: &str, from: &File) -> BytesResult<()>;
    fn list(&self, prefix: &str) -> BytesResult<Vec<ObjectMeta>>;
    /// A listing's modification time in ms since the epoch (0: not dated).
    fn modified_ms(last_modified: &str) -> u64;
    /// Removes `key` (gone already: no error).
    fn delete(&self, key: &str) -> BytesResult<()>;
    /// Uploads started under `prefix` and never completed; none for stores whose unfinished
    /// uploads are invisible and expire (Azure's uncommitted blocks, GCS's sessions).
    fn unfinished(&self, prefix: &str) -> BytesResult<Vec<Unfinished>> {
        let _ = prefix;
        Ok(Vec::new())
    }
    fn abort(&self, key: &str, id: &str) -> BytesResult<()> {
        let _ = (key, id);
        Ok(())
    }
}

pub(crate) struct PrefixStore<C> {
    client: C,
    /// The URL as given, without a trailing `/` (errors name objects below it).
    location: String,
    /// The dataset's key prefix, ending in `/`.
    prefix: String,
    storage: StorageOptions,
}

impl<C: BlobClient> PrefixStore<C> {
    /// The dataset at `location` (`scheme://bucket/prefix`).
    pub(crate) fn open(location: &str, storage: &StorageOptions) -> Result<PrefixStore<C>> {
        let location = location.trim_end_matches('/').to_string();
        let (client, key) = C::for_url(&location, storage)?;
        Ok(PrefixStore {
            client,
            prefix: format!("{}/", key.trim_end_matches('/')),
            location: tensorsmith::bytes::redact_url(&location),
            storage: storage.clone(),
        })
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

impl<C: BlobClient> Store for PrefixStore<C> {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn concurrency(&self) -> usize {
        self.client.concurrency()
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.client.get_tagged(&self.key(key))?.map(|(b, _)| b))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        Ok(self.client.put(&self.key(key), bytes, Cond::Always)?)
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        written(self.client.put(&self.key(key), bytes, Cond::Absent))
    }

    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        Ok(self
            .client
            .get_tagged(&self.key(key))?
            .map(|(b, t)| (b, Some(t))))
    }

    fn replace(&self, key: &str, bytes: &[u8], expect: Expect<'_>) -> Result<bool> {
        let cond = match expect {
            Expect::Absent => Cond::Absent,
            Expect::Tag(t) => Cond::Tag(t),
        };
        // Changed, created, or removed since it was read: false.
        written(self.client.put(&self.key(key), bytes, cond))
    }

    fn put_file(&self, key: &str, from: &Path) -> Result<()> {
        let f = File::open(from).map_err(|e| DatasetError::io(from, e))?;
        Ok(self.client.put_file(&self.key(key), &f)?)
    }

    fn list(&self, prefix: &str) -> Result<Vec<Entry>> {
        let mut out: Vec<Entry> = self
            .client
            .list(&self.key(prefix))?
            .into_iter()
            .filter_map(|o| {
                Some(Entry {
                    key: o.key.strip_prefix(&self.prefix)?.to_string(),
                    size: o.size,
                    modified_ms: C::modified_ms(&o.last_modified),
                })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        Ok(self.client.delete(&self.key(key))?)
    }

    fn open(&self, key: &str) -> Result<Box<dyn ReadAt>> {
        self.open_head(key, 64 * 1024)
    }

    fn open_head(&self, key: &str, first: u64) -> Result<Box<dyn ReadAt>> {
        let url = self.client.key_url(&self.key(key));
        Ok(tensorsmith::bytes::open_url(&url, &self.storage, first)?)
    }

    fn uploads(&self, prefix: &str) -> Result<Vec<Upload>> {
        Ok(self
            .client
            .unfinished(&self.key(prefix))?
            .into_iter()
            .filter_map(|u| {
                Some(Upload {
                    key: u.key.strip_prefix(&self.prefix)?.to_string(),
                    id: u.id,
                    started_ms: u.started_ms,
                })
            })
            .collect())
    }

    fn abort(&self, upload: &Upload) -> Result<()> {
        Ok(self.client.abort(&self.key(&upload.key), &upload.id)?)
    }
}
