//! A URL as errors may show it: without the credentials a URL can carry (`user:password@` in
//! its authority, tokens and signatures in its query), so that secrets are never printed.

/// `url` without userinfo, query or fragment: `https://u:p@host/a/b?sig=x` → `https://host/a/b`.
/// Text that is not a `scheme://` URL comes back unchanged.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn credentials_are_removed() {
        assert_eq!(
            redact_url("https://u:p@host:8/a/b.safetensors?X-Amz-Signature=s#f"),
            "https://host:8/a/b.safetensors"
        );
        assert_eq!(redact_url("http://host"), "http://host");
        assert_eq!(redact_url("http://host?token=t"), "http://host");
        assert_eq!(redact_url("http://a@b/c@d"), "http://b/c@d");
        assert_eq!(redact_url("model.safetensors"), "model.safetensors");
    }
}
