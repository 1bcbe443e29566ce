//! Per-call settings for object stores and the Hub: the CLI's `--storage-option KEY=VALUE`
//! and Python's `storage_options={...}`, in the fsspec spellings (`key`, `secret`, `token`,
//! `endpoint_url`, `region`, `anon`) and the AWS ones (`aws_access_key_id`, …). A name no
//! store knows is refused by name. Values of secret keys never appear in `Debug` output.
//!
//! `token` is the session token for `s3://` and the access token for `hf://`: one call reads
//! one URL scheme, so one name serves both, as in fsspec (s3fs, HfFileSystem).

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
];

impl StorageKey {
    /// The setting `name` names (case-insensitive), if any.
    pub fn from_name(name: &str) -> Option<StorageKey> {
        let name = name.trim().to_ascii_lowercase();
        NAMES.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
    }

    /// Whether values of this setting are secrets (never shown).
    pub fn is_secret(self) -> bool {
        matches!(self, StorageKey::SecretAccessKey | StorageKey::Token)
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
        Ok(StorageOption {
            key,
            value: value.to_owned(),
        })
    }

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

/// The settings of one call; a later value of a key replaces an earlier one.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StorageOptions {
    set: Vec<StorageOption>,
}

impl StorageOptions {
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

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
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
}
