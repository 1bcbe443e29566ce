//! The neutral tensor index: what every format reader produces and every operation
//! (inspect, hash, diff, convert) consumes. It describes tensors and where their bytes are;
//! it never holds tensor bytes itself.

use crate::dtype::DType;
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
    Safetensors,
    /// GGUF, little-endian, version 1 to 3.
    Gguf {
        version: u32,
    },
}

impl Format {
    pub fn name(&self) -> &'static str {
        match self {
            Format::Safetensors => "safetensors",
            Format::Gguf { .. } => "gguf",
        }
    }

    /// The format's own version, where it has one.
    pub fn version(&self) -> Option<String> {
        match self {
            Format::Safetensors => None,
            Format::Gguf { version } => Some(version.to_string()),
        }
    }
}

/// A typed metadata value. Safetensors only has strings; other formats bring the rest.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    Str(String),
    Bool(bool),
    Int(i64),
    UInt(u64),
    F32(f32),
    F64(f64),
    Array(Vec<MetaValue>),
}

/// How a tensor's elements are laid out across its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One part, `data`, holding the elements in row-major order.
    Dense,
    /// One part, `data`, of ggml blocks of this block-quantized type (GGUF); the tensor's
    /// `dtype` is then `U8`, the type of the stored bytes.
    Ggml(crate::gguf::GgmlType),
}

/// How a part's bytes are stored in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoding {
    Raw,
}

/// One stored byte range of a tensor (the whole tensor, for a dense one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Role of the part in its layout (`data` for dense tensors).
    pub role: &'static str,
    pub dtype: DType,
    /// Absolute byte range in the file.
    pub range: Range<u64>,
    pub encoding: Encoding,
}

/// One named tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: DType,
    pub shape: Shape,
    pub layout: Layout,
    pub parts: Parts,
}

impl TensorInfo {
    /// Number of elements (1 for a scalar). Readers have checked it does not overflow.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes taken by the decoded tensor (sum of stored part lengths for raw parts).
    pub fn byte_len(&self) -> u64 {
        self.parts.iter().map(|p| p.range.end - p.range.start).sum()
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
    pub format: Format,
    /// Bytes before the first tensor byte (the 8-byte length plus the JSON, for safetensors).
    pub header_len: u64,
    pub file_len: u64,
    pub metadata: BTreeMap<String, MetaValue>,
    /// Tensors in the order of their data in the file.
    pub tensors: Vec<TensorInfo>,
}

impl TensorIndex {
    /// Looks up a tensor by name (linear; use [`TensorIndex::by_name`] for many look-ups).
    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// A name → position map for repeated look-ups.
    pub fn by_name(&self) -> std::collections::HashMap<&str, usize> {
        self.tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
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
