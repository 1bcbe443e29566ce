//! Where temporary AWS credentials come from, one function per source, each as AWS's SDKs
//! ask it: the EC2 instance metadata service (IMDSv2: a session token first), the ECS / EKS
//! Pod Identity container endpoint, STS (`AssumeRoleWithWebIdentity` for IRSA and web
//! identity, `AssumeRole` for a profile's `role_arn`), and a profile's `credential_process`.
//!
//! Written here, over the byte layer's HTTP client, because no crate in our tree asks them as
//! the SDKs do: `object_store`'s providers are private to its builder, which picks one source
//! and refuses a plain-HTTP STS endpoint; rusty-s3 signs requests only. The order they are
//! tried in, and the cache that refreshes what they issue, are `aws_chain.rs`.

use crate::bytes::s3::sigv4::{presign_get, SigningKeys};
use crate::bytes::s3::xml;
use std::time::Duration;

/// Static or temporary AWS keys.
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

/// Keys a source handed out, and when they expire (`None`: never).
#[derive(Clone, Debug)]
pub(crate) struct Issued {
    pub keys: AwsKeys,
    pub expires: Option<jiff::Timestamp>,
}

/// Why a source gave nothing: a sentence without secrets.
pub(crate) type Why = String;

/// How long the instance metadata service may take, connection included. AWS's SDKs give it
/// one second and one attempt, so that a machine off EC2 is not held up.
const IMDS_TIMEOUT: Duration = Duration::from_secs(1);
/// The container endpoint and STS: a few seconds, as the SDKs.
const SERVICE_TIMEOUT: Duration = Duration::from_secs(10);

/// A client whose requests each take at most `timeout`, connection included.
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(timeout))
        .timeout_global(Some(timeout))
        .max_redirects(0)
        .build()
        .into()
}

/// The body of a response, at most 64 KiB (credential documents are small).
fn body(resp: &mut ureq::http::Response<ureq::Body>) -> Result<String, Why> {
    resp.body_mut()
        .with_config()
        .limit(64 << 10)
        .read_to_string()
        .map_err(|e| format!("reading the answer: {e}"))
}

fn transport(what: &str, url: &str, e: ureq::Error) -> Why {
    format!(
        "{what} {} did not answer: {e}",
        crate::bytes::redact_url(url)
    )
}

/// A JSON credential document (IMDS, container endpoint, `credential_process`):
/// `AccessKeyId`, `SecretAccessKey`, `Token` or `SessionToken`, `Expiration`.
pub(crate) fn parse_json_keys(text: &str) -> Result<Issued, Why> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    if let Some(code) = field("Code").filter(|c| c != "Success") {
        return Err(format!(
            "the answer's Code is {code:?}: {}",
            field("Message").unwrap_or_default()
        ));
    }
    issued(|k| match k {
        "SessionToken" => field("Token").or_else(|| field("SessionToken")),
        k => field(k),
    })
}

/// Keys from a document's `AccessKeyId`, `SecretAccessKey`, `SessionToken` and `Expiration`
/// (ISO 8601), read by `field`.
fn issued(field: impl Fn(&str) -> Option<String>) -> Result<Issued, Why> {
    let (Some(id), Some(secret)) = (field("AccessKeyId"), field("SecretAccessKey")) else {
        return Err("the answer has no AccessKeyId and SecretAccessKey".to_owned());
    };
    let expires = match field("Expiration") {
        Some(e) => Some(parse_time(&e)?),
        None => None,
    };
    Ok(Issued {
        keys: AwsKeys {
            id,
            secret,
            token: field("SessionToken"),
        },
        expires,
    })
}

fn parse_time(s: &str) -> Result<jiff::Timestamp, Why> {
    s.parse::<jiff::Timestamp>()
        .map_err(|e| format!("the expiry {s:?} is not a time: {e}"))
}

/// IMDSv2: a session token (`PUT /latest/api/token`), the role's name, then its keys.
/// `endpoint` is `http://169.254.169.254` on EC2.
pub(crate) fn imds(endpoint: &str) -> Result<Issued, Why> {
    let base = endpoint.trim_end_matches('/');
    let agent = agent(IMDS_TIMEOUT);
    let url = format!("{base}/latest/api/token");
    let mut r = agent
        .put(&url)
        .header("X-aws-ec2-metadata-token-ttl-seconds", "21600")
        .send_empty()
        .map_err(|e| transport("the instance metadata service", &url, e))?;
    if r.status() != 200 {
        return Err(format!(
            "the instance metadata service refused a session token (HTTP {})",
            r.status().as_u16()
        ));
    }
    let token = body(&mut r)?;
    let get = |url: &str| -> Result<String, Why> {
        let mut r = agent
            .get(url)
            .header("X-aws-ec2-metadata-token", token.trim())
            .call()
            .map_err(|e| transport("the instance metadata service", url, e))?;
        match r.status().as_u16() {
            200 => body(&mut r),
            404 => Err("the instance has no IAM role (instance profile)".to_owned()),
            s => Err(format!(
                "the instance metadata service answered HTTP {s} for {}",
                crate::bytes::redact_url(url)
            )),
        }
    };
    let roles = format!("{base}/latest/meta-data/iam/security-credentials/");
    let role = get(&roles)?;
    let role = role.lines().next().unwrap_or("").trim();
    if role.is_empty() {
        return Err("the instance has no IAM role (instance profile)".to_owned());
    }
    parse_json_keys(&get(&format!("{roles}{role}"))?)
        .map_err(|e| format!("the instance role {role:?}: {e}"))
}

/// Whether a container endpoint may be asked over plain HTTP: AWS's SDKs allow the ECS and
/// EKS link-local addresses and loopback only; anything else must be HTTPS.
fn container_http_allowed(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => {
            ip.is_loopback()
                || ip.octets() == [169, 254, 170, 2]
                || ip.octets() == [169, 254, 170, 23]
        }
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback() || ip.segments() == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x23]
        }
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    }
}

/// The ECS task role or EKS Pod Identity endpoint: `url` with `authorization` (the token
/// from `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` or `_TOKEN`) as `Authorization`.
pub(crate) fn container(url: &str, authorization: Option<&str>) -> Result<Issued, Why> {
    let parsed = url::Url::parse(url)
        .map_err(|e| format!("the container credentials URI is not a URL: {e}"))?;
    if parsed.scheme() != "https" && !(parsed.scheme() == "http" && container_http_allowed(&parsed))
    {
        return Err(format!(
            "the container credentials URI {} must be https, or http to loopback or the \
             ECS/EKS addresses",
            crate::bytes::redact_url(url)
        ));
    }
    let mut req = agent(SERVICE_TIMEOUT).get(url);
    if let Some(a) = authorization {
        req = req.header("Authorization", a.trim());
    }
    let mut r = req
        .call()
        .map_err(|e| transport("the container credentials endpoint", url, e))?;
    let status = r.status().as_u16();
    let text = body(&mut r)?;
    if status != 200 {
        return Err(format!(
            "the container credentials endpoint {} answered HTTP {status}",
            crate::bytes::redact_url(url)
        ));
    }
    parse_json_keys(&text)
}

/// STS's answer: the `<Credentials>` of a successful call, or its `<Error>` worded.
fn sts_answer(status: u16, text: &str) -> Result<Issued, Why> {
    if status != 200 {
        let code = xml::text(text, "Code").unwrap_or_else(|| format!("HTTP {status}"));
        let msg = xml::text(text, "Message").unwrap_or_default();
        return Err(format!("STS refused: {code}: {msg}"));
    }
    issued(|k| xml::text(text, k)).map_err(|e| format!("STS: {e}"))
}

/// What an STS role call needs besides its keys.
pub(crate) struct Role<'a> {
    pub sts_endpoint: &'a str,
    pub region: &'a str,
    pub role_arn: &'a str,
    pub session_name: &'a str,
}

/// `AssumeRoleWithWebIdentity` with the token in `token_file` (IRSA, GitHub Actions, any
/// OIDC provider): an unsigned POST.
pub(crate) fn web_identity(role: &Role<'_>, token_file: &str) -> Result<Issued, Why> {
    let token = std::fs::read_to_string(token_file)
        .map_err(|e| format!("the web identity token file {token_file}: {e}"))?;
    let form = [
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role.role_arn),
        ("RoleSessionName", role.session_name),
        ("WebIdentityToken", token.trim()),
    ];
    let url = role.sts_endpoint;
    let mut r = agent(SERVICE_TIMEOUT)
        .post(url)
        .send_form(form)
        .map_err(|e| transport("STS", url, e))?;
    let status = r.status().as_u16();
    let text = body(&mut r)?;
    sts_answer(status, &text).map_err(|e| format!("{e} (role {})", role.role_arn))
}

/// `AssumeRole` signed with `source`'s keys (a profile's `role_arn` with `source_profile` or
/// `credential_source`).
pub(crate) fn assume_role(
    role: &Role<'_>,
    source: &AwsKeys,
    external_id: Option<&str>,
) -> Result<Issued, Why> {
    let endpoint = url::Url::parse(role.sts_endpoint)
        .map_err(|e| format!("the STS endpoint is not a URL: {e}"))?;
    let mut params = vec![
        ("Action", "AssumeRole"),
        ("Version", "2011-06-15"),
        ("RoleArn", role.role_arn),
        ("RoleSessionName", role.session_name),
    ];
    if let Some(x) = external_id {
        params.push(("ExternalId", x));
    }
    let keys = SigningKeys {
        id: &source.id,
        secret: &source.secret,
        token: source.token.as_deref(),
    };
    let url = presign_get(
        &endpoint,
        &params,
        &keys,
        "sts",
        role.region,
        jiff::Timestamp::now(),
        300,
    );
    let mut r = agent(SERVICE_TIMEOUT)
        .get(&url)
        .call()
        .map_err(|e| transport("STS", role.sts_endpoint, e))?;
    let status = r.status().as_u16();
    let text = body(&mut r)?;
    sts_answer(status, &text).map_err(|e| format!("{e} (role {})", role.role_arn))
}

/// A profile's `credential_process`: the command run by `sh -c`, its standard output the
/// JSON document of AWS's credential_process protocol (`Version` 1).
pub(crate) fn process(command: &str) -> Result<Issued, Why> {
    let out = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("credential_process could not start: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "credential_process exited with {}: {}",
            out.status,
            err.trim().chars().take(400).collect::<String>()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("credential_process printed no JSON: {e}"))?;
    if v.get("Version").and_then(|x| x.as_u64()) != Some(1) {
        return Err("credential_process printed a document without \"Version\": 1".to_owned());
    }
    parse_json_keys(&text).map_err(|e| format!("credential_process: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_documents() {
        let i = parse_json_keys(
            r#"{"Code":"Success","AccessKeyId":"ASIA1","SecretAccessKey":"s","Token":"t",
                "Expiration":"2030-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(i.keys.id, "ASIA1");
        assert_eq!(i.keys.token.as_deref(), Some("t"));
        assert_eq!(i.expires.unwrap().to_string(), "2030-01-01T00:00:00Z");
        let e = parse_json_keys(r#"{"Code":"Failure","Message":"no"}"#).unwrap_err();
        assert!(e.contains("Failure"), "{e}");
        assert!(parse_json_keys("{}").is_err());
        assert!(parse_json_keys("nope").is_err());
    }

    #[test]
    fn sts_xml() {
        let ok = "<AssumeRoleResponse><AssumeRoleResult><Credentials>\
            <AccessKeyId>ASIA2</AccessKeyId><SecretAccessKey>x</SecretAccessKey>\
            <SessionToken>y</SessionToken><Expiration>2030-01-01T00:00:00Z</Expiration>\
            </Credentials></AssumeRoleResult></AssumeRoleResponse>";
        assert_eq!(sts_answer(200, ok).unwrap().keys.id, "ASIA2");
        let err = "<ErrorResponse><Error><Code>AccessDenied</Code><Message>nope</Message>\
            </Error></ErrorResponse>";
        let e = sts_answer(403, err).unwrap_err();
        assert!(e.contains("AccessDenied: nope"), "{e}");
    }

    #[test]
    fn container_hosts() {
        let ok = |u: &str| container_http_allowed(&url::Url::parse(u).unwrap());
        assert!(ok("http://127.0.0.1:9/x"));
        assert!(ok("http://169.254.170.23/v1/credentials"));
        assert!(ok("http://[fd00:ec2::23]/v1/credentials"));
        assert!(!ok("http://example.com/x"));
        assert!(!ok("http://10.0.0.1/x"));
    }

    #[test]
    fn process_protocol() {
        let i = process(
            r#"printf '{"Version":1,"AccessKeyId":"A","SecretAccessKey":"S","SessionToken":"T"}'"#,
        )
        .unwrap();
        assert_eq!(i.keys.token.as_deref(), Some("T"));
        assert!(i.expires.is_none());
        assert!(process("exit 3").unwrap_err().contains("exited"));
        assert!(process(r#"printf '{"AccessKeyId":"A"}'"#)
            .unwrap_err()
            .contains("Version"));
    }
}
