//! An S3 object written as a stream: the S3 [`PartTarget`] of the shared part uploader
//! (`part_upload.rs`: bounded memory, parts to `max_concurrency` threads). Parts go up as a
//! multipart upload (CreateMultipartUpload at the first full part, UploadPart, retried per
//! the transfer settings); nothing is visible under the key until the commit completes the
//! upload (CompleteMultipartUpload, conditional when asked); an output smaller than one part
//! goes up at commit as one PutObject and starts no upload. An upload dropped without a
//! commit, or one whose commit fails, is aborted (AbortMultipartUpload, once the parts in
//! flight are done). A process killed mid-upload leaves an open multipart upload (no
//! object): `S3Client::list_uploads` finds it, and a bucket lifecycle rule or `abort_upload`
//! removes it.
//!
//! Parts are `part_size` bytes, doubled after every 1,000 parts (S3 allows 10,000 parts of
//! at most 5 GiB), so a stream of unknown length fits: 8 MiB parts hold 7.8 GiB before the
//! first doubling.

use super::part_upload::{doubling_part_len, PartTarget, PartUpload};
use super::s3_client::{PutCondition, S3Client, MAX_PARTS};
use super::storage_options::Transfer;
use crate::error::Result;

/// The largest part S3 takes.
const MAX_PART: u64 = 5 << 30;
/// Parts of one size before the size doubles.
const PARTS_PER_SIZE: u32 = 1000;

/// An object being written to S3; invisible until [`PartUpload::commit`].
pub type S3Upload = PartUpload<S3Parts>;

/// Where the parts of an S3 upload go.
pub struct S3Parts {
    client: S3Client,
    key: String,
    cond: PutCondition,
    /// Set when the multipart upload is created.
    upload_id: String,
}

impl PartUpload<S3Parts> {
    /// Starts writing what will become `key`, written at commit when `cond` allows.
    pub fn new(client: S3Client, key: &str, cond: PutCondition) -> S3Upload {
        PartUpload::with_target(S3Parts {
            client,
            key: key.to_owned(),
            cond,
            upload_id: String::new(),
        })
    }
}

impl PartTarget for S3Parts {
    fn url(&self) -> String {
        self.client.key_url(&self.key)
    }

    fn transfer(&self) -> Transfer {
        self.client.transfer()
    }

    fn max_parts(&self) -> u64 {
        MAX_PARTS
    }

    fn part_len(&self, i: u32) -> usize {
        doubling_part_len(
            self.client.transfer().part_size,
            i,
            PARTS_PER_SIZE,
            MAX_PART,
        )
    }

    fn begin(&mut self) -> Result<()> {
        self.upload_id = self.client.create_upload(&self.key)?;
        Ok(())
    }

    fn put_part(&self, number: u32, _: u64, bytes: &[u8]) -> Result<String> {
        self.client
            .upload_part(&self.key, &self.upload_id, number, bytes)
    }

    fn put_whole(&self, body: &[u8]) -> Result<String> {
        self.client.put(&self.key, body, self.cond.clone())
    }

    fn complete(&self, parts: &[(u32, String)], _: &[u8], _: u64) -> Result<String> {
        self.client
            .complete_upload(&self.key, &self.upload_id, parts, self.cond.clone())
    }

    fn abort(&self) {
        let _ = self.client.abort_upload(&self.key, &self.upload_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::StorageOptions;
    use std::io::Write;

    #[test]
    fn part_sizes_grow_and_the_unsent_part_cuts_back() {
        let mut o = StorageOptions::new();
        o.set("endpoint_url", "http://127.0.0.1:1").unwrap();
        o.set("part_size", "5MiB").unwrap();
        let (c, key) = S3Client::for_url("s3://b/k", &o).unwrap();
        let mut u = S3Upload::new(c, &key, PutCondition::Always);
        assert_eq!(u.part_len(0), 5 << 20);
        assert_eq!(u.part_len(999), 5 << 20);
        assert_eq!(u.part_len(1000), 10 << 20);
        assert_eq!(u.part_len(9999), 5 << 29);
        // 10,000 parts hold far more than 10,000 × 5 MiB.
        let total: u64 = (0..MAX_PARTS as u32).map(|i| u.part_len(i) as u64).sum();
        assert!(total > 1 << 40, "{total}");
        u.write_all(b"0123456789").unwrap();
        u.rewind_to(4).unwrap();
        assert_eq!(u.written(), 4);
        assert!(u.rewind_to(5).is_err());
        u.write_all(b"xy").unwrap();
        assert_eq!(u.written(), 6);
        // Dropped before any part went up: nothing was started, nothing to abort.
    }
}
