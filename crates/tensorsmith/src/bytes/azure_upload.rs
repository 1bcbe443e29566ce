//! An Azure blob written as a stream: the Azure [`PartTarget`] of the shared part uploader
//! (`part_upload.rs`: bounded memory, parts to `max_concurrency` threads). Each part is a
//! block (Put Block, `?comp=block&blockid=…`: base64 ids of one length, `block-000001`…);
//! the commit is Put Block List (`?comp=blocklist`, the ids as `<Latest>`), which makes the
//! blob appear whole, at once. Uncommitted blocks never make a blob visible, and Azure
//! discards them (after a week), so a dropped or failed write simply never commits: nothing
//! to abort. An output smaller than one part is one Put Blob (`x-ms-blob-type: BlockBlob`).
//! Created only if absent (`create_if_absent`), the Put Blob or Put Block List carries
//! `If-None-Match: *`, and a blob already there (409 `BlobAlreadyExists`, or 412) is
//! `ErrorKind::PreconditionFailed`.
//!
//! Requests are authorised as reads are (`azure.rs`): a SAS signed per request with the
//! account key, for creating and writing (`sp=cw`); a SAS given, used as is (a 403 says it
//! must allow writing); or none. Each is retried per the transfer settings (`retried.rs`).
//! A block is at most 4000 MiB and a blob has at most 50,000 blocks: parts of `part_size`,
//! doubled after every 5,000.

use super::azure::AzureBlob;
use super::http::Target;
use super::part_upload::{doubling_part_len, PartTarget, PartUpload};
use super::retried::{self, Method, Reply};
use super::s3_bucket::error_code;
use super::storage_options::{StorageOptions, Transfer};
use super::url_path::encode;
use crate::error::{Error, ErrorKind, Result};
use std::path::Path;

/// The REST version of the requests (Azurite accepts it; the SAS carries the same).
const VERSION: &str = "2022-11-02";
const MAX_BLOCKS: u64 = 50_000;
const MAX_BLOCK: u64 = 4000 << 20;
const BLOCKS_PER_SIZE: u32 = 5_000;

/// An Azure blob being written; invisible until committed.
pub type AzureUpload = PartUpload<AzureBlocks>;

/// Where the blocks of an Azure upload go.
pub struct AzureBlocks {
    blob: AzureBlob,
    agent: ureq::Agent,
    transfer: Transfer,
    /// Whether the commit carries `If-None-Match: *`.
    if_absent: bool,
}

impl AzureUpload {
    /// Starts writing what will become the blob `location` names (`az://`, `abfs(s)://`).
    pub(crate) fn create(location: &str, opts: &StorageOptions) -> Result<AzureUpload> {
        AzureUpload::begin_blob(location, opts, false)
    }

    /// As [`AzureUpload::create`], committed only if no blob has the name by then.
    pub(crate) fn create_if_absent(location: &str, opts: &StorageOptions) -> Result<AzureUpload> {
        AzureUpload::begin_blob(location, opts, true)
    }

    fn begin_blob(location: &str, opts: &StorageOptions, if_absent: bool) -> Result<AzureUpload> {
        let blob = AzureBlob::resolve(location, opts)?.for_writing();
        let transfer = opts.transfer();
        Ok(PartUpload::with_target(AzureBlocks {
            blob,
            agent: retried::agent(&transfer),
            transfer,
            if_absent,
        }))
    }
}

/// A block's id: base64 of `block-NNNNNN`, so all have one length.
fn block_id(number: u32) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("block-{number:06}"))
}

impl AzureBlocks {
    /// A `PUT` of the blob with `query` (`comp=…`) and `body`; the reply when `201 Created`.
    fn put(&self, query: &str, headers: &[(&str, String)], body: &[u8]) -> Result<Reply> {
        let url = || {
            let base = self.blob.url();
            match (query.is_empty(), base.contains('?')) {
                (true, _) => base,
                (false, true) => format!("{base}&{query}"),
                (false, false) => format!("{base}?{query}"),
            }
        };
        let mut all = vec![("x-ms-version", VERSION.to_owned())];
        all.extend_from_slice(headers);
        // The commit (a blob, or its block list) is what may find the name taken.
        let commit = !query.starts_with("comp=block&");
        if self.if_absent && commit {
            all.push(("if-none-match", "*".to_owned()));
        }
        let reply = retried::send(
            &self.agent,
            &self.transfer,
            Method::Put,
            &url,
            &all,
            body,
            self.blob.name(),
            self.blob.redacted_endpoint(),
        )?;
        let taken = reply.status == 412
            || (reply.status == 409 && error_code(&reply.body) == Some("BlobAlreadyExists"));
        match reply.status {
            200..=299 => Ok(reply),
            _ if self.if_absent && commit && taken => {
                Err(Error::new(ErrorKind::PreconditionFailed(format!(
                    "'{}' exists already (If-None-Match: *)",
                    self.blob.name()
                )))
                .in_file(Path::new(self.blob.name())))
            }
            s => Err(Error::new(self.blob.status_error(s, None, &reply.body))
                .in_file(Path::new(self.blob.name()))),
        }
    }
}

impl PartTarget for AzureBlocks {
    fn url(&self) -> String {
        self.blob.name().to_owned()
    }

    fn transfer(&self) -> Transfer {
        self.transfer
    }

    fn max_parts(&self) -> u64 {
        MAX_BLOCKS
    }

    fn part_len(&self, i: u32) -> usize {
        doubling_part_len(self.transfer.part_size, i, BLOCKS_PER_SIZE, MAX_BLOCK)
    }

    fn begin(&mut self) -> Result<()> {
        Ok(()) // blocks need no upload to belong to
    }

    fn put_part(&self, number: u32, _: u64, bytes: &[u8]) -> Result<String> {
        let id = block_id(number);
        let query = format!("comp=block&blockid={}", encode(&id, false));
        self.put(&query, &[], bytes)?;
        Ok(id)
    }

    fn put_whole(&self, body: &[u8]) -> Result<String> {
        let blob_type = [("x-ms-blob-type", "BlockBlob".to_owned())];
        Ok(self.put("", &blob_type, body)?.etag.unwrap_or_default())
    }

    fn complete(&self, parts: &[(u32, String)], _: &[u8], _: u64) -> Result<String> {
        let mut xml = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
        for (_, id) in parts {
            xml.push_str(&format!("<Latest>{id}</Latest>"));
        }
        xml.push_str("</BlockList>");
        let headers = [("content-type", "application/xml".to_owned())];
        let reply = self.put("comp=blocklist", &headers, xml.as_bytes())?;
        Ok(reply.etag.unwrap_or_default())
    }

    fn abort(&self) {
        // Uncommitted blocks are never visible, and the service discards them.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_ids_have_one_length() {
        assert_eq!(block_id(1), "YmxvY2stMDAwMDAx");
        assert_eq!(block_id(1).len(), block_id(MAX_BLOCKS as u32).len());
    }
}
