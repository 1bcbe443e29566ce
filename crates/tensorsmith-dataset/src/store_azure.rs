//! The store seam over an Azure Blob prefix (`az://container/path/to/dataset`, also
//! `az://CONTAINER@ACCOUNT.blob…/…` and `abfs(s)://CONTAINER@ACCOUNT.dfs…/…`): the byte
//! layer's Azure client (`tensorsmith::bytes::AzureClient` over object_store: the credential chain, retries, block
//! uploads, errors naming `az://…` without credentials) as a `BlobClient` of
//! store_prefix.rs. The exclusive create is a Put Blob with `If-None-Match: *` (Azure's 409
//! `BlobAlreadyExists` or 412: another writer created the name first), the conditional
//! replace `If-Match` the ETag. Block uploads have nothing to abort: uncommitted blocks are
//! never visible and Azure discards them.

use crate::store_prefix::{BlobClient, Cond, PrefixStore};
use crate::store_s3::{iso8601_ms, put_condition};
use std::fs::File;
use tensorsmith::bytes::{AzureClient, ObjectMeta, PutCondition, StorageOptions};
use tensorsmith::error::Result;

/// A dataset on Azure Blob Storage.
pub(crate) type AzureStore = PrefixStore<AzureClient>;

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

impl BlobClient for AzureClient {
    fn for_url(location: &str, storage: &StorageOptions) -> Result<(AzureClient, String)> {
        AzureClient::for_url(location, storage)
    }
    fn key_url(&self, key: &str) -> String {
        AzureClient::key_url(self, key)
    }
    fn concurrency(&self) -> usize {
        self.transfer().max_concurrency
    }
    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, String)>> {
        AzureClient::get_tagged(self, key)
    }
    fn put(&self, key: &str, bytes: &[u8], cond: Cond<'_>) -> Result<()> {
        AzureClient::put(self, key, bytes, put_condition(cond))
    }
    fn put_file(&self, key: &str, from: &File) -> Result<()> {
        AzureClient::put_file(self, key, from, PutCondition::Always)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        AzureClient::list(self, prefix)
    }
    fn modified_ms(last_modified: &str) -> u64 {
        http_date_ms(last_modified)
    }
    fn delete(&self, key: &str) -> Result<()> {
        AzureClient::delete(self, key)
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
