//! S3's wording of failures, naming `s3://…` and never a secret: missing bucket or key,
//! access denied (the key id and the source it came from, why its refresh failed, or the
//! sources tried when there were none), a bucket in another region, an endpoint that does not
//! answer; for object_store's errors (`StoreWords`) and ListMultipartUploads' statuses.

use crate::bytes::http::other_status;
use crate::bytes::s3::config::Credentials;
use crate::bytes::store::error::classify;
use crate::bytes::store::file::StoreWords;
use crate::error::ErrorKind;
use std::sync::Arc;

/// S3's wording of a failure on a key of one bucket.
pub(crate) struct S3Words {
    pub bucket: String,
    pub region: String,
    /// The endpoint, without credentials.
    pub endpoint: String,
    pub keys: Option<Arc<Credentials>>,
    /// The sources the chain tried, for the error of a refused unsigned request.
    pub tried: String,
}

impl S3Words {
    /// The error of status `status` with S3's error code `code` about `key`.
    pub(crate) fn status_error(&self, status: u16, code: &str, key: &str) -> ErrorKind {
        let bucket = &self.bucket;
        match (status, code) {
            (_, "NoSuchBucket") => ErrorKind::NoSuchBucket(bucket.to_owned()),
            (_, "NoSuchKey") | (404, _) => {
                ErrorKind::RemoteNotFound(format!("no object '{key}' in bucket '{bucket}'"))
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

impl StoreWords for S3Words {
    fn missing_bucket(&self) -> ErrorKind {
        ErrorKind::NoSuchBucket(self.bucket.clone())
    }

    fn error(&self, e: &object_store::Error, key: &str, _write: bool) -> ErrorKind {
        let f = classify(e);
        if f.unreachable && f.status.is_none() {
            return ErrorKind::Unreachable(crate::bytes::store::error::unreachable(
                &self.endpoint,
                &f,
            ));
        }
        let status = match (f.status, e) {
            (Some(s), _) => s,
            (None, object_store::Error::NotFound { .. }) => 404,
            (None, _) => return ErrorKind::Http(f.text),
        };
        self.status_error(status, &f.code, key)
    }
}
