//! The S3 settings of one call, where the AWS tools look for them, first found wins:
//! - credentials: the chain of `aws_chain.rs` (storage options, the environment, the profile,
//!   web identity, the container endpoint, instance metadata); `anon=true` or none found:
//!   requests go unsigned, for public buckets;
//! - region: the `region` option, `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's;
//! - endpoint: the `endpoint_url` option, `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the
//!   profile's `endpoint_url`.
//!
//! The profile is the `profile` option, else `AWS_PROFILE`, else `default`, in the shared
//! files (`aws_profile.rs`).

pub(crate) use crate::bytes::s3::chain::Credentials;
use crate::bytes::s3::chain::{self, Found};
use crate::bytes::s3::profile::Profile;
use crate::bytes::storage_options::{StorageKey, StorageOptions};
use crate::error::Result;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// What a request to S3 needs.
#[derive(Clone, Debug)]
pub(crate) struct AwsSettings {
    /// What the credential chain found (`None` credentials: unsigned requests).
    pub found: Found,
    pub region: String,
    /// A custom endpoint (MinIO, moto, R2); `None`: AWS's own for the region.
    pub endpoint: Option<String>,
}

/// Region when none is set anywhere (the AWS CLI's default for S3).
const DEFAULT_REGION: &str = "us-east-1";

/// The environment variables the settings and the chain read: their values are part of the
/// key the chain's answer is cached under.
const ENV: &[&str] = &[
    "HOME",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_STS",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
];

const OPTS: &[StorageKey] = &[
    StorageKey::AccessKeyId,
    StorageKey::SecretAccessKey,
    StorageKey::Token,
    StorageKey::Region,
    StorageKey::EndpointUrl,
    StorageKey::Profile,
    StorageKey::Anon,
    StorageKey::CredentialSource,
    StorageKey::MetadataEndpoint,
    StorageKey::StsEndpoint,
];

/// The settings from `opts`, the environment read by `env`, and the shared files; the
/// settings are cached for the process under these inputs (`cache`), so that a dataset's
/// objects do not each read the files or ask a metadata service.
pub(crate) fn resolve(
    opts: &StorageOptions,
    env: &dyn Fn(&str) -> Option<String>,
    cache: bool,
) -> Result<AwsSettings> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    if !cache {
        return settings(opts, &env);
    }
    let mut key = String::new();
    for k in OPTS {
        key.push_str(&format!("{:?}={:?};", k, opts.get(*k)));
    }
    for v in ENV {
        key.push_str(&format!("{v}={:?};", env(v)));
    }
    cached(key, || settings(opts, &env))
}

/// The settings of this process by their inputs.
fn cached(key: String, run: impl FnOnce() -> Result<AwsSettings>) -> Result<AwsSettings> {
    static CACHE: OnceLock<Mutex<HashMap<String, AwsSettings>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(s) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(s.clone());
    }
    let s = run()?;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, s.clone());
    Ok(s)
}

/// The settings read afresh: the profile's files, then the chain.
fn settings(opts: &StorageOptions, env: &dyn Fn(&str) -> Option<String>) -> Result<AwsSettings> {
    let explicit_profile = opts
        .get(StorageKey::Profile)
        .map(str::to_owned)
        .or_else(|| env("AWS_PROFILE"));
    let profile_name = explicit_profile
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let profile = Profile::load(&profile_name, explicit_profile.is_some(), env)?;
    let opt = |k| opts.get(k).map(str::to_owned);
    let region = opt(StorageKey::Region)
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .or_else(|| profile.get("region"))
        .unwrap_or_else(|| DEFAULT_REGION.to_owned());
    let endpoint = opt(StorageKey::EndpointUrl)
        .or_else(|| env("AWS_ENDPOINT_URL_S3"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| profile.get("endpoint_url"));
    let found = if opts.anon() {
        Found {
            credentials: None,
            tried: vec!["anon=true".to_owned()],
        }
    } else {
        chain::find(&chain::Inputs {
            opts,
            env,
            profile: &profile,
            region: &region,
        })?
    };
    Ok(AwsSettings {
        found,
        region,
        endpoint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn id(s: &AwsSettings) -> Option<String> {
        s.found.credentials.as_ref().map(|c| c.current().id)
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        // Never the real instance metadata service (169.254.169.254) in a test.
        let mut m: HashMap<String, String> = [("AWS_EC2_METADATA_DISABLED", "true")]
            .iter()
            .chain(pairs)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        m.retain(|_, v| !v.is_empty());
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
        let s = resolve(&none, &env_of(&files), false).unwrap();
        assert_eq!(id(&s).unwrap(), "D");
        assert_eq!(s.region, "us-east-1");
        let mut e = files.to_vec();
        e.push(("AWS_PROFILE", "dev"));
        let s = resolve(&none, &env_of(&e), false).unwrap();
        assert_eq!(id(&s).unwrap(), "P");
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        e.push(("AWS_ACCESS_KEY_ID", "E"));
        e.push(("AWS_SECRET_ACCESS_KEY", "ES"));
        e.push(("AWS_REGION", "ap-south-1"));
        let s = resolve(&none, &env_of(&e), false).unwrap();
        assert_eq!(id(&s).unwrap(), "E");
        assert_eq!(s.region, "ap-south-1");
        let mut o = StorageOptions::new();
        o.set("key", "O").unwrap();
        o.set("secret", "OS").unwrap();
        assert_eq!(id(&resolve(&o, &env_of(&e), false).unwrap()).unwrap(), "O");
        o.set("anon", "true").unwrap();
        assert_eq!(id(&resolve(&o, &env_of(&e), false).unwrap()), None);
        let mut sso = files.to_vec();
        sso.push(("AWS_PROFILE", "sso"));
        let err = resolve(&none, &env_of(&sso), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("SSO"), "{err}");
        let mut missing = files.to_vec();
        missing.push(("AWS_PROFILE", "nope"));
        let err = resolve(&none, &env_of(&missing), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'nope'"), "{err}");
        let s = resolve(&none, &env_of(&[]), false).unwrap();
        assert_eq!(id(&s), None);
        let tried = s.found.tried_sentence();
        assert!(
            tried.contains("environment") && tried.contains("AWS_EC2_METADATA_DISABLED"),
            "{tried}"
        );
    }
}
