//! A SigV4 presigned GET: STS `AssumeRole`, called by the credential chain (`aws_sources.rs`)
//! with the source profile's keys, and S3's ListMultipartUploads (`s3_uploads.rs`), which
//! object_store does not offer. Written here because object_store's signer is private to
//! its S3 client; this is the query-string form of AWS's documented algorithm (canonical
//! request, string to sign, derived key), HMAC-SHA256 and SHA-256 from `ring`.

use ring::{digest, hmac};

/// Characters SigV4 leaves unencoded in a query: RFC 3986's unreserved set.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac(key: &[u8], data: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        .as_ref()
        .to_vec()
}

/// The keys a request is signed with.
pub(crate) struct SigningKeys<'a> {
    pub id: &'a str,
    pub secret: &'a str,
    pub token: Option<&'a str>,
}

/// `endpoint` (scheme, host, optional port and path; no query) with `params` and the SigV4
/// query parameters of a GET signed for `service` in `region` at `now`, valid for
/// `expires_s` seconds.
pub(crate) fn presign_get(
    endpoint: &url::Url,
    params: &[(&str, &str)],
    keys: &SigningKeys<'_>,
    service: &str,
    region: &str,
    now: jiff::Timestamp,
    expires_s: u32,
) -> String {
    let date = now.strftime("%Y%m%d").to_string();
    let stamp = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let credential = format!("{}/{scope}", keys.id);
    let expires = expires_s.to_string();
    let mut query: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in [
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
        ("X-Amz-Credential", credential.as_str()),
        ("X-Amz-Date", stamp.as_str()),
        ("X-Amz-Expires", expires.as_str()),
        ("X-Amz-SignedHeaders", "host"),
    ] {
        query.push((k.to_owned(), v.to_owned()));
    }
    if let Some(t) = keys.token.filter(|t| !t.is_empty()) {
        query.push(("X-Amz-Security-Token".to_owned(), t.to_owned()));
    }
    let mut encoded: Vec<(String, String)> =
        query.iter().map(|(k, v)| (encode(k), encode(v))).collect();
    encoded.sort();
    let canonical_query = encoded
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let host = match endpoint.port() {
        Some(p) => format!("{}:{p}", endpoint.host_str().unwrap_or_default()),
        None => endpoint.host_str().unwrap_or_default().to_owned(),
    };
    let path = if endpoint.path().is_empty() {
        "/"
    } else {
        endpoint.path()
    };
    // S3 signs presigned URLs over an unsigned payload; other services over the empty body.
    let payload = match service {
        "s3" => "UNSIGNED-PAYLOAD".to_owned(),
        _ => hex(digest::digest(&digest::SHA256, b"").as_ref()),
    };
    let canonical_request =
        format!("GET\n{path}\n{canonical_query}\nhost:{host}\n\nhost\n{payload}");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
        hex(digest::digest(&digest::SHA256, canonical_request.as_bytes()).as_ref())
    );
    let mut key = mac(format!("AWS4{}", keys.secret).as_bytes(), &date);
    for part in [region, service, "aws4_request"] {
        key = mac(&key, part);
    }
    let signature = hex(&mac(&key, &to_sign));
    let mut base = endpoint.clone();
    base.set_query(None);
    format!("{base}?{canonical_query}&X-Amz-Signature={signature}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signatures botocore's `SigV4QueryAuth` (1.x, the AWS SDK for Python) makes for
    /// the same request, keys and time (printed by a script run once, with its clock fixed).
    #[test]
    fn signs_as_botocore() {
        let url = url::Url::parse("http://127.0.0.1:8080/").unwrap();
        let now: jiff::Timestamp = "2015-08-30T12:36:00Z".parse().unwrap();
        let params = [
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::123456789012:role/r"),
            ("RoleSessionName", "s"),
        ];
        for (token, want) in [
            (
                None,
                "bae5462304fa0814abc53c57da4d8d2357c370a80b078fe79493121746ac27d5",
            ),
            (
                Some("TOKEN/x+y"),
                "48d9ac37ab0067fa1254106a1bb4404e8e352b7f6503960dcf1483614fb70a49",
            ),
        ] {
            let keys = SigningKeys {
                id: "AKIDEXAMPLE",
                secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                token,
            };
            let got = presign_get(&url, &params, &keys, "sts", "us-east-1", now, 30);
            assert!(
                got.starts_with("http://127.0.0.1:8080/?Action=AssumeRole&"),
                "{got}"
            );
            assert!(got.contains(
                "X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fsts%2Faws4_request"
            ));
            assert_eq!(got.rsplit_once("X-Amz-Signature=").unwrap().1, want);
        }
    }
}
