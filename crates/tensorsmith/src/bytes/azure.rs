//! Azure Blob Storage read as an HTTP file: `az://CONTAINER/BLOB` (adlfs's form, the account
//! from the settings), `az://CONTAINER@ACCOUNT.blob.core.windows.net/BLOB`, and Hadoop's
//! `abfs://` / `abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH` (read through the blob
//! endpoint of the same account). Each request goes to `ENDPOINT/CONTAINER/BLOB?SAS`: the SAS
//! given, or one signed for this blob with the account key (`azure_sas.rs`), or none
//! (anonymous: a public container). Settings: `azure_config.rs`. Errors name the `az://` URL,
//! never a key or a signature, in Azure's words (container or blob not found, authentication
//! failed).

use super::azure_config::{self, AzureAuth, AzureSettings};
use super::azure_sas;
use super::http::{other_status, Target};
use super::redact_url;
use super::s3_bucket::error_code;
use super::storage_options::StorageOptions;
use super::url_path::{encode, split_bucket_url};
use crate::error::{Error, ErrorKind, Result};
use std::path::Path;

/// A blob, and how to ask for it.
pub(crate) struct AzureBlob {
    name: String,
    container: String,
    blob: String,
    settings: AzureSettings,
    endpoint: String,
    /// What a SAS signed per request allows: `r` (reading), `cw` (creating and writing),
    /// `d` (deleting).
    permissions: &'static str,
}

impl std::fmt::Debug for AzureBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AzureBlob({:?})", self.name)
    }
}

/// An account named in a URL's host, and its endpoint suffix (`core.windows.net`).
type HostAccount<'a> = Option<(&'a str, &'a str)>;

/// `(container, the host's account, blob)` of an `az://` or `abfs(s)://` URL.
pub(crate) fn split_azure_url(location: &str) -> Result<(&str, HostAccount<'_>, &str)> {
    let (authority, blob) = split_bucket_url(location)?;
    let Some((container, host)) = authority.split_once('@') else {
        return Ok((authority, None, blob));
    };
    let account_and_suffix = host.split_once('.').and_then(|(account, rest)| {
        let suffix = rest
            .strip_prefix("blob.")
            .or_else(|| rest.strip_prefix("dfs."))?;
        (!account.is_empty() && !suffix.is_empty()).then_some((account, suffix))
    });
    match account_and_suffix {
        Some(a) if !container.is_empty() => Ok((container, Some(a), blob)),
        _ => Err(Error::new(ErrorKind::BadStorageOption(format!(
            "'{authority}' is not CONTAINER@ACCOUNT.blob.core.windows.net or \
             CONTAINER@ACCOUNT.dfs.core.windows.net"
        )))
        .in_file(Path::new(location))),
    }
}

impl AzureBlob {
    /// The blob `location` names, with the settings of `opts` and the environment.
    pub(crate) fn resolve(location: &str, opts: &StorageOptions) -> Result<AzureBlob> {
        let env = |k: &str| std::env::var(k).ok();
        AzureBlob::with_env(location, opts, &env)
    }

    fn with_env(
        location: &str,
        opts: &StorageOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AzureBlob> {
        let (container, host, blob) = split_azure_url(location)?;
        let settings =
            azure_config::resolve(host, opts, env).map_err(|e| e.in_file(Path::new(location)))?;
        Ok(AzureBlob {
            name: location.to_owned(),
            container: container.to_owned(),
            blob: blob.to_owned(),
            endpoint: redact_url(&settings.endpoint),
            settings,
            permissions: "r",
        })
    }
}

impl AzureBlob {
    /// The same blob, its requests signed for creating and writing it.
    pub(crate) fn for_writing(self) -> AzureBlob {
        self.with_permissions("cw")
    }

    /// The same blob, its requests signed with `permissions` (`r`, `cw`, `d`).
    pub(crate) fn with_permissions(mut self, permissions: &'static str) -> AzureBlob {
        self.permissions = permissions;
        self
    }

    /// The account, endpoint and credential.
    pub(crate) fn settings(&self) -> &AzureSettings {
        &self.settings
    }

    /// The container's name.
    pub(crate) fn container(&self) -> &str {
        &self.container
    }

    /// Another blob of the same container and settings, named `name` in errors, read-only.
    pub(crate) fn sibling(&self, name: String, blob: &str) -> AzureBlob {
        AzureBlob {
            name,
            container: self.container.clone(),
            blob: blob.to_owned(),
            settings: self.settings.clone(),
            endpoint: self.endpoint.clone(),
            permissions: "r",
        }
    }

    /// The blob endpoint, without credentials, for errors.
    pub(crate) fn redacted_endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl Target for AzureBlob {
    fn name(&self) -> &str {
        &self.name
    }

    fn url(&self) -> String {
        let s = &self.settings;
        let base = format!(
            "{}/{}/{}",
            s.endpoint,
            encode(&self.container, false),
            encode(&self.blob, true)
        );
        match &s.auth {
            AzureAuth::Anonymous => base,
            AzureAuth::Sas(sas) => format!("{base}?{sas}"),
            AzureAuth::Key(key) => {
                let expiry = azure_sas::expiry_in_an_hour();
                let sas = azure_sas::blob_sas(
                    key,
                    self.permissions,
                    &s.account,
                    &self.container,
                    &self.blob,
                    &expiry,
                );
                format!("{base}?{sas}")
            }
        }
    }

    fn status_error(&self, status: u16, _: Option<&str>, body: &str) -> ErrorKind {
        let (container, blob, account) = (&self.container, &self.blob, &self.settings.account);
        match (status, error_code(body).unwrap_or_default()) {
            (_, "ContainerNotFound") => ErrorKind::RemoteNotFound(format!(
                "no container '{container}' in storage account '{account}'"
            )),
            (_, "BlobNotFound") | (404, _) => {
                ErrorKind::RemoteNotFound(format!("no blob '{blob}' in container '{container}'"))
            }
            (401 | 403, code) => {
                let code = match code {
                    "" => format!("HTTP {status}"),
                    c => c.to_owned(),
                };
                let why = match self.settings.auth {
                    AzureAuth::Anonymous => {
                        "no credentials were given (anonymous request): set \
                        account_key or sas_token (storage options), AZURE_STORAGE_ACCOUNT_KEY, \
                        AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING; Microsoft \
                        Entra ID is not read"
                    }
                    AzureAuth::Sas(_) if self.permissions == "cw" => {
                        "the SAS token was refused (expired, or without create and write \
                        permissions on this blob)"
                    }
                    AzureAuth::Sas(_) if self.permissions == "d" => {
                        "the SAS token was refused (expired, or without delete \
                        permission on this blob)"
                    }
                    AzureAuth::Sas(_) => {
                        "the SAS token was refused (expired, or without read \
                        permission on this blob)"
                    }
                    AzureAuth::Key(_) => {
                        "the account key was refused (check that it belongs to \
                        this storage account)"
                    }
                };
                ErrorKind::AccessDenied(format!("{code} for account '{account}': {why}"))
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
    fn urls_and_errors() {
        let env = |k: &str| {
            (k == "AZURE_STORAGE_CONNECTION_STRING")
                .then(|| "UseDevelopmentStorage=true".to_owned())
        };
        let o = StorageOptions::new();
        let b = AzureBlob::with_env("az://c/dir/m a.safetensors", &o, &env).unwrap();
        let u = b.url();
        assert!(
            u.starts_with("http://127.0.0.1:10000/devstoreaccount1/c/dir/m%20a.safetensors?sv="),
            "{u}"
        );
        assert!(u.contains("&sr=b&sp=r&sig="), "{u}");
        let none = |_: &str| None;
        let b = AzureBlob::with_env("abfss://data@acct.dfs.core.windows.net/x/y.gguf", &o, &none)
            .unwrap();
        assert_eq!(b.url(), "https://acct.blob.core.windows.net/data/x/y.gguf");
        let b = AzureBlob::with_env("az://data@acct.blob.core.windows.net/y", &o, &none).unwrap();
        assert_eq!(b.url(), "https://acct.blob.core.windows.net/data/y");
        for bad in [
            "az://c",
            "az://c@host/x",
            "abfss://@a.dfs.core.windows.net/x",
        ] {
            assert!(AzureBlob::with_env(bad, &o, &none).is_err(), "{bad}");
        }
        let e = AzureBlob::with_env("az://c/x", &o, &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no storage account") && e.contains("az://c/x"),
            "{e}"
        );
        let body = "<?xml version=\"1.0\"?><Error><Code>BlobNotFound</Code></Error>";
        let e = b.status_error(404, None, body).to_string();
        assert!(e.contains("no blob 'y' in container 'data'"), "{e}");
        let body = "<Error><Code>ContainerNotFound</Code></Error>";
        let e = b.status_error(404, None, body).to_string();
        assert!(
            e.contains("no container 'data' in storage account 'acct'"),
            "{e}"
        );
        let e = b.status_error(403, None, "").to_string();
        assert!(e.contains("anonymous"), "{e}");
    }
}
