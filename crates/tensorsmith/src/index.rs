//! The neutral tensor index: what every format reader produces and every operation
//! (inspect, hash, diff, convert) consumes. It describes tensors and where their bytes are;
//! it never holds tensor bytes itself.

use crate::dtype::DType;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

/// A shape: dimension sizes, outermost first. Inline up to rank 4 (no allocation for the
/// tensors that make up nearly every real file).
pub type Shape = smallvec::SmallVec<[u64; 4]>;

/// A tensor's parts: inline for one (dense tensors), allocated for sparse or quantized ones.
pub type Parts = smallvec::SmallVec<[Part; 1]>;

/// Which file format (and version) an index was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// safetensors (the format has no version).
    Safetensors,
    /// GGUF, little-endian, version 1 to 3.
    Gguf {
        /// The `version` field of the GGUF header.
        version: u32,
    },
    /// zTensor, in one of its three on-disk versions.
    Ztensor {
        /// Which zTensor version the file is.
        version: ZtVersion,
    },
    /// ONNX, by its `ir_version` (0 when absent).
    Onnx {
        /// The model's `ir_version`, or 0 when the file does not set it.
        ir_version: i64,
    },
}

impl Format {
    /// The format's lower-case name: `safetensors`, `gguf`, `ztensor` or `onnx`.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Safetensors => "safetensors",
            Format::Gguf { .. } => "gguf",
            Format::Ztensor { .. } => "ztensor",
            Format::Onnx { .. } => "onnx",
        }
    }

    /// The format's own version, where it has one.
    pub fn version(&self) -> Option<String> {
        match self {
            Format::Safetensors => None,
            Format::Gguf { version } => Some(version.to_string()),
            Format::Ztensor { version } => Some(version.to_string()),
            Format::Onnx { ir_version } => Some(ir_version.to_string()),
        }
    }
}

/// The three incompatible on-disk versions of zTensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ZtVersion {
    /// Magic `ZTEN0001`, trailing CBOR array (specs/ztensor-v0.1.md).
    V0_1,
    /// Magic `ZTEN1000` at both ends, CBOR manifest (specs/ztensor-v1.1.md; also 1.2 files).
    V1_1,
    /// PNG-style magic, 40-byte footer, deterministic CBOR manifest.
    V2,
}

impl ZtVersion {
    /// The version as people write it: `0.1`, `1.1` or `2`.
    pub fn as_str(self) -> &'static str {
        match self {
            ZtVersion::V0_1 => "0.1",
            ZtVersion::V1_1 => "1.1",
            ZtVersion::V2 => "2",
        }
    }
}

impl std::fmt::Display for ZtVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed metadata value. Safetensors only has strings; other formats bring the rest.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// A UTF-8 string (the only kind safetensors `__metadata__` holds).
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A signed integer, widened to 64 bits.
    Int(i64),
    /// An unsigned integer, widened to 64 bits.
    UInt(u64),
    /// A single precision float, kept at its stored width.
    F32(f32),
    /// A double precision float.
    F64(f64),
    /// An array of values (GGUF arrays, CBOR arrays); items need not share a type.
    Array(Vec<MetaValue>),
    /// CBOR null (zTensor attributes).
    Null,
    /// A CBOR byte string (zTensor attributes).
    Bytes(Vec<u8>),
    /// A map with text keys (zTensor attributes).
    Map(BTreeMap<String, MetaValue>),
}

impl MetaValue {
    /// Equality by value, not by width or rendering: NaN equals NaN (a file equals itself), an
    /// f32 equals the f64 of the same value (a CBOR float keeps the value, not the width), a
    /// signed integer equals the unsigned one of the same value, and arrays and maps compare
    /// item by item.
    pub fn same_value(&self, other: &MetaValue) -> bool {
        use MetaValue::*;
        let float_eq = |p: f64, q: f64| p == q || (p.is_nan() && q.is_nan());
        match (self, other) {
            (F32(p), F32(q)) => float_eq(f64::from(*p), f64::from(*q)),
            (F64(p), F64(q)) => float_eq(*p, *q),
            (F32(p), F64(q)) | (F64(q), F32(p)) => float_eq(f64::from(*p), *q),
            (Int(i), UInt(u)) | (UInt(u), Int(i)) => u64::try_from(*i).is_ok_and(|i| i == *u),
            (Array(p), Array(q)) => {
                p.len() == q.len() && p.iter().zip(q).all(|(x, y)| x.same_value(y))
            }
            (Map(p), Map(q)) => {
                p.len() == q.len()
                    && p.iter()
                        .zip(q)
                        .all(|((k, x), (l, y))| k == l && x.same_value(y))
            }
            _ => self == other,
        }
    }
}

/// How a tensor's elements are laid out across its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One part, `data`, holding the elements in row-major order.
    Dense,
    /// One part, `data`, of ggml blocks of this block-quantized type (GGUF); the tensor's
    /// `dtype` is then `U8`, the type of the stored bytes.
    Ggml(crate::ggml_type::GgmlType),
    /// Compressed sparse rows: parts `values`, `indices`, `indptr`; rank 2.
    SparseCsr,
    /// Coordinate list: parts `values` and `coords` (structure of arrays: all dimension-0
    /// indices, then dimension 1, ...).
    SparseCoo,
    /// Group quantization: `packed_weight`, `scales`, `zeros` (zTensor v1.1) or `data`,
    /// `scales`, `zeros`? (v2 `zt.quant_group/1`); parameters in the tensor's attributes.
    QuantizedGroup,
    /// OCP microscaling (v2 `zt.mx/1`): `data` and one `f8_e8m0` scale per block.
    Mx,
    /// A layout this library does not interpret; its parts are exposed as stored.
    Other(Box<str>),
}

impl Layout {
    /// The roles a layout requires, in the order the zTensor writers lay them out.
    pub fn roles(&self) -> &'static [&'static str] {
        match self {
            Layout::Dense => &["data"],
            Layout::SparseCsr => &["values", "indices", "indptr"],
            Layout::SparseCoo => &["values", "coords"],
            Layout::Ggml(_) => &["data"],
            Layout::QuantizedGroup | Layout::Mx | Layout::Other(_) => &[],
        }
    }

    /// The layout's name in one of the sets of names (the one table of layout names: no
    /// other module spells one). `Other` layouts keep their own name in every set.
    pub fn name(&self, names: LayoutNames) -> Cow<'_, str> {
        use LayoutNames::*;
        let fixed = match (self, names) {
            (Layout::Other(s), _) => return Cow::Borrowed(s),
            (Layout::Ggml(g), Python) => return Cow::Owned(format!("ggml:{g}")),
            (Layout::Ggml(g), Message) => return Cow::Owned(format!("ggml {g}")),
            (Layout::Ggml(g), _) => g.name(),
            (Layout::Dense, _) => "dense",
            (Layout::SparseCsr, ZtV2) => "zt.sparse_csr/1",
            (Layout::SparseCsr, _) => "sparse_csr",
            (Layout::SparseCoo, ZtV2) => "zt.sparse_coo/1",
            (Layout::SparseCoo, _) => "sparse_coo",
            (Layout::QuantizedGroup, ZtV2) => "zt.quant_group/1",
            (Layout::QuantizedGroup, StructuralId) => "quant_group",
            (Layout::QuantizedGroup, _) => "quantized_group",
            (Layout::Mx, ZtV2) => "zt.mx/1",
            (Layout::Mx, _) => "mx",
        };
        Cow::Borrowed(fixed)
    }

    /// The layout a zTensor manifest names: one the set defines, else `Other` (which keeps
    /// the name, so an unknown layout's parts stay readable as stored).
    pub fn from_name(name: &str, names: LayoutNames) -> Layout {
        // v1.1 defines no mx layout (its writer refuses one), so its "mx" stays `Other`.
        const V1: &[Layout] = &[
            Layout::Dense,
            Layout::SparseCsr,
            Layout::SparseCoo,
            Layout::QuantizedGroup,
        ];
        const V2: &[Layout] = &[
            Layout::Dense,
            Layout::SparseCsr,
            Layout::SparseCoo,
            Layout::QuantizedGroup,
            Layout::Mx,
        ];
        let defined = if names == LayoutNames::ZtV2 { V2 } else { V1 };
        defined
            .iter()
            .find(|l| l.name(names) == name)
            .cloned()
            .unwrap_or_else(|| Layout::Other(name.into()))
    }
}

/// The sets of layout names: each format, the structural ID and the places that show a
/// layout to people spell layouts their own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutNames {
    /// zTensor v0.1 `layout` (only `dense`) and v1.1 `format`: `sparse_csr`,
    /// `quantized_group`, ...; ggml types by name.
    ZtV1,
    /// zTensor v2 `layout`: the registry names (`zt.sparse_csr/1`, `zt.quant_group/1`, ...).
    ZtV2,
    /// The structural ID (`ts1-`): one name per layout whatever the format spells
    /// (`quant_group`), ggml types by name.
    StructuralId,
    /// The Python package's `layout`: the v1.1 names, ggml types as `ggml:q4_0` (the
    /// package tells block-quantized tensors by that prefix).
    Python,
    /// Error messages: the v1.1 names, ggml types as `ggml q4_0`.
    Message,
}

/// How a part's bytes are stored in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoding {
    /// Stored as they are: the stored bytes are the decoded bytes.
    Raw,
    /// zstd frames (zTensor v0.1/v1.1 `zstd`).
    Zstd,
    /// zstd frames plus a seek table (zTensor v2 `zt.zstd-seekable/1`).
    ZstdSeekable,
    /// An encoding this library cannot decode; the stored bytes are still reachable.
    Other(Box<str>),
}

impl Encoding {
    /// The encoding as files name it (`raw`, `zstd`, `zt.zstd-seekable/1`, or the file's own
    /// word for one this library does not know).
    pub fn name(&self) -> &str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Zstd => "zstd",
            Encoding::ZstdSeekable => "zt.zstd-seekable/1",
            Encoding::Other(e) => e,
        }
    }
}

/// A content digest as a file records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Digest {
    /// CRC-32C (Castagnoli) checksum.
    Crc32c(u32),
    /// SHA-256 hash, as its 32 bytes.
    Sha256([u8; 32]),
    /// 64-bit XXH3 hash.
    Xxh3(u64),
}

/// Which bytes a digest covers: the stored ones (zTensor v0.1/v1.1) or the decoded ones (v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestScope {
    /// The digest covers the bytes as stored in the file (compressed, for a zstd part).
    Stored,
    /// The digest covers the decoded bytes.
    Decoded,
}

/// What few parts carry beyond bytes and type (boxed: most parts have none of it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartExtra {
    /// The digest the file records for the part, and which bytes it covers.
    pub digest: Option<(Digest, DigestScope)>,
    /// A logical type this library does not know (zTensor v2 `type`). `dtype` is then the
    /// storage type and the bytes must not be interpreted as elements.
    pub unknown_type: Option<String>,
    /// The shard (another file) holding the bytes (zTensor v2); `range` is in that file.
    pub shard: Option<String>,
}

impl PartExtra {
    /// As a part holds it: `None` when there is nothing in it, so most parts cost no box.
    pub fn boxed(self) -> Option<Box<PartExtra>> {
        (self != PartExtra::default()).then(|| Box::new(self))
    }
}

/// One stored byte range of a tensor (the whole tensor, for a dense one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Role of the part in its layout (`data` for dense tensors).
    pub role: Cow<'static, str>,
    /// Element type of the decoded bytes (the logical type where the format has one).
    pub dtype: DType,
    /// Absolute byte range of the stored bytes in the file.
    pub range: Range<u64>,
    /// How the stored bytes are encoded (raw or compressed).
    pub encoding: Encoding,
    /// Length of the decoded bytes (the stored length for raw parts).
    pub decoded_len: u64,
    /// Stored elements are big-endian (zTensor v0.1 `data_endianness: "big"`, raw only);
    /// readers swap them, decoded bytes are always little-endian.
    pub big_endian: bool,
    /// Digest, unknown logical type and shard, for the few parts that have any (`None` otherwise).
    pub extra: Option<Box<PartExtra>>,
}

impl Part {
    /// A raw little-endian part with nothing extra: what safetensors has.
    pub fn raw(role: &'static str, dtype: DType, range: Range<u64>) -> Part {
        Part {
            role: Cow::Borrowed(role),
            dtype,
            decoded_len: range.end.saturating_sub(range.start),
            range,
            encoding: Encoding::Raw,
            big_endian: false,
            extra: None,
        }
    }

    /// Length of the stored bytes: the length of `range`.
    pub fn stored_len(&self) -> u64 {
        self.range.end.saturating_sub(self.range.start)
    }

    /// The digest the file records for this part, with its scope, if any.
    pub fn digest(&self) -> Option<(Digest, DigestScope)> {
        self.extra.as_ref().and_then(|e| e.digest)
    }

    /// The logical type name this library does not know (zTensor v2), if the part has one.
    pub fn unknown_type(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|e| e.unknown_type.as_deref())
    }

    /// The shard file holding this part's bytes (zTensor v2), if not the file itself.
    pub fn shard(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|e| e.shard.as_deref())
    }

    /// Whether the decoded bytes are the stored bytes, so a map can serve them as they are.
    pub fn is_zero_copy(&self) -> bool {
        self.encoding == Encoding::Raw && !self.big_endian && self.shard().is_none()
    }
}

/// Per-tensor attributes: a map that costs one pointer when empty, as it is for nearly every
/// tensor (the index of a 100,000-tensor header stays small). Reads through `Deref`.
#[derive(Debug, Clone, Default, PartialEq)]
// The Box is the point: 8 bytes inline instead of the 24 of an empty BTreeMap.
#[allow(clippy::box_collection)]
pub struct Attributes(Option<Box<BTreeMap<String, MetaValue>>>);

static NO_ATTRIBUTES: BTreeMap<String, MetaValue> = BTreeMap::new();

impl std::ops::Deref for Attributes {
    type Target = BTreeMap<String, MetaValue>;
    fn deref(&self) -> &Self::Target {
        self.0.as_deref().unwrap_or(&NO_ATTRIBUTES)
    }
}

impl From<BTreeMap<String, MetaValue>> for Attributes {
    fn from(m: BTreeMap<String, MetaValue>) -> Self {
        Attributes((!m.is_empty()).then(|| Box::new(m)))
    }
}

impl Attributes {
    /// The map, owned.
    pub fn to_map(&self) -> BTreeMap<String, MetaValue> {
        (**self).clone()
    }
}

/// One named tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// The tensor's name, unique within the file.
    pub name: String,
    /// Element type of the tensor (`U8` for a block-quantized GGUF tensor: see [`Layout::Ggml`]).
    pub dtype: DType,
    /// Dimension sizes, outermost first; empty for a scalar.
    pub shape: Shape,
    /// How the elements are laid out across `parts`.
    pub layout: Layout,
    /// The stored parts, one per role of the layout (a single `data` part for a dense
    /// tensor).
    pub parts: Parts,
    /// Per-tensor attributes (zTensor object `attributes`, e.g. quantization parameters).
    pub attributes: Attributes,
}

impl TensorInfo {
    /// Number of elements (1 for a scalar). Readers have checked it does not overflow.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes taken by the decoded tensor (sum of decoded part lengths).
    pub fn byte_len(&self) -> u64 {
        self.parts.iter().map(|p| p.decoded_len).sum()
    }

    /// The part with this role.
    pub fn part(&self, role: &str) -> Option<&Part> {
        self.parts.iter().find(|p| p.role == role)
    }

    /// The name of the element type as shown to people: the dtype's, or the ggml type's for
    /// block-quantized tensors (`q4_0`).
    pub fn type_name(&self) -> &'static str {
        match &self.layout {
            Layout::Ggml(t) => t.name(),
            _ => self.dtype.safetensors_name(),
        }
    }

    /// The byte range of a dense tensor's data in the file.
    pub fn data_range(&self) -> Range<u64> {
        self.parts[0].range.clone()
    }
}

/// Everything a reader learned about a file, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorIndex {
    /// The format and version the index was read from.
    pub format: Format,
    /// Bytes before the first tensor byte (the 8-byte length plus the JSON, for safetensors).
    pub header_len: u64,
    /// Length of the file in bytes.
    pub file_len: u64,
    /// File-level metadata: safetensors `__metadata__`, GGUF key-values, zTensor attributes,
    /// ONNX model fields.
    pub metadata: BTreeMap<String, MetaValue>,
    /// Tensors in the order of their data in the file.
    pub tensors: Vec<TensorInfo>,
}

impl TensorIndex {
    /// Looks up a tensor by name (linear; use [`TensorIndex::by_name`] for many look-ups).
    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// A name → position map for repeated look-ups (owned, to live beside the index).
    pub fn by_name(&self) -> std::collections::HashMap<String, usize> {
        self.tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect()
    }

    /// Total elements over all tensors.
    pub fn total_elements(&self) -> u64 {
        self.tensors.iter().map(|t| t.elements()).sum()
    }

    /// `(type name, tensor count, elements, bytes)` per element type (ggml block types apart
    /// from their `U8` storage), ordered by dtype, then name.
    pub fn dtype_totals(&self) -> Vec<(&'static str, u64, u64, u64)> {
        let mut m: BTreeMap<(DType, &'static str), (u64, u64, u64)> = BTreeMap::new();
        for t in &self.tensors {
            let e = m.entry((t.dtype, t.type_name())).or_default();
            e.0 += 1;
            e.1 += t.elements();
            e.2 += t.byte_len();
        }
        m.into_iter()
            .map(|((_, n), (c, e, b))| (n, c, e, b))
            .collect()
    }
}

/// Whether `ranges` (one per leading dimension) select within `shape`: the message of the
/// first that does not, for a tensor's slice (`Tensor::slice`) and a rank's part
/// (`rank_plan.rs`).
pub(crate) fn check_ranges(
    shape: &[u64],
    ranges: &[std::ops::Range<u64>],
) -> std::result::Result<(), String> {
    if ranges.len() > shape.len() {
        return Err(format!(
            "{} ranges for a tensor of rank {}",
            ranges.len(),
            shape.len()
        ));
    }
    for (k, r) in ranges.iter().enumerate() {
        if r.start > r.end || r.end > shape[k] {
            return Err(format!(
                "range {}..{} out of bounds for dimension {k} of size {}",
                r.start, r.end, shape[k]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn metadata_values_compare_by_value() {
        use super::MetaValue::*;
        assert!(F32(f32::NAN).same_value(&F64(f64::NAN)));
        assert!(F32(0.1).same_value(&F64(f64::from(0.1f32))));
        assert!(!F32(f32::INFINITY).same_value(&F32(f32::NEG_INFINITY)));
        assert!(Int(7).same_value(&UInt(7)) && !Int(-1).same_value(&UInt(u64::MAX)));
        assert!(Array(vec![F32(f32::NAN)]).same_value(&Array(vec![F64(f64::NAN)])));
        assert!(!Str("1".into()).same_value(&Int(1)));
    }

    use super::*;
    use LayoutNames::*;

    #[test]
    fn every_set_of_layout_names_is_pinned() {
        let q4_0 = Layout::Ggml(crate::gguf::GgmlType::from_id(2).unwrap());
        let rows: [(Layout, [&str; 5]); 7] = [
            (Layout::Dense, ["dense"; 5]),
            (
                Layout::SparseCsr,
                [
                    "sparse_csr",
                    "zt.sparse_csr/1",
                    "sparse_csr",
                    "sparse_csr",
                    "sparse_csr",
                ],
            ),
            (
                Layout::SparseCoo,
                [
                    "sparse_coo",
                    "zt.sparse_coo/1",
                    "sparse_coo",
                    "sparse_coo",
                    "sparse_coo",
                ],
            ),
            (
                Layout::QuantizedGroup,
                [
                    "quantized_group",
                    "zt.quant_group/1",
                    "quant_group",
                    "quantized_group",
                    "quantized_group",
                ],
            ),
            (Layout::Mx, ["mx", "zt.mx/1", "mx", "mx", "mx"]),
            (Layout::Other("v.x/2".into()), ["v.x/2"; 5]),
            (q4_0, ["q4_0", "q4_0", "q4_0", "ggml:q4_0", "ggml q4_0"]),
        ];
        for (layout, names) in rows {
            for (set, want) in [ZtV1, ZtV2, StructuralId, Python, Message]
                .into_iter()
                .zip(names)
            {
                assert_eq!(layout.name(set), want, "{layout:?} in {set:?}");
            }
        }
    }

    #[test]
    fn manifest_names_read_back_and_unknown_ones_stay_other() {
        for l in [
            Layout::Dense,
            Layout::SparseCsr,
            Layout::SparseCoo,
            Layout::QuantizedGroup,
        ] {
            assert_eq!(Layout::from_name(&l.name(ZtV1), ZtV1), l);
            assert_eq!(Layout::from_name(&l.name(ZtV2), ZtV2), l);
        }
        assert_eq!(Layout::from_name("zt.mx/1", ZtV2), Layout::Mx);
        assert_eq!(Layout::from_name("mx", ZtV1), Layout::Other("mx".into()));
        assert_eq!(
            Layout::from_name("sparse_csr", ZtV2),
            Layout::Other("sparse_csr".into())
        );
        assert_eq!(
            Layout::from_name("q4_0", ZtV1),
            Layout::Other("q4_0".into())
        );
    }
}
