//! Per-tensor content digests recorded in a safetensors file's `__metadata__` under
//! [`DIGEST_KEY`], so `verify` can name the tensor (and its byte range) whose bytes changed.
//! The value is a JSON object, as text: tensor name -> digest spelled `xxh3:<16 hex>`,
//! `crc32c:<8 hex>` or `sha256:<64 hex>` (`digest::spell`). Tensor bytes are untouched and
//! the reference reads the file as any other (metadata values are strings).

use crate::digest::{parse_spelled, spell};
use crate::index::{Digest, DigestScope, MetaValue, TensorIndex};
use std::collections::BTreeMap;

/// The `__metadata__` key holding the digests.
pub const DIGEST_KEY: &str = "tensorsmith.digest";

/// The metadata value for `digests` (name, digest).
pub fn encode<'a>(digests: impl IntoIterator<Item = (&'a str, Digest)>) -> String {
    let map: BTreeMap<&str, String> = digests.into_iter().map(|(n, d)| (n, spell(&d))).collect();
    serde_json::to_string(&map).expect("strings serialize")
}

/// The digests of a metadata value; `None` when it is not a well-formed record.
pub fn decode(value: &str) -> Option<BTreeMap<String, Digest>> {
    let map: BTreeMap<String, String> = serde_json::from_str(value).ok()?;
    map.into_iter()
        .map(|(k, v)| parse_spelled(&v).map(|d| (k, d)))
        .collect()
}

/// Gives each tensor of `index` the digest its file records (a whole-tensor digest of its
/// stored bytes). Returns whether the file has a well-formed record; a malformed one is
/// reported by `verify` rather than refusing the file.
pub fn attach(index: &mut TensorIndex) -> Option<bool> {
    let MetaValue::Str(value) = index.metadata.get(DIGEST_KEY)? else {
        return Some(false);
    };
    let Some(digests) = decode(value) else {
        return Some(false);
    };
    for t in &mut index.tensors {
        if let (Some(d), Some(p)) = (digests.get(&t.name), t.parts.first_mut()) {
            let mut extra = p.extra.take().map(|b| *b).unwrap_or_default();
            extra.digest = Some((*d, DigestScope::Stored));
            p.extra = extra.boxed();
        }
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let text = encode([("a", Digest::Xxh3(1)), ("b\"", Digest::Crc32c(2))]);
        let back = decode(&text).unwrap();
        assert_eq!(back["a"], Digest::Xxh3(1));
        assert_eq!(back["b\""], Digest::Crc32c(2));
        assert!(decode("{\"a\":\"nope\"}").is_none());
        assert!(decode("[]").is_none());
    }
}
