//! Digest strings as each zTensor version writes them: v0.1/v1.1 `crc32c:0x%08X` or
//! `sha256:<hex>` (over the stored bytes), v2 `xxh3:%016x` or `sha256:<hex>` (lower-case
//! only, over the decoded bytes). Computing digests is format-neutral (`crate::digest`).

use crate::error::{ErrorKind, Result};
use crate::index::Digest;

/// The string form the writers use.
pub fn format(d: &Digest) -> String {
    match d {
        Digest::Crc32c(v) => format!("crc32c:0x{v:08X}"),
        Digest::Sha256(b) => {
            let mut s = String::with_capacity(71);
            s.push_str("sha256:");
            for x in b {
                s.push_str(&format!("{x:02x}"));
            }
            s
        }
        Digest::Xxh3(v) => format!("xxh3:{v:016x}"),
    }
}

fn hex_digits(s: &str, n: usize, lower_only: bool) -> Option<Vec<u8>> {
    if s.len() != n || n % 2 != 0 {
        return None;
    }
    let val = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' if !lower_only => Some(c - b'A' + 10),
        _ => None,
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(val(p[0])? << 4 | val(p[1])?))
        .collect()
}

fn bad(s: &str) -> crate::Error {
    ErrorKind::ZtBadDigest(s.to_string()).into()
}

/// A v0.1/v1.1 digest. Unknown algorithms are ignored (`Ok(None)`), as the references do;
/// a known algorithm with a malformed value is an error. Hex case is not enforced.
pub fn parse_legacy(s: &str) -> Result<Option<Digest>> {
    if let Some(h) = s.strip_prefix("crc32c:") {
        let h = h
            .strip_prefix("0x")
            .or_else(|| h.strip_prefix("0X"))
            .unwrap_or(h);
        let b = hex_digits(h, 8, false).ok_or_else(|| bad(s))?;
        return Ok(Some(Digest::Crc32c(u32::from_be_bytes(
            b.try_into().expect("4 bytes"),
        ))));
    }
    if let Some(h) = s.strip_prefix("sha256:") {
        let b = hex_digits(h, 64, false).ok_or_else(|| bad(s))?;
        return Ok(Some(Digest::Sha256(b.try_into().expect("32 bytes"))));
    }
    Ok(None)
}

/// A v2 digest: `algo:lowercase-hex` with a registered algorithm, or an error.
pub fn parse_v2(s: &str) -> Result<Digest> {
    if let Some(h) = s.strip_prefix("xxh3:") {
        let b = hex_digits(h, 16, true).ok_or_else(|| bad(s))?;
        return Ok(Digest::Xxh3(u64::from_be_bytes(
            b.try_into().expect("8 bytes"),
        )));
    }
    if let Some(h) = s.strip_prefix("sha256:") {
        let b = hex_digits(h, 64, true).ok_or_else(|| bad(s))?;
        return Ok(Digest::Sha256(b.try_into().expect("32 bytes")));
    }
    Err(bad(s))
}

/// Checks `bytes` against `want`; a mismatch shows both digests in zTensor's spelling.
pub fn check(want: &Digest, bytes: &[u8]) -> Result<()> {
    crate::digest::check(want, bytes, format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::{compute, DigestKind};

    #[test]
    fn formats_parse_back() {
        for k in [DigestKind::Crc32c, DigestKind::Sha256, DigestKind::Xxh3] {
            let d = compute(k, b"abc");
            let s = format(&d);
            match k {
                DigestKind::Xxh3 => assert_eq!(parse_v2(&s).unwrap(), d),
                DigestKind::Crc32c => assert_eq!(parse_legacy(&s).unwrap(), Some(d)),
                DigestKind::Sha256 => {
                    assert_eq!(parse_v2(&s).unwrap(), d);
                    assert_eq!(parse_legacy(&s).unwrap(), Some(d));
                }
            }
        }
        assert_eq!(format(&Digest::Crc32c(0x645d19c3)), "crc32c:0x645D19C3");
    }

    #[test]
    fn v2_rejects_upper_case_and_unknown_algorithms() {
        assert!(parse_v2("xxh3:F8C4268D8F9F4C75").is_err());
        assert!(parse_v2("md5:00").is_err());
        assert!(parse_v2("xxh3:f8c4268d8f9f4c7").is_err());
        assert_eq!(parse_legacy("md5:00").unwrap(), None);
        assert!(parse_legacy("crc32c:0xZZ").is_err());
    }
}
