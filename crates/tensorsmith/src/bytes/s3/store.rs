//! An S3 bucket (`s3://`, `s3a://`) as an `object_store` store (`AmazonS3`), from the settings
//! of one call (`aws_config.rs`: region, endpoint, and what the credential chain found), its
//! failures worded by `s3_words.rs`.
//!
//! The keys come from our chain (`aws_chain.rs`) through [`ChainKeys`], object_store's
//! `CredentialProvider`: the crate's builder picks one source from the environment and knows
//! neither `~/.aws` profiles with `role_arn` or `credential_process` nor reports what it tried.
//! No keys anywhere: unsigned requests (`skip_signature`), for public buckets.
//!
//! Addressing: path-style (`ENDPOINT/bucket/key`) for a custom endpoint (MinIO, moto, R2,
//! Ceph) and for bucket names a host name cannot hold (dots); virtual-hosted on AWS.
//! Conditional writes: `If-None-Match: *` and `If-Match` (object_store's `ETagMatch`); a
//! create-if-absent copy (`StoreUpload` of more than one part) is S3's conditional multipart
//! copy.

use crate::bytes::redact_url;
use crate::bytes::runtime::PerProcess;
use crate::bytes::s3::config::{self, AwsSettings, Credentials};
use crate::bytes::s3::uploads::Uploads;
use crate::bytes::s3::words::S3Words;
use crate::bytes::storage_options::{StorageOptions, Transfer};
use crate::bytes::store::client::{client_settings, StoreClient};
use crate::error::{Error, ErrorKind, Result};
use object_store::aws::{AmazonS3, AmazonS3Builder, AwsCredential, S3CopyIfNotExists};
use object_store::CredentialProvider;
use std::path::Path;
use std::sync::Arc;

/// The chain's keys as object_store asks for them before each request: refreshed ahead of
/// expiry by [`Credentials::current`] (a blocking fetch, so off the runtime's workers).
#[derive(Debug)]
struct ChainKeys(Arc<Credentials>);

#[async_trait::async_trait]
impl CredentialProvider for ChainKeys {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let c = Arc::clone(&self.0);
        let k = tokio::task::spawn_blocking(move || c.current())
            .await
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        Ok(Arc::new(AwsCredential {
            key_id: k.id,
            secret_key: k.secret,
            token: k.token,
        }))
    }
}

/// Where `bucket` is served: the endpoint and whether it is addressed path-style.
fn endpoint_of(bucket: &str, s: &AwsSettings) -> (String, bool) {
    match &s.endpoint {
        Some(e) => (e.trim_end_matches('/').to_owned(), false),
        None if bucket.contains('.') => (format!("https://s3.{}.amazonaws.com", s.region), false),
        None => (format!("https://s3.{}.amazonaws.com", s.region), true),
    }
}

/// The builder of `bucket` with the settings `s`.
fn builder(bucket: &str, s: &AwsSettings, t: &Transfer) -> AmazonS3Builder {
    let (endpoint, virtual_hosted) = endpoint_of(bucket, s);
    let (options, retry) = client_settings(t, endpoint.starts_with("http:"));
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(&s.region)
        .with_client_options(options)
        .with_retry(retry)
        .with_copy_if_not_exists(S3CopyIfNotExists::Multipart)
        // Bodies are not hashed into the signature (`UNSIGNED-PAYLOAD`, as boto3 sends over
        // HTTPS and as our presigned requests did): TLS guards them, and hashing every part
        // cost a fifth of an upload's time (4 GiB to s3s-fs: 40.3 s against 32.2 s).
        .with_unsigned_payload(true);
    b = match virtual_hosted {
        // object_store's own endpoint for the region, virtual-hosted.
        true => b.with_virtual_hosted_style_request(true),
        false => b.with_endpoint(endpoint),
    };
    match &s.found.credentials {
        Some(c) => b.with_credentials(Arc::new(ChainKeys(Arc::clone(c)))),
        None => b.with_skip_signature(true),
    }
}

/// The stores of this process, by bucket and settings.
static STORES: PerProcess<AmazonS3> = PerProcess::new();

fn cached_store(
    bucket: &str,
    s: &AwsSettings,
    t: &Transfer,
    location: &str,
) -> Result<Arc<AmazonS3>> {
    // The chain's answer is one `Arc` per set of inputs (aws_config caches it): its address
    // tells one source of keys from another without holding a secret here.
    let keys = s.found.credentials.as_ref().map(Arc::as_ptr);
    let key = format!(
        "{bucket}\n{}\n{:?}\n{keys:?}\n{:?}\n{} {} {:?} {:?}",
        s.region,
        s.endpoint,
        t.max_concurrency,
        t.part_size,
        t.max_attempts,
        t.timeout,
        t.connect_timeout
    );
    STORES.get_or_make(key, || {
        builder(bucket, s, t).build().map_err(|e| {
            Error::new(ErrorKind::BadStorageOption(format!(
                "S3 settings: {}",
                crate::bytes::store::error::scrub(&e.to_string())
            )))
            .in_file(Path::new(location))
        })
    })
}

/// The client of the bucket `location` (`s3://BUCKET/KEY`, `s3a://…`) names, with the
/// settings of `opts` and the environment, the key, and what listing the bucket's unfinished
/// uploads needs.
pub(crate) fn client_for(
    location: &str,
    opts: &StorageOptions,
) -> Result<(StoreClient, String, Uploads)> {
    let (bucket, key) = crate::bytes::url_path::split_bucket_url(location)?;
    let s = config::resolve(opts, &|k| std::env::var(k).ok(), true)
        .map_err(|e| e.in_file(Path::new(location)))?;
    if let Some(e) = &s.endpoint {
        if url::Url::parse(e).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
            return Err(Error::new(ErrorKind::BadStorageOption(format!(
                "endpoint {} is not an http:// or https:// URL",
                redact_url(e)
            )))
            .in_file(Path::new(location)));
        }
    }
    let transfer = opts.transfer();
    let store = cached_store(bucket, &s, &transfer, location)?;
    let endpoint = endpoint_of(bucket, &s).0;
    let words = Arc::new(S3Words {
        bucket: bucket.to_owned(),
        region: s.region.clone(),
        endpoint: redact_url(&endpoint),
        keys: s.found.credentials.clone(),
        tried: s.found.tried_sentence(),
    });
    // Errors name `s3://` whichever alias was given (`s3a://`).
    let base = format!("s3://{bucket}");
    let uploads = Uploads {
        store: Arc::clone(&store),
        bucket_url: format!("{endpoint}/{bucket}"),
        region: s.region.clone(),
        keys: s.found.credentials.clone(),
        words: Arc::clone(&words),
        transfer,
        base: base.clone(),
    };
    let client = StoreClient {
        store,
        base,
        words,
        transfer,
    };
    Ok((client, key.to_owned(), uploads))
}
