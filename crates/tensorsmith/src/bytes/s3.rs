//! `s3://bucket/key` (and `s3a://`, as Spark writes it) read as an HTTP file: each request
//! goes to a presigned GetObject URL (SigV4 by `rusty-s3`, signed afresh for every request,
//! valid for [`EXPIRY`], so a long read never meets an expired URL), or to the unsigned
//! object URL when there are no credentials. Ranges, version pinning and errors are the
//! HTTP file's; this file adds the store's wording of failures (missing bucket or key,
//! access denied, an endpoint that does not answer), naming `s3://bucket/key`, never the
//! signed URL.
//!
//! Addressing: path-style (`ENDPOINT/bucket/key`) for a custom endpoint (MinIO, moto, R2,
//! Ceph), virtual-hosted (`https://bucket.s3.REGION.amazonaws.com/key`) on AWS, path-style
//! there too for bucket names a host name cannot hold (dots).

use super::aws_config::{self, AwsSettings};
use super::http::{other_status, Target};
use super::redact_url;
use super::storage_options::StorageOptions;
use crate::error::{Error, ErrorKind, Result};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use std::path::Path;
use std::time::Duration;

/// How long one signed URL is valid (it is used for one request, made at once).
const EXPIRY: Duration = Duration::from_secs(3600);

/// An object in a bucket, and how to ask for it.
pub(crate) struct S3Object {
    /// The URL as the user wrote it: `s3://bucket/key`.
    name: String,
    bucket: Bucket,
    key: String,
    credentials: Option<Credentials>,
    /// The endpoint, for errors.
    endpoint: String,
    region: String,
}

impl std::fmt::Debug for S3Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Object({:?})", self.name)
    }
}

/// `(bucket, key)` of `s3://bucket/key` or `s3a://bucket/key`.
pub(crate) fn split_s3_url(location: &str) -> Result<(&str, &str)> {
    super::url_path::split_bucket_url(location)
}

impl S3Object {
    /// The object `location` names, with the settings of `opts` and the environment.
    pub(crate) fn resolve(location: &str, opts: &StorageOptions) -> Result<S3Object> {
        let settings = aws_config::resolve(opts, &|k| std::env::var(k).ok())
            .map_err(|e| e.in_file(Path::new(location)))?;
        S3Object::with_settings(location, settings)
    }

    fn with_settings(location: &str, s: AwsSettings) -> Result<S3Object> {
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
        let b = Bucket::new(url, style, bucket.to_owned(), s.region.clone())
            .map_err(|e| bad(format!("endpoint {shown} with bucket '{bucket}': {e:?}")))?;
        let credentials = s.keys.map(|k| match k.token {
            Some(t) => Credentials::new_with_token(k.id, k.secret, t),
            None => Credentials::new(k.id, k.secret),
        });
        Ok(S3Object {
            name: location.to_owned(),
            bucket: b,
            key: key.to_owned(),
            credentials,
            endpoint: shown,
            region: s.region,
        })
    }
}

/// The `<Code>` of an S3 error body.
pub(crate) fn error_code(body: &str) -> Option<&str> {
    let start = body.find("<Code>")? + "<Code>".len();
    let len = body[start..].find("</Code>")?;
    Some(body[start..start + len].trim())
}

impl Target for S3Object {
    fn name(&self) -> &str {
        &self.name
    }

    fn url(&self) -> String {
        self.bucket
            .get_object(self.credentials.as_ref(), &self.key)
            .sign(EXPIRY)
            .to_string()
    }

    fn status_error(&self, status: u16, _: Option<&str>, body: &str) -> ErrorKind {
        let bucket = self.bucket.name();
        let code = error_code(body).unwrap_or_default();
        match (status, code) {
            (_, "NoSuchBucket") => ErrorKind::NoSuchBucket(bucket.to_owned()),
            (_, "NoSuchKey") | (404, _) => {
                ErrorKind::RemoteNotFound(format!("no object '{}' in bucket '{bucket}'", self.key))
            }
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
                let why = match &self.credentials {
                    None => "no credentials were given (anonymous request): set AWS_ACCESS_KEY_ID \
                             and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or storage options key and secret"
                        .to_owned(),
                    Some(c) => format!(
                        "the store refused access key id {} (check the secret, the profile, \
                         or the bucket's policy)",
                        c.key()
                    ),
                };
                ErrorKind::AccessDenied(format!("{code}: {why}"))
            }
            (s, c) => other_status(s, c),
        }
    }

    fn endpoint(&self) -> Option<&str> {
        Some(&self.endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::aws_config::AwsKeys;

    fn settings(endpoint: Option<&str>, keys: bool) -> AwsSettings {
        AwsSettings {
            keys: keys.then(|| AwsKeys {
                id: "AKIDEXAMPLE".into(),
                secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
                token: None,
            }),
            region: "eu-west-1".into(),
            endpoint: endpoint.map(str::to_owned),
        }
    }

    #[test]
    fn urls_addressing_and_errors() {
        let o = S3Object::with_settings("s3://b/dir/m.safetensors", settings(None, false)).unwrap();
        assert_eq!(
            o.url(),
            "https://b.s3.eu-west-1.amazonaws.com/dir/m.safetensors"
        );
        let o = S3Object::with_settings(
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
