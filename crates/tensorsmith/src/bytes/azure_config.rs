//! The Azure Blob settings of one call, where Azure's tools look for them (adlfs and the
//! Azure CLI spellings), each setting first found in: the storage options (`account_name`,
//! `account_key`, `sas_token`, `endpoint_url`, `anon`), the connection string (the
//! `connection_string` option, else `AZURE_STORAGE_CONNECTION_STRING`: `AccountName`,
//! `AccountKey`, `SharedAccessSignature`, `BlobEndpoint`, `DefaultEndpointsProtocol`,
//! `EndpointSuffix`, or `UseDevelopmentStorage=true` for Azurite), the environment
//! (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`).
//! An account in the URL's host (`abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/…`) comes
//! before all of them.
//!
//! Requests are authorised by a SAS: the one given, else one made per request from the
//! account key (`azure_sas.rs`); with neither (or `anon=true`) they go anonymous, for public
//! containers. Microsoft Entra ID (service principals, managed identities) is not read.

use super::storage_options::{StorageKey, StorageOptions};
use crate::error::{Error, ErrorKind, Result};
use std::collections::HashMap;

/// How requests are authorised.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum AzureAuth {
    /// The account key, decoded: a service SAS is signed for each request.
    Key(Vec<u8>),
    /// A SAS token given as it is (the query string, without `?`).
    Sas(String),
    Anonymous,
}

/// What a request to a storage account needs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AzureSettings {
    pub account: String,
    /// The blob endpoint, containers below it: `https://ACCOUNT.blob.core.windows.net`, or
    /// Azurite's `http://127.0.0.1:10000/devstoreaccount1`.
    pub endpoint: String,
    pub auth: AzureAuth,
}

impl std::fmt::Debug for AzureSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = match self.auth {
            AzureAuth::Key(_) => "account key",
            AzureAuth::Sas(_) => "SAS token",
            AzureAuth::Anonymous => "anonymous",
        };
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
    let endpoint = match opts.get(StorageKey::EndpointUrl) {
        Some(e) => e.to_owned(),
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
    let auth = match (opts.anon(), sas, key) {
        (true, _, _) => AzureAuth::Anonymous,
        (false, Some(sas), _) => AzureAuth::Sas(sas.trim_start_matches('?').to_owned()),
        (false, None, Some(key)) => {
            use base64::Engine as _;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(key.trim())
                .map_err(
                    |_| bad("the account key is not base64 (as the portal shows it)".into()),
                )?;
            AzureAuth::Key(decoded)
        }
        (false, None, None) => AzureAuth::Anonymous,
    };
    Ok(AzureSettings {
        account,
        endpoint: endpoint.trim_end_matches('/').to_owned(),
        auth,
    })
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
        assert!(matches!(s.auth, AzureAuth::Key(ref k) if k.len() == 64));
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
        assert!(s.auth == AzureAuth::Key(vec![0, 0, 0]));
        o.set("account_key", "not base64!").unwrap();
        let e = resolve(None, &o, &none).unwrap_err().to_string();
        assert!(
            e.contains("not base64") && !e.contains("not base64!"),
            "{e}"
        );
        o.set("anon", "true").unwrap();
        assert!(resolve(None, &o, &none).unwrap().auth == AzureAuth::Anonymous);
    }
}
