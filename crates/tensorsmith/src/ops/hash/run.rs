//! Identities of a model that do not depend on its file format.
//!
//! **Structural ID** (`ts1-…`): SHA-256 over a canonical binary description of the tensors
//! (name, type, shape outermost first, byte length, layout) in byte order of names, then the
//! metadata (typed) in byte order of keys. Offsets, tensor order in the file, padding, the
//! format and its version are left out, so a model converted between formats keeps its ID as
//! long as names, types, shapes and metadata survive. The encoding (all integers u64
//! little-endian, strings as length + UTF-8 bytes):
//!
//! ```text
//! "tensorsmith-structure/1\n"
//! per tensor:   'T' name type_name rank dims… byte_length layout
//!               (layout: "dense", or the ggml type name for GGUF block types)
//! per key:      'M' key value
//! value:        's' string | 'i' i64 | 'u' u64 | 'f' f32 bits | 'd' f64 bits | 'b' 0/1
//!               | 'a' count value… | 'n' | 'y' bytes | 'm' count (key value)…
//! ```
//!
//! **Content digest** (`tc1-…`, with `--content`): every tensor's stored bytes hashed with
//! XXH3-128 in 16 MiB chunks (in parallel across tensors and chunks; a tensor of several
//! chunks hashes the concatenation of its chunk digests), then SHA-256 over
//! `"tensorsmith-content/1\n"` and, per tensor in name order, name, type name and its 16-byte
//! digest. Equal for the same weights in any format that stores them the same way.

use crate::error::Result;
use crate::index::{LayoutNames, MetaValue, TensorIndex, TensorInfo};
use crate::model::Model;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::xxh3_128;

/// Prefix of the structural ID: bump when the encoding changes.
pub const STRUCTURE_PREFIX: &str = "ts1-";
/// Prefix of the content digest.
pub const CONTENT_PREFIX: &str = "tc1-";
/// Chunk size of the content digest.
pub const CONTENT_CHUNK: u64 = 16 << 20;

struct Enc(Sha256);

impl Enc {
    fn u64(&mut self, x: u64) {
        self.0.update(x.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.update(s.as_bytes());
    }
    fn tag(&mut self, t: u8) {
        self.0.update([t]);
    }
    fn value(&mut self, v: &MetaValue) {
        match v {
            MetaValue::Str(s) => {
                self.tag(b's');
                self.str(s);
            }
            MetaValue::Int(i) => {
                self.tag(b'i');
                self.u64(*i as u64);
            }
            MetaValue::UInt(u) => {
                self.tag(b'u');
                self.u64(*u);
            }
            MetaValue::F32(f) => {
                self.tag(b'f');
                self.u64(u64::from(f.to_bits()));
            }
            MetaValue::F64(f) => {
                self.tag(b'd');
                self.u64(f.to_bits());
            }
            MetaValue::Bool(b) => {
                self.tag(b'b');
                self.u64(u64::from(*b));
            }
            MetaValue::Array(a) => {
                self.tag(b'a');
                self.u64(a.len() as u64);
                for x in a {
                    self.value(x);
                }
            }
            MetaValue::Null => self.tag(b'n'),
            MetaValue::Bytes(b) => {
                self.tag(b'y');
                self.u64(b.len() as u64);
                self.0.update(b);
            }
            MetaValue::Map(m) => {
                self.tag(b'm');
                self.u64(m.len() as u64);
                for (k, v) in m {
                    self.str(k);
                    self.value(v);
                }
            }
        }
    }
}

fn sorted(index: &TensorIndex) -> Vec<&TensorInfo> {
    let mut v: Vec<&TensorInfo> = index.tensors.iter().collect();
    v.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The structural ID's 32 bytes.
pub fn structural_digest(index: &TensorIndex) -> [u8; 32] {
    let mut e = Enc(Sha256::new());
    e.0.update(b"tensorsmith-structure/1\n");
    for t in sorted(index) {
        e.tag(b'T');
        e.str(&t.name);
        e.str(t.type_name());
        e.u64(t.shape.len() as u64);
        for &d in &t.shape {
            e.u64(d);
        }
        e.u64(t.byte_len());
        // One name per layout whatever the format spells (zTensor v1.1 and v2 differ; the
        // ID must not).
        e.str(&t.layout.name(LayoutNames::StructuralId));
    }
    // What a conversion does not carry (a checkpoint's write id names one write; a digest
    // record follows the values) is not the model's: left out, so a converted copy keeps the ID.
    for (k, v) in index
        .metadata
        .iter()
        .filter(|(k, _)| crate::ops::convert::meta_carry::carried(k))
    {
        e.tag(b'M');
        e.str(k);
        e.value(v);
    }
    e.0.finalize().into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `ts1-` and 64 hex digits.
pub fn structural_id(index: &TensorIndex) -> String {
    format!("{STRUCTURE_PREFIX}{}", hex(&structural_digest(index)))
}

/// XXH3-128 of `bytes`, or of its 16 MiB chunks' digests when it spans chunks.
fn digest_bytes(bytes: &[u8]) -> [u8; 16] {
    if bytes.len() as u64 <= CONTENT_CHUNK {
        return xxh3_128(bytes).to_le_bytes();
    }
    let digests: Vec<[u8; 16]> = bytes
        .par_chunks(CONTENT_CHUNK as usize)
        .map(|c| xxh3_128(c).to_le_bytes())
        .collect();
    xxh3_128(&digests.concat()).to_le_bytes()
}

/// One tensor's digest. A tensor of one part: the digest of its values ([`digest_bytes`],
/// whether stored raw, compressed or big-endian). Several parts (sparse, quantized): XXH3-128
/// over each part's role and digest, in role order. With `verify`, the digests the file
/// records are checked in the same read (a plain tensor with one is then read in order, its
/// recorded digest computed beside the content digest).
fn tensor_digest(model: &Model, t: &TensorInfo, verify: bool) -> Result<[u8; 16]> {
    if !model.is_plain(t) {
        crate::progress::advance(t.byte_len());
        if t.parts.len() == 1 {
            return Ok(digest_bytes(&model.part_bytes_checked(t, 0, verify)?));
        }
        // In role order: files list parts in different orders.
        let mut order: Vec<usize> = (0..t.parts.len()).collect();
        order.sort_by(|&a, &b| t.parts[a].role.cmp(&t.parts[b].role));
        let mut all = Vec::new();
        for (i, p) in order.into_iter().map(|i| (i, &t.parts[i])) {
            all.extend_from_slice(&(p.role.len() as u64).to_le_bytes());
            all.extend_from_slice(p.role.as_bytes());
            all.extend_from_slice(&digest_bytes(&model.part_bytes_checked(t, i, verify)?));
        }
        return Ok(xxh3_128(&all).to_le_bytes());
    }
    let r = t.data_range();
    let len = r.end - r.start;
    if let Some(mut h) = model.digest_hasher(t).filter(|_| verify) {
        let mut digests: Vec<[u8; 16]> = Vec::new();
        model.for_each_chunk(t, CONTENT_CHUNK, |b| {
            h.update(b);
            digests.push(xxh3_128(b).to_le_bytes());
            crate::progress::advance(b.len() as u64);
            Ok(())
        })?;
        model.compare_digest(t, h)?;
        return Ok(match digests.as_slice() {
            [one] if len <= CONTENT_CHUNK => *one,
            _ if len == 0 => xxh3_128(&[]).to_le_bytes(),
            _ => xxh3_128(&digests.concat()).to_le_bytes(),
        });
    }
    if len <= CONTENT_CHUNK {
        let bytes = model.read(t, r)?;
        crate::progress::advance(len);
        return Ok(xxh3_128(&bytes).to_le_bytes());
    }
    let chunks: Vec<u64> = (0..len.div_ceil(CONTENT_CHUNK)).collect();
    let digests: Result<Vec<[u8; 16]>> = chunks
        .par_iter()
        .map(|&i| {
            let start = r.start + i * CONTENT_CHUNK;
            let end = (start + CONTENT_CHUNK).min(r.end);
            let d = xxh3_128(&model.read(t, start..end)?).to_le_bytes();
            crate::progress::advance(end - start);
            Ok(d)
        })
        .collect();
    Ok(xxh3_128(&digests?.concat()).to_le_bytes())
}

/// `tc1-` and 64 hex digits: the content digest of every tensor's bytes. A tensor whose file
/// records its digest is checked against it first (a mismatch is an error naming it).
pub fn content_id(model: &Model) -> Result<String> {
    content_id_with(model, true)
}

/// [`content_id`]; `check_digests: false` hashes tensors without checking recorded digests.
pub fn content_id_with(model: &Model, check_digests: bool) -> Result<String> {
    let tensors = sorted(&model.index);
    crate::progress::expect(tensors.iter().map(|t| t.byte_len()).sum());
    let digests: Result<Vec<[u8; 16]>> = tensors
        .par_iter()
        .map(|t| tensor_digest(model, t, check_digests))
        .collect();
    let digests = digests?;
    let mut e = Enc(Sha256::new());
    e.0.update(b"tensorsmith-content/1\n");
    for (t, d) in tensors.iter().zip(&digests) {
        e.str(&t.name);
        e.str(t.type_name());
        e.0.update(d);
    }
    Ok(format!("{CONTENT_PREFIX}{}", hex(&e.0.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::index::{Format, Layout, Part};

    fn index(tensors: Vec<TensorInfo>, meta: &[(&str, MetaValue)]) -> TensorIndex {
        TensorIndex {
            format: Format::Safetensors,
            header_len: 0,
            file_len: 0,
            metadata: meta
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            tensors,
        }
    }

    fn t(name: &str, dtype: DType, shape: &[u64], range: std::ops::Range<u64>) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dtype,
            shape: shape.iter().copied().collect(),
            layout: Layout::Dense,
            parts: smallvec::smallvec![Part::raw("data", dtype, range)],
            attributes: Default::default(),
        }
    }

    #[test]
    fn structure_ignores_offsets_and_order_but_not_names_types_shapes_or_metadata() {
        let a = index(
            vec![
                t("a", DType::F32, &[2], 0..8),
                t("b", DType::F16, &[4], 8..16),
            ],
            &[("k", MetaValue::Str("v".into()))],
        );
        let moved = index(
            vec![
                t("b", DType::F16, &[4], 100..108),
                t("a", DType::F32, &[2], 108..116),
            ],
            &[("k", MetaValue::Str("v".into()))],
        );
        assert_eq!(structural_id(&a), structural_id(&moved));
        let id = structural_id(&a);
        assert!(id.starts_with("ts1-") && id.len() == 4 + 64);
        for changed in [
            index(
                vec![
                    t("a", DType::F32, &[2], 0..8),
                    t("c", DType::F16, &[4], 8..16),
                ],
                &[("k", MetaValue::Str("v".into()))],
            ),
            index(
                vec![
                    t("a", DType::I32, &[2], 0..8),
                    t("b", DType::F16, &[4], 8..16),
                ],
                &[("k", MetaValue::Str("v".into()))],
            ),
            index(
                vec![
                    t("a", DType::F32, &[2], 0..8),
                    t("b", DType::F16, &[2, 2], 8..16),
                ],
                &[("k", MetaValue::Str("v".into()))],
            ),
            index(
                vec![
                    t("a", DType::F32, &[2], 0..8),
                    t("b", DType::F16, &[4], 8..16),
                ],
                &[("k", MetaValue::Str("w".into()))],
            ),
            index(
                vec![
                    t("a", DType::F32, &[2], 0..8),
                    t("b", DType::F16, &[4], 8..16),
                ],
                &[("k", MetaValue::UInt(1))],
            ),
            index(
                vec![
                    t("a", DType::F32, &[2], 0..8),
                    t("b", DType::F16, &[4], 8..16),
                ],
                &[],
            ),
        ] {
            assert_ne!(structural_id(&changed), id);
        }
        // Typed: 1 as u64 is not 1 as i64.
        let i = index(vec![], &[("n", MetaValue::Int(1))]);
        let u = index(vec![], &[("n", MetaValue::UInt(1))]);
        assert_ne!(structural_id(&i), structural_id(&u));
    }
}
