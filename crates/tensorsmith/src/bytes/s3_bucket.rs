//! One S3 bucket and how to address and sign requests to it, shared by the reader (`s3.rs`)
//! and the client that writes (`s3_client.rs`): an `s3://`/`s3a://` URL split into bucket
//! and key, the call's settings resolved (`aws_config.rs`) into a `rusty-s3` bucket, the
//! credentials and the endpoint; and the store's wording of failed statuses (missing bucket
//! or key, access denied, wrong region), naming `s3://bucket/key`, never a signature.
//!
//! Addressing: path-style (`ENDPOINT/bucket/key`) for a custom endpoint (MinIO, moto, R2,
//! Ceph), virtual-hosted (`https://bucket.s3.REGION.amazonaws.com/key`) on AWS, path-style
//! there too for bucket names a host name cannot hold (dots).

use super::aws_config::{self, AwsSettings, Credentials as Keys};
use super::http::other_status;
use super::redact_url;
use super::storage_options::StorageOptions;
use crate::error::{Error, ErrorKind, Result};
use rusty_s3::{Bucket, Credentials, UrlStyle};
use std::path::Path;
use std::sync::Arc;

/// A bucket, its credentials and endpoint: what every request to it needs.
#[derive(Clone)]
pub(crate) struct S3Bucket {
    pub bucket: Bucket,
    /// The chain's keys, refreshed as they near expiry; `None`: unsigned requests.
    keys: Option<Arc<Keys>>,
    /// The sources the chain tried, for the error of a refused unsigned request.
    tried: String,
    /// The endpoint, without credentials, for errors.
    pub endpoint: String,
    pub region: String,
}

impl std::fmt::Debug for S3Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Bucket({:?} at {})", self.bucket.name(), self.endpoint)
    }
}

/// `(bucket, key)` of `s3://bucket/key` or `s3a://bucket/key`.
pub(crate) fn split_s3_url(location: &str) -> Result<(&str, &str)> {
    super::url_path::split_bucket_url(location)
}

impl S3Bucket {
    /// The bucket of `location` and its key, with the settings of `opts` and the environment.
    pub(crate) fn resolve(location: &str, opts: &StorageOptions) -> Result<(S3Bucket, String)> {
        let settings = aws_config::resolve(opts, &|k| std::env::var(k).ok(), true)
            .map_err(|e| e.in_file(Path::new(location)))?;
        S3Bucket::with_settings(location, settings)
    }

    pub(crate) fn with_settings(location: &str, s: AwsSettings) -> Result<(S3Bucket, String)> {
        let (bucket, key) = split_s3_url(location)?;
        let bad =
            |msg: String| Error::new(ErrorKind::BadStorageOption(msg)).in_file(Path::new(location));
        let (endpoint, style) = match &s.endpoint {
            Some(e) => (e.clone(), UrlStyle::Path),
            None if bucket.contains('.') => (
                format!("https://s3.{}.amazonaws.com", s.region),
                UrlStyle::Path,
            ),
            None => (
                format!("https://s3.{}.amazonaws.com", s.region),
                UrlStyle::VirtualHost,
            ),
        };
        let shown = redact_url(&endpoint);
        let url = url::Url::parse(&endpoint)
            .map_err(|e| bad(format!("endpoint {shown} is not a URL: {e}")))?;
        let b = Bucket::new(url, style, bucket.to_owned(), s.region.clone()).map_err(|e| {
            let why = match e {
                rusty_s3::BucketError::UnsupportedScheme => {
                    "an endpoint is an http:// or https:// URL".to_owned()
                }
                rusty_s3::BucketError::MissingHost => "the URL names no host".to_owned(),
                other => other.to_string(),
            };
            bad(format!("endpoint {shown} with bucket '{bucket}': {why}"))
        })?;
        let store = S3Bucket {
            bucket: b,
            keys: s.found.credentials.clone(),
            tried: s.found.tried_sentence(),
            endpoint: shown,
            region: s.region,
        };
        Ok((store, key.to_owned()))
    }

    /// The keys to sign the next request with (refreshed when due); `None`: unsigned.
    pub(crate) fn credentials(&self) -> Option<Credentials> {
        self.keys.as_ref().map(|c| {
            let k = c.current();
            match k.token {
                Some(t) => Credentials::new_with_token(k.id, k.secret, t),
                None => Credentials::new(k.id, k.secret),
            }
        })
    }

    pub(crate) fn name(&self) -> &str {
        self.bucket.name()
    }

    /// The error for a response of status `status` to a request about `key`, given the
    /// start of its body.
    pub(crate) fn status_error(&self, status: u16, key: &str, body: &str) -> ErrorKind {
        let bucket = self.bucket.name();
        let code = error_code(body).unwrap_or_default();
        match (status, code) {
            (_, "NoSuchBucket") => ErrorKind::NoSuchBucket(bucket.to_owned()),
            (_, "NoSuchKey") | (404, _) => {
                ErrorKind::RemoteNotFound(format!("no object '{key}' in bucket '{bucket}'"))
            }
            (_, "NoSuchUpload") => ErrorKind::RemoteNotFound(format!(
                "no multipart upload of '{key}' in bucket '{bucket}' (completed or aborted)"
            )),
            (
                _,
                "PermanentRedirect"
                | "AuthorizationHeaderMalformed"
                | "IllegalLocationConstraintException",
            )
            | (301, _) => ErrorKind::Http(format!(
                "bucket '{bucket}' is not in region {} (set AWS_REGION or the region storage \
                 option)",
                self.region
            )),
            (401 | 403, _)
            | (_, "AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch") => {
                let code = if code.is_empty() { "403" } else { code };
                let why = match &self.keys {
                    None => format!(
                        "no credentials were found (anonymous request): set AWS_ACCESS_KEY_ID \
                         and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or storage options key and \
                         secret{}",
                        self.tried
                    ),
                    Some(c) => match c.refresh_failed() {
                        Some(why) => why,
                        None => format!(
                            "the store refused access key id {} from {} (check the secret, \
                             the profile, or the bucket's policy)",
                            c.key_id(),
                            c.source
                        ),
                    },
                };
                ErrorKind::AccessDenied(format!("{code}: {why}"))
            }
            (s, c) => other_status(s, c),
        }
    }
}

/// The `<Code>` of an S3 error body.
pub(crate) fn error_code(body: &str) -> Option<&str> {
    let start = body.find("<Code>")? + "<Code>".len();
    let len = body[start..].find("</Code>")?;
    Some(body[start..start + len].trim())
}
