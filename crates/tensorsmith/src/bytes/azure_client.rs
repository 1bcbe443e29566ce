//! A small synchronous Azure Blob client for what a dataset's commit needs, the Azure
//! counterpart of `s3_client.rs`: a blob read whole (`get`: `None` when there is none),
//! written (`put`: one Put Blob; created only if absent with `If-None-Match: *`, which Azure
//! refuses with 409 `BlobAlreadyExists` or 412 `ConditionNotMet`: then
//! [`ErrorKind::PreconditionFailed`]), a file streamed up in blocks (`put_file`: the
//! uploader of `azure_upload.rs`), a container listed by prefix (List Blobs, every page by
//! `marker`), a blob deleted (a missing one is no error).
//!
//! Each request carries the SAS given, or one signed for it with the account key (`sp=r` to
//! read, `cw` to write, `d` to delete, a container SAS `sr=c&sp=l` to list), or none; each is
//! retried per the transfer settings (`retried.rs`). Errors name the `az://` URL in Azure's
//! words (`azure.rs`), never a key or a signature. Unfinished block uploads need no abort:
//! uncommitted blocks are never visible, and Azure discards them.

use super::azure::{split_azure_url, AzureBlob};
use super::azure_config::AzureAuth;
use super::azure_sas;
use super::http::Target;
use super::retried::{self, Method, Reply};
use super::s3_bucket::error_code;
use super::s3_client::{ObjectMeta, PutCondition};
use super::s3_xml;
use super::storage_options::{StorageOptions, Transfer};
use super::url_path::encode;
use crate::error::{Error, ErrorKind, Result};
use std::fs::File;
use std::path::Path;

/// The REST version of the requests (as the uploads send it).
const VERSION: &str = "2022-11-02";

/// A client of one container.
pub struct AzureClient {
    /// A blob of the container: its settings, and the wording of errors.
    anchor: AzureBlob,
    /// `az://CONTAINER` (or the `abfs(s)://CONTAINER@HOST` given): keys are named below it.
    base: String,
    opts: StorageOptions,
    agent: ureq::Agent,
    transfer: Transfer,
    /// Blobs per List Blobs page (`maxresults`; Azure's default, 5000, when `None`).
    page_size: Option<u32>,
}

impl std::fmt::Debug for AzureClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AzureClient({:?})", self.base)
    }
}

impl AzureClient {
    /// The client of the container `location` (`az://CONTAINER/PATH`, `abfs(s)://…`) names,
    /// with the settings of `opts` and the environment, and the blob name `PATH`.
    pub fn for_url(location: &str, opts: &StorageOptions) -> Result<(AzureClient, String)> {
        let (_, _, blob) = split_azure_url(location)?;
        let key = blob.to_owned();
        let base = location[..location.len() - blob.len() - 1].to_owned();
        let anchor = AzureBlob::resolve(location, opts)?;
        let transfer = opts.transfer();
        Ok((
            AzureClient {
                anchor,
                base,
                opts: opts.clone(),
                agent: retried::agent(&transfer),
                transfer,
                page_size: None,
            },
            key,
        ))
    }

    /// `az://CONTAINER/key`: how errors name a blob.
    pub fn key_url(&self, key: &str) -> String {
        format!("{}/{key}", self.base)
    }

    /// The same client, listing `n` blobs a page.
    pub fn with_page_size(mut self, n: u32) -> AzureClient {
        self.page_size = Some(n);
        self
    }

    /// The transfer settings (concurrency, part size, attempts).
    pub fn transfer(&self) -> Transfer {
        self.transfer
    }

    fn blob(&self, key: &str) -> AzureBlob {
        self.anchor.sibling(self.key_url(key), key)
    }

    /// `method` on `blob` (its URL, `query` added) with `headers` and `body`, retried.
    fn send(
        &self,
        blob: &AzureBlob,
        method: Method,
        query: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Result<Reply> {
        let url = || {
            let base = blob.url();
            match (query.is_empty(), base.contains('?')) {
                (true, _) => base,
                (false, true) => format!("{base}&{query}"),
                (false, false) => format!("{base}?{query}"),
            }
        };
        let mut all = vec![("x-ms-version", VERSION.to_owned())];
        all.extend_from_slice(headers);
        retried::send(
            &self.agent,
            &self.transfer,
            method,
            &url,
            &all,
            body,
            blob.name(),
            blob.redacted_endpoint(),
        )
    }

    fn status_err(&self, blob: &AzureBlob, reply: &Reply) -> Error {
        Error::new(blob.status_error(reply.status, None, &reply.body))
            .in_file(Path::new(blob.name()))
    }

    /// The whole blob `key`, `None` when there is none (a missing container is an error).
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.get_tagged(key)?.map(|(b, _)| b))
    }

    /// The whole blob `key` and its ETag (what `PutCondition::IfMatch` names), `None` when
    /// there is none.
    pub fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        let blob = self.blob(key);
        let reply = self.send(&blob, Method::Get, "", &[], &[])?;
        match (reply.status, error_code(&reply.body)) {
            (200, _) => Ok(Some((reply.bytes, reply.etag.unwrap_or_default()))),
            (404, Some("BlobNotFound") | None) => Ok(None),
            _ => Err(self.status_err(&blob, &reply)),
        }
    }

    /// Writes `bytes` as `key` in one Put Blob, if `cond` allows: a blob present where it
    /// was to be created (`IfNoneMatch`), or another version than the one to replace
    /// (`IfMatch`), is [`ErrorKind::PreconditionFailed`].
    pub fn put(&self, key: &str, bytes: &[u8], cond: PutCondition) -> Result<()> {
        let blob = self.blob(key).for_writing();
        let mut headers = vec![("x-ms-blob-type", "BlockBlob".to_owned())];
        match &cond {
            PutCondition::Always => {}
            PutCondition::IfNoneMatch => headers.push(("if-none-match", "*".to_owned())),
            PutCondition::IfMatch(etag) => headers.push(("if-match", etag.clone())),
        }
        let reply = self.send(&blob, Method::Put, "", &headers, bytes)?;
        let code = error_code(&reply.body).unwrap_or_default();
        match (reply.status, code) {
            (200..=299, _) => Ok(()),
            (412, _) | (409, "BlobAlreadyExists") => {
                let why = match cond {
                    PutCondition::IfMatch(etag) => {
                        format!("'{key}' is no longer the version with ETag {etag} (If-Match)")
                    }
                    _ => format!("'{key}' exists already (If-None-Match: *)"),
                };
                Err(Error::new(ErrorKind::PreconditionFailed(why)).in_file(Path::new(blob.name())))
            }
            _ => Err(self.status_err(&blob, &reply)),
        }
    }

    /// Uploads the file `from` as `key`, streamed in blocks of the part size; the blob
    /// appears once complete. `IfNoneMatch`: the commit (Put Block List, or the one Put Blob)
    /// carries `If-None-Match: *`, a blob there by then is [`ErrorKind::PreconditionFailed`];
    /// `IfMatch` is not offered for files.
    pub fn put_file(&self, key: &str, from: &File, cond: PutCondition) -> Result<()> {
        use super::azure_upload::AzureUpload;
        let url = self.key_url(key);
        let mut upload = match cond {
            PutCondition::Always => AzureUpload::create(&url, &self.opts)?,
            PutCondition::IfNoneMatch => AzureUpload::create_if_absent(&url, &self.opts)?,
            PutCondition::IfMatch(_) => {
                return Err(Error::new(ErrorKind::Unsupported(
                    "If-Match uploads of files to az://".into(),
                ))
                .in_file(Path::new(&url)))
            }
        };
        let mut reader = from;
        std::io::copy(&mut reader, &mut upload)
            .map_err(|e| Error::new(ErrorKind::Io(e)).in_file(Path::new(&self.key_url(key))))?;
        upload.commit()?;
        Ok(())
    }

    /// Removes `key`; a blob already gone is no error.
    pub fn delete(&self, key: &str) -> Result<()> {
        let blob = self.blob(key).with_permissions("d");
        let reply = self.send(&blob, Method::Delete, "", &[], &[])?;
        match (reply.status, error_code(&reply.body)) {
            (200..=299, _) | (404, Some("BlobNotFound") | None) => Ok(()),
            _ => Err(self.status_err(&blob, &reply)),
        }
    }

    /// Every blob whose name starts with `prefix`, in name order (every page of List Blobs).
    /// Times are as Azure sends them (`Fri, 27 Nov 2026 05:57:43 GMT`).
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let s = self.anchor.settings();
        let container = self.anchor.container();
        let shown = self.key_url(prefix);
        let mut out = Vec::new();
        let mut marker = String::new();
        loop {
            let mut query = format!(
                "restype=container&comp=list&prefix={}",
                encode(prefix, false)
            );
            if !marker.is_empty() {
                query.push_str(&format!("&marker={}", encode(&marker, false)));
            }
            if let Some(n) = self.page_size {
                query.push_str(&format!("&maxresults={n}"));
            }
            let url = || {
                let base = format!("{}/{}?{query}", s.endpoint, encode(container, false));
                match &s.auth {
                    AzureAuth::Anonymous => base,
                    AzureAuth::Sas(sas) => format!("{base}&{sas}"),
                    AzureAuth::Key(key) => {
                        let expiry = azure_sas::expiry_in_an_hour();
                        let sas =
                            azure_sas::container_sas(key, "l", &s.account, container, &expiry);
                        format!("{base}&{sas}")
                    }
                }
            };
            let reply = retried::send(
                &self.agent,
                &self.transfer,
                Method::Get,
                &url,
                &[("x-ms-version", VERSION.to_owned())],
                &[],
                &shown,
                self.anchor.redacted_endpoint(),
            )?;
            if reply.status != 200 {
                let blob = self.anchor.sibling(shown.clone(), prefix);
                return Err(self.status_err(&blob, &reply));
            }
            let xml = String::from_utf8_lossy(&reply.bytes);
            for b in s3_xml::elements(&xml, "Blob") {
                let field = |tag| s3_xml::text(b, tag).unwrap_or_default();
                out.push(ObjectMeta {
                    key: field("Name"),
                    size: field("Content-Length").parse().unwrap_or(0),
                    etag: field("Etag"),
                    last_modified: field("Last-Modified"),
                });
            }
            match s3_xml::text(&xml, "NextMarker").filter(|m| !m.is_empty()) {
                Some(m) => marker = m,
                None => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}
