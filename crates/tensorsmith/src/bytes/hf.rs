//! `hf://` URLs of the Hugging Face Hub read as HTTP files:
//! - `hf://ORG/REPO/PATH` and `hf://ORG/REPO@REV/PATH` (a model; `hf://models/…` too),
//! - `hf://datasets/ORG/REPO[@REV]/PATH` and `hf://spaces/ORG/REPO[@REV]/PATH`,
//!
//! resolve to `ENDPOINT/[datasets/|spaces/]ORG/REPO/resolve/REV/PATH` (`ENDPOINT`: the
//! `endpoint_url` storage option, else `HF_ENDPOINT`, else `https://huggingface.co`; `REV`
//! defaults to `main` and is percent-encoded whole, so `refs/pr/1` stays one segment). A
//! revision with slashes is written encoded (`@refs%2Fpr%2F1`), or as `@refs/pr/N` and
//! `@refs/convert/NAME`, which are recognised.
//!
//! The token (the `token` storage option, else `HF_TOKEN`, else the file `huggingface_hub`
//! saves: `HF_TOKEN_PATH`, else `$HF_HOME/token`, else `~/.cache/huggingface/token`) goes
//! as `Authorization: Bearer` to the endpoint's host only: the Hub redirects downloads to
//! its CDN, and the HTTP client drops the header on a redirect to another host.
//!
//! The Hub is read only: a write to `hf://` is refused (`url_scheme::refuse_write`).

use crate::bytes::http::{other_status, Target};
use crate::bytes::redact_url;
use crate::bytes::storage_options::{StorageKey, StorageOptions};
use crate::bytes::url_path::encode;
use crate::error::{Error, ErrorKind, Result};
use std::path::{Path, PathBuf};

const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The kind of a Hub repository, by its URL prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RepoKind {
    Model,
    Dataset,
    Space,
}

/// The parts of an `hf://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HfPath {
    pub kind: RepoKind,
    /// `ORG/REPO`.
    pub repo: String,
    pub rev: String,
    pub path: String,
}

fn bad(location: &str, why: &str) -> Error {
    Error::new(ErrorKind::BadStorageOption(format!(
        "an hf:// URL is hf://[datasets/|spaces/]ORG/REPO[@REVISION]/PATH: {why}"
    )))
    .in_file(Path::new(location))
}

/// `%XX` escapes decoded (an invalid one is kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The parts of `hf://…`.
pub(crate) fn parse_hf_url(location: &str) -> Result<HfPath> {
    let rest = location
        .split_once("://")
        .map(|(_, r)| r)
        .ok_or_else(|| bad(location, "no scheme"))?;
    let (kind, rest) = if let Some(r) = rest.strip_prefix("datasets/") {
        (RepoKind::Dataset, r)
    } else if let Some(r) = rest.strip_prefix("spaces/") {
        (RepoKind::Space, r)
    } else {
        (
            RepoKind::Model,
            rest.strip_prefix("models/").unwrap_or(rest),
        )
    };
    let mut segs = rest.split('/');
    let org = segs.next().unwrap_or_default();
    let name_rev = segs.next().unwrap_or_default();
    let (name, rev) = match name_rev.split_once('@') {
        Some((n, r)) => (n, Some(r)),
        None => (name_rev, None),
    };
    if org.is_empty() || name.is_empty() {
        return Err(bad(location, "no ORG/REPO"));
    }
    let mut rest: Vec<&str> = segs.collect();
    let rev = match rev {
        None => "main".to_owned(),
        Some("") => return Err(bad(location, "an empty revision")),
        Some("refs") if rest.len() >= 2 && matches!(rest[0], "pr" | "convert") => {
            let r = format!("refs/{}/{}", rest[0], rest[1]);
            rest.drain(..2);
            r
        }
        Some(r) => percent_decode(r),
    };
    let path = rest.join("/");
    if path.is_empty() || rest.iter().any(|s| s.is_empty() || *s == "." || *s == "..") {
        return Err(bad(
            location,
            "no PATH, or an empty, `.` or `..` part in it",
        ));
    }
    Ok(HfPath {
        kind,
        repo: format!("{org}/{name}"),
        rev,
        path,
    })
}

/// The repository's name (`REPO` of `hf://ORG/REPO[@REV]`) when `location` is an `hf://`
/// URL of a repository's root (no path in it, a trailing `/` allowed); `None` otherwise.
pub fn hf_repo_name(location: &str) -> Option<String> {
    if !location.to_ascii_lowercase().starts_with("hf://") {
        return None;
    }
    let p = parse_hf_url(&format!("{}/_", location.trim_end_matches('/'))).ok()?;
    (p.path == "_").then(|| p.repo.rsplit('/').next().unwrap_or_default().to_string())
}

impl HfPath {
    /// The resolve URL under `endpoint`.
    pub(crate) fn resolve_url(&self, endpoint: &str) -> String {
        let prefix = match self.kind {
            RepoKind::Model => "",
            RepoKind::Dataset => "datasets/",
            RepoKind::Space => "spaces/",
        };
        format!(
            "{}/{prefix}{}/resolve/{}/{}",
            endpoint.trim_end_matches('/'),
            encode(&self.repo, true),
            encode(&self.rev, false),
            encode(&self.path, true)
        )
    }
}

/// A file on the Hub, and how to ask for it.
pub(crate) struct HfFile {
    name: String,
    path: HfPath,
    url: String,
    endpoint: String,
    token: Option<String>,
}

impl std::fmt::Debug for HfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HfFile({:?})", self.name)
    }
}

/// The token `huggingface_hub` saved with `hf auth login`, if any.
fn saved_token(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let path = env("HF_TOKEN_PATH").map(PathBuf::from).or_else(|| {
        env("HF_HOME")
            .map(|h| PathBuf::from(h).join("token"))
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface/token")))
    })?;
    let t = std::fs::read_to_string(path).ok()?;
    Some(t.trim().to_owned()).filter(|t| !t.is_empty())
}

impl HfFile {
    /// The file `location` names, with the settings of `opts` and the environment.
    pub(crate) fn resolve(location: &str, opts: &StorageOptions) -> Result<HfFile> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        HfFile::with_env(location, opts, &env)
    }

    fn with_env(
        location: &str,
        opts: &StorageOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HfFile> {
        let path = parse_hf_url(location)?;
        let endpoint = opts
            .get(StorageKey::EndpointUrl)
            .map(str::to_owned)
            .or_else(|| env("HF_ENDPOINT"))
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let token = if opts.anon() {
            None
        } else {
            opts.get(StorageKey::Token)
                .map(str::to_owned)
                .or_else(|| env("HF_TOKEN"))
                .or_else(|| saved_token(env))
        };
        Ok(HfFile {
            name: location.to_owned(),
            url: path.resolve_url(&endpoint),
            endpoint: redact_url(&endpoint),
            path,
            token,
        })
    }
}

impl Target for HfFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    fn keeps_redirects(&self) -> bool {
        // The Hub answers every resolve with the same CDN URL, signed for an hour or so:
        // asked directly, with a new resolve when it expires.
        true
    }

    fn authorization(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("Bearer {t}"))
    }

    fn status_error(&self, status: u16, error_code: Option<&str>, _: &str) -> ErrorKind {
        let HfPath {
            repo, rev, path, ..
        } = &self.path;
        let token = match self.token {
            Some(_) => "the token sent has no access to it",
            None => "no token was sent: set HF_TOKEN or the token storage option",
        };
        match (status, error_code.unwrap_or_default()) {
            (_, "GatedRepo") => ErrorKind::AccessDenied(format!(
                "repo {repo} is gated: accept its conditions on the Hub, with a token of an \
                 account that has ({token})"
            )),
            (401, "RepoNotFound") => ErrorKind::AccessDenied(format!(
                "repo {repo} does not exist, or it is private or gated and {token}"
            )),
            (401 | 403, _) => ErrorKind::AccessDenied(format!(
                "repo {repo} is private or gated (HTTP {status}): {token}"
            )),
            (404, "RepoNotFound") => ErrorKind::RemoteNotFound(format!("repo {repo}")),
            (404, "RevisionNotFound") => {
                ErrorKind::RemoteNotFound(format!("revision '{rev}' of repo {repo}"))
            }
            (404, _) => ErrorKind::RemoteNotFound(format!(
                "file '{path}' in repo {repo} at revision '{rev}'"
            )),
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
    fn urls() {
        let p = parse_hf_url("hf://org/repo/dir/model.safetensors").unwrap();
        assert_eq!(
            p.resolve_url("https://huggingface.co/"),
            "https://huggingface.co/org/repo/resolve/main/dir/model.safetensors"
        );
        let p = parse_hf_url("hf://datasets/org/ds@v1.0/a b.gguf").unwrap();
        assert_eq!(
            p.resolve_url("http://h"),
            "http://h/datasets/org/ds/resolve/v1.0/a%20b.gguf"
        );
        for u in [
            "hf://org/r@refs/pr/3/x.gguf",
            "hf://org/r@refs%2Fpr%2F3/x.gguf",
        ] {
            let p = parse_hf_url(u).unwrap();
            assert_eq!(p.rev, "refs/pr/3");
            assert_eq!(
                p.resolve_url("http://h"),
                "http://h/org/r/resolve/refs%2Fpr%2F3/x.gguf"
            );
        }
        let p = parse_hf_url("hf://spaces/o/s/app.onnx").unwrap();
        assert_eq!(p.kind, RepoKind::Space);
        for u in [
            "hf://org",
            "hf://org/repo",
            "hf://org/repo/",
            "hf://org/r@/x",
            "hf://o/r/../x",
        ] {
            assert!(parse_hf_url(u).is_err(), "{u}");
        }
        let env = |k: &str| (k == "HF_TOKEN").then(|| "hf_secret".to_owned());
        let f = HfFile::with_env("hf://o/r/x", &StorageOptions::new(), &env).unwrap();
        assert_eq!(f.authorization().as_deref(), Some("Bearer hf_secret"));
        assert!(!format!("{f:?}").contains("hf_secret"));
        let mut anon = StorageOptions::new();
        anon.set("anon", "true").unwrap();
        let f = HfFile::with_env("hf://o/r/x", &anon, &env).unwrap();
        assert_eq!(f.authorization(), None);
    }
}
