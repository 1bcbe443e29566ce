//! The AWS credential chain: the sources AWS's SDKs try, in their order (botocore's default
//! chain), the first that has credentials wins:
//! 1. storage options (`key`/`secret`/`token`);
//! 2. the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`),
//!    unless the `profile` option names a profile (as boto3's `Session(profile_name=)`);
//! 3. the profile's `role_arn`, through STS `AssumeRole` with the keys of its
//!    `source_profile` (itself resolved by these rules) or its `credential_source`
//!    (`Environment`, `Ec2InstanceMetadata`, `EcsContainer`);
//! 4. web identity (IRSA): `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, or the profile's
//!    `web_identity_token_file` + `role_arn`, through STS `AssumeRoleWithWebIdentity`;
//! 5. the profile's SSO settings: refused by name (not supported);
//! 6. the profile's static keys; 7. its `credential_process`;
//! 8. the container endpoint (ECS task roles, EKS Pod Identity):
//!    `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or `_FULL_URI`, with
//!    `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` or `_TOKEN`;
//! 9. the EC2 instance metadata service (IMDSv2), unless `AWS_EC2_METADATA_DISABLED=true`, at
//!    `AWS_EC2_METADATA_SERVICE_ENDPOINT` (or the `imds_endpoint` option), else
//!    `http://169.254.169.254`.
//!
//! None has credentials: requests go unsigned (public buckets), and an access-denied error
//! then lists what was tried. A source that is configured but fails (a token file missing,
//! STS refusing) is an error that names it and the sources before it, never a secret. The
//! `credential_source` option forces one source.
//!
//! Temporary credentials are cached per process and refreshed before they expire (a quarter
//! of their lifetime before, at most five minutes), by every request that signs, so a long
//! upload or a Spark task outlives the keys it started with. The `Chain` is why this is by
//! hand: see `aws_sources.rs`.

use crate::bytes::s3::profile::Profile;
use crate::bytes::s3::sources::{self, AwsKeys, Issued, Role, Why};
use crate::bytes::storage_options::{StorageKey, StorageOptions};
use crate::error::{Error, ErrorKind, Result};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One source of temporary or static keys, with what it needs to ask again.
#[derive(Clone, Debug)]
enum Fetch {
    Static(AwsKeys),
    Imds(String),
    Container {
        url: String,
        token: Option<String>,
        token_file: Option<String>,
    },
    WebIdentity {
        sts: String,
        region: String,
        role_arn: String,
        session: String,
        token_file: String,
    },
    AssumeRole {
        sts: String,
        region: String,
        role_arn: String,
        session: String,
        external_id: Option<String>,
        source: Arc<Credentials>,
    },
    Process(String),
}

impl Fetch {
    fn fetch(&self) -> std::result::Result<Issued, Why> {
        match self {
            Fetch::Static(k) => Ok(Issued {
                keys: k.clone(),
                expires: None,
            }),
            Fetch::Imds(endpoint) => sources::imds(endpoint),
            Fetch::Container {
                url,
                token,
                token_file,
            } => {
                let auth =
                    match token_file {
                        Some(f) => Some(std::fs::read_to_string(f).map_err(|e| {
                            format!("the container authorization token file {f}: {e}")
                        })?),
                        None => token.clone(),
                    };
                sources::container(url, auth.as_deref())
            }
            Fetch::WebIdentity {
                sts,
                region,
                role_arn,
                session,
                token_file,
            } => sources::web_identity(
                &Role {
                    sts_endpoint: sts,
                    region,
                    role_arn,
                    session_name: session,
                },
                token_file,
            ),
            Fetch::AssumeRole {
                sts,
                region,
                role_arn,
                session,
                external_id,
                source,
            } => {
                let keys = source
                    .keys()
                    .map_err(|e| format!("the source credentials: {e}"))?;
                sources::assume_role(
                    &Role {
                        sts_endpoint: sts,
                        region,
                        role_arn,
                        session_name: session,
                    },
                    &keys,
                    external_id.as_deref(),
                )
            }
            Fetch::Process(cmd) => sources::process(cmd),
        }
    }
}

/// Keys from one source, refreshed before they expire.
#[derive(Debug)]
pub(crate) struct Credentials {
    /// The source's name, for messages ("web identity (role arn:…)").
    pub source: String,
    fetch: Fetch,
    state: Mutex<Option<(Issued, jiff::Timestamp)>>,
    /// Why the last refresh failed, if it did (for the error of a request then refused).
    refresh_failed: Mutex<Option<String>>,
}

/// The longest a refresh is done ahead of expiry.
const REFRESH_AHEAD: Duration = Duration::from_secs(300);

impl Credentials {
    fn new(source: String, fetch: Fetch, first: Issued) -> Credentials {
        Credentials {
            source,
            fetch,
            state: Mutex::new(Some((first, jiff::Timestamp::now()))),
            refresh_failed: Mutex::new(None),
        }
    }

    /// Static keys given directly.
    pub(crate) fn fixed(source: &str, keys: AwsKeys) -> Credentials {
        let issued = Issued {
            keys: keys.clone(),
            expires: None,
        };
        Credentials::new(source.to_owned(), Fetch::Static(keys), issued)
    }

    /// The current keys: fetched again when they are due for a refresh; a failed refresh
    /// keeps keys that have not expired yet, and is an error naming the source once they have.
    pub(crate) fn keys(&self) -> Result<AwsKeys> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = jiff::Timestamp::now();
        if let Some((issued, at)) = state.as_ref() {
            match issued.expires {
                None => return Ok(issued.keys.clone()),
                Some(exp) => {
                    let life = exp.duration_since(*at).unsigned_abs();
                    let ahead = (life / 4).min(REFRESH_AHEAD);
                    if now.duration_until(exp).unsigned_abs() > ahead && now < exp {
                        return Ok(issued.keys.clone());
                    }
                }
            }
        }
        match self.fetch.fetch() {
            Ok(fresh) => {
                let keys = fresh.keys.clone();
                *state = Some((fresh, now));
                Ok(keys)
            }
            Err(why) => match state.as_ref() {
                Some((issued, _)) if issued.expires.is_some_and(|e| now < e) => {
                    Ok(issued.keys.clone())
                }
                _ => Err(Error::new(ErrorKind::AccessDenied(format!(
                    "the credentials from {} expired and could not be refreshed: {why}",
                    self.source
                )))),
            },
        }
    }

    /// The keys to sign with now: refreshed when due; when a refresh fails after they expired,
    /// the last keys (the store then refuses them, and the error says why, through
    /// [`Credentials::refresh_failed`]).
    pub(crate) fn current(&self) -> AwsKeys {
        match self.keys() {
            Ok(k) => {
                *self
                    .refresh_failed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = None;
                k
            }
            Err(e) => {
                *self
                    .refresh_failed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                state
                    .as_ref()
                    .map(|(i, _)| i.keys.clone())
                    .unwrap_or(AwsKeys {
                        id: String::new(),
                        secret: String::new(),
                        token: None,
                    })
            }
        }
    }

    /// Why the last refresh failed, if the last one did.
    pub(crate) fn refresh_failed(&self) -> Option<String> {
        self.refresh_failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The key id in use (for messages), without a refresh.
    pub(crate) fn key_id(&self) -> String {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state
            .as_ref()
            .map(|(i, _)| i.keys.id.clone())
            .unwrap_or_default()
    }
}

/// What the chain found: keys (with their source), or none and what was tried.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub credentials: Option<Arc<Credentials>>,
    /// Each source tried, in order, and why it had nothing (sentences without secrets).
    pub tried: Vec<String>,
}

impl Found {
    /// What was tried, as one sentence, for an access-denied error of unsigned requests.
    pub(crate) fn tried_sentence(&self) -> String {
        if self.tried.is_empty() {
            return String::new();
        }
        format!(" (credential sources tried: {})", self.tried.join("; "))
    }
}

/// The names `credential_source` takes.
const SOURCES: &[&str] = &["env", "profile", "web_identity", "container", "imds"];

/// The chain's inputs: storage options, the environment, the region for STS.
pub(crate) struct Inputs<'a> {
    pub opts: &'a StorageOptions,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub profile: &'a Profile,
    pub region: &'a str,
}

fn bad(msg: String) -> Error {
    Error::new(ErrorKind::BadStorageOption(msg))
}

/// A source that is set up but failed: an error naming it and what came before.
fn broken(source: &str, why: Why, tried: &[String]) -> Error {
    let before = if tried.is_empty() {
        String::new()
    } else {
        format!(" (tried before it: {})", tried.join("; "))
    };
    Error::new(ErrorKind::AccessDenied(format!(
        "AWS credentials from {source}: {why}{before}"
    )))
}

/// Keys from `fetch`, asked once now, as `Credentials` of `source`.
fn ask(source: String, fetch: Fetch, tried: &[String]) -> Result<Arc<Credentials>> {
    match fetch.fetch() {
        Ok(first) => Ok(Arc::new(Credentials::new(source, fetch, first))),
        Err(why) => Err(broken(&source, why, tried)),
    }
}

/// The STS endpoint: the `sts_endpoint` option, `AWS_ENDPOINT_URL_STS`, the profile's
/// `sts_endpoint`-less `endpoint_url` is not used (it is S3's), else AWS's regional one.
fn sts_endpoint(i: &Inputs<'_>) -> String {
    i.opts
        .get(StorageKey::StsEndpoint)
        .map(str::to_owned)
        .or_else(|| (i.env)("AWS_ENDPOINT_URL_STS"))
        .unwrap_or_else(|| format!("https://sts.{}.amazonaws.com", i.region))
}

fn session_name(i: &Inputs<'_>, profile: Option<&Profile>) -> String {
    profile
        .and_then(|p| p.get("role_session_name"))
        .or_else(|| (i.env)("AWS_ROLE_SESSION_NAME"))
        .unwrap_or_else(|| format!("tensorsmith-{}", jiff::Timestamp::now().as_second()))
}

/// The instance metadata endpoint, or why it is not asked.
fn imds_endpoint(i: &Inputs<'_>) -> std::result::Result<String, Why> {
    if let Some(e) = i.opts.get(StorageKey::MetadataEndpoint) {
        return Ok(e.to_owned());
    }
    if (i.env)("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err("instance metadata: AWS_EC2_METADATA_DISABLED=true".to_owned());
    }
    if let Some(e) = (i.env)("AWS_EC2_METADATA_SERVICE_ENDPOINT") {
        return Ok(e);
    }
    let ipv6 = (i.env)("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE")
        .is_some_and(|m| m.eq_ignore_ascii_case("ipv6"));
    Ok(if ipv6 {
        "http://[fd00:ec2::254]".to_owned()
    } else {
        "http://169.254.169.254".to_owned()
    })
}

/// The container endpoint's URL and token settings, if the environment names one.
fn container_fetch(i: &Inputs<'_>) -> Option<Fetch> {
    let url = if let Some(rel) = (i.env)("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        format!("http://169.254.170.2{rel}")
    } else {
        (i.env)("AWS_CONTAINER_CREDENTIALS_FULL_URI")?
    };
    Some(Fetch::Container {
        url,
        token: (i.env)("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
        token_file: (i.env)("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
    })
}

/// Static keys of the environment.
fn env_keys(i: &Inputs<'_>) -> Option<AwsKeys> {
    Some(AwsKeys {
        id: (i.env)("AWS_ACCESS_KEY_ID")?,
        secret: (i.env)("AWS_SECRET_ACCESS_KEY")?,
        token: (i.env)("AWS_SESSION_TOKEN"),
    })
}

fn profile_keys(p: &Profile) -> Option<AwsKeys> {
    Some(AwsKeys {
        id: p.get("aws_access_key_id")?,
        secret: p.get("aws_secret_access_key")?,
        token: p.get("aws_session_token"),
    })
}

/// A profile's credentials by its own settings (role, web identity, static keys, process),
/// for a `source_profile`: `None` if it has none. `depth` bounds chains of source profiles.
fn profile_credentials(
    i: &Inputs<'_>,
    p: &Profile,
    depth: u32,
    tried: &mut Vec<String>,
) -> Result<Option<Arc<Credentials>>> {
    let name = &p.name;
    if let Some(role_arn) = p.get("role_arn") {
        if p.get("web_identity_token_file").is_none() {
            return assume_role(i, p, role_arn, depth, tried).map(Some);
        }
    }
    if let (Some(role_arn), Some(file)) = (p.get("role_arn"), p.get("web_identity_token_file")) {
        let fetch = Fetch::WebIdentity {
            sts: sts_endpoint(i),
            region: i.region.to_owned(),
            role_arn: role_arn.clone(),
            session: session_name(i, Some(p)),
            token_file: file,
        };
        return ask(
            format!("profile '{name}' web identity (role {role_arn})"),
            fetch,
            tried,
        )
        .map(Some);
    }
    if ["sso_session", "sso_start_url"]
        .iter()
        .any(|k| p.get(k).is_some())
    {
        return Err(bad(format!(
            "AWS profile '{name}' gets its credentials through SSO, which is not supported: \
             run `aws configure export-credentials --profile {name} --format env` and export \
             them, or use another profile"
        )));
    }
    if let Some(k) = profile_keys(p) {
        return Ok(Some(Arc::new(Credentials::fixed(
            &format!("profile '{name}' static keys"),
            k,
        ))));
    }
    if let Some(cmd) = p.get("credential_process") {
        return ask(
            format!("profile '{name}' credential_process"),
            Fetch::Process(cmd),
            tried,
        )
        .map(Some);
    }
    Ok(None)
}

/// `AssumeRole` for profile `p`'s `role_arn`, with the keys of its `source_profile` or
/// `credential_source`.
fn assume_role(
    i: &Inputs<'_>,
    p: &Profile,
    role_arn: String,
    depth: u32,
    tried: &mut Vec<String>,
) -> Result<Arc<Credentials>> {
    let name = &p.name;
    let source: Arc<Credentials> = if let Some(src) = p.get("source_profile") {
        if depth >= 4 {
            return Err(bad(format!(
                "AWS profile '{name}': source_profile chains deeper than 4 (a loop?)"
            )));
        }
        let sp = if src == *name {
            // A profile that is its own source uses its own static keys.
            match profile_keys(p) {
                Some(k) => Arc::new(Credentials::fixed(
                    &format!("profile '{name}' static keys"),
                    k,
                )),
                None => {
                    return Err(bad(format!(
                        "AWS profile '{name}' is its own source_profile but has no static keys"
                    )))
                }
            }
        } else {
            let sp = Profile::load(&src, true, i.env)?;
            profile_credentials(i, &sp, depth + 1, tried)?.ok_or_else(|| {
                bad(format!(
                    "AWS profile '{name}': its source_profile '{src}' has no credentials"
                ))
            })?
        };
        sp
    } else if let Some(cs) = p.get("credential_source") {
        let none = |what: &str| {
            bad(format!(
                "AWS profile '{name}': credential_source {cs} found no credentials ({what})"
            ))
        };
        match cs.as_str() {
            "Environment" => Arc::new(Credentials::fixed(
                "the environment",
                env_keys(i).ok_or_else(|| none("AWS_ACCESS_KEY_ID is not set"))?,
            )),
            "Ec2InstanceMetadata" => {
                let endpoint = imds_endpoint(i).map_err(|w| none(&w))?;
                ask(
                    "instance metadata (IMDSv2)".to_owned(),
                    Fetch::Imds(endpoint),
                    tried,
                )?
            }
            "EcsContainer" => {
                let f = container_fetch(i).ok_or_else(|| none("no container endpoint is set"))?;
                ask("the container endpoint".to_owned(), f, tried)?
            }
            other => {
                return Err(bad(format!(
                    "AWS profile '{name}': credential_source {other:?} is not one of \
                     Environment, Ec2InstanceMetadata, EcsContainer"
                )))
            }
        }
    } else {
        return Err(bad(format!(
            "AWS profile '{name}' has role_arn but neither source_profile nor \
             credential_source"
        )));
    };
    let fetch = Fetch::AssumeRole {
        sts: sts_endpoint(i),
        region: i.region.to_owned(),
        role_arn: role_arn.clone(),
        session: session_name(i, Some(p)),
        external_id: p.get("external_id"),
        source,
    };
    ask(format!("profile '{name}' role {role_arn}"), fetch, tried)
}

/// Runs the chain.
pub(crate) fn find(i: &Inputs<'_>) -> Result<Found> {
    let forced = i.opts.get(StorageKey::CredentialSource).map(str::to_owned);
    if let Some(f) = &forced {
        if !SOURCES.contains(&f.as_str()) {
            return Err(bad(format!(
                "credential_source {f:?} is not one of {}",
                SOURCES.join(", ")
            )));
        }
    }
    let wants = |s: &str| forced.as_deref().is_none_or(|f| f == s);
    let mut tried: Vec<String> = Vec::new();
    let found = |c: Arc<Credentials>, tried: Vec<String>| {
        Ok(Found {
            credentials: Some(c),
            tried,
        })
    };

    // 1. Storage options.
    let opt = |k| i.opts.get(k).map(str::to_owned);
    match (
        opt(StorageKey::AccessKeyId),
        opt(StorageKey::SecretAccessKey),
    ) {
        (Some(id), Some(secret)) => {
            let keys = AwsKeys {
                id,
                secret,
                token: opt(StorageKey::Token),
            };
            return found(Arc::new(Credentials::fixed("storage options", keys)), tried);
        }
        (None, None) => {}
        _ => {
            return Err(bad(
                "key and secret go together: give both or neither".to_owned()
            ))
        }
    }
    // 2. The environment, unless a profile is named by the options: as boto3's
    // `Session(profile_name=)` and the AWS CLI's `--profile`, that profile is the one used
    // (`AWS_PROFILE` in the environment does not set one aside: the environment's keys win).
    if wants("env") && opt(StorageKey::Profile).is_some() && forced.is_none() {
        tried.push("environment: set aside, the profile option names the profile".into());
    } else if wants("env") {
        match env_keys(i) {
            Some(k) => return found(Arc::new(Credentials::fixed("the environment", k)), tried),
            None => {
                tried.push("environment: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY not set".into())
            }
        }
    }
    let p = i.profile;
    // 3–7. The profile's role, web identity (the environment's first), SSO, keys, process.
    if wants("profile") && p.get("role_arn").is_some() && p.get("web_identity_token_file").is_none()
    {
        let role = p.get("role_arn").unwrap_or_default();
        return found(assume_role(i, p, role, 0, &mut tried)?, tried);
    }
    if wants("web_identity") {
        match (
            (i.env)("AWS_WEB_IDENTITY_TOKEN_FILE"),
            (i.env)("AWS_ROLE_ARN"),
        ) {
            (Some(file), Some(role_arn)) => {
                let fetch = Fetch::WebIdentity {
                    sts: sts_endpoint(i),
                    region: i.region.to_owned(),
                    role_arn: role_arn.clone(),
                    session: session_name(i, None),
                    token_file: file,
                };
                let c = ask(format!("web identity (role {role_arn})"), fetch, &tried)?;
                return found(c, tried);
            }
            (Some(_), None) => {
                return Err(broken(
                    "web identity",
                    "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not".into(),
                    &tried,
                ))
            }
            _ => tried.push("web identity: AWS_WEB_IDENTITY_TOKEN_FILE not set".into()),
        }
    }
    if wants("profile") || wants("web_identity") {
        if let Some(c) = profile_credentials(i, p, 0, &mut tried)? {
            return found(c, tried);
        }
        tried.push(if p.found {
            format!("profile '{}': no credentials in it", p.name)
        } else {
            format!(
                "profile '{}': not in ~/.aws/config or ~/.aws/credentials",
                p.name
            )
        });
    }
    // 8. The container endpoint.
    if wants("container") {
        match container_fetch(i) {
            Some(f) => {
                let c = ask(
                    "the container endpoint (ECS/EKS Pod Identity)".into(),
                    f,
                    &tried,
                )?;
                return found(c, tried);
            }
            None => tried
                .push("container: AWS_CONTAINER_CREDENTIALS_FULL_URI/_RELATIVE_URI not set".into()),
        }
    }
    // 9. Instance metadata: absent off EC2 (no answer within a second), an error only when
    // it was asked for by name.
    if wants("imds") {
        match imds_endpoint(i) {
            Ok(endpoint) => match Fetch::Imds(endpoint.clone()).fetch() {
                Ok(first) => {
                    let c = Credentials::new(
                        "instance metadata (IMDSv2)".into(),
                        Fetch::Imds(endpoint),
                        first,
                    );
                    return found(Arc::new(c), tried);
                }
                Err(why) if forced.is_some() => {
                    return Err(broken("instance metadata (IMDSv2)", why, &tried))
                }
                Err(why) => tried.push(format!("instance metadata: {why}")),
            },
            Err(why) => tried.push(why),
        }
    }
    if let Some(f) = forced {
        return Err(broken(&f, "it has no credentials".into(), &tried));
    }
    Ok(Found {
        credentials: None,
        tried,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn run(env: &[(&str, &str)], opts: &StorageOptions) -> Result<Found> {
        let env = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let profile = Profile::load("default", false, &env)?;
        find(&Inputs {
            opts,
            env: &env,
            profile: &profile,
            region: "us-east-1",
        })
    }

    /// Off EC2, a metadata endpoint that takes connections and never answers holds the
    /// chain for about a second, then requests go unsigned; asked for by name, it is an error.
    #[test]
    fn a_silent_metadata_endpoint_is_given_up_quickly() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", silent.local_addr().unwrap());
        let env = [
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint.as_str()),
            ("HOME", "/nonexistent"),
        ];
        let t = Instant::now();
        let f = run(&env, &StorageOptions::new()).unwrap();
        assert!(
            t.elapsed() < Duration::from_millis(2500),
            "{:?}",
            t.elapsed()
        );
        assert!(f.credentials.is_none());
        let tried = f.tried_sentence();
        assert!(
            tried.contains("instance metadata") && tried.contains("container"),
            "{tried}"
        );
        let mut opts = StorageOptions::new();
        opts.set("credential_source", "imds").unwrap();
        let e = run(&env, &opts).unwrap_err().to_string();
        assert!(e.contains("instance metadata (IMDSv2)"), "{e}");
        opts.set("credential_source", "nope").unwrap();
        assert!(run(&env, &opts)
            .unwrap_err()
            .to_string()
            .contains("one of env"));
    }

    /// A configured source that fails is an error naming it and what was tried before; no
    /// secret is in it.
    #[test]
    fn broken_sources_are_named() {
        let env = [
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9"),
            ("HOME", "/nonexistent"),
        ];
        let e = run(&env, &StorageOptions::new()).unwrap_err().to_string();
        assert!(
            e.contains("web identity (role arn:aws:iam::1:role/r)"),
            "{e}"
        );
        assert!(
            e.contains("/nonexistent/token") && e.contains("environment"),
            "{e}"
        );
        let env = [
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/x"),
            ("HOME", "/nonexistent"),
        ];
        let e = run(&env, &StorageOptions::new()).unwrap_err().to_string();
        assert!(e.contains("AWS_ROLE_ARN"), "{e}");
        let env = [
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://example.com/creds",
            ),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("HOME", "/nonexistent"),
        ];
        let e = run(&env, &StorageOptions::new()).unwrap_err().to_string();
        assert!(
            e.contains("container endpoint") && e.contains("must be https"),
            "{e}"
        );
        let env = [
            ("AWS_SECRET_ACCESS_KEY", "sekrit"),
            ("HOME", "/nonexistent"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ];
        let f = run(&env, &StorageOptions::new()).unwrap();
        assert!(!f.tried_sentence().contains("sekrit"));
    }

    /// Temporary keys are asked again a quarter of their lifetime before they expire.
    #[test]
    fn temporary_keys_are_refreshed_before_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("n");
        // Each run issues keys named by a counter, valid for 8 seconds.
        let script = format!(
            "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; \
             exp=$(date -u -d '+8 seconds' +%Y-%m-%dT%H:%M:%SZ); \
             printf '{{\"Version\":1,\"AccessKeyId\":\"K%s\",\"SecretAccessKey\":\"S\",\"Expiration\":\"%s\"}}' $n $exp",
            c = count.display()
        );
        let c = ask("test".into(), Fetch::Process(script), &[]).unwrap();
        assert_eq!(c.keys().unwrap().id, "K1");
        assert_eq!(c.keys().unwrap().id, "K1");
        std::thread::sleep(Duration::from_millis(6500));
        assert_eq!(c.keys().unwrap().id, "K2");
    }
}
