//! `gs://bucket/object` read as an HTTP file through the Cloud Storage XML API
//! (`ENDPOINT/BUCKET/OBJECT`, ranged GETs, the object's `ETag` pinned as for any HTTP file).
//!
//! Settings, first found wins: the `endpoint_url` storage option, else `STORAGE_EMULATOR_HOST`
//! (the variable Google's client libraries read for an emulator; `host:port` or a URL), else
//! `https://storage.googleapis.com`. The credential is an OAuth 2 access token, sent as
//! `Authorization: Bearer` to the endpoint's host only: the `token` storage option, else
//! `GOOGLE_OAUTH_ACCESS_TOKEN` (`gcloud auth print-access-token` prints one), else one from a
//! credential file (`GOOGLE_APPLICATION_CREDENTIALS` or gcloud's application-default
//! credentials: `gcs_auth.rs`; not read for an emulator named by `STORAGE_EMULATOR_HOST`),
//! else the GCE metadata server's token for the instance's service account when its host is
//! announced (`GCE_METADATA_HOST`), through `object_store`'s provider (cached, renewed four
//! minutes before expiry; it falls back to `GCE_METADATA_IP`, 169.254.169.254 by default).
//! `credential_source=token|service_account|authorized_user|metadata` forces one source.
//! Without any (or with `anon=true`) requests go unauthenticated: public objects, emulators.

use crate::bytes::gcs::auth::{credential_file, TokenSource};
use crate::bytes::http::{other_status, Target};
use crate::bytes::redact_url;
use crate::bytes::storage_options::{StorageKey, StorageOptions};
use crate::bytes::store::error::error_code;
use crate::bytes::url_path::{encode, split_bucket_url};
use crate::error::{ErrorKind, Result};
use std::path::Path;

const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";

/// What authorises requests.
enum Credential {
    Anonymous,
    Token(String),
    /// Tokens from a credential file, fetched through the agent.
    File(TokenSource, ureq::Agent),
    /// The GCE metadata server's tokens (object_store's provider), and where it was asked.
    Metadata(object_store::gcp::GcpCredentialProvider, String),
}

/// The metadata server's tokens for `bucket`, through object_store's instance provider
/// (what its builder uses when no credential file is given), with the transfer's timeouts.
fn metadata(bucket: &str, opts: &StorageOptions) -> Result<Credential> {
    use object_store::gcp::GoogleCloudStorageBuilder;
    crate::bytes::runtime::install_tls();
    let (options, retry) = crate::bytes::store::client::client_settings(&opts.transfer(), true);
    let store = GoogleCloudStorageBuilder::new()
        .with_bucket_name(bucket)
        .with_client_options(options)
        .with_retry(retry)
        .build()
        .map_err(|e| {
            ErrorKind::BadStorageOption(format!(
                "the GCE metadata server: {}",
                crate::bytes::store::error::scrub(&e.to_string())
            ))
        })?;
    let host = std::env::var("GCE_METADATA_HOST")
        .or_else(|_| std::env::var("GCE_METADATA_ROOT"))
        .unwrap_or_else(|_| "metadata.google.internal".to_owned());
    Ok(Credential::Metadata(store.credentials().clone(), host))
}

impl Credential {
    /// The current token (fetched or renewed now if need be).
    fn token(&self) -> Result<Option<String>> {
        Ok(Some(match self {
            Credential::Anonymous => return Ok(None),
            Credential::Token(t) => t.clone(),
            Credential::File(source, agent) => source.token(agent)?,
            Credential::Metadata(provider, host) => {
                crate::bytes::runtime::block_on(provider.get_credential())
                    .map_err(|e| {
                        ErrorKind::AccessDenied(format!(
                            "the GCE metadata server at {host} (metadata) gave no token: {}",
                            crate::bytes::store::error::scrub(&e.to_string())
                        ))
                    })?
                    .bearer
                    .clone()
            }
        }))
    }
}

/// An object in a Cloud Storage bucket, and how to ask for it.
pub(crate) struct GcsObject {
    name: String,
    bucket: String,
    object: String,
    url: String,
    /// The endpoint as given (requests go to it), and without credentials (errors name it).
    base: String,
    endpoint: String,
    /// Shared by the objects of one client (`sibling`): a credential file's token is cached.
    credential: std::sync::Arc<Credential>,
}

impl std::fmt::Debug for GcsObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GcsObject({:?})", self.name)
    }
}

impl GcsObject {
    /// The object `location` names, with the settings of `opts` and the environment.
    pub(crate) fn resolve(location: &str, opts: &StorageOptions) -> Result<GcsObject> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        GcsObject::with_env(location, opts, &env)
    }

    fn with_env(
        location: &str,
        opts: &StorageOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<GcsObject> {
        let (bucket, object) = split_bucket_url(location)?;
        let emulator = env("STORAGE_EMULATOR_HOST").map(|h| match h.contains("://") {
            true => h,
            false => format!("http://{h}"),
        });
        let endpoint = opts
            .get(StorageKey::EndpointUrl)
            .map(str::to_owned)
            .or_else(|| emulator.clone())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let token = opts
            .get(StorageKey::Token)
            .map(str::to_owned)
            .or_else(|| env("GOOGLE_OAUTH_ACCESS_TOKEN"));
        let forced = opts
            .get(StorageKey::CredentialSource)
            .map(str::trim)
            .filter(|f| !f.is_empty());
        let file = match (&token, &emulator, forced) {
            (_, _, Some("service_account" | "authorized_user")) => credential_file(env),
            (None, None, None) => credential_file(env),
            _ => None,
        };
        let missing = |what: &str, needs: &str| {
            ErrorKind::BadStorageOption(format!(
                "credential_source={what} is not configured: it needs {needs}"
            ))
        };
        let load = |path: &std::path::Path| -> Result<Credential> {
            let source = TokenSource::load(path).map_err(|e| e.in_file(Path::new(location)))?;
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(opts.transfer().timeout))
                .timeout_connect(Some(opts.transfer().connect_timeout))
                .build()
                .into();
            // The first token now: a refused credential fails the open, naming the file.
            source
                .token(&agent)
                .map_err(|e| e.in_file(Path::new(location)))?;
            Ok(Credential::File(source, agent))
        };
        let announced = env("GCE_METADATA_HOST").is_some() && emulator.is_none();
        let credential = match (opts.anon(), forced) {
            (true, _) => Credential::Anonymous,
            (false, None) => match (token, file) {
                (Some(t), _) => Credential::Token(t),
                (None, Some(path)) => load(&path)?,
                (None, None) if announced => metadata(bucket, opts)?,
                (None, None) => Credential::Anonymous,
            },
            (false, Some("token")) => Credential::Token(token.ok_or_else(|| {
                missing(
                    "token",
                    "the token storage option or GOOGLE_OAUTH_ACCESS_TOKEN",
                )
            })?),
            (false, Some("service_account" | "authorized_user")) => match file {
                Some(path) => load(&path)?,
                None => {
                    return Err(missing(
                        forced.unwrap_or_default(),
                        "GOOGLE_APPLICATION_CREDENTIALS or gcloud's application-default \
                         credentials",
                    )
                    .into())
                }
            },
            (false, Some("metadata")) => metadata(bucket, opts)?,
            (false, Some(other)) => {
                return Err(ErrorKind::BadStorageOption(format!(
                    "credential_source \"{other}\" is not a Google Cloud source (token, \
                     service_account, authorized_user, metadata)"
                ))
                .into())
            }
        };
        if let Credential::Metadata(..) = credential {
            // The first token now: a metadata server that gives none fails the open.
            credential
                .token()
                .map_err(|e| e.in_file(Path::new(location)))?;
        }
        Ok(GcsObject {
            name: location.to_owned(),
            url: format!(
                "{}/{}/{}",
                endpoint.trim_end_matches('/'),
                encode(bucket, false),
                encode(object, true)
            ),
            bucket: bucket.to_owned(),
            object: object.to_owned(),
            base: endpoint.trim_end_matches('/').to_owned(),
            endpoint: redact_url(&endpoint),
            credential: std::sync::Arc::new(credential),
        })
    }
}

impl GcsObject {
    /// The bucket and the object's name in it.
    pub(crate) fn bucket_and_object(&self) -> (&str, &str) {
        (&self.bucket, &self.object)
    }

    /// The endpoint requests go to (`https://storage.googleapis.com`, an emulator's).
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// Another object of the same bucket and credential, named `name` in errors.
    pub(crate) fn sibling(&self, name: String, object: &str) -> GcsObject {
        GcsObject {
            name,
            url: format!(
                "{}/{}/{}",
                self.base,
                encode(&self.bucket, false),
                encode(object, true)
            ),
            bucket: self.bucket.clone(),
            object: object.to_owned(),
            base: self.base.clone(),
            endpoint: self.endpoint.clone(),
            credential: self.credential.clone(),
        }
    }
}

impl Target for GcsObject {
    fn name(&self) -> &str {
        &self.name
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    fn authorization(&self) -> Option<String> {
        // A token that cannot be renewed: the request goes without, and its refusal says
        // which credential was in use.
        let token = self.credential.token().ok()??;
        Some(format!("Bearer {token}"))
    }

    fn status_error(&self, status: u16, _: Option<&str>, body: &str) -> ErrorKind {
        let (bucket, object) = (&self.bucket, &self.object);
        match (status, error_code(body).unwrap_or_default()) {
            (_, "NoSuchBucket") => ErrorKind::NoSuchBucket(bucket.clone()),
            (_, "NoSuchKey") | (404, _) => {
                ErrorKind::RemoteNotFound(format!("no object '{object}' in bucket '{bucket}'"))
            }
            (401 | 403, code) => {
                let code = match code {
                    "" => format!("HTTP {status}"),
                    c => c.to_owned(),
                };
                let why = match &*self.credential {
                    Credential::Anonymous => "no token was sent (anonymous request): set \
                        GOOGLE_APPLICATION_CREDENTIALS, the token storage option or \
                        GOOGLE_OAUTH_ACCESS_TOKEN (`gcloud auth print-access-token`)"
                        .to_owned(),
                    Credential::Token(_) => {
                        "the access token was refused (expired, or no access to the bucket)"
                            .to_owned()
                    }
                    Credential::File(source, _) => {
                        format!("{} has no access to the bucket", source.who())
                    }
                    Credential::Metadata(_, host) => format!(
                        "the instance's service account (GCE metadata server at {host}) has \
                         no access to the bucket"
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

    #[test]
    fn urls_settings_and_errors() {
        let none = |_: &str| None;
        let o = GcsObject::with_env("gs://b/dir/a b.gguf", &StorageOptions::new(), &none).unwrap();
        assert_eq!(o.url(), "https://storage.googleapis.com/b/dir/a%20b.gguf");
        assert_eq!(o.authorization(), None);
        let env = |k: &str| match k {
            "STORAGE_EMULATOR_HOST" => Some("127.0.0.1:9023".to_owned()),
            "GOOGLE_OAUTH_ACCESS_TOKEN" => Some("ya29.secret".to_owned()),
            _ => None,
        };
        let o = GcsObject::with_env("gs://b/k", &StorageOptions::new(), &env).unwrap();
        assert_eq!(o.url(), "http://127.0.0.1:9023/b/k");
        assert_eq!(o.authorization().as_deref(), Some("Bearer ya29.secret"));
        assert!(!format!("{o:?}").contains("ya29"));
        let mut anon = StorageOptions::new();
        anon.set("anon", "true").unwrap();
        assert_eq!(
            GcsObject::with_env("gs://b/k", &anon, &env)
                .unwrap()
                .authorization(),
            None
        );
        assert!(GcsObject::with_env("gs://b", &anon, &env).is_err());
        let e = o.status_error(404, None, "").to_string();
        assert!(e.contains("no object 'k' in bucket 'b'"), "{e}");
        let e = o
            .status_error(404, None, "<Error><Code>NoSuchBucket</Code></Error>")
            .to_string();
        assert!(e.contains("'b'"), "{e}");
        let e = o.status_error(403, None, "").to_string();
        assert!(e.contains("HTTP 403") && e.contains("refused"), "{e}");
    }
}
