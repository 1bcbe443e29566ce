//! Which store a dataset location names: a local path (`None`: the local protocol, commit
//! lock and renames), an `s3://`/`s3a://` or `az://`/`abfs(s)://` prefix
//! (`store_object.rs`), a `gs://` prefix (`store_gcs.rs`). `hf://` is refused for
//! writing (the Hub is read only) and, for now, for datasets, as is `http(s)://`; any other
//! `scheme://` is refused by name, never taken for a local folder.

use crate::error::{DatasetError, Result};
use crate::store::gcs::GcsStore;
use crate::store::object::ObjectPrefixStore;
use crate::store::seam::Store;
use tensorsmith::bytes::{scheme_name, url_scheme, StorageOptions, UrlScheme};

/// The store of `location`, `None` for a local path. `writing`: hf:// gets the read-only
/// wording.
pub(crate) fn open_store(
    location: &str,
    storage: &StorageOptions,
    writing: bool,
) -> Result<Option<Box<dyn Store>>> {
    if scheme_name(location).is_none() {
        return Ok(None);
    }
    match url_scheme(location) {
        Some(UrlScheme::S3 | UrlScheme::Az) => {
            Ok(Some(Box::new(ObjectPrefixStore::open(location, storage)?)))
        }
        Some(UrlScheme::Gs) => Ok(Some(Box::new(GcsStore::open(location, storage)?))),
        Some(UrlScheme::Hf) if writing => Err(tensorsmith::bytes::refuse_write(location)
            .expect_err("a URL")
            .into()),
        Some(_) => Err(DatasetError::input(format!(
            "{}: datasets are read and written on s3:// (s3a://), az:// (abfs(s)://), gs:// and local folders; {}:// is not supported for datasets",
            tensorsmith::bytes::redact_url(location),
            scheme_name(location).unwrap_or_default()
        ))),
        None => Err(tensorsmith::bytes::refuse_write(location)
            .expect_err("an unknown scheme")
            .into()),
    }
}
