//! The store seam over a Cloud Storage prefix (`gs://bucket/path/to/dataset`), through the
//! byte layer's GCS client (`tensorsmith::bytes::GcsClient`: the token, retries, resumable
//! uploads, errors naming `gs://…` without the token). The exclusive create is an upload
//! with `ifGenerationMatch=0` (a 412: another writer created the name first); ranged reads
//! go through the byte layer's `open_url`. Resumable sessions have nothing to abort: an
//! unfinished one makes no object and GCS expires it, so `uploads` lists none.

use crate::error::{DatasetError, Result};
use crate::store::{written, Entry, Expect, Store, Upload};
use crate::store_s3::iso8601_ms;
use std::path::Path;
use tensorsmith::bytes::{GcsClient, PutCondition, ReadAt, StorageOptions};

pub(crate) struct GcsStore {
    client: GcsClient,
    /// The URL as given, without a trailing `/` (errors name objects below it).
    location: String,
    /// The dataset's object-name prefix, ending in `/`.
    prefix: String,
    storage: StorageOptions,
}

impl GcsStore {
    /// The dataset at `location` (`gs://bucket/prefix`).
    pub(crate) fn open(location: &str, storage: &StorageOptions) -> Result<GcsStore> {
        let location = location.trim_end_matches('/').to_string();
        let (client, key) = GcsClient::for_url(&location, storage)?;
        Ok(GcsStore {
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

impl Store for GcsStore {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn concurrency(&self) -> usize {
        self.client.transfer().max_concurrency
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.client.get(&self.key(key))?)
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        Ok(self
            .client
            .put(&self.key(key), bytes, PutCondition::Always)?)
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        written(
            self.client
                .put(&self.key(key), bytes, PutCondition::IfNoneMatch),
        )
    }

    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        Ok(self
            .client
            .get_tagged(&self.key(key))?
            .map(|(b, t)| (b, Some(t))))
    }

    fn replace(&self, key: &str, bytes: &[u8], expect: Expect<'_>) -> Result<bool> {
        let key = self.key(key);
        written(match expect {
            Expect::Absent => self.client.put(&key, bytes, PutCondition::IfNoneMatch),
            Expect::Tag(generation) => self.client.put_if_generation(&key, bytes, generation),
        })
    }

    fn put_file(&self, key: &str, from: &Path) -> Result<()> {
        let f = std::fs::File::open(from).map_err(|e| DatasetError::io(from, e))?;
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
                    modified_ms: iso8601_ms(&o.last_modified),
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
        let url = self.client.key_url(&self.key(key));
        Ok(Box::new(tensorsmith::bytes::open_url(
            &url,
            &self.storage,
            64 * 1024,
        )?))
    }

    fn uploads(&self, _: &str) -> Result<Vec<Upload>> {
        Ok(Vec::new()) // unfinished resumable sessions: no object, expired by GCS
    }

    fn abort(&self, _: &Upload) -> Result<()> {
        Ok(())
    }
}
