//! `s3://bucket/key` (and `s3a://`, as Spark writes it) read as an HTTP file: each request
//! goes to a presigned GetObject URL (SigV4 by `rusty-s3`, signed afresh for every request,
//! valid for [`EXPIRY`], so a long read never meets an expired URL), or to the unsigned
//! object URL when there are no credentials. Ranges, version pinning and errors are the
//! HTTP file's; this file adds the store's wording of failures (missing bucket or key,
//! access denied, an endpoint that does not answer), naming `s3://bucket/key`, never the
//! signed URL.
//!
//! How the bucket is addressed and signed for, and the wording of failures, are
//! `s3_bucket.rs`'s, shared with the client that writes (`s3_client.rs`).

use super::http::Target;
use super::s3_bucket::S3Bucket;
use super::storage_options::StorageOptions;
use crate::error::{ErrorKind, Result};
use rusty_s3::S3Action;
use std::time::Duration;

/// How long one signed URL is valid (it is used for one request, made at once).
const EXPIRY: Duration = Duration::from_secs(3600);

/// An object in a bucket, and how to ask for it.
pub(crate) struct S3Object {
    /// The URL as the user wrote it: `s3://bucket/key`.
    name: String,
    store: S3Bucket,
    key: String,
}

impl std::fmt::Debug for S3Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Object({:?})", self.name)
    }
}

impl S3Object {
    /// The object `location` names, with the settings of `opts` and the environment.
    pub(crate) fn resolve(location: &str, opts: &StorageOptions) -> Result<S3Object> {
        let (store, key) = S3Bucket::resolve(location, opts)?;
        Ok(S3Object {
            name: location.to_owned(),
            store,
            key,
        })
    }
}

impl Target for S3Object {
    fn name(&self) -> &str {
        &self.name
    }

    fn url(&self) -> String {
        self.store
            .bucket
            .get_object(self.store.credentials().as_ref(), &self.key)
            .sign(EXPIRY)
            .to_string()
    }

    fn status_error(&self, status: u16, _: Option<&str>, body: &str) -> ErrorKind {
        self.store.status_error(status, &self.key, body)
    }

    fn endpoint(&self) -> Option<&str> {
        Some(&self.store.endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::aws_chain::Found;
    use crate::bytes::aws_config::{AwsSettings, Credentials};
    use crate::bytes::aws_sources::AwsKeys;
    use crate::bytes::s3_bucket::split_s3_url;
    use std::sync::Arc;

    fn object(location: &str, s: AwsSettings) -> Result<S3Object> {
        let (store, key) = S3Bucket::with_settings(location, s)?;
        Ok(S3Object {
            name: location.to_owned(),
            store,
            key,
        })
    }

    fn settings(endpoint: Option<&str>, keys: bool) -> AwsSettings {
        let keys = keys.then(|| AwsKeys {
            id: "AKIDEXAMPLE".into(),
            secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            token: None,
        });
        AwsSettings {
            found: Found {
                credentials: keys.map(|k| Arc::new(Credentials::fixed("storage options", k))),
                tried: vec![],
            },
            region: "eu-west-1".into(),
            endpoint: endpoint.map(str::to_owned),
        }
    }

    #[test]
    fn urls_addressing_and_errors() {
        let o = object("s3://b/dir/m.safetensors", settings(None, false)).unwrap();
        assert_eq!(
            o.url(),
            "https://b.s3.eu-west-1.amazonaws.com/dir/m.safetensors"
        );
        let o = object(
            "s3a://b/a b.gguf",
            settings(Some("http://127.0.0.1:9000"), true),
        )
        .unwrap();
        let u = o.url();
        assert!(u.starts_with("http://127.0.0.1:9000/b/a%20b.gguf?"), "{u}");
        assert!(u.contains("X-Amz-Signature="), "{u}");
        assert!(!format!("{o:?}").contains("wJalr"));
        assert!(split_s3_url("s3://b").is_err());
        assert!(split_s3_url("s3:///k").is_err());
        assert!(split_s3_url("s3://b/").is_err());
        let body = "<Error><Code>NoSuchBucket</Code></Error>";
        assert!(matches!(
            o.status_error(404, None, body),
            ErrorKind::NoSuchBucket(_)
        ));
        assert!(matches!(
            o.status_error(404, None, ""),
            ErrorKind::RemoteNotFound(_)
        ));
        let e = o
            .status_error(403, None, "<Code>SignatureDoesNotMatch</Code>")
            .to_string();
        assert!(
            e.contains("SignatureDoesNotMatch") && !e.contains("wJalr"),
            "{e}"
        );
    }
}
