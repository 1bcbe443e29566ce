//! The multipart uploads a killed writer left in an S3 bucket: listed (ListMultipartUploads,
//! every page) and aborted, for `dataset clean`. Listing is written here because object_store
//! has no call for it (its `MultipartStore` creates, completes and aborts only): one presigned
//! GET (`aws_sigv4.rs`) sent with `ureq`, the XML read by `s3_xml.rs`. The abort is
//! object_store's.

use crate::bytes::http::{is_unreachable, transport_message};
use crate::bytes::runtime::block_on;
use crate::bytes::s3::config::Credentials;
use crate::bytes::s3::sigv4::{presign_get, SigningKeys};
use crate::bytes::s3::words::S3Words;
use crate::bytes::s3::xml;
use crate::bytes::store::client::StoreClient;
use crate::bytes::store::file::StoreWords;
use crate::error::{Error, ErrorKind, Result};
use object_store::aws::AmazonS3;
use object_store::multipart::MultipartStore;
use std::path::Path;
use std::sync::Arc;

/// A multipart upload that was started and neither completed nor aborted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadMeta {
    /// The key of the object being uploaded.
    pub key: String,
    /// The id S3 gave the upload, needed to abort it.
    pub upload_id: String,
    /// When it was started (ISO 8601, as the store sends it).
    pub initiated: String,
}

/// What listing and aborting the uploads of one bucket need.
pub(crate) struct Uploads {
    pub store: Arc<AmazonS3>,
    /// `ENDPOINT/BUCKET`, path-style.
    pub bucket_url: String,
    pub region: String,
    pub keys: Option<Arc<Credentials>>,
    pub words: Arc<S3Words>,
    pub transfer: crate::bytes::Transfer,
    /// `s3://BUCKET`: how errors name keys.
    pub base: String,
}

impl Uploads {
    fn err(&self, prefix: &str, kind: ErrorKind) -> Error {
        Error::new(kind).in_file(Path::new(&format!("{}/{prefix}", self.base)))
    }

    /// One page of the uploads under `prefix`, after `markers`.
    fn page(&self, prefix: &str, markers: &Option<(String, String)>) -> Result<String> {
        let url = url::Url::parse(&self.bucket_url)
            .map_err(|e| self.err(prefix, ErrorKind::BadStorageOption(e.to_string())))?;
        let mut params = vec![("uploads", ""), ("prefix", prefix)];
        if let Some((k, u)) = markers {
            params.push(("key-marker", k));
            params.push(("upload-id-marker", u));
        }
        let signed = match &self.keys {
            Some(c) => {
                let k = c.current();
                let keys = SigningKeys {
                    id: &k.id,
                    secret: &k.secret,
                    token: k.token.as_deref(),
                };
                let now = jiff::Timestamp::now();
                presign_get(&url, &params, &keys, "s3", &self.region, now, 300)
            }
            None => {
                let mut u = url.clone();
                u.query_pairs_mut().extend_pairs(&params);
                u.to_string()
            }
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.transfer.timeout))
            .timeout_connect(Some(self.transfer.connect_timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let mut reply = agent.get(&signed).call().map_err(|e| {
            let kind = match is_unreachable(&e) {
                true => ErrorKind::Unreachable(format!(
                    "{} ({})",
                    crate::bytes::redact_url(&self.bucket_url),
                    transport_message(&e)
                )),
                false => ErrorKind::Http(transport_message(&e)),
            };
            self.err(prefix, kind)
        })?;
        let status = reply.status().as_u16();
        let body = reply
            .body_mut()
            .read_to_string()
            .map_err(|e| self.err(prefix, ErrorKind::Http(transport_message(&e))))?;
        if status != 200 {
            let code = crate::bytes::store::error::error_code(&body).unwrap_or_default();
            return Err(self.err(prefix, self.words.status_error(status, code, prefix)));
        }
        Ok(body)
    }

    /// The multipart uploads started under `prefix` and neither completed nor aborted.
    pub(crate) fn list(&self, prefix: &str) -> Result<Vec<UploadMeta>> {
        let mut out = Vec::new();
        let mut markers: Option<(String, String)> = None;
        loop {
            let xml = self.page(prefix, &markers)?;
            for u in xml::elements(&xml, "Upload") {
                let field = |t| xml::text(u, t).unwrap_or_default();
                out.push(UploadMeta {
                    key: field("Key"),
                    upload_id: field("UploadId"),
                    initiated: field("Initiated"),
                });
            }
            markers = match xml::text(&xml, "IsTruncated").as_deref() {
                Some("true") => {
                    xml::text(&xml, "NextKeyMarker").zip(xml::text(&xml, "NextUploadIdMarker"))
                }
                _ => None,
            };
            if markers.is_none() {
                return Ok(out);
            }
        }
    }

    /// Aborts the upload `id` of `key`; one already completed or aborted is no error.
    pub(crate) fn abort(&self, client: &StoreClient, key: &str, id: &str) -> Result<()> {
        let path = crate::bytes::store::key::store_path(key)?;
        match block_on(self.store.abort_multipart(&path, &id.to_owned())) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => {
                let f = crate::bytes::store::error::classify(&e);
                if f.code == "NoSuchUpload" {
                    return Ok(());
                }
                Err(Error::new(self.words.error(&e, key, true))
                    .in_file(Path::new(&client.key_url(key))))
            }
        }
    }
}
