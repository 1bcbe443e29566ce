//! `ObjectClient`: the client of one S3 bucket or Azure Object container that the dataset
//! commit and the sink use, over `object_store` (`s3_store.rs` and `azure_store.rs` make the
//! store, `store_client.rs` does the calls): an object read whole (`get`: `None` when there is
//! none), written (`put`: one put; created only if absent with `If-None-Match: *`, replaced
//! only if still the ETag read (`If-Match`): else [`ErrorKind::PreconditionFailed`]), a file
//! streamed up in parts (`put_file`), a prefix listed, an object deleted (a missing one is no
//! error). Errors name the `s3://` or `az://` URL in the store's words, never a key, a token
//! or a signature. S3's multipart uploads left by a killed writer are listed
//! (`s3_uploads.rs`) and aborted; Azure's uncommitted blocks need no abort (never visible,
//! and Azure discards them).

pub use crate::bytes::s3::uploads::UploadMeta;
use crate::bytes::storage_options::{StorageOptions, Transfer};
use crate::bytes::store::client::StoreClient;
use crate::error::{Error, ErrorKind, Result};
use object_store::{PutMode, UpdateVersion};
use std::fs::File;
use std::path::Path;

/// When a write may happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PutCondition {
    /// Unconditionally.
    Always,
    /// Only if no object has the key (`If-None-Match: *`): create, never replace.
    IfNoneMatch,
    /// Only if the object is still the version with this `ETag` (`If-Match`); where there
    /// is no object at all, refused as well (S3's 404 to `If-Match`).
    IfMatch(String),
}

/// One object of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The object's key (its path within the bucket or container).
    pub key: String,
    /// The object's length in bytes.
    pub size: u64,
    /// As the store sends it, quotes included.
    pub etag: String,
    /// ISO 8601, UTC (`2026-11-27T03:10:05.123Z`).
    pub last_modified: String,
}

/// A client of one bucket or container.
pub struct ObjectClient {
    inner: StoreClient,
    /// S3's: the bucket's unfinished multipart uploads can be listed.
    s3: Option<crate::bytes::s3::uploads::Uploads>,
}

impl std::fmt::Debug for ObjectClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectClient({:?})", self.inner.base)
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

impl ObjectClient {
    /// The client of the bucket or container `location` (`s3://BUCKET/KEY`, `s3a://…`,
    /// `az://CONTAINER/PATH`, `abfs(s)://…`) names, with the settings of `opts` and the
    /// environment, and the key.
    pub fn for_url(location: &str, opts: &StorageOptions) -> Result<(ObjectClient, String)> {
        match crate::bytes::url_scheme(location) {
            Some(crate::bytes::UrlScheme::S3) => {
                let (inner, key, uploads) = crate::bytes::s3::store::client_for(location, opts)?;
                Ok((
                    ObjectClient {
                        inner,
                        s3: Some(uploads),
                    },
                    key,
                ))
            }
            _ => {
                let (inner, key) = crate::bytes::azure::store::client_for(location, opts)?;
                Ok((ObjectClient { inner, s3: None }, key))
            }
        }
    }

    /// `s3://BUCKET/key` or `az://CONTAINER/key`: how errors name an object.
    pub fn key_url(&self, key: &str) -> String {
        self.inner.key_url(key)
    }

    /// The transfer settings (concurrency, part size, attempts).
    pub fn transfer(&self) -> Transfer {
        self.inner.transfer
    }

    /// The whole object `key`, `None` when there is none (a missing bucket or container is an error).
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.get_tagged(key)?.map(|(b, _)| b))
    }

    /// The whole object `key` and its ETag (what `PutCondition::IfMatch` names), `None` when
    /// there is none.
    pub fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        Ok(self
            .inner
            .get_tagged(key)?
            .map(|(b, m)| (b, m.e_tag.unwrap_or_default())))
    }

    /// Writes `bytes` as `key` in one put, if `cond` allows.
    pub fn put(&self, key: &str, bytes: &[u8], cond: PutCondition) -> Result<()> {
        let (mode, why) = mode(key, cond);
        self.inner.put(key, bytes, mode, &why)
    }

    /// Uploads the file `from` as `key`, streamed in blocks of the part size; the object
    /// appears once complete. `IfNoneMatch` holds for a file of one part; `IfMatch` is not
    /// offered for files.
    pub fn put_file(&self, key: &str, from: &File, cond: PutCondition) -> Result<()> {
        if let PutCondition::IfMatch(_) = cond {
            return Err(
                Error::new(ErrorKind::Unsupported("If-Match uploads of files".into()))
                    .in_file(Path::new(&self.key_url(key))),
            );
        }
        let (mode, _) = mode(key, cond);
        self.inner.put_file(key, from, mode)
    }

    /// Removes `key`; an object already gone is no error.
    pub fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }

    /// Every object whose name starts with `prefix`, in name order.
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        Ok(self
            .inner
            .list(prefix)?
            .into_iter()
            .map(|m| ObjectMeta {
                key: m.location.to_string(),
                size: m.size,
                etag: m.e_tag.unwrap_or_default(),
                last_modified: m.last_modified.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            })
            .collect())
    }

    /// A streamed upload of `key` (the sink's `create_upload`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::BadStorageOption`](crate::error::ErrorKind::BadStorageOption) for a key
    /// the store client cannot name as it is (an empty segment, `.`, `..`).
    pub fn upload(&self, key: &str, cond: PutCondition) -> Result<crate::bytes::StoreUpload> {
        let (mode, _) = mode(key, cond);
        self.inner.upload(key, mode)
    }

    /// `key` opened for ranged reads, its version pinned.
    /// The whole object `key` (of `len` bytes) written to `out` by one GET.
    pub fn get_into(&self, key: &str, len: u64, out: &mut dyn std::io::Write) -> Result<()> {
        self.inner.get_into(key, len, out)
    }

    pub(crate) fn open(&self, key: &str, first: u64) -> Result<crate::bytes::StoreFile> {
        self.inner.open(key, first)
    }
}

impl ObjectClient {
    /// The multipart uploads started under `prefix` and neither completed nor aborted (none
    /// on Azure).
    pub fn list_uploads(&self, prefix: &str) -> Result<Vec<UploadMeta>> {
        match &self.s3 {
            Some(u) => u.list(prefix),
            None => Ok(Vec::new()),
        }
    }

    /// Aborts the multipart upload `upload_id` of `key`: its parts are dropped and no object
    /// appears. One already completed or aborted is no error.
    pub fn abort_upload(&self, key: &str, upload_id: &str) -> Result<()> {
        match &self.s3 {
            Some(u) => u.abort(&self.inner, key, upload_id),
            None => Ok(()),
        }
    }
}
