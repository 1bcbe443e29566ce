//! The store seam over a Cloud Storage prefix (`gs://bucket/path/to/dataset`): the byte
//! layer's GCS client (`tensorsmith::bytes::GcsClient`: the token, retries, resumable
//! uploads, errors naming `gs://…` without the token) as a `BlobClient` of store_prefix.rs.
//! The exclusive create is an upload with `ifGenerationMatch=0` (a 412: another writer
//! created the name first), the conditional replace `ifGenerationMatch` the generation read.
//! Resumable sessions have nothing to abort: an unfinished one makes no object and GCS
//! expires it.

use crate::store::object::iso8601_ms;
use crate::store::prefix::{BlobClient, Cond, PrefixStore};
use std::fs::File;
use tensorsmith::bytes::{GcsClient, ObjectMeta, PutCondition, StorageOptions};
use tensorsmith::error::Result;

/// A dataset on Cloud Storage.
pub(crate) type GcsStore = PrefixStore<GcsClient>;

impl BlobClient for GcsClient {
    fn for_url(location: &str, storage: &StorageOptions) -> Result<(GcsClient, String)> {
        GcsClient::for_url(location, storage)
    }
    fn key_url(&self, key: &str) -> String {
        GcsClient::key_url(self, key)
    }
    fn concurrency(&self) -> usize {
        self.transfer().max_concurrency
    }
    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        GcsClient::get_tagged(self, key)
    }
    fn put(&self, key: &str, bytes: &[u8], cond: Cond<'_>) -> Result<()> {
        match cond {
            Cond::Always => GcsClient::put(self, key, bytes, PutCondition::Always),
            Cond::Absent => GcsClient::put(self, key, bytes, PutCondition::IfNoneMatch),
            Cond::Tag(generation) => self.put_if_generation(key, bytes, generation),
        }
    }
    fn put_file(&self, key: &str, from: &File) -> Result<()> {
        GcsClient::put_file(self, key, from)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        GcsClient::list(self, prefix)
    }
    fn modified_ms(last_modified: &str) -> u64 {
        iso8601_ms(last_modified)
    }
    fn delete(&self, key: &str) -> Result<()> {
        GcsClient::delete(self, key)
    }
}
