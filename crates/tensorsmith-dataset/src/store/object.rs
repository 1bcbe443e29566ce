//! The store seam over an S3 prefix (`s3://bucket/path/to/dataset`, also `s3a://`) or an
//! Azure Blob prefix (`az://container/path`, `az://CONTAINER@ACCOUNT.blob…/…`,
//! `abfs(s)://CONTAINER@ACCOUNT.dfs…/…`): the byte layer's object_store client
//! (`tensorsmith::bytes::ObjectClient`: the credential chains, retries, multipart and block
//! uploads, errors naming the URL without credentials) as a `BlobClient` of store_prefix.rs.
//! The exclusive create is a put with `If-None-Match: *` (S3's 412, Azure's 409
//! `BlobAlreadyExists` or 412: another writer created the name first), the conditional
//! replace `If-Match` the ETag. S3's unfinished multipart uploads are listed and aborted;
//! Azure's uncommitted blocks are never visible and Azure discards them.

use crate::store::prefix::{BlobClient, Cond, PrefixStore, Unfinished};
use std::fs::File;
use tensorsmith::bytes::{ObjectClient, ObjectMeta, PutCondition, StorageOptions};
use tensorsmith::error::Result;

/// A dataset on S3 or Azure Blob Storage.
pub(crate) type ObjectPrefixStore = PrefixStore<ObjectClient>;

/// The put condition of `cond`.
pub(crate) fn put_condition(cond: Cond<'_>) -> PutCondition {
    match cond {
        Cond::Always => PutCondition::Always,
        Cond::Absent => PutCondition::IfNoneMatch,
        Cond::Tag(etag) => PutCondition::IfMatch(etag.to_string()),
    }
}

/// `2026-11-27T03:10:05.123Z` (ISO 8601, as objects are listed) in ms since the epoch; 0 when it
/// is not that.
pub(crate) fn iso8601_ms(s: &str) -> u64 {
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|t| t.parse::<i64>().ok());
    let (Some(y), Some(m), Some(d), Some(hh), Some(mm), Some(ss)) = (
        num(0..4),
        num(5..7),
        num(8..10),
        num(11..13),
        num(14..16),
        num(17..19),
    ) else {
        return 0;
    };
    let frac = s
        .get(19..)
        .and_then(|t| t.strip_prefix('.'))
        .map(|t| t.trim_end_matches('Z'))
        .and_then(|t| t.get(..t.len().min(3)))
        .and_then(|t| format!("{t:0<3}").parse::<i64>().ok())
        .unwrap_or(0);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs * 1000 + frac).unwrap_or(0)
}

impl BlobClient for ObjectClient {
    fn for_url(location: &str, storage: &StorageOptions) -> Result<(ObjectClient, String)> {
        ObjectClient::for_url(location, storage)
    }
    fn key_url(&self, key: &str) -> String {
        ObjectClient::key_url(self, key)
    }
    fn concurrency(&self) -> usize {
        self.transfer().max_concurrency
    }
    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        ObjectClient::get_tagged(self, key)
    }
    fn put(&self, key: &str, bytes: &[u8], cond: Cond<'_>) -> Result<()> {
        ObjectClient::put(self, key, bytes, put_condition(cond))
    }
    fn put_file(&self, key: &str, from: &File) -> Result<()> {
        ObjectClient::put_file(self, key, from, PutCondition::Always)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        ObjectClient::list(self, prefix)
    }
    fn modified_ms(last_modified: &str) -> u64 {
        iso8601_ms(last_modified)
    }
    fn delete(&self, key: &str) -> Result<()> {
        ObjectClient::delete(self, key)
    }
    fn unfinished(&self, prefix: &str) -> Result<Vec<Unfinished>> {
        Ok(self
            .list_uploads(prefix)?
            .into_iter()
            .map(|u| Unfinished {
                started_ms: iso8601_ms(&u.initiated),
                key: u.key,
                id: u.upload_id,
            })
            .collect())
    }
    fn abort(&self, key: &str, id: &str) -> Result<()> {
        self.abort_upload(key, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_times() {
        assert_eq!(iso8601_ms("1970-01-01T00:00:00.000Z"), 0);
        assert_eq!(iso8601_ms("2026-11-25T09:49:53.000Z"), 1_795_600_193_000);
        assert_eq!(iso8601_ms("2026-11-25T09:49:53.5Z"), 1_795_600_193_500);
        assert_eq!(iso8601_ms("2000-02-29T00:00:00Z"), 951_782_400_000);
        assert_eq!(iso8601_ms("yesterday"), 0);
    }
}
