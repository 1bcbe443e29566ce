//! The Azure Blob settings of one call, where Azure's tools look for them (adlfs, the Azure
//! CLI and the Azure SDKs' spellings), each setting first found in: the storage options
//! (`account_name`, `account_key`, `sas_token`, `endpoint_url`, `anon`, `credential_source`),
//! the connection string (the `connection_string` option, else
//! `AZURE_STORAGE_CONNECTION_STRING`: `AccountName`, `AccountKey`, `SharedAccessSignature`,
//! `BlobEndpoint`, `DefaultEndpointsProtocol`, `EndpointSuffix`, or
//! `UseDevelopmentStorage=true` for Azurite; read here, object_store reads none), the
//! environment (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`,
//! `AZURE_STORAGE_SAS_TOKEN`, and Microsoft Entra ID's `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`,
//! `AZURE_CLIENT_SECRET`, `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_AUTHORITY_HOST`, the managed
//! identity's `AZURE_MSI_ENDPOINT`/`MSI_ENDPOINT`/`IDENTITY_ENDPOINT`, `AZURE_USE_AZURE_CLI`).
//! An account in the URL's host (`abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/…`) comes
//! before all of them.
//!
//! The credential is the first source configured, in this order: a SAS, the account key,
//! workload identity (client id, tenant, federated token file), a service principal's client
//! secret, a managed identity (its endpoint announced: App Service's `IDENTITY_ENDPOINT`, or
//! `AZURE_MSI_ENDPOINT`; the VM metadata service is asked only when named by
//! `credential_source=managed_identity`, so nothing off Azure waits for 169.254.169.254), the
//! Azure CLI (`AZURE_USE_AZURE_CLI=true`), else none: anonymous requests, for public
//! containers. `credential_source` forces one; `anon=true` none.

use crate::bytes::storage_options::{StorageKey, StorageOptions};
use crate::bytes::url_path::split_bucket_url;
use crate::error::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::path::Path;

/// How requests are authorised.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum AzureAuth {
    /// The account key (base64, checked).
    Key(String),
    /// A SAS token given as it is (the query string, without `?`).
    Sas(String),
    /// Microsoft Entra ID, a service principal's client secret.
    ClientSecret {
        tenant: String,
        client_id: String,
        secret: String,
    },
    /// Microsoft Entra ID, a federated token file exchanged (AKS workload identity).
    Workload {
        tenant: String,
        client_id: String,
        file: String,
    },
    /// A managed identity's token endpoint (IMDS or App Service), and a user-assigned
    /// identity's client id.
    Managed {
        endpoint: Option<String>,
        client_id: Option<String>,
    },
    /// `az account get-access-token`.
    AzureCli,
    Anonymous,
}

impl AzureAuth {
    /// The source's name in messages (never a secret).
    pub(crate) fn source(&self) -> String {
        match self {
            AzureAuth::Key(_) => "the account key".into(),
            AzureAuth::Sas(_) => "the SAS token".into(),
            AzureAuth::ClientSecret { client_id, .. } => {
                format!("the client secret of service principal {client_id} (client_secret)")
            }
            AzureAuth::Workload { file, .. } => {
                format!("workload identity (federated token file {file})")
            }
            AzureAuth::Managed { endpoint, .. } => format!(
                "the managed identity (managed_identity, at {})",
                crate::bytes::redact_url(endpoint.as_deref().unwrap_or("the VM metadata service"))
            ),
            AzureAuth::AzureCli => "the Azure CLI (azure_cli: az account get-access-token)".into(),
            AzureAuth::Anonymous => "no credentials (anonymous)".into(),
        }
    }
}

/// What a request to a storage account needs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AzureSettings {
    pub account: String,
    /// The blob endpoint, containers below it: `https://ACCOUNT.blob.core.windows.net`, or
    /// Azurite's `http://127.0.0.1:10000/devstoreaccount1`.
    pub endpoint: String,
    pub auth: AzureAuth,
    /// Microsoft Entra ID's host (`AZURE_AUTHORITY_HOST`), for the Entra sources.
    pub authority_host: Option<String>,
}

impl std::fmt::Debug for AzureSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = self.auth.source();
        write!(
            f,
            "AzureSettings({} at {}, {auth})",
            self.account, self.endpoint
        )
    }
}

/// Azurite's development account, which Microsoft publishes with the emulator (not a secret:
/// every Azurite has it), used for `UseDevelopmentStorage=true`.
const DEV_ACCOUNT: &str = "devstoreaccount1";
const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const DEV_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";

fn bad(msg: String) -> Error {
    Error::new(ErrorKind::BadStorageOption(msg))
}

/// `Key=Value;Key=Value` (values may hold `=`, as base64 keys and SAS tokens do).
fn parse_connection_string(s: &str) -> Result<HashMap<String, String>> {
    let mut m = HashMap::new();
    for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            bad("a connection string is Key=Value pairs separated by ';'".to_owned())
        })?;
        m.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    Ok(m)
}

/// The settings for an account named in the URL (`host_account`, if any), from `opts`, the
/// environment read by `env`, and a connection string.
pub(crate) fn resolve(
    host: Option<(&str, &str)>,
    opts: &StorageOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<AzureSettings> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let cs = match opts
        .get(StorageKey::ConnectionString)
        .map(str::to_owned)
        .or_else(|| env("AZURE_STORAGE_CONNECTION_STRING"))
    {
        Some(s) => parse_connection_string(&s)?,
        None => HashMap::new(),
    };
    let dev = cs
        .get("usedevelopmentstorage")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let from_cs = |k: &str| cs.get(k).cloned().filter(|v| !v.is_empty());
    let pick = |key: StorageKey, cs_key: &str, var: &str, dev_value: &str| {
        opts.get(key)
            .map(str::to_owned)
            .or_else(|| from_cs(cs_key))
            .or_else(|| dev.then(|| dev_value.to_owned()))
            .or_else(|| env(var))
    };
    let account = match host {
        Some((account, _)) => account.to_owned(),
        None => pick(
            StorageKey::AccountName,
            "accountname",
            "AZURE_STORAGE_ACCOUNT_NAME",
            DEV_ACCOUNT,
        )
        .ok_or_else(|| {
            bad("no storage account: set the account_name storage option, \
                 AZURE_STORAGE_ACCOUNT_NAME or a connection string, or write \
                 az://CONTAINER@ACCOUNT.blob.core.windows.net/PATH"
                .to_owned())
        })?,
    };
    let endpoint = match opts
        .get(StorageKey::EndpointUrl)
        .map(str::to_owned)
        .or_else(|| env("AZURE_STORAGE_ENDPOINT"))
    {
        Some(e) => e,
        None => match (from_cs("blobendpoint"), host) {
            (Some(e), _) => e,
            (None, Some((_, suffix))) => format!("https://{account}.blob.{suffix}"),
            (None, None) if dev => DEV_ENDPOINT.to_owned(),
            (None, None) => format!(
                "{}://{account}.blob.{}",
                from_cs("defaultendpointsprotocol").unwrap_or_else(|| "https".to_owned()),
                from_cs("endpointsuffix").unwrap_or_else(|| "core.windows.net".to_owned())
            ),
        },
    };
    let sas = pick(
        StorageKey::SasToken,
        "sharedaccesssignature",
        "AZURE_STORAGE_SAS_TOKEN",
        "",
    )
    .filter(|s| !s.is_empty());
    let key = pick(
        StorageKey::AccountKey,
        "accountkey",
        "AZURE_STORAGE_ACCOUNT_KEY",
        DEV_KEY,
    );
    let key = match key {
        Some(key) if !opts.anon() => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(key.trim())
                .map_err(
                    |_| bad("the account key is not base64 (as the portal shows it)".into()),
                )?;
            Some(key.trim().to_owned())
        }
        _ => None,
    };
    let entra = |k: &str| env(k);
    let (tenant, client_id) = (entra("AZURE_TENANT_ID"), entra("AZURE_CLIENT_ID"));
    let federated = entra("AZURE_FEDERATED_TOKEN_FILE");
    let secret = entra("AZURE_CLIENT_SECRET");
    let msi = entra("AZURE_MSI_ENDPOINT")
        .or_else(|| entra("MSI_ENDPOINT"))
        .or_else(|| entra("IDENTITY_ENDPOINT"));
    let cli = entra("AZURE_USE_AZURE_CLI").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let workload = match (&tenant, &client_id, &federated) {
        (Some(t), Some(c), Some(f)) => Some(AzureAuth::Workload {
            tenant: t.clone(),
            client_id: c.clone(),
            file: f.clone(),
        }),
        _ => None,
    };
    let client_secret = match (&tenant, &client_id, &secret) {
        (Some(t), Some(c), Some(s)) => Some(AzureAuth::ClientSecret {
            tenant: t.clone(),
            client_id: c.clone(),
            secret: s.clone(),
        }),
        _ => None,
    };
    let managed = |forced: bool| {
        (forced || msi.is_some()).then(|| AzureAuth::Managed {
            endpoint: msi.clone(),
            client_id: client_id.clone(),
        })
    };
    let missing = |what: &str, needs: &str| {
        bad(format!(
            "credential_source={what} is not configured: it needs {needs}"
        ))
    };
    let auth = match opts.get(StorageKey::CredentialSource).map(str::trim) {
        _ if opts.anon() => AzureAuth::Anonymous,
        None | Some("") => sas
            .map(|s| AzureAuth::Sas(s.trim_start_matches('?').to_owned()))
            .or(key.map(AzureAuth::Key))
            .or(workload)
            .or(client_secret)
            .or_else(|| managed(false))
            .or_else(|| cli.then_some(AzureAuth::AzureCli))
            .unwrap_or(AzureAuth::Anonymous),
        Some("sas" | "sas_token") => sas
            .map(|s| AzureAuth::Sas(s.trim_start_matches('?').to_owned()))
            .ok_or_else(|| missing("sas_token", "sas_token or AZURE_STORAGE_SAS_TOKEN"))?,
        Some("account_key" | "access_key") => key
            .map(AzureAuth::Key)
            .ok_or_else(|| missing("account_key", "account_key or AZURE_STORAGE_ACCOUNT_KEY"))?,
        Some("workload_identity") => workload.ok_or_else(|| {
            missing(
                "workload_identity",
                "AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE",
            )
        })?,
        Some("client_secret") => client_secret.ok_or_else(|| {
            missing(
                "client_secret",
                "AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET",
            )
        })?,
        Some("managed_identity") => managed(true).expect("forced"),
        Some("azure_cli") => AzureAuth::AzureCli,
        Some(other) => {
            return Err(bad(format!(
                "credential_source \"{other}\" is not an Azure source (sas_token, \
                 account_key, workload_identity, client_secret, managed_identity, azure_cli)"
            )))
        }
    };
    Ok(AzureSettings {
        account,
        endpoint: endpoint.trim_end_matches('/').to_owned(),
        auth,
        authority_host: env("AZURE_AUTHORITY_HOST"),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn sources_in_order() {
        let none = env_of(&[]);
        let e = resolve(None, &StorageOptions::new(), &none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no storage account"), "{e}");
        let dev = env_of(&[(
            "AZURE_STORAGE_CONNECTION_STRING",
            "UseDevelopmentStorage=true",
        )]);
        let s = resolve(None, &StorageOptions::new(), &dev).unwrap();
        assert_eq!(s.account, "devstoreaccount1");
        assert_eq!(s.endpoint, DEV_ENDPOINT);
        assert!(matches!(s.auth, AzureAuth::Key(ref k) if k == DEV_KEY));
        assert!(!format!("{s:?}").contains("Eby8"));
        let vars = env_of(&[
            ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
            ("AZURE_STORAGE_SAS_TOKEN", "?sv=2022-11-02&sig=abc"),
        ]);
        let s = resolve(None, &StorageOptions::new(), &vars).unwrap();
        assert_eq!(s.endpoint, "https://acct.blob.core.windows.net");
        assert!(s.auth == AzureAuth::Sas("sv=2022-11-02&sig=abc".into()));
        let s = resolve(
            Some(("other", "core.chinacloudapi.cn")),
            &StorageOptions::new(),
            &vars,
        )
        .unwrap();
        assert_eq!(s.endpoint, "https://other.blob.core.chinacloudapi.cn");
        let mut o = StorageOptions::new();
        o.set(
            "connection_string",
            "DefaultEndpointsProtocol=http;AccountName=a2;AccountKey=AAAA;BlobEndpoint=http://h:1/a2;",
        )
        .unwrap();
        let s = resolve(None, &o, &none).unwrap();
        assert_eq!(
            (s.account.as_str(), s.endpoint.as_str()),
            ("a2", "http://h:1/a2")
        );
        assert!(s.auth == AzureAuth::Key("AAAA".into()));
        o.set("account_key", "not base64!").unwrap();
        let e = resolve(None, &o, &none).unwrap_err().to_string();
        assert!(
            e.contains("not base64") && !e.contains("not base64!"),
            "{e}"
        );
        o.set("anon", "true").unwrap();
        assert!(resolve(None, &o, &none).unwrap().auth == AzureAuth::Anonymous);
    }

    #[test]
    fn entra_sources_in_order_and_forced() {
        let all = env_of(&[
            ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_CLIENT_SECRET", "s3cr3t"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token"),
            ("AZURE_MSI_ENDPOINT", "http://127.0.0.1:9/msi"),
            ("AZURE_USE_AZURE_CLI", "true"),
        ]);
        let o = StorageOptions::new();
        let s = resolve(None, &o, &all).unwrap();
        assert!(matches!(s.auth, AzureAuth::Workload { .. }), "{s:?}");
        let forced = |src: &str| {
            let mut o = StorageOptions::new();
            o.set("credential_source", src).unwrap();
            resolve(None, &o, &all).map(|s| s.auth.source())
        };
        assert!(forced("client_secret").unwrap().contains("client secret"));
        assert!(forced("managed_identity")
            .unwrap()
            .contains("127.0.0.1:9/msi"));
        assert!(forced("azure_cli").unwrap().contains("Azure CLI"));
        let e = forced("account_key").unwrap_err().to_string();
        assert!(e.contains("account_key is not configured"), "{e}");
        assert!(forced("imds")
            .unwrap_err()
            .to_string()
            .contains("not an Azure source"));
        // Only an announced managed identity is used unasked; nothing else: anonymous.
        let msi_only = env_of(&[
            ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
            ("IDENTITY_ENDPOINT", "http://127.0.0.1:9/msi/token"),
        ]);
        let s = resolve(None, &o, &msi_only).unwrap();
        assert!(matches!(s.auth, AzureAuth::Managed { .. }), "{s:?}");
        assert!(!format!("{:?}", resolve(None, &o, &all).unwrap()).contains("s3cr3t"));
        let bare = env_of(&[("AZURE_STORAGE_ACCOUNT_NAME", "acct")]);
        assert!(resolve(None, &o, &bare).unwrap().auth == AzureAuth::Anonymous);
    }
}
