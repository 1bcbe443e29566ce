//! The S3 settings of one call, where the AWS tools look for them, first found wins:
//! 1. storage options (`key`, `secret`, `token`, `region`, `endpoint_url`, `profile`, `anon`);
//! 2. the environment: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`,
//!    `AWS_REGION` (else `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL_S3` (else
//!    `AWS_ENDPOINT_URL`);
//! 3. the profile (`profile` option, else `AWS_PROFILE`, else `default`) in the shared files:
//!    `~/.aws/credentials` (`AWS_SHARED_CREDENTIALS_FILE`) for static keys, `~/.aws/config`
//!    (`AWS_CONFIG_FILE`, sections `[profile NAME]`) for `region` and `endpoint_url`. Profiles
//!    that get keys another way (SSO, `credential_process`, an assumed role) are refused by
//!    name: only static keys are read.
//!
//! No credentials anywhere (or `anon=true`): requests go unsigned, for public buckets.

use super::storage_options::{StorageKey, StorageOptions};
use crate::error::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::path::PathBuf;

/// Static credentials.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AwsKeys {
    pub id: String,
    pub secret: String,
    pub token: Option<String>,
}

impl std::fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsKeys")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What a request to S3 needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AwsSettings {
    /// `None`: unsigned requests.
    pub keys: Option<AwsKeys>,
    pub region: String,
    /// A custom endpoint (MinIO, moto, R2); `None`: AWS's own for the region.
    pub endpoint: Option<String>,
}

/// Region when none is set anywhere (the AWS CLI's default for S3).
const DEFAULT_REGION: &str = "us-east-1";

fn bad(msg: String) -> Error {
    Error::new(ErrorKind::BadStorageOption(msg))
}

/// The settings from `opts`, the environment read by `env`, and the shared files.
pub(crate) fn resolve(
    opts: &StorageOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<AwsSettings> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let explicit_profile = opts
        .get(StorageKey::Profile)
        .map(str::to_owned)
        .or_else(|| env("AWS_PROFILE"));
    let profile_name = explicit_profile
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let profile = Profile::load(&profile_name, explicit_profile.is_some(), &env)?;

    let opt = |k| opts.get(k).map(str::to_owned);
    let keys = if opts.anon() {
        None
    } else if let (Some(id), Some(secret)) = (
        opt(StorageKey::AccessKeyId),
        opt(StorageKey::SecretAccessKey),
    ) {
        Some(AwsKeys {
            id,
            secret,
            token: opt(StorageKey::Token),
        })
    } else if opts.get(StorageKey::AccessKeyId).is_some()
        || opts.get(StorageKey::SecretAccessKey).is_some()
    {
        return Err(bad(
            "key and secret go together: give both or neither".to_owned()
        ));
    } else if let (Some(id), Some(secret)) =
        (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
    {
        Some(AwsKeys {
            id,
            secret,
            token: env("AWS_SESSION_TOKEN"),
        })
    } else {
        profile.keys(&profile_name)?
    };
    let region = opt(StorageKey::Region)
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .or_else(|| profile.get("region"))
        .unwrap_or_else(|| DEFAULT_REGION.to_owned());
    let endpoint = opt(StorageKey::EndpointUrl)
        .or_else(|| env("AWS_ENDPOINT_URL_S3"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| profile.get("endpoint_url"));
    Ok(AwsSettings {
        keys,
        region,
        endpoint,
    })
}

/// One profile's keys from the credentials file and the config file (the credentials file
/// wins where both set a key).
#[derive(Default)]
struct Profile {
    values: HashMap<String, String>,
}

impl Profile {
    /// The profile `name`; one named explicitly must exist in one of the files.
    fn load(name: &str, explicit: bool, env: &dyn Fn(&str) -> Option<String>) -> Result<Profile> {
        let home = env("HOME").map(PathBuf::from);
        let file = |var: &str, default: &str| {
            env(var)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
        };
        let mut values = HashMap::new();
        let mut found = false;
        let config_section = if name == "default" {
            "default".to_owned()
        } else {
            format!("profile {name}")
        };
        let sources = [
            (file("AWS_CONFIG_FILE", "config"), config_section),
            (
                file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
                name.to_owned(),
            ),
        ];
        for (path, section) in sources {
            let Some(path) = path else { continue };
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if let Some(kv) = ini_section(&text, &section) {
                found = true;
                values.extend(kv);
            }
        }
        if explicit && !found {
            return Err(bad(format!(
                "AWS profile '{name}' is in neither the credentials nor the config file"
            )));
        }
        Ok(Profile { values })
    }

    fn get(&self, key: &str) -> Option<String> {
        self.values.get(key).filter(|v| !v.is_empty()).cloned()
    }

    /// Static keys, if the profile has them; a profile that gets keys another way is refused.
    fn keys(&self, name: &str) -> Result<Option<AwsKeys>> {
        if let (Some(id), Some(secret)) = (
            self.get("aws_access_key_id"),
            self.get("aws_secret_access_key"),
        ) {
            return Ok(Some(AwsKeys {
                id,
                secret,
                token: self.get("aws_session_token"),
            }));
        }
        let other = [
            ("sso_session", "SSO"),
            ("sso_start_url", "SSO"),
            ("credential_process", "credential_process"),
            ("role_arn", "an assumed role (role_arn)"),
            ("web_identity_token_file", "web identity"),
        ];
        if let Some((_, how)) = other.iter().find(|(k, _)| self.get(k).is_some()) {
            return Err(bad(format!(
                "AWS profile '{name}' gets its credentials through {how}, which is not \
                 supported: give static keys (aws_access_key_id, aws_secret_access_key), \
                 AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or storage options key and secret"
            )));
        }
        Ok(None)
    }
}

/// The `key = value` lines of `[section]` in an INI text, keys lower-cased; `None` if there
/// is no such section. Indented lines (nested settings) and comments are skipped.
fn ini_section(text: &str, section: &str) -> Option<HashMap<String, String>> {
    let mut out: Option<HashMap<String, String>> = None;
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            inside = name == section;
            if inside {
                out.get_or_insert_with(HashMap::new);
            }
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if let Some(map) = out.as_mut() {
                map.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn precedence_and_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &creds,
            "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n\
             [dev]\naws_access_key_id=P\naws_secret_access_key=PS\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[profile dev]\nregion = eu-west-1\nendpoint_url = http://127.0.0.1:9\n\
             s3 =\n  addressing_style = path\n[profile sso]\nsso_session = x\n",
        )
        .unwrap();
        let files = [
            ("AWS_SHARED_CREDENTIALS_FILE", creds.to_str().unwrap()),
            ("AWS_CONFIG_FILE", config.to_str().unwrap()),
        ];
        let none = StorageOptions::new();
        let s = resolve(&none, &env_of(&files)).unwrap();
        assert_eq!(s.keys.unwrap().id, "D");
        assert_eq!(s.region, "us-east-1");
        let mut e = files.to_vec();
        e.push(("AWS_PROFILE", "dev"));
        let s = resolve(&none, &env_of(&e)).unwrap();
        assert_eq!(s.keys.unwrap().id, "P");
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        e.push(("AWS_ACCESS_KEY_ID", "E"));
        e.push(("AWS_SECRET_ACCESS_KEY", "ES"));
        e.push(("AWS_REGION", "ap-south-1"));
        let s = resolve(&none, &env_of(&e)).unwrap();
        assert_eq!(s.keys.unwrap().id, "E");
        assert_eq!(s.region, "ap-south-1");
        let mut o = StorageOptions::new();
        o.set("key", "O").unwrap();
        o.set("secret", "OS").unwrap();
        assert_eq!(resolve(&o, &env_of(&e)).unwrap().keys.unwrap().id, "O");
        o.set("anon", "true").unwrap();
        assert_eq!(resolve(&o, &env_of(&e)).unwrap().keys, None);
        let mut sso = files.to_vec();
        sso.push(("AWS_PROFILE", "sso"));
        let err = resolve(&none, &env_of(&sso)).unwrap_err().to_string();
        assert!(err.contains("SSO"), "{err}");
        let mut missing = files.to_vec();
        missing.push(("AWS_PROFILE", "nope"));
        let err = resolve(&none, &env_of(&missing)).unwrap_err().to_string();
        assert!(err.contains("'nope'"), "{err}");
        assert_eq!(resolve(&none, &env_of(&[])).unwrap().keys, None);
    }
}
