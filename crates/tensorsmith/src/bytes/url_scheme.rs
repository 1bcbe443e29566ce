//! Which locations are URLs, and of which scheme: `http(s)://` (read as given), `s3://` and
//! `s3a://` (an S3 object, `s3.rs`), `gs://` (Cloud Storage, `gcs.rs`), `az://`, `abfs://`
//! and `abfss://` (Azure Blob Storage, through `object_store`: `azure_client.rs`), `hf://`
//! (the Hugging Face Hub, `hf.rs`). All but Azure are read through the HTTP file; any other `scheme://` is refused by name, never
//! taken for a local path. Outputs may be `s3://`, `az://`/`abfs(s)://` and `gs://` URLs
//! ([`create_upload`]; `sink.rs` uploads them); `hf://` is read only.

use crate::error::{Error, ErrorKind, Result};
use std::path::Path;

/// A URL scheme the byte layer reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlScheme {
    /// `http://` or `https://`: read as given, by range requests where the server answers
    /// them.
    Http,
    /// `s3://` or `s3a://`: an S3 (or S3-compatible) object.
    S3,
    /// `gs://` or `gcs://`: a Google Cloud Storage object.
    Gs,
    /// `az://`, `abfs://` or `abfss://`: an Azure Blob Storage object.
    Az,
    /// `hf://`: a file in a Hugging Face Hub repository (read only).
    Hf,
}

/// The scheme of `scheme://…`, when it could be one (letters, digits, `+-.`), as written.
pub fn scheme_name(location: &str) -> Option<&str> {
    let (scheme, _) = location.split_once("://")?;
    let plausible = !scheme.is_empty()
        && scheme.len() <= 16
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.');
    plausible.then_some(scheme)
}

/// The scheme of a URL the byte layer reads; `None` for a path or another scheme.
pub fn url_scheme(location: &str) -> Option<UrlScheme> {
    match scheme_name(location)?.to_ascii_lowercase().as_str() {
        "http" | "https" => Some(UrlScheme::Http),
        "s3" | "s3a" => Some(UrlScheme::S3),
        "gs" | "gcs" => Some(UrlScheme::Gs),
        "az" | "abfs" | "abfss" => Some(UrlScheme::Az),
        "hf" => Some(UrlScheme::Hf),
        _ => None,
    }
}

/// Whether `s` names a remote file the byte layer reads (`http(s)://`, `s3://`, `s3a://`,
/// `gs://`, `az://`, `abfs(s)://`, `hf://`). Known with or without the `remote` feature, so that a build without it can say
/// why it refuses a URL.
pub fn is_url(s: &str) -> bool {
    url_scheme(s).is_some()
}

/// Whether `s` is an `http(s)://` URL (whose query and fragment are not part of its path).
pub fn is_http_url(s: &str) -> bool {
    url_scheme(s) == Some(UrlScheme::Http)
}

/// Refuses an output this build cannot write: the Hub is read only, HTTP servers are not
/// written to, unknown schemes are refused by name. `s3://`/`s3a://`, `az://`/`abfs(s)://`
/// and `gs://` pass with the `remote` feature (the sink uploads them; outputs of several files are refused where they are made:
/// [`refuse_remote`]).
pub fn refuse_write(out: &str) -> Result<()> {
    let Some(scheme) = scheme_name(out) else {
        return Ok(());
    };
    let why = match url_scheme(out) {
        Some(UrlScheme::Hf) => "hf:// is read only: the Hugging Face Hub is not written to \
             (write a local file and upload it with `hf upload`)"
            .to_owned(),
        Some(UrlScheme::S3 | UrlScheme::Az | UrlScheme::Gs) if cfg!(feature = "remote") => {
            return Ok(())
        }
        Some(UrlScheme::S3 | UrlScheme::Az | UrlScheme::Gs) => {
            format!("writing to {scheme}:// URLs needs the `remote` feature")
        }
        Some(_) => format!("writing to {scheme}:// URLs (write a local file and upload it)"),
        None => {
            format!(
                "unsupported URL scheme \"{scheme}\" (outputs are local paths or s3://, az:// \
                 or gs:// URLs)"
            )
        }
    };
    Err(Error::new(ErrorKind::Unsupported(why)).in_file(Path::new(&crate::bytes::redact_url(out))))
}

/// Refuses an output URL for `what`, an output not written to object stores yet (several
/// files, a lock beside them, an existing file to extend): say so by name rather than write
/// half of it.
pub fn refuse_remote(out: &str, what: &str) -> Result<()> {
    match scheme_name(out) {
        None => Ok(()),
        Some(scheme) => Err(Error::new(ErrorKind::Unsupported(format!(
            "{what} to {scheme}:// URLs is not supported (write it to a local folder and upload \
             it)"
        )))
        .in_file(Path::new(&crate::bytes::redact_url(out)))),
    }
}

/// Opens a URL the byte layer reads, with the store settings `storage` (for every scheme,
/// plain `http(s)` too: its transfer settings), fetching its first `first` bytes.
///
/// # Errors
///
/// - [`ErrorKind::RemoteNotFound`] for a missing object, repository, revision or file;
///   [`ErrorKind::NoSuchBucket`] for a missing bucket or container.
/// - [`ErrorKind::AccessDenied`] when the store or the Hub refuses the credentials (401, 403).
/// - [`ErrorKind::Unreachable`] when the endpoint cannot be reached (refused connection,
///   unknown host, timeout, after the retries `storage` allows).
/// - [`ErrorKind::BadStorageOption`] when a store setting cannot be used.
/// - [`ErrorKind::Http`] for any other failed request or unexpected reply.
#[cfg(feature = "remote")]
pub fn open_url(
    location: &str,
    storage: &crate::bytes::StorageOptions,
    first: u64,
) -> Result<Box<dyn crate::bytes::ReadAt>> {
    use crate::bytes::http::HttpFile;
    let transfer = storage.transfer();
    Ok(match url_scheme(location) {
        Some(UrlScheme::Hf) => Box::new(HttpFile::open_target(
            Box::new(crate::bytes::hf::HfFile::resolve(location, storage)?),
            first,
            &transfer,
        )?),
        Some(UrlScheme::Gs) => Box::new(HttpFile::open_target(
            Box::new(crate::bytes::gcs::GcsObject::resolve(location, storage)?),
            first,
            &transfer,
        )?),
        Some(UrlScheme::S3 | UrlScheme::Az) => {
            let (client, key) = crate::bytes::ObjectClient::for_url(location, storage)?;
            Box::new(client.open(&key, first)?)
        }
        _ => Box::new(HttpFile::open_with(location, first, &transfer)?),
    })
}

/// The whole object at `location`, of `len` bytes (what a listing or a manifest said),
/// written to `out` with as few requests as the store allows: on S3 and Azure one GET (one
/// request is one version; a read pinned by an open would cost a request more), elsewhere an
/// open that fetches the first part, then the rest in parallel parts pinned to it. A length
/// other than `len` is an error.
#[cfg(feature = "remote")]
pub fn fetch_whole(
    location: &str,
    storage: &crate::bytes::StorageOptions,
    len: u64,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    if let Some(UrlScheme::S3 | UrlScheme::Az) = url_scheme(location) {
        let (client, key) = crate::bytes::ObjectClient::for_url(location, storage)?;
        return client.get_into(&key, len, out);
    }
    let f = open_url(location, storage, len.min(storage.transfer().part_size))?;
    if f.len() != len {
        return Err(Error::new(ErrorKind::Http(format!(
            "the object has {} bytes where {len} were expected",
            f.len()
        )))
        .in_file(Path::new(&crate::bytes::redact_url(location))));
    }
    f.copy_to(0..len, out)
}

/// Starts an upload of one object to `location` (`s3://`, `az://`, `abfs(s)://`, `gs://`),
/// with the store settings `storage`: written as a stream, visible only once committed.
#[cfg(feature = "remote")]
pub fn create_upload(
    location: &str,
    storage: &crate::bytes::StorageOptions,
) -> Result<Box<dyn crate::bytes::ObjectUpload>> {
    refuse_write(location)?;
    match url_scheme(location) {
        Some(UrlScheme::S3 | UrlScheme::Az) => {
            let (client, key) = crate::bytes::ObjectClient::for_url(location, storage)?;
            Ok(Box::new(
                client.upload(&key, crate::bytes::PutCondition::Always)?,
            ))
        }
        Some(UrlScheme::Gs) => Ok(Box::new(crate::bytes::gcs::upload::GcsUpload::create(
            location, storage,
        )?)),
        _ => Err(
            Error::new(ErrorKind::Unsupported("uploads to this kind of URL".into()))
                .in_file(Path::new(&crate::bytes::redact_url(location))),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert_eq!(url_scheme("S3A://b/k"), Some(UrlScheme::S3));
        assert_eq!(url_scheme("hf://o/r/f"), Some(UrlScheme::Hf));
        assert_eq!(url_scheme("gs://b/k"), Some(UrlScheme::Gs));
        assert_eq!(
            url_scheme("abfss://c@a.dfs.core.windows.net/k"),
            Some(UrlScheme::Az)
        );
        assert_eq!(url_scheme("ftp://h/k"), None);
        assert_eq!(scheme_name("ftp://h/k"), Some("ftp"));
        assert_eq!(scheme_name("a b://x"), None);
        assert!(!is_url("model.safetensors"));
        let e = refuse_write("hf://o/r/x.safetensors")
            .unwrap_err()
            .to_string();
        assert!(e.contains("read only"), "{e}");
        assert!(refuse_write("ftp://x/y")
            .unwrap_err()
            .to_string()
            .contains("\"ftp\""));
        assert!(refuse_write("out/model.safetensors").is_ok());
        for out in [
            "s3a://b/k",
            "az://c/k",
            "abfss://c@a.dfs.core.windows.net/k",
            "gs://b/k",
        ] {
            assert_eq!(refuse_write(out).is_ok(), cfg!(feature = "remote"), "{out}");
        }
        assert!(refuse_write("https://h/k").is_err());
        let e = refuse_remote("s3://b/m.onnx", "ONNX output").unwrap_err();
        assert!(e.to_string().contains("ONNX output to s3:// URLs"), "{e}");
    }
}
