//! The store seam over an S3 prefix (`s3://bucket/path/to/dataset`, also `s3a://`), through
//! the byte layer's S3 client (`tensorsmith::bytes::S3Client`: signed requests, retries,
//! multipart uploads, errors naming `s3://…` without credentials). The exclusive create is
//! a put with `If-None-Match: *` (a 412 means another writer created the name first);
//! ranged reads go through the byte layer's `open_url`.

use crate::error::{DatasetError, Result};
use crate::store::{written, Entry, Expect, Store, Upload};
use std::path::Path;
use tensorsmith::bytes::{PutCondition, ReadAt, S3Client, StorageOptions};

pub(crate) struct S3Store {
    client: S3Client,
    /// The URL as given, without a trailing `/` (errors name objects below it).
    location: String,
    /// The dataset's key prefix, ending in `/`.
    prefix: String,
    storage: StorageOptions,
}

impl S3Store {
    /// The dataset at `location` (`s3://bucket/prefix`).
    pub(crate) fn open(location: &str, storage: &StorageOptions) -> Result<S3Store> {
        let location = location.trim_end_matches('/').to_string();
        let (client, key) = S3Client::for_url(&location, storage)?;
        Ok(S3Store {
            client,
            prefix: format!("{}/", key.trim_end_matches('/')),
            location: tensorsmith::bytes::redact_url(&location),
            storage: storage.clone(),
        })
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

/// `2026-11-27T03:10:05.123Z` (ISO 8601 as S3 lists times) in ms since the epoch; 0 when it
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

impl Store for S3Store {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn concurrency(&self) -> usize {
        self.client.transfer().max_concurrency
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.client.get(&self.key(key))?.map(|(b, _)| b))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.client
            .put(&self.key(key), bytes, PutCondition::Always)?;
        Ok(())
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        written(
            self.client
                .put(&self.key(key), bytes, PutCondition::IfNoneMatch),
        )
    }

    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        Ok(self.client.get(&self.key(key))?.map(|(b, t)| (b, Some(t))))
    }

    fn replace(&self, key: &str, bytes: &[u8], expect: Expect<'_>) -> Result<bool> {
        let cond = match expect {
            Expect::Absent => PutCondition::IfNoneMatch,
            Expect::Tag(t) => PutCondition::IfMatch(t.to_string()),
        };
        // Changed (412, 409), or removed since it was read (If-Match on nothing: 404).
        written(self.client.put(&self.key(key), bytes, cond))
    }

    fn put_file(&self, key: &str, from: &Path) -> Result<()> {
        let f = std::fs::File::open(from).map_err(|e| DatasetError::io(from, e))?;
        self.client
            .put_file(&self.key(key), &f, PutCondition::Always)?;
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<Entry>> {
        let mut out: Vec<Entry> = self
            .client
            .list(&self.key(prefix))?
            .into_iter()
            .filter_map(|o| {
                Some(Entry {
                    key: o.key.strip_prefix(&self.prefix)?.to_string(),
                    size: o.size,
                    modified_ms: iso8601_ms(&o.last_modified),
                })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        Ok(self.client.delete(&self.key(key))?)
    }

    fn open(&self, key: &str) -> Result<Box<dyn ReadAt>> {
        let url = format!("{}/{key}", self.location);
        Ok(Box::new(tensorsmith::bytes::open_url(
            &url,
            &self.storage,
            64 * 1024,
        )?))
    }

    fn uploads(&self, prefix: &str) -> Result<Vec<Upload>> {
        Ok(self
            .client
            .list_uploads(&self.key(prefix))?
            .into_iter()
            .filter_map(|u| {
                Some(Upload {
                    key: u.key.strip_prefix(&self.prefix)?.to_string(),
                    id: u.upload_id,
                    started_ms: iso8601_ms(&u.initiated),
                })
            })
            .collect())
    }

    fn abort(&self, upload: &Upload) -> Result<()> {
        Ok(self
            .client
            .abort_upload(&self.key(&upload.key), &upload.id)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_times() {
        assert_eq!(iso8601_ms("1970-01-01T00:00:00.000Z"), 0);
        assert_eq!(iso8601_ms("2026-11-25T09:49:53.000Z"), 1_795_600_193_000);
        assert_eq!(iso8601_ms("2026-11-25T09:49:53.5Z"), 1_795_600_193_500);
        assert_eq!(iso8601_ms("2000-02-29T00:00:00Z"), 951_782_400_000);
        assert_eq!(iso8601_ms("yesterday"), 0);
    }
}
