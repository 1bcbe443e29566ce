//! A service SAS for reading one blob (`sp=r`), or for creating and writing it (`sp=cw`: Put
//! Blob, Put Block, Put Block List), deleting it (`sp=d`), or listing a container's blobs (a
//! container SAS, `sr=c&sp=l`), signed with the account key: the Azure counterpart of
//! an S3 presigned URL, made afresh for each request, valid one hour. The string to sign is
//! the one Azure Storage defines for signed versions 2020-12-06 and later (permissions, start,
//! expiry, the canonical resource `/blob/ACCOUNT/CONTAINER/BLOB`, identifier, IP, protocol,
//! version, resource, snapshot time, encryption scope, five response headers), HMAC-SHA256
//! with the decoded key, base64. Written here because the Azure SDK crates are async (tokio,
//! reqwest) and would not fit the extension's size limit; Azurite checks every signature in
//! the tests (`azure_cli.rs`).

use super::url_path::encode;

/// The signed version: accepted by Azure Storage and by Azurite.
const SIGNED_VERSION: &str = "2022-11-02";

/// `sv=…&spr=…&se=…&sr=b&sp=PERMISSIONS&sig=…` for `container/blob` of `account`, valid
/// until `expiry` (`YYYY-MM-DDTHH:MM:SSZ`).
pub(crate) fn blob_sas(
    key: &[u8],
    permissions: &str,
    account: &str,
    container: &str,
    blob: &str,
    expiry: &str,
) -> String {
    let resource = format!("/blob/{account}/{container}/{blob}");
    sas(key, permissions, &resource, "b", expiry)
}

/// The SAS of `permissions` (`l`: list) on a container.
pub(crate) fn container_sas(
    key: &[u8],
    permissions: &str,
    account: &str,
    container: &str,
    expiry: &str,
) -> String {
    let resource = format!("/blob/{account}/{container}");
    sas(key, permissions, &resource, "c", expiry)
}

/// The SAS of `permissions` on the `canonical` resource, of kind `resource` (`b`, `c`).
fn sas(key: &[u8], permissions: &str, canonical: &str, resource: &str, expiry: &str) -> String {
    use base64::Engine as _;
    let protocol = "https,http";
    let string_to_sign = [
        permissions,
        "",
        expiry,
        canonical,
        "",
        "",
        protocol,
        SIGNED_VERSION,
        resource,
        "",
        "",
        "",
        "",
        "",
        "",
        "",
    ]
    .join("\n");
    let mac = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key),
        string_to_sign.as_bytes(),
    );
    let sig = base64::engine::general_purpose::STANDARD.encode(mac.as_ref());
    format!(
        "sv={SIGNED_VERSION}&spr={}&se={}&sr={resource}&sp={permissions}&sig={}",
        encode(protocol, false),
        encode(expiry, false),
        encode(&sig, false)
    )
}

/// The expiry of a SAS made now: an hour ahead, in UTC.
pub(crate) fn expiry_in_an_hour() -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signature pinned against Python's `hmac`/`base64` over the same string to sign
    /// (`python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(bytes(32),
    /// "r\n\n2026-11-27T05:00:00Z\n/blob/acct/c/dir/m a.bin\n\n\nhttps,http\n2022-11-02\nb\n\n\n\n\n\n\n".encode(),
    /// hashlib.sha256).digest()).decode())'`); Azurite checks the format end to end.
    #[test]
    fn pinned_signature() {
        let q = blob_sas(
            &[0; 32],
            "r",
            "acct",
            "c",
            "dir/m a.bin",
            "2026-11-27T05:00:00Z",
        );
        assert!(
            q.starts_with(
                "sv=2022-11-02&spr=https%2Chttp&se=2026-11-27T05%3A00%3A00Z&sr=b&sp=r&sig="
            ),
            "{q}"
        );
        assert!(q.ends_with(PINNED), "{q}");
        let w = blob_sas(
            &[0; 32],
            "cw",
            "acct",
            "c",
            "dir/m a.bin",
            "2026-11-27T05:00:00Z",
        );
        assert!(
            w.contains("&sr=b&sp=cw&sig=") && !w.ends_with(PINNED),
            "{w}"
        );
        let c = container_sas(&[0; 32], "l", "acct", "c", "2026-11-27T05:00:00Z");
        assert!(c.contains("&sr=c&sp=l&sig=") && !c.ends_with(PINNED), "{c}");
        let e = expiry_in_an_hour();
        assert_eq!((e.len(), &e[10..11], &e[19..]), (20, "T", "Z"), "{e}");
    }

    const PINNED: &str = "ZKmoREyvf1rJNl4cwfbVf1km1uqx%2F5fW8Oignh723KE%3D";
}
