//! A small synchronous S3 client: the requests a writer needs (PutObject, conditional;
//! multipart uploads; GetObject and HeadObject of small objects; ListObjectsV2;
//! DeleteObject; ListMultipartUploads and AbortMultipartUpload, for cleaning), over presigned
//! SigV4 URLs sent with `ureq`. Every URL is signed by `rusty_s3::signing::sign`, the function
//! its actions sign with, which also signs the actions it lacks (ListMultipartUploads) and
//! needs none of its XML feature; the few responses read are parsed by `s3_xml.rs`. Bucket, endpoint and credentials are resolved as the reader resolves
//! them (`s3_bucket.rs`).
//!
//! Every request is retried with exponential backoff on 5xx, 429, `SlowDown` and on a
//! dropped or timed-out connection, up to [`Transfer::max_attempts`], each attempt under
//! [`Transfer::timeout`] (and [`Transfer::connect_timeout`] to connect), signed afresh.
//! Errors name `s3://bucket/key` and what failed, worded as the reader words them, never a
//! signature or a secret. A refused conditional write is [`ErrorKind::PreconditionFailed`],
//! which callers match to tell a lost race from a failure.

use super::http::{is_unreachable, transport_message};
use super::retry;
use super::s3_bucket::{error_code, S3Bucket};
use super::s3_xml;
use super::storage_options::{StorageOptions, Transfer};
use crate::error::{Error, ErrorKind, Result};
use rusty_s3::Method;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long one signed URL is valid (it is used for one request, made at once).
const EXPIRY: Duration = Duration::from_secs(3600);
/// The most parts one multipart upload may have (S3's limit).
pub(crate) const MAX_PARTS: u64 = 10_000;

/// When a write may happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PutCondition {
    /// Unconditionally.
    Always,
    /// Only if no object has the key (`If-None-Match: *`): create, never replace.
    IfNoneMatch,
    /// Only if the object is still the version with this `ETag` (`If-Match`). Where there
    /// is no object at all, S3 answers 404: [`ErrorKind::RemoteNotFound`].
    IfMatch(String),
}

/// One object of a listing, or what a HEAD tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub size: u64,
    /// As the store sends it, quotes included.
    pub etag: String,
    /// As the store sends it (ISO 8601 in listings, an HTTP date from HEAD).
    pub last_modified: String,
}

/// A multipart upload that was started and neither completed nor aborted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadMeta {
    pub key: String,
    pub upload_id: String,
    /// When it was started (ISO 8601, as the store sends it).
    pub initiated: String,
}

/// A client of one bucket.
#[derive(Clone)]
pub struct S3Client {
    store: S3Bucket,
    agent: ureq::Agent,
    transfer: Transfer,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Client({:?})", self.store)
    }
}

/// What a request sends.
#[derive(Clone, Copy)]
enum Body<'a> {
    Empty,
    Bytes(&'a [u8]),
    /// `len` bytes of `file` from `offset`, streamed.
    File {
        file: &'a File,
        offset: u64,
        len: u64,
    },
}

/// A response: its status, validators and body (read whole: the requests that bring one
/// are for small objects and listings).
struct Reply {
    status: u16,
    etag: Option<String>,
    last_modified: Option<String>,
    length: Option<u64>,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A range of a file as a reader, by positioned reads (several readers share one file).
struct FileRange<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for FileRange<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min((self.end - self.pos) as usize);
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.pos)?;
        if got == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file got shorter while it was uploaded",
            ));
        }
        self.pos += got as u64;
        Ok(got)
    }
}

fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Whether a status (with the store's error code) is worth another attempt.
pub(crate) fn retryable_status(status: u16, code: &str) -> bool {
    retry::retryable_status(status) || retry::retryable_code(code)
}

impl S3Client {
    /// The client of the bucket `location` (`s3://bucket/key`, `s3a://…`) names, with the
    /// settings of `opts` and the environment, and the key.
    pub fn for_url(location: &str, opts: &StorageOptions) -> Result<(S3Client, String)> {
        let (store, key) = super::s3_bucket::S3Bucket::resolve(location, opts)?;
        let transfer = opts.transfer();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(transfer.timeout))
            .timeout_connect(Some(transfer.connect_timeout))
            .http_status_as_error(false)
            .max_idle_connections_per_host(transfer.max_concurrency.max(3))
            .build()
            .into();
        Ok((
            S3Client {
                store,
                agent,
                transfer,
            },
            key,
        ))
    }

    /// `s3://bucket/key`: how errors name an object.
    pub fn key_url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.store.name())
    }

    pub fn bucket(&self) -> &str {
        self.store.name()
    }

    /// The transfer settings of the call it was made for.
    pub fn transfer(&self) -> Transfer {
        self.transfer
    }

    fn err(&self, key: &str, kind: ErrorKind) -> Error {
        Error::new(kind).in_file(Path::new(&self.key_url(key)))
    }

    /// The presigned URL of `method` on `key` (`None`: the bucket) with `query` and the
    /// signed `headers` (lower-case names).
    fn url(
        &self,
        method: Method,
        key: Option<&str>,
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> String {
        let url = match key {
            Some(k) => self.store.bucket.object_url(k),
            None => self.store.bucket.base_url().clone(),
        };
        let mut query = query.to_vec();
        query.sort_unstable();
        let mut headers = headers.to_vec();
        headers.sort_unstable();
        match &self.store.credentials() {
            Some(c) => rusty_s3::signing::sign(
                &jiff::Timestamp::now(),
                method,
                url,
                c.key(),
                c.secret(),
                c.token(),
                &self.store.region,
                EXPIRY.as_secs(),
                query.iter().copied(),
                headers.iter().copied(),
            )
            .to_string(),
            None => {
                let mut url = url;
                if !query.is_empty() {
                    url.query_pairs_mut().extend_pairs(query);
                }
                url.to_string()
            }
        }
    }

    /// One request, retried per the transfer settings; `key` names it in errors. Statuses
    /// that are not retried come back as they are, for the caller to word.
    fn send(
        &self,
        method: Method,
        key: Option<&str>,
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
        body: Body<'_>,
    ) -> Result<Reply> {
        let name = key.unwrap_or("");
        let mut backoff = retry::Backoff::per_request(&self.transfer);
        loop {
            match self.send_once(method, key, query, headers, body) {
                Ok(reply) => {
                    let code = error_code(std::str::from_utf8(&reply.body).unwrap_or(""))
                        .unwrap_or("")
                        .to_owned();
                    if retryable_status(reply.status, &code) && backoff.wait(None) {
                        continue;
                    }
                    return Ok(reply);
                }
                Err(e) => {
                    if retry::retryable_transport(&e, true) && backoff.wait(None) {
                        continue;
                    }
                    let msg = transport_message(&e);
                    let msg = match backoff.attempts() {
                        1 => msg,
                        n => format!("{msg} (after {n} attempts)"),
                    };
                    let kind = if is_unreachable(&e) {
                        ErrorKind::Unreachable(format!("{} ({msg})", self.store.endpoint))
                    } else {
                        ErrorKind::Http(msg)
                    };
                    return Err(self.err(name, kind));
                }
            }
        }
    }

    fn send_once(
        &self,
        method: Method,
        key: Option<&str>,
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
        body: Body<'_>,
    ) -> std::result::Result<Reply, ureq::Error> {
        let url = self.url(method, key, query, headers);
        let a = &self.agent;
        let resp = match method {
            Method::Get | Method::Head | Method::Delete => {
                let mut r = match method {
                    Method::Get => a.get(url),
                    Method::Head => a.head(url),
                    _ => a.delete(url),
                };
                for (k, v) in headers {
                    r = r.header(*k, *v);
                }
                r.call()
            }
            Method::Put | Method::Post => {
                let mut r = match method {
                    Method::Put => a.put(url),
                    _ => a.post(url),
                };
                for (k, v) in headers {
                    r = r.header(*k, *v);
                }
                match body {
                    Body::Empty => r.header("content-length", "0").send_empty(),
                    Body::Bytes(b) => r.send(b),
                    Body::File { file, offset, len } => {
                        let mut reader = FileRange {
                            file,
                            pos: offset,
                            end: offset + len,
                        };
                        r.header("content-length", len.to_string())
                            .send(ureq::SendBody::from_reader(&mut reader))
                    }
                }
            }
        };
        let mut resp = resp?;
        let mut reply = Reply {
            status: resp.status().as_u16(),
            etag: header(&resp, "etag"),
            last_modified: header(&resp, "last-modified"),
            length: header(&resp, "content-length").and_then(|v| v.parse().ok()),
            body: Vec::new(),
        };
        if method != Method::Head {
            resp.body_mut()
                .as_reader()
                .read_to_end(&mut reply.body)
                .map_err(ureq::Error::Io)?;
        }
        Ok(reply)
    }

    /// The error for an unexpected status of a request about `key`.
    fn status_err(&self, key: &str, reply: &Reply) -> Error {
        self.err(
            key,
            self.store.status_error(reply.status, key, &reply.text()),
        )
    }

    /// A refused conditional write as [`ErrorKind::PreconditionFailed`], or `None`.
    fn refused(&self, key: &str, reply: &Reply, cond: &PutCondition) -> Option<Error> {
        let conflict =
            reply.status == 409 && error_code(&reply.text()) == Some("ConditionalRequestConflict");
        if reply.status != 412 && !conflict {
            return None;
        }
        let why = match cond {
            PutCondition::IfMatch(etag) => {
                format!("'{key}' is no longer the version with ETag {etag} (If-Match)")
            }
            _ => format!("'{key}' exists already (If-None-Match: *)"),
        };
        let why = match conflict {
            true => format!("{why}: another write to it was in progress (409)"),
            false => why,
        };
        Some(self.err(key, ErrorKind::PreconditionFailed(why)))
    }

    fn etag_of(&self, key: &str, reply: &Reply) -> Result<String> {
        reply.etag.clone().ok_or_else(|| {
            self.err(
                key,
                ErrorKind::Http(format!("status {} without an ETag", reply.status)),
            )
        })
    }

    /// Writes `body` as `key` in one PutObject when `cond` allows; the new ETag.
    pub fn put(&self, key: &str, body: &[u8], cond: PutCondition) -> Result<String> {
        self.put_body(key, Body::Bytes(body), &cond)
    }

    fn put_body(&self, key: &str, body: Body<'_>, cond: &PutCondition) -> Result<String> {
        let headers = condition_headers(cond);
        let reply = self.send(Method::Put, Some(key), &[], &headers, body)?;
        if let Some(e) = self.refused(key, &reply, cond) {
            return Err(e);
        }
        if reply.status != 200 {
            return Err(self.status_err(key, &reply));
        }
        self.etag_of(key, &reply)
    }

    /// Writes the local file `file` as `key`, streamed from the file (never read into
    /// memory): one PutObject up to the part size, a multipart upload of up to
    /// `max_concurrency` parts at once above it (aborted if it fails); the new ETag.
    pub fn put_file(&self, key: &str, file: &File, cond: PutCondition) -> Result<String> {
        let len = file
            .metadata()
            .map_err(|e| self.err(key, ErrorKind::Io(e)))?
            .len();
        let part = part_size_for(self.transfer.part_size, len);
        if len <= part {
            return self.put_body(
                key,
                Body::File {
                    file,
                    offset: 0,
                    len,
                },
                &cond,
            );
        }
        let upload = self.create_upload(key)?;
        let parts = len.div_ceil(part);
        let etags = Mutex::new(vec![String::new(); parts as usize]);
        let next = AtomicU64::new(0);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<Error>> = Mutex::new(None);
        let workers = (self.transfer.max_concurrency as u64).min(parts) as usize;
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= parts || failed.load(Ordering::Relaxed) {
                        return;
                    }
                    let offset = i * part;
                    let body = Body::File {
                        file,
                        offset,
                        len: part.min(len - offset),
                    };
                    match self.upload_part_body(key, &upload, i as u32 + 1, body) {
                        Ok(etag) => {
                            etags.lock().unwrap_or_else(|p| p.into_inner())[i as usize] = etag
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            first_error
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                            return;
                        }
                    }
                });
            }
        });
        let result = match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => {
                let etags = etags.into_inner().unwrap_or_else(|p| p.into_inner());
                let list: Vec<(u32, String)> = (1..).zip(etags).collect();
                self.complete_upload(key, &upload, &list, cond)
            }
        };
        if result.is_err() {
            let _ = self.abort_upload(key, &upload);
        }
        result
    }

    /// The object `key` (small: a manifest, a version file) and its ETag; `None` when there
    /// is no such key.
    pub fn get(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        let reply = self.send(Method::Get, Some(key), &[], &[], Body::Empty)?;
        match reply.status {
            200 => {
                let etag = self.etag_of(key, &reply)?;
                if let Some(n) = reply.length.filter(|&n| n != reply.body.len() as u64) {
                    return Err(self.err(
                        key,
                        ErrorKind::Http(format!(
                            "body ended after {} of {n} bytes",
                            reply.body.len()
                        )),
                    ));
                }
                Ok(Some((reply.body, etag)))
            }
            404 if error_code(&reply.text()) != Some("NoSuchBucket") => Ok(None),
            _ => Err(self.status_err(key, &reply)),
        }
    }

    /// What the store tells of `key` (`None`: no such key; a HEAD's 404 has no body, so a
    /// missing bucket is `None` too).
    pub fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        let reply = self.send(Method::Head, Some(key), &[], &[], Body::Empty)?;
        match reply.status {
            200 => Ok(Some(ObjectMeta {
                key: key.to_owned(),
                size: reply.length.unwrap_or(0),
                etag: self.etag_of(key, &reply)?,
                last_modified: reply.last_modified.unwrap_or_default(),
            })),
            404 => Ok(None),
            _ => Err(self.status_err(key, &reply)),
        }
    }

    /// Every object whose key starts with `prefix` (ListObjectsV2, all pages), in key order.
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![("list-type", "2"), ("prefix", prefix)];
            if let Some(t) = &token {
                query.push(("continuation-token", t));
            }
            let reply = self.send(Method::Get, None, &query, &[], Body::Empty)?;
            if reply.status != 200 {
                return Err(self.status_err(prefix, &reply));
            }
            let xml = reply.text();
            for c in s3_xml::elements(&xml, "Contents") {
                let field = |t| s3_xml::text(c, t).unwrap_or_default();
                out.push(ObjectMeta {
                    key: field("Key"),
                    size: field("Size").parse().unwrap_or(0),
                    etag: field("ETag"),
                    last_modified: field("LastModified"),
                });
            }
            token = match s3_xml::text(&xml, "IsTruncated").as_deref() {
                Some("true") => s3_xml::text(&xml, "NextContinuationToken"),
                _ => None,
            };
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Deletes `key` (no error when there is none).
    pub fn delete(&self, key: &str) -> Result<()> {
        let reply = self.send(Method::Delete, Some(key), &[], &[], Body::Empty)?;
        match reply.status {
            200 | 204 => Ok(()),
            404 if error_code(&reply.text()) != Some("NoSuchBucket") => Ok(()),
            _ => Err(self.status_err(key, &reply)),
        }
    }

    /// The multipart uploads started under `prefix` and neither completed nor aborted
    /// (ListMultipartUploads, all pages).
    pub fn list_uploads(&self, prefix: &str) -> Result<Vec<UploadMeta>> {
        let mut out = Vec::new();
        let mut markers: Option<(String, String)> = None;
        loop {
            let mut query = vec![("uploads", "1"), ("prefix", prefix)];
            if let Some((k, u)) = &markers {
                query.push(("key-marker", k));
                query.push(("upload-id-marker", u));
            }
            let reply = self.send(Method::Get, None, &query, &[], Body::Empty)?;
            if reply.status != 200 {
                return Err(self.status_err(prefix, &reply));
            }
            let xml = reply.text();
            for u in s3_xml::elements(&xml, "Upload") {
                let field = |t| s3_xml::text(u, t).unwrap_or_default();
                out.push(UploadMeta {
                    key: field("Key"),
                    upload_id: field("UploadId"),
                    initiated: field("Initiated"),
                });
            }
            markers = match s3_xml::text(&xml, "IsTruncated").as_deref() {
                Some("true") => s3_xml::text(&xml, "NextKeyMarker")
                    .zip(s3_xml::text(&xml, "NextUploadIdMarker")),
                _ => None,
            };
            if markers.is_none() {
                return Ok(out);
            }
        }
    }

    /// Aborts the multipart upload `upload_id` of `key`: its parts are dropped and no object
    /// appears. One already completed or aborted is no error.
    pub fn abort_upload(&self, key: &str, upload_id: &str) -> Result<()> {
        let reply = self.send(
            Method::Delete,
            Some(key),
            &[("uploadId", upload_id)],
            &[],
            Body::Empty,
        )?;
        match reply.status {
            200 | 204 => Ok(()),
            404 if error_code(&reply.text()) == Some("NoSuchUpload") => Ok(()),
            _ => Err(self.status_err(key, &reply)),
        }
    }

    /// Starts a multipart upload of `key`; its upload id.
    pub fn create_upload(&self, key: &str) -> Result<String> {
        let reply = self.send(
            Method::Post,
            Some(key),
            &[("uploads", "1")],
            &[],
            Body::Empty,
        )?;
        if reply.status != 200 {
            return Err(self.status_err(key, &reply));
        }
        s3_xml::text(&reply.text(), "UploadId").ok_or_else(|| {
            self.err(
                key,
                ErrorKind::Http("CreateMultipartUpload answered without an UploadId".into()),
            )
        })
    }

    /// Uploads part `number` (from 1) of the upload `upload_id` of `key`; its ETag.
    pub fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: &[u8],
    ) -> Result<String> {
        self.upload_part_body(key, upload_id, number, Body::Bytes(body))
    }

    fn upload_part_body(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: Body<'_>,
    ) -> Result<String> {
        let n = number.to_string();
        let query = [("partNumber", n.as_str()), ("uploadId", upload_id)];
        let reply = self.send(Method::Put, Some(key), &query, &[], body)?;
        if reply.status != 200 {
            return Err(self.status_err(key, &reply));
        }
        self.etag_of(key, &reply)
    }

    /// Completes the upload `upload_id` of `key` from its parts (number, ETag) in order,
    /// when `cond` allows: the object appears whole, now; its ETag.
    pub fn complete_upload(
        &self,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
        cond: PutCondition,
    ) -> Result<String> {
        let mut body = String::from("<CompleteMultipartUpload>");
        for (n, etag) in parts {
            body.push_str(&format!(
                "<Part><PartNumber>{n}</PartNumber><ETag>{}</ETag></Part>",
                s3_xml::escape(etag)
            ));
        }
        body.push_str("</CompleteMultipartUpload>");
        let headers = condition_headers(&cond);
        let reply = self.send(
            Method::Post,
            Some(key),
            &[("uploadId", upload_id)],
            &headers,
            Body::Bytes(body.as_bytes()),
        )?;
        if let Some(e) = self.refused(key, &reply, &cond) {
            return Err(e);
        }
        let text = reply.text();
        // S3 may answer 200 and then an <Error> body, once the parts are assembled.
        if reply.status != 200 || text.contains("<Error>") {
            let status = if reply.status == 200 {
                500
            } else {
                reply.status
            };
            return Err(self.err(key, self.store.status_error(status, key, &text)));
        }
        s3_xml::text(&text, "ETag").or(reply.etag).ok_or_else(|| {
            self.err(
                key,
                ErrorKind::Http("CompleteMultipartUpload answered without an ETag".into()),
            )
        })
    }
}

/// The headers (lower case, signed) of a condition.
fn condition_headers(cond: &PutCondition) -> Vec<(&'static str, &str)> {
    match cond {
        PutCondition::Always => vec![],
        PutCondition::IfNoneMatch => vec![("if-none-match", "*")],
        PutCondition::IfMatch(etag) => vec![("if-match", etag.as_str())],
    }
}

/// The part size for an object of `len` bytes: `wanted`, grown where S3's 10,000 parts
/// would not hold it.
pub(crate) fn part_size_for(wanted: u64, len: u64) -> u64 {
    wanted.max(len.div_ceil(MAX_PARTS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_retries_and_part_sizes() {
        assert!(condition_headers(&PutCondition::Always).is_empty());
        assert_eq!(
            condition_headers(&PutCondition::IfNoneMatch),
            vec![("if-none-match", "*")]
        );
        assert!(retryable_status(503, "SlowDown") && retryable_status(400, "RequestTimeout"));
        assert!(!retryable_status(404, "NoSuchKey") && !retryable_status(412, ""));
        assert_eq!(part_size_for(8 << 20, 1 << 30), 8 << 20);
        assert_eq!(
            part_size_for(5 << 20, 100 << 30),
            (100u64 << 30).div_ceil(MAX_PARTS)
        );
    }
}
