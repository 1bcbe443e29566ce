//! `AzureClient`: the Azure Blob client the dataset commit and the sink use, over
//! `object_store` (`azure_store.rs` makes the store, `store_client.rs` does the calls): a
//! blob read whole (`get`: `None` when there is none), written (`put`: one Put Blob; created
//! only if absent with `If-None-Match: *` (Azure's 409 `BlobAlreadyExists` or 412), replaced
//! only if still the ETag read (`If-Match`): else [`ErrorKind::PreconditionFailed`]), a file
//! streamed up in blocks (`put_file`), a container listed by prefix, a blob deleted (a
//! missing one is no error). Errors name the `az://` URL in Azure's words, never a key, a
//! token or a signature. Unfinished block uploads need no abort: uncommitted blocks are never
//! visible, and Azure discards them.

use super::s3_client::{ObjectMeta, PutCondition};
use super::storage_options::{StorageOptions, Transfer};
use super::store_client::StoreClient;
use crate::error::{Error, ErrorKind, Result};
use object_store::{PutMode, UpdateVersion};
use std::fs::File;
use std::path::Path;

/// A client of one container.
pub struct AzureClient {
    inner: StoreClient,
}

impl std::fmt::Debug for AzureClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AzureClient({:?})", self.inner.base)
    }
}

/// The `PutMode` of a condition, and how its refusal is worded.
fn mode(key: &str, cond: PutCondition) -> (PutMode, String) {
    match cond {
        PutCondition::Always => (PutMode::Overwrite, String::new()),
        PutCondition::IfNoneMatch => (
            PutMode::Create,
            format!("'{key}' exists already (If-None-Match: *)"),
        ),
        PutCondition::IfMatch(etag) => (
            PutMode::Update(UpdateVersion {
                e_tag: Some(etag.clone()),
                version: None,
            }),
            format!("'{key}' is no longer the version with ETag {etag} (If-Match)"),
        ),
    }
}

impl AzureClient {
    /// The client of the container `location` (`az://CONTAINER/PATH`, `abfs(s)://…`) names,
    /// with the settings of `opts` and the environment, and the blob name `PATH`.
    pub fn for_url(location: &str, opts: &StorageOptions) -> Result<(AzureClient, String)> {
        let (inner, key) = super::azure_store::client_for(location, opts)?;
        Ok((AzureClient { inner }, key))
    }

    /// `az://CONTAINER/key`: how errors name a blob.
    pub fn key_url(&self, key: &str) -> String {
        self.inner.key_url(key)
    }

    /// The same client (object_store pages listings itself; kept for callers).
    pub fn with_page_size(self, _n: u32) -> AzureClient {
        self
    }

    /// The transfer settings (concurrency, part size, attempts).
    pub fn transfer(&self) -> Transfer {
        self.inner.transfer
    }

    /// The whole blob `key`, `None` when there is none (a missing container is an error).
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.get_tagged(key)?.map(|(b, _)| b))
    }

    /// The whole blob `key` and its ETag (what `PutCondition::IfMatch` names), `None` when
    /// there is none.
    pub fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        Ok(self
            .inner
            .get_tagged(key)?
            .map(|(b, m)| (b, m.e_tag.unwrap_or_default())))
    }

    /// Writes `bytes` as `key` in one Put Blob, if `cond` allows.
    pub fn put(&self, key: &str, bytes: &[u8], cond: PutCondition) -> Result<()> {
        let (mode, why) = mode(key, cond);
        self.inner.put(key, bytes, mode, &why)
    }

    /// Uploads the file `from` as `key`, streamed in blocks of the part size; the blob
    /// appears once complete. `IfNoneMatch` holds for a file of one part; `IfMatch` is not
    /// offered for files.
    pub fn put_file(&self, key: &str, from: &File, cond: PutCondition) -> Result<()> {
        if let PutCondition::IfMatch(_) = cond {
            return Err(Error::new(ErrorKind::Unsupported(
                "If-Match uploads of files to az://".into(),
            ))
            .in_file(Path::new(&self.key_url(key))));
        }
        let (mode, _) = mode(key, cond);
        self.inner.put_file(key, from, mode)
    }

    /// Removes `key`; a blob already gone is no error.
    pub fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }

    /// Every blob whose name starts with `prefix`, in name order. Times are as Azure sends
    /// them (`Fri, 27 Nov 2026 05:57:43 GMT`).
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        Ok(self
            .inner
            .list(prefix)?
            .into_iter()
            .map(|m| ObjectMeta {
                key: m.location.to_string(),
                size: m.size,
                etag: m.e_tag.unwrap_or_default(),
                last_modified: m
                    .last_modified
                    .format("%a, %d %b %Y %H:%M:%S GMT")
                    .to_string(),
            })
            .collect())
    }

    /// A streamed upload of `key` (the sink's `create_upload`).
    pub(crate) fn upload(&self, key: &str, cond: PutCondition) -> super::StoreUpload {
        let (mode, _) = mode(key, cond);
        self.inner.upload(key, mode)
    }

    /// `key` opened for ranged reads, its version pinned.
    pub(crate) fn open(&self, key: &str, first: u64) -> Result<super::StoreFile> {
        self.inner.open(key, first)
    }
}
