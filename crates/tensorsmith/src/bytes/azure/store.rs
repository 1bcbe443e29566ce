//! An Azure Blob container as an `object_store` store (`MicrosoftAzure`), from the settings
//! of one call (`azure_config.rs`: account, endpoint, the credential source), and Azure's
//! failures worded as before: container or blob not found, the credential refused (naming
//! the source used), an endpoint unreachable. The store retries per the transfer settings
//! (`max_attempts`, `timeout`, `connect_timeout`: `store_client::client_settings`). Plain-HTTP endpoints (Azurite, a local
//! Entra stand-in) are allowed when named.

use crate::bytes::azure::config::{self, split_azure_url, AzureAuth, AzureSettings};
use crate::bytes::runtime::PerProcess;
use crate::bytes::storage_options::{StorageOptions, Transfer};
use crate::bytes::store::client::{client_settings, StoreClient};
use crate::bytes::store::error::classify;
use crate::bytes::store::file::StoreWords;
use crate::error::{Error, ErrorKind, Result};
use object_store::azure::{AzureConfigKey, MicrosoftAzure, MicrosoftAzureBuilder};
use std::path::Path;
use std::sync::Arc;

/// Azure's wording of a failure on a blob of one container.
struct AzureWords {
    account: String,
    container: String,
    endpoint: String,
    auth: AzureAuth,
}

impl StoreWords for AzureWords {
    fn missing_bucket(&self) -> ErrorKind {
        ErrorKind::RemoteNotFound(format!(
            "no container '{}' in storage account '{}'",
            self.container, self.account
        ))
    }

    fn error(&self, e: &object_store::Error, blob: &str, write: bool) -> ErrorKind {
        let f = classify(e);
        let (container, account) = (&self.container, &self.account);
        if f.code == "ContainerNotFound" {
            return self.missing_bucket();
        }
        if f.code == "BlobNotFound" || f.status == Some(404) {
            return ErrorKind::RemoteNotFound(format!(
                "no blob '{blob}' in container '{container}'"
            ));
        }
        if f.unreachable && f.status.is_none() && !f.credential {
            return ErrorKind::Unreachable(crate::bytes::store::error::unreachable(
                &self.endpoint,
                &f,
            ));
        }
        if f.credential && f.status.is_none_or(|s| s != 401 && s != 403) {
            return ErrorKind::AccessDenied(format!(
                "{} for account '{account}' failed: {}",
                self.auth.source(),
                f.text
            ));
        }
        if matches!(f.status, Some(401 | 403)) {
            let code = match f.code.as_str() {
                "" => format!("HTTP {}", f.status.unwrap_or(403)),
                c => c.to_owned(),
            };
            let why = match &self.auth {
                AzureAuth::Anonymous => "no credentials were given (anonymous request): set \
                    account_key or sas_token (storage options), AZURE_STORAGE_ACCOUNT_KEY, \
                    AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_CONNECTION_STRING, or a Microsoft \
                    Entra ID identity (credential_source)"
                    .to_owned(),
                AzureAuth::Sas(_) if write => "the SAS token was refused (expired, or without \
                    create and write permissions on this blob)"
                    .to_owned(),
                AzureAuth::Sas(_) => "the SAS token was refused (expired, or without read \
                    permission on this blob)"
                    .to_owned(),
                AzureAuth::Key(_) => "the account key was refused (check that it belongs to \
                    this storage account)"
                    .to_owned(),
                other => format!("the token of {} was refused", other.source()),
            };
            return ErrorKind::AccessDenied(format!("{code} for account '{account}': {why}"));
        }
        match f.status {
            Some(s) if f.code.is_empty() => ErrorKind::Http(format!("HTTP status {s}")),
            Some(s) => ErrorKind::Http(format!("HTTP status {s} ({})", f.code)),
            None => ErrorKind::Http(f.text),
        }
    }
}

/// The builder of `container` with the settings `s`.
fn builder(container: &str, s: &AzureSettings, t: &Transfer) -> MicrosoftAzureBuilder {
    let http = |u: &Option<String>| u.as_deref().is_some_and(|u| u.starts_with("http:"));
    let allow_http = s.endpoint.starts_with("http:")
        || http(&s.authority_host)
        || matches!(&s.auth, AzureAuth::Managed { endpoint, .. } if http(endpoint));
    let (options, retry) = client_settings(t, allow_http);
    let mut b = MicrosoftAzureBuilder::new()
        .with_account(&s.account)
        .with_container_name(container)
        .with_endpoint(s.endpoint.clone())
        .with_client_options(options)
        .with_retry(retry);
    if let Some(host) = &s.authority_host {
        b = b.with_authority_host(host);
    }
    match &s.auth {
        AzureAuth::Key(k) => b.with_access_key(k),
        AzureAuth::Sas(sas) => b.with_config(AzureConfigKey::SasKey, sas),
        AzureAuth::ClientSecret {
            tenant,
            client_id,
            secret,
        } => b.with_client_secret_authorization(client_id, secret, tenant),
        AzureAuth::Workload {
            tenant,
            client_id,
            file,
        } => b
            .with_client_id(client_id)
            .with_tenant_id(tenant)
            .with_config(AzureConfigKey::FederatedTokenFile, file),
        AzureAuth::Managed {
            endpoint,
            client_id,
        } => {
            if let Some(e) = endpoint {
                b = b.with_msi_endpoint(e);
            }
            if let Some(c) = client_id {
                b = b.with_client_id(c);
            }
            b
        }
        AzureAuth::AzureCli => b.with_use_azure_cli(true),
        AzureAuth::Anonymous => b.with_skip_signature(true),
    }
}

/// The stores of this process, by their settings: an Entra or managed-identity token is asked
/// for once per store, and renewed by object_store before it expires.
static STORES: PerProcess<MicrosoftAzure> = PerProcess::new();

/// Everything a store is made of, secrets included (in memory only, as in the store).
fn cache_key(container: &str, s: &AzureSettings, t: &Transfer) -> String {
    let auth = match &s.auth {
        AzureAuth::Key(k) => format!("key {k}"),
        AzureAuth::Sas(sas) => format!("sas {sas}"),
        AzureAuth::ClientSecret {
            tenant,
            client_id,
            secret,
        } => format!("secret {tenant} {client_id} {secret}"),
        AzureAuth::Workload {
            tenant,
            client_id,
            file,
        } => format!("workload {tenant} {client_id} {file}"),
        AzureAuth::Managed {
            endpoint,
            client_id,
        } => format!("managed {endpoint:?} {client_id:?}"),
        AzureAuth::AzureCli => "cli".into(),
        AzureAuth::Anonymous => "anonymous".into(),
    };
    format!(
        "{container}\n{}\n{}\n{auth}\n{:?}\n{} {} {} {:?} {:?}",
        s.account,
        s.endpoint,
        s.authority_host,
        t.max_concurrency,
        t.part_size,
        t.max_attempts,
        t.timeout,
        t.connect_timeout
    )
}

/// The store of `container` with the settings `s`: made once per process and settings (a
/// forked child makes its own: the parent's connections belong to the parent's runtime).
fn cached_store(
    container: &str,
    s: &AzureSettings,
    t: &Transfer,
    location: &str,
) -> Result<Arc<MicrosoftAzure>> {
    STORES.get_or_make(cache_key(container, s, t), || {
        builder(container, s, t).build().map_err(|e| {
            Error::new(ErrorKind::BadStorageOption(format!(
                "Azure settings ({}): {}",
                s.auth.source(),
                crate::bytes::store::error::scrub(&e.to_string())
            )))
            .in_file(Path::new(location))
        })
    })
}

/// The client of the container `location` names, and the blob's name.
pub(crate) fn client_for(location: &str, opts: &StorageOptions) -> Result<(StoreClient, String)> {
    let (container, host, blob) = split_azure_url(location)?;
    let env = |k: &str| std::env::var(k).ok();
    let s = config::resolve(host, opts, &env).map_err(|e| e.in_file(Path::new(location)))?;
    let transfer = opts.transfer();
    let store = cached_store(container, &s, &transfer, location)?;
    let words = AzureWords {
        account: s.account.clone(),
        container: container.to_owned(),
        endpoint: crate::bytes::redact_url(&s.endpoint),
        auth: s.auth.clone(),
    };
    let base = location[..location.len() - blob.len() - 1].to_owned();
    Ok((
        StoreClient {
            store,
            base,
            words: Arc::new(words),
            transfer,
        },
        blob.to_owned(),
    ))
}
