//! Google credential files for `gs://`, read as Google's client libraries read them: the file
//! `GOOGLE_APPLICATION_CREDENTIALS` names, else gcloud's application-default credentials
//! (`~/.config/gcloud/application_default_credentials.json`, written by `gcloud auth
//! application-default login`). Two kinds:
//! - `service_account`: a JWT (RS256 with the file's private key, by `ring`) exchanged at the
//!   file's `token_uri` for an access token (OAuth 2 JWT bearer grant);
//! - `authorized_user`: the refresh token exchanged at the token endpoint.
//!
//! The token is fetched when the object is opened (a refused credential is an error then) and
//! fetched again five minutes before it expires. Other kinds (external accounts, impersonation)
//! are refused by name. Written here because Google's Rust auth crates are async (tokio) and
//! would not fit the extension's size limit.

use crate::bytes::url_path::encode;
use crate::error::{Error, ErrorKind, Result};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Reads and writes of objects (the narrowest scope that covers both).
const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

enum Grant {
    ServiceAccount {
        email: String,
        key_id: Option<String>,
        /// The private key, PKCS#8 DER.
        key: Vec<u8>,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
    },
}

/// Access tokens from one credential file.
pub(crate) struct TokenSource {
    path: PathBuf,
    grant: Grant,
    token_uri: String,
    /// The current token and when to fetch the next.
    cache: Mutex<Option<(String, Instant)>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSource({})", self.path.display())
    }
}

fn bad(path: &Path, why: String) -> Error {
    Error::new(ErrorKind::BadStorageOption(format!(
        "Google credentials {}: {why}",
        path.display()
    )))
}

/// The credential file to use, if any: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's
/// application-default credentials when present.
pub(crate) fn credential_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = env("GOOGLE_APPLICATION_CREDENTIALS") {
        return Some(PathBuf::from(p));
    }
    let config = env("CLOUDSDK_CONFIG")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".config/gcloud")))?;
    Some(config.join("application_default_credentials.json")).filter(|p| p.is_file())
}

/// The DER bytes of a PEM block.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

fn b64url(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

impl TokenSource {
    /// The credential file at `path`, read and checked (not yet exchanged).
    pub(crate) fn load(path: &Path) -> Result<TokenSource> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad(path, format!("cannot be read ({e})")))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(path, format!("is not JSON ({e})")))?;
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
        let need = |k: &str| field(k).ok_or_else(|| bad(path, format!("has no \"{k}\"")));
        let kind = field("type").unwrap_or_default();
        let grant = match kind.as_str() {
            "service_account" => Grant::ServiceAccount {
                email: need("client_email")?,
                key_id: field("private_key_id"),
                key: pem_der(&need("private_key")?)
                    .ok_or_else(|| bad(path, "its private_key is not PEM".to_owned()))?,
            },
            "authorized_user" => Grant::AuthorizedUser {
                client_id: need("client_id")?,
                client_secret: need("client_secret")?,
                refresh_token: need("refresh_token")?,
            },
            other => {
                return Err(bad(
                    path,
                    format!(
                        "credentials of type \"{other}\" are not read (service_account and \
                         authorized_user are; or pass an access token as the token storage \
                         option)"
                    ),
                ))
            }
        };
        Ok(TokenSource {
            path: path.to_owned(),
            grant,
            token_uri: field("token_uri").unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned()),
            cache: Mutex::new(None),
        })
    }

    /// A valid access token: the cached one, or a new one from the token endpoint.
    pub(crate) fn token(&self, agent: &ureq::Agent) -> Result<String> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, renew)) = cache.as_ref() {
            if Instant::now() < *renew {
                return Ok(t.clone());
            }
        }
        let (token, lifetime) = self.fetch(agent)?;
        let renew = Instant::now() + lifetime.saturating_sub(Duration::from_secs(300));
        *cache = Some((token.clone(), renew));
        Ok(token)
    }

    /// The form the token endpoint takes for this grant.
    fn form(&self) -> Result<String> {
        let pairs: Vec<(&str, String)> = match &self.grant {
            Grant::ServiceAccount { email, key_id, key } => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
                if let Some(k) = key_id {
                    header["kid"] = k.clone().into();
                }
                let claims = serde_json::json!({
                    "iss": email, "scope": SCOPE, "aud": self.token_uri,
                    "iat": now, "exp": now + 3600,
                });
                let signed = format!(
                    "{}.{}",
                    b64url(header.to_string().as_bytes()),
                    b64url(claims.to_string().as_bytes())
                );
                let pair = ring::signature::RsaKeyPair::from_pkcs8(key).map_err(|e| {
                    bad(
                        &self.path,
                        format!("its private_key is not an RSA key ({e})"),
                    )
                })?;
                let mut sig = vec![0u8; pair.public().modulus_len()];
                pair.sign(
                    &ring::signature::RSA_PKCS1_SHA256,
                    &ring::rand::SystemRandom::new(),
                    signed.as_bytes(),
                    &mut sig,
                )
                .map_err(|_| bad(&self.path, "signing with its private_key failed".into()))?;
                vec![
                    (
                        "grant_type",
                        "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned(),
                    ),
                    ("assertion", format!("{signed}.{}", b64url(&sig))),
                ]
            }
            Grant::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
            } => vec![
                ("grant_type", "refresh_token".to_owned()),
                ("client_id", client_id.clone()),
                ("client_secret", client_secret.clone()),
                ("refresh_token", refresh_token.clone()),
            ],
        };
        Ok(pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v, false)))
            .collect::<Vec<_>>()
            .join("&"))
    }

    /// Whose credentials these are, and from which file (for errors).
    pub(crate) fn who(&self) -> String {
        match &self.grant {
            Grant::ServiceAccount { email, .. } => {
                format!("service account {email} ({})", self.path.display())
            }
            Grant::AuthorizedUser { .. } => {
                format!("the user credentials in {}", self.path.display())
            }
        }
    }

    /// A new token and its lifetime, from the token endpoint.
    fn fetch(&self, agent: &ureq::Agent) -> Result<(String, Duration)> {
        let refused = |why: String| {
            Error::new(ErrorKind::AccessDenied(format!(
                "the token endpoint {} refused {}: {why}",
                crate::bytes::redact_url(&self.token_uri),
                self.who()
            )))
        };
        let mut resp = agent
            .post(&self.token_uri)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .send(self.form()?)
            .map_err(|e| refused(format!("no answer ({e})")))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(64 << 10)
            .read_to_string()
            .map_err(|e| refused(format!("reading the answer: {e}")))?;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let text = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or_default();
        match (status, text("access_token")) {
            (200, t) if !t.is_empty() => {
                let secs = v.get("expires_in").and_then(|x| x.as_u64()).unwrap_or(3600);
                Ok((t.to_owned(), Duration::from_secs(secs)))
            }
            _ => Err(refused(format!(
                "HTTP {status} {} {}",
                text("error"),
                text("error_description")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_checked_and_found() {
        let d = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let p = write("ext.json", r#"{"type": "external_account"}"#);
        let e = TokenSource::load(&p).unwrap_err().to_string();
        assert!(e.contains("\"external_account\" are not read"), "{e}");
        let p = write(
            "user.json",
            r#"{"type": "authorized_user", "client_id": "c"}"#,
        );
        let e = TokenSource::load(&p).unwrap_err().to_string();
        assert!(e.contains("has no \"client_secret\""), "{e}");
        let p = write(
            "u2.json",
            r#"{"type": "authorized_user", "client_id": "c", "client_secret": "s",
                "refresh_token": "r t"}"#,
        );
        let s = TokenSource::load(&p).unwrap();
        assert_eq!(s.token_uri, DEFAULT_TOKEN_URI);
        assert_eq!(
            s.form().unwrap(),
            "grant_type=refresh_token&client_id=c&client_secret=s&refresh_token=r%20t"
        );
        let home = d.path().to_str().unwrap().to_owned();
        let env = |k: &str| (k == "HOME").then(|| home.clone());
        assert_eq!(credential_file(&env), None);
        std::fs::create_dir_all(d.path().join(".config/gcloud")).unwrap();
        write(".config/gcloud/application_default_credentials.json", "{}");
        assert!(credential_file(&env).is_some());
        let env2 = |k: &str| (k == "GOOGLE_APPLICATION_CREDENTIALS").then(|| "/x.json".into());
        assert_eq!(credential_file(&env2), Some(PathBuf::from("/x.json")));
    }
}
