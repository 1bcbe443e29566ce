//! Per-call settings for object stores and the Hub: the CLI's `--storage-option KEY=VALUE`
//! and Python's `storage_options={...}`, in the fsspec spellings (`key`, `secret`, `token`,
//! `endpoint_url`, `region`, `anon`) and the AWS ones (`aws_access_key_id`, …). A name no
//! store knows is refused by name. Values of secret keys never appear in `Debug` output.
//!
//! `token` is the session token for `s3://` and the access token for `hf://` and `gs://`: one
//! call reads one URL scheme, so one name serves all, as in fsspec (s3fs, HfFileSystem,
//! gcsfs). Azure's settings take adlfs's names (`account_name`, `account_key`, `sas_token`,
//! `connection_string`).

use crate::error::{Error, ErrorKind, Result};
use std::fmt;

/// One setting a store reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKey {
    /// S3 access key id.
    AccessKeyId,
    /// S3 secret access key.
    SecretAccessKey,
    /// S3 session token, or the Hub's access token.
    Token,
    /// The endpoint (an S3-compatible server, or a Hub mirror).
    EndpointUrl,
    /// The S3 region.
    Region,
    /// The AWS profile to read from the shared config files.
    Profile,
    /// `true`: no credentials, unsigned requests (a public bucket or repository).
    Anon,
    /// The Azure storage account.
    AccountName,
    /// The Azure storage account's key (base64, as the portal shows it).
    AccountKey,
    /// An Azure shared access signature (the query string).
    SasToken,
    /// An Azure connection string (`AccountName=…;AccountKey=…;…`).
    ConnectionString,
    /// Requests one transfer keeps in flight at once (ranged GETs of a large read, parts of
    /// an upload).
    MaxConcurrency,
    /// The size of each ranged GET of a large read and of each part of an upload.
    PartSize,
    /// Attempts of one request before its failure is final (5xx, throttling, a dropped
    /// connection).
    MaxAttempts,
    /// Seconds one request may take, connection to last byte.
    Timeout,
    /// Seconds a connection may take to open.
    ConnectTimeout,
    /// The one credential source to use (`env`, `profile`, `web_identity`, `container`,
    /// `imds`), instead of the chain.
    CredentialSource,
    /// The EC2 instance metadata service's endpoint (`AWS_EC2_METADATA_SERVICE_ENDPOINT`).
    MetadataEndpoint,
    /// STS's endpoint for assumed roles and web identity (`AWS_ENDPOINT_URL_STS`).
    StsEndpoint,
}

/// Every accepted name, lower case, with the setting it names.
const NAMES: &[(&str, StorageKey)] = &[
    ("key", StorageKey::AccessKeyId),
    ("access_key_id", StorageKey::AccessKeyId),
    ("aws_access_key_id", StorageKey::AccessKeyId),
    ("secret", StorageKey::SecretAccessKey),
    ("secret_access_key", StorageKey::SecretAccessKey),
    ("aws_secret_access_key", StorageKey::SecretAccessKey),
    ("token", StorageKey::Token),
    ("session_token", StorageKey::Token),
    ("aws_session_token", StorageKey::Token),
    ("hf_token", StorageKey::Token),
    ("endpoint_url", StorageKey::EndpointUrl),
    ("endpoint", StorageKey::EndpointUrl),
    ("aws_endpoint_url", StorageKey::EndpointUrl),
    ("hf_endpoint", StorageKey::EndpointUrl),
    ("region", StorageKey::Region),
    ("region_name", StorageKey::Region),
    ("aws_region", StorageKey::Region),
    ("profile", StorageKey::Profile),
    ("aws_profile", StorageKey::Profile),
    ("anon", StorageKey::Anon),
    ("account_name", StorageKey::AccountName),
    ("account_key", StorageKey::AccountKey),
    ("sas_token", StorageKey::SasToken),
    ("connection_string", StorageKey::ConnectionString),
    ("max_concurrency", StorageKey::MaxConcurrency),
    ("part_size", StorageKey::PartSize),
    ("multipart_chunksize", StorageKey::PartSize),
    ("max_attempts", StorageKey::MaxAttempts),
    ("timeout", StorageKey::Timeout),
    ("connect_timeout", StorageKey::ConnectTimeout),
    ("credential_source", StorageKey::CredentialSource),
    ("imds_endpoint", StorageKey::MetadataEndpoint),
    ("metadata_endpoint", StorageKey::MetadataEndpoint),
    ("aws_metadata_endpoint", StorageKey::MetadataEndpoint),
    ("sts_endpoint", StorageKey::StsEndpoint),
    ("endpoint_url_sts", StorageKey::StsEndpoint),
    ("aws_endpoint_url_sts", StorageKey::StsEndpoint),
];

impl StorageKey {
    /// The setting `name` names (case-insensitive), if any.
    pub fn from_name(name: &str) -> Option<StorageKey> {
        let name = name.trim().to_ascii_lowercase();
        NAMES.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
    }

    /// The setting's first name in the table (for messages).
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| *n)
    }

    /// Whether values of this setting are secrets (never shown).
    pub fn is_secret(self) -> bool {
        matches!(
            self,
            StorageKey::SecretAccessKey
                | StorageKey::Token
                | StorageKey::AccountKey
                | StorageKey::SasToken
                | StorageKey::ConnectionString
        )
    }
}

/// Every accepted name, comma-separated (for messages and help).
pub fn storage_option_names() -> String {
    NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

fn bad(msg: String) -> Error {
    Error::new(ErrorKind::BadStorageOption(msg))
}

/// One checked setting: a known key and a valid value.
#[derive(Clone, PartialEq, Eq)]
pub struct StorageOption {
    key: StorageKey,
    value: String,
}

impl StorageOption {
    /// The setting `name` = `value`; an unknown name, or an `anon` that is not a boolean, is
    /// refused by name.
    pub fn new(name: &str, value: &str) -> Result<StorageOption> {
        let key = StorageKey::from_name(name).ok_or_else(|| {
            bad(format!(
                "unknown key \"{}\" (known: {})",
                name.escape_debug(),
                storage_option_names()
            ))
        })?;
        if key == StorageKey::Anon {
            parse_bool(value)
                .ok_or_else(|| bad(format!("anon must be true or false, not \"{value}\"")))?;
        }
        Transfer::default().with(key, value)?;
        Ok(StorageOption {
            key,
            value: value.to_owned(),
        })
    }

    /// Which setting this is.
    pub fn key(&self) -> StorageKey {
        self.key
    }
}

impl std::str::FromStr for StorageOption {
    type Err = Error;

    /// `KEY=VALUE`.
    fn from_str(s: &str) -> Result<StorageOption> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE".to_owned()))?;
        StorageOption::new(k, v)
    }
}

impl fmt::Debug for StorageOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = if self.key.is_secret() {
            "<redacted>"
        } else {
            &self.value
        };
        write!(f, "{:?}={value:?}", self.key)
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" | "" => Some(false),
        _ => None,
    }
}

/// How one transfer moves its bytes: the numeric storage options, checked, with their
/// defaults (boto3's `TransferConfig`: 10 requests at once, 8 MiB parts; 5 attempts as its
/// legacy retry mode; a request that takes over 60 s, or a connection over 10 s, fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Requests in flight at once (`max_concurrency`, 1 to 256; default 10).
    pub max_concurrency: usize,
    /// Bytes per part of a multipart upload or ranged download (`part_size`, 5 MiB to 5 GiB;
    /// default 8 MiB).
    pub part_size: u64,
    /// Tries per request before it fails (`max_attempts`, 1 to 100; default 5).
    pub max_attempts: u32,
    /// Longest a request may take (`timeout`; default 60 s).
    pub timeout: std::time::Duration,
    /// Longest a connection may take to open (`connect_timeout`; default 10 s).
    pub connect_timeout: std::time::Duration,
}

impl Default for Transfer {
    fn default() -> Transfer {
        Transfer {
            max_concurrency: 10,
            part_size: 8 << 20,
            max_attempts: 5,
            timeout: std::time::Duration::from_secs(60),
            connect_timeout: std::time::Duration::from_secs(10),
        }
    }
}

/// A byte count: digits with an optional `K`/`M`/`G` suffix (`KiB`, `MB`… read as powers of
/// 1024, as boto3's and s5cmd's part sizes are).
fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, unit) = v.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Seconds, whole or decimal, above zero.
fn parse_seconds(v: &str) -> Option<std::time::Duration> {
    let s: f64 = v.trim().parse().ok()?;
    (s.is_finite() && s > 0.0 && s < 1e9).then(|| std::time::Duration::from_secs_f64(s))
}

impl Transfer {
    /// These settings with `key` = `value` applied (keys other than the numeric ones leave
    /// them as they are); a value out of range is refused by name.
    fn with(mut self, key: StorageKey, value: &str) -> Result<Transfer> {
        let refuse = |what: &str| {
            Err(bad(format!(
                "{} must be {what}, not \"{}\"",
                key.name(),
                value.escape_debug()
            )))
        };
        match key {
            StorageKey::MaxConcurrency => match value.trim().parse::<usize>() {
                Ok(n @ 1..=256) => self.max_concurrency = n,
                _ => return refuse("a whole number from 1 to 256"),
            },
            // S3's bounds for a part (the last part may be smaller): 5 MiB to 5 GiB.
            StorageKey::PartSize => match parse_size(value) {
                Some(n) if (5 << 20..=5 << 30).contains(&n) => self.part_size = n,
                _ => return refuse("a size from 5MiB to 5GiB (bytes, or with K, M or G)"),
            },
            StorageKey::MaxAttempts => match value.trim().parse::<u32>() {
                Ok(n @ 1..=100) => self.max_attempts = n,
                _ => return refuse("a whole number from 1 to 100"),
            },
            StorageKey::Timeout => match parse_seconds(value) {
                Some(d) => self.timeout = d,
                None => return refuse("a number of seconds above 0"),
            },
            StorageKey::ConnectTimeout => match parse_seconds(value) {
                Some(d) => self.connect_timeout = d,
                None => return refuse("a number of seconds above 0"),
            },
            _ => {}
        }
        Ok(self)
    }
}

/// The settings of one call; a later value of a key replaces an earlier one.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StorageOptions {
    set: Vec<StorageOption>,
}

impl StorageOptions {
    /// No settings: everything comes from the environment and the defaults.
    pub fn new() -> StorageOptions {
        StorageOptions::default()
    }

    /// Adds one checked setting.
    pub fn push(&mut self, opt: StorageOption) {
        self.set.retain(|o| o.key != opt.key);
        self.set.push(opt);
    }

    /// Adds `name` = `value`, refusing an unknown name.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        self.push(StorageOption::new(name, value)?);
        Ok(())
    }

    /// The value of `key`, if set (empty values count as unset).
    pub fn get(&self, key: StorageKey) -> Option<&str> {
        self.set
            .iter()
            .find(|o| o.key == key)
            .map(|o| o.value.as_str())
            .filter(|v| !v.is_empty())
    }

    /// Whether `anon=true` was given.
    pub fn anon(&self) -> bool {
        self.get(StorageKey::Anon)
            .and_then(parse_bool)
            .unwrap_or(false)
    }

    /// Whether no setting was given.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The transfer settings: the numeric options given, the defaults for the rest (each
    /// value was checked when it was set).
    pub fn transfer(&self) -> Transfer {
        self.set.iter().fold(Transfer::default(), |t, o| {
            t.with(o.key, &o.value).unwrap_or(t)
        })
    }
}

impl FromIterator<StorageOption> for StorageOptions {
    fn from_iter<I: IntoIterator<Item = StorageOption>>(iter: I) -> Self {
        let mut o = StorageOptions::new();
        for opt in iter {
            o.push(opt);
        }
        o
    }
}

impl fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.set).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_values_and_redaction() {
        let mut o = StorageOptions::new();
        o.set("KEY", "AKID").unwrap();
        o.set("aws_secret_access_key", "s3cr3t").unwrap();
        o.set("endpoint_url", "http://127.0.0.1:9").unwrap();
        assert_eq!(o.get(StorageKey::AccessKeyId), Some("AKID"));
        assert_eq!(o.get(StorageKey::SecretAccessKey), Some("s3cr3t"));
        let shown = format!("{o:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("AKID"), "{shown}");
        let e = o.set("bogus", "x").unwrap_err().to_string();
        assert!(e.contains("unknown key \"bogus\""), "{e}");
        assert!("anon=maybe".parse::<StorageOption>().is_err());
        assert!("novalue".parse::<StorageOption>().is_err());
        o.push("anon=true".parse().unwrap());
        assert!(o.anon());
    }

    #[test]
    fn transfer_settings() {
        let mut o = StorageOptions::new();
        assert_eq!(o.transfer(), Transfer::default());
        o.set("max_concurrency", "4").unwrap();
        o.set("multipart_chunksize", "16MiB").unwrap();
        o.set("max_attempts", "2").unwrap();
        o.set("timeout", "1.5").unwrap();
        let t = o.transfer();
        assert_eq!(t.max_concurrency, 4);
        assert_eq!(t.part_size, 16 << 20);
        assert_eq!(t.max_attempts, 2);
        assert_eq!(t.timeout, std::time::Duration::from_millis(1500));
        for (k, v, why) in [
            ("max_concurrency", "0", "from 1 to 256"),
            ("part_size", "1MiB", "from 5MiB"),
            ("part_size", "8 parsecs", "from 5MiB"),
            ("max_attempts", "-1", "from 1 to 100"),
            ("connect_timeout", "0", "above 0"),
        ] {
            let e = o.set(k, v).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(v), "{e}");
        }
        assert_eq!(parse_size("5242880"), Some(5 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
    }
}
