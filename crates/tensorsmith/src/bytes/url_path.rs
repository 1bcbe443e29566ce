//! Percent-encoding of URL path parts, as object stores and the Hub expect them: unreserved
//! characters (RFC 3986) kept, every other byte `%XX`. Written here rather than taken from the
//! `percent-encoding` crate because the rule is one line and each caller decides about `/`
//! (a key's slashes separate segments; a Hub revision's do not).

use crate::error::{Error, ErrorKind, Result};
use std::path::Path;

/// `(bucket, key)` of `SCHEME://BUCKET/KEY` (`s3://`, `gs://`, and Azure's
/// `az://CONTAINER/BLOB`): neither may be empty.
pub(crate) fn split_bucket_url(location: &str) -> Result<(&str, &str)> {
    let scheme = location.split_once("://").map_or("", |(s, _)| s);
    let bad = |why: &str| {
        Error::new(ErrorKind::BadStorageOption(format!(
            "{scheme}:// URLs are {scheme}://BUCKET/KEY: {why}"
        )))
        .in_file(Path::new(location))
    };
    let (_, rest) = location.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let (bucket, key) = rest.split_once('/').ok_or_else(|| bad("no key"))?;
    if bucket.is_empty() {
        return Err(bad("no bucket"));
    }
    if key.is_empty() {
        return Err(bad("no key"));
    }
    Ok((bucket, key))
}

/// `s` percent-encoded for a URL path, `/` kept only when `keep_slash`.
pub(crate) fn encode(s: &str, keep_slash: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || (keep_slash && b == b'/') {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes() {
        assert_eq!(super::encode("a b/c+d~", true), "a%20b/c%2Bd~");
        assert_eq!(super::encode("refs/pr/1", false), "refs%2Fpr%2F1");
        assert_eq!(super::encode("é", true), "%C3%A9");
        assert_eq!(super::split_bucket_url("gs://b/k/x").unwrap(), ("b", "k/x"));
        for u in ["gs://b", "gs:///k", "gs://b/"] {
            let e = super::split_bucket_url(u).unwrap_err().to_string();
            assert!(e.contains("gs:// URLs are gs://BUCKET/KEY"), "{e}");
        }
    }
}
