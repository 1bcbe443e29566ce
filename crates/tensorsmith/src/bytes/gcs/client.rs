//! A small synchronous Cloud Storage client for what a dataset's commit needs, the GCS
//! counterpart of `object_client.rs`: an object read whole (`get`, the XML API as reads go:
//! `None` when there is none), written (`put`: one JSON API multipart upload; created only
//! if absent with `ifGenerationMatch=0`, which GCS refuses with 412: then
//! [`ErrorKind::PreconditionFailed`]), a file streamed up (`put_file`: the resumable upload
//! of `gcs_upload.rs`), a bucket listed by prefix (the JSON API's `objects.list`, every page
//! by `pageToken`), an object deleted (a missing one is no error).
//!
//! The create is a multipart upload, not an XML `PUT` with `x-goog-if-generation-match: 0`:
//! GCS honours both, and fake-gcs-server (the emulator the tests run, as it honours the
//! precondition) only the JSON form on multipart uploads. Unfinished resumable sessions need
//! no abort: they make no object and GCS expires them after a week.
//!
//! Requests carry the token (`gcs.rs`) to the endpoint's host, each retried per the transfer
//! settings (`retried.rs`); errors name the `gs://` URL, never the token.

use crate::bytes::gcs::GcsObject;
use crate::bytes::http::Target;
use crate::bytes::retried::{self, Method, Reply};
use crate::bytes::storage_options::{StorageOptions, Transfer};
use crate::bytes::store::error::error_code;
use crate::bytes::store::object_client::{ObjectMeta, PutCondition};
use crate::bytes::url_path::{encode, split_bucket_url};
use crate::error::{Error, ErrorKind, Result};
use std::fs::File;
use std::path::Path;

/// A client of one bucket.
pub struct GcsClient {
    /// An object of the bucket: the endpoint, the credential, the wording of errors.
    anchor: GcsObject,
    bucket: String,
    opts: StorageOptions,
    agent: ureq::Agent,
    transfer: Transfer,
    /// Objects per listing page (`maxResults`; the service's default when `None`).
    page_size: Option<u32>,
}

impl std::fmt::Debug for GcsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GcsClient(gs://{})", self.bucket)
    }
}

impl GcsClient {
    /// The client of the bucket `location` (`gs://BUCKET/PATH`) names, with the settings of
    /// `opts` and the environment, and the object name `PATH`.
    pub fn for_url(location: &str, opts: &StorageOptions) -> Result<(GcsClient, String)> {
        let (bucket, key) = split_bucket_url(location)?;
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let anchor = GcsObject::resolve(location, opts)?;
        let transfer = opts.transfer();
        Ok((
            GcsClient {
                anchor,
                bucket,
                opts: opts.clone(),
                agent: retried::agent(&transfer),
                transfer,
                page_size: None,
            },
            key,
        ))
    }

    /// `gs://BUCKET/key`: how errors name an object.
    pub fn key_url(&self, key: &str) -> String {
        format!("gs://{}/{key}", self.bucket)
    }

    /// The same client, listing `n` objects a page.
    pub fn with_page_size(mut self, n: u32) -> GcsClient {
        self.page_size = Some(n);
        self
    }

    /// The transfer settings (concurrency, part size, attempts).
    pub fn transfer(&self) -> Transfer {
        self.transfer
    }

    fn object(&self, key: &str) -> GcsObject {
        self.anchor.sibling(self.key_url(key), key)
    }

    /// `method url` with `headers` and `body`, the token added, retried; `name` words errors.
    fn send(
        &self,
        method: Method,
        url: &str,
        mut headers: Vec<(&str, String)>,
        body: &[u8],
        name: &str,
    ) -> Result<Reply> {
        if let Some(a) = self.anchor.authorization() {
            headers.push(("authorization", a));
        }
        retried::send(
            &self.agent,
            &self.transfer,
            method,
            &|| url.to_owned(),
            &headers,
            body,
            name,
            self.anchor.endpoint().unwrap_or_default(),
        )
    }

    fn status_err(&self, object: &GcsObject, reply: &Reply) -> Error {
        Error::new(object.status_error(reply.status, None, &reply.body))
            .in_file(Path::new(object.name()))
    }

    /// `ENDPOINT/storage/v1/b/BUCKET/o` and what follows.
    fn json_url(&self, rest: &str) -> String {
        format!(
            "{}/storage/v1/b/{}/o{rest}",
            self.anchor.base(),
            encode(&self.bucket, false)
        )
    }

    /// The whole object `key`, `None` when there is none (a missing bucket is an error).
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.get_tagged(key)?.map(|(b, _)| b))
    }

    /// The whole object `key` and its generation (what [`GcsClient::put_if_generation`]
    /// names), `None` when there is none.
    pub fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        let object = self.object(key);
        let reply = self.send(Method::Get, &object.url(), Vec::new(), &[], object.name())?;
        match (reply.status, error_code(&reply.body)) {
            (200, _) => Ok(Some((reply.bytes, reply.generation.unwrap_or_default()))),
            (404, Some("NoSuchBucket")) => Err(self.status_err(&object, &reply)),
            (404, _) => Ok(None),
            _ => Err(self.status_err(&object, &reply)),
        }
    }

    /// Writes `bytes` as `key` in one multipart upload, if `cond` allows: an object present
    /// where it was to be created (`IfNoneMatch`, sent as `ifGenerationMatch=0`) is
    /// [`ErrorKind::PreconditionFailed`]. `IfMatch` (an ETag) is refused: GCS conditions
    /// name generations.
    pub fn put(&self, key: &str, bytes: &[u8], cond: PutCondition) -> Result<()> {
        let object = self.object(key);
        let condition = match cond {
            PutCondition::Always => "",
            PutCondition::IfNoneMatch => "0",
            PutCondition::IfMatch(_) => {
                return Err(Error::new(ErrorKind::Unsupported(
                    "If-Match writes to gs:// (GCS conditions name generations)".into(),
                ))
                .in_file(Path::new(object.name())))
            }
        };
        self.upload(key, bytes, condition)
    }

    /// Writes `bytes` as `key` only if the object is still generation `generation` (as
    /// [`GcsClient::get_tagged`] read it): another generation, or none, is
    /// [`ErrorKind::PreconditionFailed`].
    pub fn put_if_generation(&self, key: &str, bytes: &[u8], generation: &str) -> Result<()> {
        if generation.is_empty() || !generation.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "'{generation}' is not a generation number"
            )))
            .in_file(Path::new(self.object(key).name())));
        }
        self.upload(key, bytes, generation)
    }

    /// One multipart upload of `key`, with `ifGenerationMatch=generation` unless empty.
    fn upload(&self, key: &str, bytes: &[u8], generation: &str) -> Result<()> {
        let object = self.object(key);
        let condition = match generation {
            "" => String::new(),
            g => format!("&ifGenerationMatch={g}"),
        };
        let url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=multipart{condition}",
            self.anchor.base(),
            encode(&self.bucket, false)
        );
        let (boundary, body) = multipart(key, bytes);
        let headers = vec![(
            "content-type",
            format!("multipart/related; boundary={boundary}"),
        )];
        let reply = self.send(Method::Post, &url, headers, &body, object.name())?;
        match reply.status {
            200 | 201 => Ok(()),
            412 => Err(Error::new(ErrorKind::PreconditionFailed(match generation {
                "0" => format!("'{key}' exists already (ifGenerationMatch=0)"),
                g => format!("'{key}' is no longer generation {g} (ifGenerationMatch)"),
            }))
            .in_file(Path::new(object.name()))),
            404 => Err(Error::new(ErrorKind::NoSuchBucket(self.bucket.clone()))
                .in_file(Path::new(object.name()))),
            _ => Err(self.status_err(&object, &reply)),
        }
    }

    /// Uploads the file `from` as `key`, streamed in resumable chunks of the part size
    /// (replacing what is there); the object appears once complete.
    pub fn put_file(&self, key: &str, from: &File) -> Result<()> {
        let name = self.key_url(key);
        let mut upload = crate::bytes::gcs::upload::GcsUpload::create(&name, &self.opts)?;
        let mut reader = from;
        std::io::copy(&mut reader, &mut upload)
            .map_err(|e| Error::new(ErrorKind::Io(e)).in_file(Path::new(&name)))?;
        upload.commit()?;
        Ok(())
    }

    /// Removes `key`; an object already gone is no error.
    pub fn delete(&self, key: &str) -> Result<()> {
        let object = self.object(key);
        let url = self.json_url(&format!("/{}", encode(key, false)));
        let reply = self.send(Method::Delete, &url, Vec::new(), &[], object.name())?;
        match reply.status {
            200..=299 | 404 => Ok(()),
            _ => Err(self.status_err(&object, &reply)),
        }
    }

    /// Every object whose name starts with `prefix`, in name order (every page). Times are
    /// as GCS sends them (RFC 3339, `2026-11-27T05:57:43.123Z`).
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let shown = self.key_url(prefix);
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let mut rest = format!("?prefix={}", encode(prefix, false));
            if !token.is_empty() {
                rest.push_str(&format!("&pageToken={}", encode(&token, false)));
            }
            if let Some(n) = self.page_size {
                rest.push_str(&format!("&maxResults={n}"));
            }
            let reply = self.send(Method::Get, &self.json_url(&rest), Vec::new(), &[], &shown)?;
            let bad = |why: String| Error::new(ErrorKind::Http(why)).in_file(Path::new(&shown));
            match reply.status {
                200 => {}
                404 => {
                    return Err(Error::new(ErrorKind::NoSuchBucket(self.bucket.clone()))
                        .in_file(Path::new(&shown)))
                }
                _ => return Err(self.status_err(&self.object(prefix), &reply)),
            }
            let page: serde_json::Value = serde_json::from_slice(&reply.bytes)
                .map_err(|e| bad(format!("the object listing is not JSON: {e}")))?;
            let items = page["items"].as_array().map_or(&[][..], Vec::as_slice);
            for o in items {
                let text = |k: &str| o[k].as_str().unwrap_or_default().to_owned();
                out.push(ObjectMeta {
                    key: text("name"),
                    size: text("size").parse().unwrap_or(0),
                    etag: text("etag"),
                    last_modified: text("updated"),
                });
            }
            match page["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
                Some(t) => token = t.to_owned(),
                None => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

/// A `multipart/related` body of the object's metadata (its name) and its bytes, and the
/// boundary (one that the bytes do not contain).
fn multipart(key: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let mut n = bytes.len() as u64;
    let boundary = loop {
        let b = format!("tensorsmith-part-{n:016x}");
        if !bytes.windows(b.len()).any(|w| w == b.as_bytes()) {
            break b;
        }
        n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    };
    let meta = serde_json::json!({ "name": key }).to_string();
    let mut body = Vec::with_capacity(bytes.len() + 256);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n\
             --{boundary}\r\ncontent-type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (boundary, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_body_and_urls() {
        let (b, body) = multipart("dir/\"a\".json", b"{}");
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with(&format!("--{b}\r\n")), "{text}");
        assert!(text.contains(r#"{"name":"dir/\"a\".json"}"#), "{text}");
        assert!(
            text.ends_with(&format!("\r\n{{}}\r\n--{b}--\r\n")),
            "{text}"
        );
        // Bytes of 33 would be cut by the boundary of length 33; these hold it.
        let held = format!("tensorsmith-part-{:016x}", 33);
        let (other, _) = multipart("k", held.as_bytes());
        assert_eq!(held.len(), 33);
        assert_ne!(other, held);
        let mut o = StorageOptions::new();
        o.set("endpoint_url", "http://127.0.0.1:1").unwrap();
        let (c, key) = GcsClient::for_url("gs://bkt/ds/x", &o).unwrap();
        assert_eq!(key, "ds/x");
        assert_eq!(c.key_url("ds/y"), "gs://bkt/ds/y");
        assert_eq!(
            c.json_url("/ds%2Fy"),
            "http://127.0.0.1:1/storage/v1/b/bkt/o/ds%2Fy"
        );
    }
}
