//! A Cloud Storage object written as a stream: the GCS [`PartTarget`] of the shared part
//! uploader (`part_upload.rs`), through the JSON API's resumable upload. The first full part
//! starts a session (`POST ENDPOINT/upload/storage/v1/b/BUCKET/o?uploadType=resumable&name=…`:
//! its URI comes back in `Location`); each part is one chunk (`PUT` to the session,
//! `Content-Range: bytes A-B/*`, answered 308), and the commit sends the rest with the total
//! (`bytes A-B/TOTAL`, or `bytes */TOTAL` when nothing is left): the object appears only
//! then. An output smaller than one part is one `uploadType=media` POST.
//!
//! Chunks go one after another (one uploader thread, so memory is two parts): a resumable
//! session takes bytes only in order, at the offset it has persisted, unlike S3 parts or
//! Azure blocks. Chunks are multiples of 256 KiB, as the API asks: `part_size` rounded up.
//! A dropped or failed write cancels the session (`DELETE` of its URI; the emulator has no
//! such call and leaves an unfinished session, which makes no object either). The session
//! URI authorises writes by itself: it is never printed; errors name the `gs://` URL. The
//! token (`gcs.rs`) goes with each request to the endpoint's host only.

use crate::bytes::gcs::GcsObject;
use crate::bytes::http::Target;
use crate::bytes::retried::{self, Method, Reply};
use crate::bytes::storage_options::{StorageOptions, Transfer};
use crate::bytes::store::part_upload::{doubling_part_len, PartTarget, PartUpload};
use crate::bytes::url_path::encode;
use crate::error::{Error, ErrorKind, Result};
use std::path::Path;

/// Chunks are multiples of this.
const CHUNK_UNIT: u64 = 256 << 10;
const PARTS_PER_SIZE: u32 = 1000;
/// The largest chunk sent (GCS objects may be 5 TiB).
const MAX_CHUNK: u64 = 1 << 32;

/// A Cloud Storage object being written; invisible until committed.
pub type GcsUpload = PartUpload<GcsChunks>;

/// Where the chunks of a resumable upload go.
pub struct GcsChunks {
    object: GcsObject,
    agent: ureq::Agent,
    transfer: Transfer,
    /// The session URI, once begun.
    session: String,
}

impl GcsUpload {
    /// Starts writing what will become the object `location` (`gs://BUCKET/OBJECT`) names.
    pub(crate) fn create(location: &str, opts: &StorageOptions) -> Result<GcsUpload> {
        let object = GcsObject::resolve(location, opts)?;
        let mut transfer = opts.transfer();
        transfer.max_concurrency = 1;
        transfer.part_size = transfer.part_size.div_ceil(CHUNK_UNIT).max(1) * CHUNK_UNIT;
        Ok(PartUpload::with_target(GcsChunks {
            object,
            agent: retried::agent(&transfer),
            transfer,
            session: String::new(),
        }))
    }
}

impl GcsChunks {
    fn err(&self, kind: ErrorKind) -> Error {
        Error::new(kind).in_file(Path::new(self.object.name()))
    }

    /// `method url` with `headers` and `body`, the token added for the endpoint's host; the
    /// reply when its status is one of `want`.
    fn send(
        &self,
        method: Method,
        url: &str,
        mut headers: Vec<(&str, String)>,
        body: &[u8],
        want: &[u16],
    ) -> Result<Reply> {
        let same_host = url.starts_with(&format!("{}/", self.object.base()));
        let target = &self.object;
        let auth = || target.authorization().filter(|_| same_host);
        if let Some(a) = auth() {
            headers.push(("authorization", a));
        }
        let reply = retried::send(
            &self.agent,
            &self.transfer,
            method,
            &|| url.to_owned(),
            &headers,
            body,
            self.object.name(),
            self.object.endpoint().unwrap_or_default(),
        )?;
        if want.contains(&reply.status) {
            return Ok(reply);
        }
        let (bucket, _) = self.object.bucket_and_object();
        Err(self.err(match reply.status {
            404 => ErrorKind::NoSuchBucket(bucket.to_owned()),
            s => self.object.status_error(s, None, &reply.body),
        }))
    }

    /// `ENDPOINT/upload/storage/v1/b/BUCKET/o?uploadType=KIND&name=OBJECT`.
    fn upload_url(&self, kind: &str) -> String {
        let (bucket, object) = self.object.bucket_and_object();
        format!(
            "{}/upload/storage/v1/b/{}/o?uploadType={kind}&name={}",
            self.object.base(),
            encode(bucket, false),
            encode(object, false)
        )
    }
}

const OCTETS: &str = "application/octet-stream";

impl PartTarget for GcsChunks {
    fn url(&self) -> String {
        self.object.name().to_owned()
    }

    fn transfer(&self) -> Transfer {
        self.transfer
    }

    fn max_parts(&self) -> u64 {
        u32::MAX as u64
    }

    fn part_len(&self, i: u32) -> usize {
        doubling_part_len(self.transfer.part_size, i, PARTS_PER_SIZE, MAX_CHUNK)
    }

    fn begin(&mut self) -> Result<()> {
        let headers = vec![("x-upload-content-type", OCTETS.to_owned())];
        let reply = self.send(
            Method::Post,
            &self.upload_url("resumable"),
            headers,
            &[],
            &[200, 201],
        )?;
        self.session = reply.location.ok_or_else(|| {
            self.err(ErrorKind::Http(
                "the resumable upload was started without a session URI (no Location)".into(),
            ))
        })?;
        Ok(())
    }

    fn put_part(&self, _: u32, offset: u64, bytes: &[u8]) -> Result<String> {
        let end = offset + bytes.len() as u64 - 1;
        let range = vec![("content-range", format!("bytes {offset}-{end}/*"))];
        self.send(Method::Put, &self.session, range, bytes, &[308])?;
        Ok(String::new())
    }

    fn put_whole(&self, body: &[u8]) -> Result<String> {
        let headers = vec![("content-type", OCTETS.to_owned())];
        self.send(
            Method::Post,
            &self.upload_url("media"),
            headers,
            body,
            &[200, 201],
        )?;
        Ok(String::new())
    }

    fn complete(&self, _: &[(u32, String)], tail: &[u8], offset: u64) -> Result<String> {
        let total = offset + tail.len() as u64;
        let range = match tail.is_empty() {
            true => format!("bytes */{total}"),
            false => format!("bytes {offset}-{}/{total}", total - 1),
        };
        let headers = vec![("content-range", range)];
        self.send(Method::Put, &self.session, headers, tail, &[200, 201])?;
        Ok(String::new())
    }

    fn abort(&self) {
        let _ = self.send(Method::Delete, &self.session, Vec::new(), &[], &[204, 499]);
    }

    fn tail_at_commit(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_multiples_of_256_kib() {
        let mut o = StorageOptions::new();
        o.set("endpoint_url", "http://127.0.0.1:1").unwrap();
        o.set("part_size", "5MB").unwrap();
        o.set("max_concurrency", "8").unwrap();
        let u = GcsUpload::create("gs://b/dir/m a.gguf", &o).unwrap();
        let t = &u.target_for_tests();
        assert_eq!(t.transfer().max_concurrency, 1);
        assert_eq!(t.part_len(0) as u64 % CHUNK_UNIT, 0);
        assert!(t.part_len(0) >= 5_000_000 && t.part_len(1000) == 2 * t.part_len(0));
        assert_eq!(
            t.upload_url("media"),
            "http://127.0.0.1:1/upload/storage/v1/b/b/o?uploadType=media&name=dir%2Fm%20a.gguf"
        );
    }
}
