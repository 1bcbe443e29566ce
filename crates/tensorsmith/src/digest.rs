//! Content digests over bytes (CRC-32C, SHA-256, XXH3-64): computing them and checking bytes
//! against a recorded one. Format-neutral: how a format spells a digest as text is its own
//! business (zTensor's spellings are in `ztensor/digest.rs`).

use crate::error::{ErrorKind, Result};
use crate::index::Digest;
use sha2::Digest as _;
use std::io::{self, Write};

/// Digest algorithms a writer can be asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestKind {
    /// CRC-32C (Castagnoli), 32 bits.
    Crc32c,
    /// SHA-256, 32 bytes.
    Sha256,
    /// XXH3, 64 bits.
    Xxh3,
}

impl DigestKind {
    /// The algorithm's lower-case name: `crc32c`, `sha256` or `xxh3`.
    pub fn name(self) -> &'static str {
        match self {
            DigestKind::Crc32c => "crc32c",
            DigestKind::Sha256 => "sha256",
            DigestKind::Xxh3 => "xxh3",
        }
    }
}

/// The algorithm that produced a recorded digest.
pub fn kind_of(d: &Digest) -> DigestKind {
    match d {
        Digest::Crc32c(_) => DigestKind::Crc32c,
        Digest::Sha256(_) => DigestKind::Sha256,
        Digest::Xxh3(_) => DigestKind::Xxh3,
    }
}

/// The `kind` digest of `bytes`, in one pass.
pub fn compute(kind: DigestKind, bytes: &[u8]) -> Digest {
    match kind {
        DigestKind::Crc32c => Digest::Crc32c(crc32c::crc32c(bytes)),
        DigestKind::Sha256 => Digest::Sha256(sha2::Sha256::digest(bytes).into()),
        DigestKind::Xxh3 => Digest::Xxh3(xxhash_rust::xxh3::xxh3_64(bytes)),
    }
}

/// A digest computed over bytes that arrive in pieces (a part streamed to a file, a source
/// written into it through `io::Write`); the result equals [`compute`] over the whole.
pub enum Hasher {
    /// A CRC-32C running over the bytes seen so far.
    Crc32c(u32),
    /// A SHA-256 streaming state.
    Sha256(Box<sha2::Sha256>),
    /// An XXH3-64 streaming state.
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl Hasher {
    /// A hasher for `kind` that has seen no bytes yet.
    pub fn new(kind: DigestKind) -> Hasher {
        match kind {
            DigestKind::Crc32c => Hasher::Crc32c(0),
            DigestKind::Sha256 => Hasher::Sha256(Box::default()),
            DigestKind::Xxh3 => Hasher::Xxh3(Box::default()),
        }
    }

    /// Feeds the next bytes, in order.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Crc32c(c) => *c = crc32c::crc32c_append(*c, bytes),
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Xxh3(h) => h.update(bytes),
        }
    }

    /// The digest of every byte fed to [`Hasher::update`].
    pub fn finish(self) -> Digest {
        match self {
            Hasher::Crc32c(c) => Digest::Crc32c(c),
            Hasher::Sha256(h) => Digest::Sha256((*h).finalize().into()),
            Hasher::Xxh3(h) => Digest::Xxh3(h.digest()),
        }
    }
}

/// A digest as `algorithm:hex`, for formats that have no spelling of their own.
pub fn spell(d: &Digest) -> String {
    match d {
        Digest::Crc32c(v) => format!("crc32c:{v:08x}"),
        Digest::Sha256(v) => format!(
            "sha256:{}",
            v.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
        Digest::Xxh3(v) => format!("xxh3:{v:016x}"),
    }
}

/// Checks `bytes` against `want`. A mismatch names both digests as `spell` writes them, so
/// the error shows the file's own spelling of the digest it recorded.
pub fn check(want: &Digest, bytes: &[u8], spell: fn(&Digest) -> String) -> Result<()> {
    let got = compute(kind_of(want), bytes);
    if got != *want {
        return Err(ErrorKind::DigestMismatch {
            expected: spell(want),
            actual: spell(&got),
        }
        .into());
    }
    Ok(())
}

/// `spell`'s text back into a digest; `None` when it is not one.
pub fn parse_spelled(s: &str) -> Option<Digest> {
    let (kind, hex) = s.split_once(':')?;
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    match (kind, hex.len()) {
        ("crc32c", 8) => u32::from_str_radix(hex, 16).ok().map(Digest::Crc32c),
        ("xxh3", 16) => u64::from_str_radix(hex, 16).ok().map(Digest::Xxh3),
        ("sha256", 64) => {
            let mut out = [0u8; 32];
            for (i, o) in out.iter_mut().enumerate() {
                *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
            }
            Some(Digest::Sha256(out))
        }
        _ => None,
    }
}

/// Sources that stream write into a hasher like into a file.
impl Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The SHA-1 of a whole file, in lower-case hex, read in bounded pieces (ONNX external data
/// records one as `checksum`; the `sha1` crate computes it).
pub fn sha1_hex(r: &dyn crate::bytes::ReadAt) -> Result<String> {
    struct Sink(sha1::Sha1);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            sha1::Digest::update(&mut self.0, b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut sink = Sink(<sha1::Sha1 as sha1::Digest>::new());
    r.copy_to(0..r.len(), &mut sink)?;
    let d = sha1::Digest::finalize(sink.0);
    Ok(d.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_equals_one_shot_and_spelling_round_trips() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        for kind in [DigestKind::Crc32c, DigestKind::Sha256, DigestKind::Xxh3] {
            let mut h = Hasher::new(kind);
            for c in data.chunks(999) {
                h.write_all(c).unwrap();
            }
            let d = h.finish();
            assert_eq!(d, compute(kind, &data));
            assert_eq!(parse_spelled(&spell(&d)), Some(d));
        }
        assert_eq!(parse_spelled("xxh3:123"), None);
        assert_eq!(parse_spelled("md5:00"), None);
    }
}
