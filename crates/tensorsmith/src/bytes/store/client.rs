//! `StoreClient`: what the dataset commit asks of an object store, over any `object_store`
//! store (S3 and Azure Blob; `ObjectClient` wraps it): an object read whole with its tag
//! (`get_tagged`: `None` when there is none), written (`put`, under a `PutMode`: a refused
//! condition is [`ErrorKind::PreconditionFailed`]), a file streamed up (`put_file`, through
//! `StoreUpload`), every object under a prefix (`list`, any prefix: the store lists whole
//! path segments, so the folder above it is listed and filtered), deleted (a missing one is
//! no error), opened for ranged reads (`open`). Every call waits on the process's runtime
//! (bodies move on its threads: `runtime::run`); retries are the store's (`max_attempts`,
//! `timeout` in its client options).

use crate::bytes::resumed_get::get_resumed;
use crate::bytes::runtime::{block_on, run};
use crate::bytes::storage_options::Transfer;
use crate::bytes::store::error::refused_condition;
use crate::bytes::store::file::{StoreFile, StoreWords};
use crate::bytes::store::upload::StoreUpload;
use crate::error::{Error, ErrorKind, Result};
use futures_util::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{
    ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig,
};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// A client of one container or bucket.
#[derive(Clone)]
pub(crate) struct StoreClient {
    pub store: Arc<dyn ObjectStore>,
    /// `az://CONTAINER` (as given): keys are named below it.
    pub base: String,
    pub words: Arc<dyn StoreWords>,
    pub transfer: Transfer,
}

impl StoreClient {
    pub(crate) fn key_url(&self, key: &str) -> String {
        format!("{}/{key}", self.base)
    }

    /// The path naming exactly `key` (see `key.rs`), or the refusal naming its URL.
    fn path(&self, key: &str) -> Result<StorePath> {
        crate::bytes::store::key::store_path(key)
            .map_err(|e| e.in_file(Path::new(&self.key_url(key))))
    }

    fn err(&self, e: &object_store::Error, key: &str, write: bool) -> Error {
        Error::new(self.words.error(e, key, write)).in_file(Path::new(&self.key_url(key)))
    }

    /// The whole object `key`, its ETag and version, `None` when there is none.
    pub(crate) fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, ObjectMeta)>> {
        let (store, path) = (Arc::clone(&self.store), self.path(key)?);
        let got = run(async move {
            let r = store.get(&path).await?;
            let meta = r.meta.clone();
            Ok::<_, object_store::Error>((r.bytes().await?, meta))
        });
        match got {
            Ok((bytes, meta)) => Ok(Some((bytes.to_vec(), meta))),
            Err(e @ object_store::Error::NotFound { .. }) => {
                // A missing container is an error; a missing object is none.
                match self.words.error(&e, key, false) {
                    ErrorKind::RemoteNotFound(m) if m.starts_with("no container") => {
                        Err(self.err(&e, key, false))
                    }
                    ErrorKind::NoSuchBucket(_) => Err(self.err(&e, key, false)),
                    _ => Ok(None),
                }
            }
            Err(e) => Err(self.err(&e, key, false)),
        }
    }

    /// Writes `bytes` as `key` in one put under `mode`; a refused condition is
    /// [`ErrorKind::PreconditionFailed`], worded by `why`.
    pub(crate) fn put(&self, key: &str, bytes: &[u8], mode: PutMode, why: &str) -> Result<()> {
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let payload = PutPayload::from(bytes.to_vec());
        let (store, path) = (Arc::clone(&self.store), self.path(key)?);
        match run(async move { store.put_opts(&path, payload, opts).await }) {
            Ok(_) => Ok(()),
            Err(e) if refused_condition(&e) => {
                Err(Error::new(ErrorKind::PreconditionFailed(why.to_owned()))
                    .in_file(Path::new(&self.key_url(key))))
            }
            Err(e) => Err(self.err(&e, key, true)),
        }
    }

    /// A streamed upload of `key` (`mode` applies when it fits one part).
    pub(crate) fn upload(&self, key: &str, mode: PutMode) -> Result<StoreUpload> {
        Ok(StoreUpload::new(
            Arc::clone(&self.store),
            self.path(key)?,
            self.key_url(key),
            Arc::clone(&self.words),
            self.transfer,
            mode,
        ))
    }

    /// Uploads the file `from` as `key`: mapped, its parts slices of the map (no copy per
    /// part: a shard upload's memory is the file's pages, not anonymous buffers). The file
    /// must not change until this returns (staged shards and outputs of ours do not).
    pub(crate) fn put_file(&self, key: &str, from: &File, mode: PutMode) -> Result<()> {
        let io =
            |e: std::io::Error| Error::new(ErrorKind::Io(e)).in_file(Path::new(&self.key_url(key)));
        let len = from.metadata().map_err(io)?.len();
        let upload = self.upload(key, mode)?;
        if len == 0 {
            upload.commit()?;
            return Ok(());
        }
        // SAFETY: a read-only map of a file that nothing truncates while it is uploaded (the
        // caller's contract above).
        let map = unsafe { memmap2::Mmap::map(from) }.map_err(io)?;
        upload.commit_bytes(::bytes::Bytes::from_owner(map))?;
        Ok(())
    }

    /// Removes `key`; an object already gone is no error.
    pub(crate) fn delete(&self, key: &str) -> Result<()> {
        match block_on(self.store.delete(&self.path(key)?)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(&e, key, true)),
        }
    }

    /// Every object whose name starts with `prefix`, in name order.
    pub(crate) fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let folder = prefix.rfind('/').map(|i| &prefix[..i]);
        let folder = match folder.filter(|f| !f.is_empty()) {
            Some(f) => Some(self.path(f)?),
            None => None,
        };
        let listed = block_on(self.store.list(folder.as_ref()).try_collect::<Vec<_>>());
        let mut out: Vec<ObjectMeta> = match listed {
            Ok(v) => v,
            Err(e) => return Err(self.err(&e, prefix, false)),
        };
        out.retain(|m| m.location.as_ref().starts_with(prefix));
        out.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(out)
    }

    /// The whole object `key` written to `out` by one GET (no open, no ranges: one request,
    /// so one version), checked to be `len` bytes long. The body moves on the runtime's
    /// threads and reaches this thread through a channel of a few chunks (memory bounded
    /// whatever the object's size); a failed write drops the channel, which ends the request.
    /// A body cut short goes on from where it stopped (`get_resumed`: a ranged GET pinned to
    /// the first response's ETag), up to `max_attempts` cuts.
    pub(crate) fn get_into(&self, key: &str, len: u64, out: &mut dyn std::io::Write) -> Result<()> {
        let (store, path) = (Arc::clone(&self.store), self.path(key)?);
        let attempts = self.transfer.max_attempts;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<::bytes::Bytes>(8);
        let task = crate::bytes::runtime::spawn(async move {
            get_resumed(&*store, &path, 0..len, len, None, attempts, |c| {
                let tx = tx.clone();
                async move { tx.send(c).await.is_ok() }
            })
            .await
        });
        let mut got = 0u64;
        let mut failed = None;
        while let Some(c) = rx.blocking_recv() {
            got += c.len() as u64;
            if got > len {
                break; // longer than its length said: told below
            }
            if let Err(e) = out.write_all(&c) {
                failed = Some(Error::new(ErrorKind::Io(e)).in_file(Path::new(&self.key_url(key))));
                break;
            }
        }
        drop(rx);
        let streamed = crate::bytes::runtime::wait(task);
        if let Some(e) = failed {
            return Err(e);
        }
        let size = match streamed {
            Ok(s) => s.size,
            Err(f) => {
                return Err(f
                    .cut_short(len, &self.key_url(key))
                    .unwrap_or_else(|| self.err(&f.error, key, false)))
            }
        };
        if size != len || got != len {
            return Err(self.short(key, len, if size != len { size } else { got }));
        }
        Ok(())
    }

    fn short(&self, key: &str, len: u64, got: u64) -> Error {
        Error::new(ErrorKind::Http(format!(
            "the object has {got} bytes where {len} were expected"
        )))
        .in_file(Path::new(&self.key_url(key)))
    }

    /// `key` opened for ranged reads, its first `first` bytes fetched.
    pub(crate) fn open(&self, key: &str, first: u64) -> Result<StoreFile> {
        StoreFile::open(
            Arc::clone(&self.store),
            key,
            self.key_url(key),
            Arc::clone(&self.words),
            first,
            self.transfer,
        )
    }
}

/// The retry and timeout settings of a store's client.
pub(crate) fn client_settings(t: &Transfer, allow_http: bool) -> (ClientOptions, RetryConfig) {
    let options = ClientOptions::new()
        .with_timeout(t.timeout)
        .with_connect_timeout(t.connect_timeout)
        .with_allow_http(allow_http);
    // `timeout` bounds one request and, as the retries' budget, its attempts and waits
    // together: no retry starts once it has run out (it had a 30 s floor, so a server that
    // stopped answering took max_attempts x timeout: 16 s for timeout=3).
    let retry = RetryConfig {
        max_retries: t.max_attempts.saturating_sub(1) as usize,
        retry_timeout: t.timeout,
        ..RetryConfig::default()
    };
    (options, retry)
}
