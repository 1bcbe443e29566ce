//! The store seam over an Azure Blob prefix (`az://container/path/to/dataset`, also
//! `az://CONTAINER@ACCOUNT.blob…/…` and `abfs(s)://CONTAINER@ACCOUNT.dfs…/…`), through the
//! byte layer's Azure client (`tensorsmith::bytes::AzureClient`: SAS per request, retries,
//! block uploads, errors naming `az://…` without credentials). The exclusive create is a Put
//! Blob with `If-None-Match: *` (Azure's 409 `BlobAlreadyExists` or 412: another writer
//! created the name first); ranged reads go through the byte layer's `open_url`. Block
//! uploads have nothing to abort: uncommitted blocks are never visible and Azure discards
//! them, so `uploads` lists none.

use crate::error::{DatasetError, Result};
use crate::store::{written, Entry, Expect, Store, Upload};
use crate::store_s3::iso8601_ms;
use std::path::Path;
use tensorsmith::bytes::{AzureClient, PutCondition, ReadAt, StorageOptions};

pub(crate) struct AzureStore {
    client: AzureClient,
    /// The URL as given, without a trailing `/` (errors name objects below it).
    location: String,
    /// The dataset's blob-name prefix, ending in `/`.
    prefix: String,
    storage: StorageOptions,
}

impl AzureStore {
    /// The dataset at `location` (`az://container/prefix`, `abfs(s)://…`).
    pub(crate) fn open(location: &str, storage: &StorageOptions) -> Result<AzureStore> {
        let location = location.trim_end_matches('/').to_string();
        let (client, key) = AzureClient::for_url(&location, storage)?;
        Ok(AzureStore {
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

/// `Fri, 27 Nov 2026 05:57:43 GMT` (the HTTP date Azure lists) in ms since the epoch; 0
/// when it is not that.
pub(crate) fn http_date_ms(s: &str) -> u64 {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts[..] else {
        return 0;
    };
    let Some(m) = MONTHS.iter().position(|&n| n == month) else {
        return 0;
    };
    iso8601_ms(&format!("{year}-{:02}-{day:0>2}T{time}Z", m + 1))
}

impl Store for AzureStore {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn concurrency(&self) -> usize {
        self.client.transfer().max_concurrency
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.client.get(&self.key(key))?)
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        Ok(self
            .client
            .put(&self.key(key), bytes, PutCondition::Always)?)
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        written(
            self.client
                .put(&self.key(key), bytes, PutCondition::IfNoneMatch),
        )
    }

    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Option<String>)>> {
        Ok(self
            .client
            .get_tagged(&self.key(key))?
            .map(|(b, t)| (b, Some(t))))
    }

    fn replace(&self, key: &str, bytes: &[u8], expect: Expect<'_>) -> Result<bool> {
        let cond = match expect {
            Expect::Absent => PutCondition::IfNoneMatch,
            Expect::Tag(t) => PutCondition::IfMatch(t.to_string()),
        };
        written(self.client.put(&self.key(key), bytes, cond))
    }

    fn put_file(&self, key: &str, from: &Path) -> Result<()> {
        let f = std::fs::File::open(from).map_err(|e| DatasetError::io(from, e))?;
        Ok(self
            .client
            .put_file(&self.key(key), &f, PutCondition::Always)?)
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
                    modified_ms: http_date_ms(&o.last_modified),
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
        let url = self.client.key_url(&self.key(key));
        Ok(Box::new(tensorsmith::bytes::open_url(
            &url,
            &self.storage,
            64 * 1024,
        )?))
    }

    fn uploads(&self, _: &str) -> Result<Vec<Upload>> {
        Ok(Vec::new()) // uncommitted blocks: invisible, discarded by Azure
    }

    fn abort(&self, _: &Upload) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_times() {
        assert_eq!(
            http_date_ms("Wed, 25 Nov 2026 09:49:53 GMT"),
            1_795_600_193_000
        );
        assert_eq!(http_date_ms("Thu, 1 Jan 1970 00:00:01 GMT"), 1000);
        assert_eq!(http_date_ms("Wed, 25 Nov 2026 09:49:53 CET"), 0);
        assert_eq!(http_date_ms("yesterday"), 0);
    }
}
