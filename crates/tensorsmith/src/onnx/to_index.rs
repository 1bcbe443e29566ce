//! The walk's tensors checked against ONNX's rules and made into the neutral index: dtypes,
//! dims, value lengths, external data keys (path rules that need no file system), one name
//! per tensor, and the model's facts as `onnx.*` metadata.

use super::data_type::{dtype_of, stored_bytes, STRING};
use super::graph::{Facts, Origin, RawSparse, Walk};
use super::tensor::{RawTensor, Values};
use crate::dtype::DType;
use crate::error::{Error, OnnxRule, Result};
use crate::index::{
    Encoding, Format, Layout, MetaValue, Part, PartExtra, Shape, TensorIndex, TensorInfo,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

/// The layout of string tensors: listed, with no parts (their values are not numbers).
pub const STRING_LAYOUT: &str = "onnx.string";
/// The layout of sparse initializers: parts `values` and `indices` as ONNX stores them.
pub const SPARSE_LAYOUT: &str = "onnx.sparse";

/// Attribute keys a tensor may carry. This one: the path of the subgraph an initializer
/// comes from (text; absent for the main graph's).
pub const ATTR_GRAPH: &str = "onnx.graph";
/// Attribute key of an external-data tensor's data file, relative to the model's folder
/// (text: the `location` entry of its `external_data`).
pub const ATTR_LOCATION: &str = "onnx.location";
/// Attribute key of the byte offset of an external-data tensor in its data file (unsigned
/// integer; 0 when `external_data` gives none).
pub const ATTR_OFFSET: &str = "onnx.offset";
/// Attribute key of the byte length an external-data tensor's `external_data` states
/// (unsigned integer; present only when stated).
pub const ATTR_LENGTH: &str = "onnx.length";
/// Attribute key of the SHA-1 hex digest an external-data tensor's `external_data` records
/// for its whole data file (text; present only when recorded).
pub const ATTR_CHECKSUM: &str = "onnx.checksum";

/// The index of a walked model whose `.onnx` is `file_len` bytes.
pub(crate) fn to_index(walk: Walk, file_len: u64, base: u64, limit: u64) -> Result<TensorIndex> {
    if !walk.has_graph {
        return Err(OnnxRule::NoGraph.into());
    }
    let mut weights = 0u64;
    let mut names = HashSet::new();
    let mut tensors = Vec::with_capacity(walk.tensors.len() + walk.sparse.len());
    for (origin, raw) in walk.tensors {
        weights += raw.weight_bytes;
        let name = match &origin {
            Origin::Main => raw.name.clone().unwrap_or_default(),
            Origin::Subgraph(p) => format!("{p}/{}", raw.name.as_deref().unwrap_or("")),
        };
        let mut t = tensor(&raw, base).map_err(|e| e.at_tensor(&name))?;
        t.name = name;
        if let Origin::Subgraph(p) = origin {
            let mut a = t.attributes.to_map();
            a.insert(ATTR_GRAPH.into(), MetaValue::Str(p));
            t.attributes = a.into();
        }
        tensors.push(t);
    }
    for s in walk.sparse {
        weights += s.values.weight_bytes + s.indices.weight_bytes;
        let own = s.values.name.clone().unwrap_or_default();
        let name = match &s.origin {
            Origin::Main => own,
            Origin::Subgraph(p) => format!("{p}/{own}"),
        };
        let mut t = sparse(&s, base).map_err(|e| e.at_tensor(&name))?;
        t.name = name;
        if let Origin::Subgraph(p) = &s.origin {
            let mut a = t.attributes.to_map();
            a.insert(ATTR_GRAPH.into(), MetaValue::Str(p.clone()));
            t.attributes = a.into();
        }
        tensors.push(t);
    }
    for t in &tensors {
        if !names.insert(t.name.as_str()) {
            return Err(Error::from(OnnxRule::DuplicateName).at_tensor(&t.name));
        }
    }
    let graph_bytes = file_len.saturating_sub(weights);
    if graph_bytes > limit {
        return Err(OnnxRule::GraphTooLarge {
            len: graph_bytes,
            limit,
        }
        .into());
    }
    let metadata = metadata(&walk.facts);
    Ok(TensorIndex {
        format: Format::Onnx {
            ir_version: walk.facts.ir_version.map_or(0, |v| v as i64),
        },
        header_len: 0,
        file_len,
        metadata,
        tensors,
    })
}

/// Dims checked: none negative, their product (elements) without overflow.
fn shape_of(dims: &[i64]) -> Result<(Shape, u64)> {
    let mut shape = Shape::new();
    let mut n: u64 = 1;
    for &d in dims {
        if d < 0 {
            return Err(OnnxRule::NegativeDim(d).into());
        }
        n = n.checked_mul(d as u64).ok_or(OnnxRule::DimsOverflow)?;
        shape.push(d as u64);
    }
    Ok((shape, n))
}

/// One dense (or string) tensor; its name is set by the caller.
fn tensor(raw: &RawTensor, base: u64) -> Result<TensorInfo> {
    if raw.segment {
        return Err(OnnxRule::Segment.into());
    }
    let code = raw.data_type.unwrap_or(0);
    let (shape, elements) = shape_of(&raw.dims)?;
    let mut info = TensorInfo {
        name: String::new(),
        dtype: DType::U8,
        shape,
        layout: Layout::Dense,
        parts: Default::default(),
        attributes: Default::default(),
    };
    if code == i64::from(STRING) {
        let n = match raw.values {
            Values::Strings(n) => n,
            Values::None => 0,
            _ => {
                return Err(OnnxRule::FieldForType {
                    field: "raw_data",
                    dtype: "string",
                }
                .into())
            }
        };
        if n != elements {
            return Err(OnnxRule::ValueCount {
                field: "string_data",
                expected: elements,
                actual: n,
            }
            .into());
        }
        info.layout = Layout::Other(STRING_LAYOUT.into());
        return Ok(info);
    }
    let dtype = i32::try_from(code)
        .ok()
        .and_then(dtype_of)
        .ok_or(OnnxRule::UnknownDataType(code))?;
    info.dtype = dtype;
    let need = stored_bytes(dtype, elements).ok_or(OnnxRule::DimsOverflow)?;
    let abs = |r: &std::ops::Range<usize>| base + r.start as u64..base + r.end as u64;
    let part = match &raw.values {
        Values::Raw(r) => {
            if r.len() as u64 != need {
                return Err(OnnxRule::DataLength {
                    field: "raw_data",
                    expected: need,
                    actual: r.len() as u64,
                }
                .into());
            }
            Part::raw("data", dtype, abs(r))
        }
        Values::Typed { kind, span, count } => {
            let (entries, _) = kind
                .layout_for(dtype, elements)
                .ok_or(OnnxRule::FieldForType {
                    field: kind.name(),
                    dtype: dtype.safetensors_name(),
                })?;
            if *count != entries {
                return Err(OnnxRule::ValueCount {
                    field: kind.name(),
                    expected: entries,
                    actual: *count,
                }
                .into());
            }
            Part {
                role: Cow::Borrowed("data"),
                dtype,
                range: abs(span),
                encoding: Encoding::Other(kind.encoding().into()),
                decoded_len: need,
                big_endian: false,
                extra: None,
            }
        }
        Values::External(entries) => {
            let (part, attrs) = external(entries, dtype, need)?;
            info.attributes = attrs.into();
            part
        }
        Values::None if elements == 0 => Part::raw("data", dtype, 0..0),
        Values::None => return Err(OnnxRule::NoValues { elements }.into()),
        Values::Strings(_) => {
            return Err(OnnxRule::FieldForType {
                field: "string_data",
                dtype: dtype.safetensors_name(),
            }
            .into())
        }
    };
    info.parts.push(part);
    Ok(info)
}

fn ext(msg: impl Into<String>) -> Error {
    OnnxRule::External(msg.into()).into()
}

/// A location that stays in the model's folder by its spelling: relative, no `..`, no root.
/// Symlinks are resolved where the file is opened (`model/onnx_external.rs`).
pub fn check_location(location: &str) -> Result<()> {
    use std::path::{Component, Path};
    if location.is_empty() {
        return Err(ext("'location' is empty"));
    }
    if location.contains('\\') || location.contains('\0') {
        return Err(ext(format!(
            "location '{location}' holds a backslash or NUL"
        )));
    }
    for c in Path::new(location).components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err(ext(format!("location '{location}' contains '..'")))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ext(format!("location '{location}' is an absolute path")))
            }
        }
    }
    Ok(())
}

/// The part (in the data file named by `location`, marked as its shard) and the attributes of
/// an external tensor.
fn external(
    entries: &[(String, String)],
    dtype: DType,
    need: u64,
) -> Result<(Part, BTreeMap<String, MetaValue>)> {
    let mut location = None;
    let (mut offset, mut length, mut checksum) = (0u64, None, None);
    let number = |k: &str, v: &str| -> Result<u64> {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ext(format!("'{k}' is '{v}', not a decimal number")));
        }
        v.parse::<u64>()
            .map_err(|_| ext(format!("'{k}' {v} is too large")))
    };
    for (k, v) in entries {
        match k.as_str() {
            "location" => location = Some(v.clone()),
            "offset" => offset = number(k, v)?,
            "length" => length = Some(number(k, v)?),
            "checksum" => checksum = Some(v.clone()),
            _ => {}
        }
    }
    let location = location.ok_or_else(|| ext("no 'location' key"))?;
    check_location(&location)?;
    if let Some(len) = length {
        if len != need {
            return Err(OnnxRule::DataLength {
                field: "external data 'length'",
                expected: need,
                actual: len,
            }
            .into());
        }
    }
    let end = offset
        .checked_add(need)
        .ok_or_else(|| ext(format!("offset {offset} + {need} bytes overflows")))?;
    let mut attrs = BTreeMap::new();
    attrs.insert(ATTR_LOCATION.into(), MetaValue::Str(location.clone()));
    attrs.insert(ATTR_OFFSET.into(), MetaValue::UInt(offset));
    if let Some(len) = length {
        attrs.insert(ATTR_LENGTH.into(), MetaValue::UInt(len));
    }
    if let Some(c) = checksum {
        attrs.insert(ATTR_CHECKSUM.into(), MetaValue::Str(c));
    }
    let mut part = Part::raw("data", dtype, offset..end);
    part.extra = PartExtra {
        shard: Some(location),
        ..Default::default()
    }
    .boxed();
    Ok((part, attrs))
}

/// A sparse initializer: listed with its dense shape; its parts are the stored `values` and
/// `indices` (int64, either `[NNZ]` linear or `[NNZ, rank]`).
fn sparse(s: &RawSparse, base: u64) -> Result<TensorInfo> {
    let (shape, _) = shape_of(&s.dims)?;
    let values = tensor(&s.values, base)?;
    let indices = tensor(&s.indices, base)?;
    if values.layout != Layout::Dense || values.shape.len() != 1 {
        return Err(OnnxRule::Sparse("values must be a rank-1 numeric tensor".into()).into());
    }
    if indices.dtype != DType::I64 {
        return Err(OnnxRule::Sparse("indices must be int64".into()).into());
    }
    let nnz = values.shape[0];
    let ok = match indices.shape.as_slice() {
        [n] => *n == nnz,
        [n, r] => *n == nnz && *r == shape.len() as u64,
        _ => false,
    };
    if !ok {
        return Err(OnnxRule::Sparse(format!(
            "indices of shape {:?} do not fit {nnz} values of a rank-{} tensor",
            indices.shape.as_slice(),
            shape.len()
        ))
        .into());
    }
    let mut parts = crate::index::Parts::new();
    let mut v = values.parts[0].clone();
    v.role = Cow::Borrowed("values");
    let mut i = indices.parts[0].clone();
    i.role = Cow::Borrowed("indices");
    parts.push(v);
    parts.push(i);
    Ok(TensorInfo {
        name: s.values.name.clone().unwrap_or_default(),
        dtype: values.dtype,
        shape,
        layout: Layout::Other(SPARSE_LAYOUT.into()),
        parts,
        attributes: Default::default(),
    })
}

/// The model's facts as `onnx.*` metadata; absent fields stay absent.
fn metadata(f: &Facts) -> BTreeMap<String, MetaValue> {
    let mut m = BTreeMap::new();
    let s = |v: &str| MetaValue::Str(v.to_string());
    let list = |v: &[String]| MetaValue::Array(v.iter().map(|x| s(x)).collect());
    if let Some(v) = f.ir_version {
        m.insert("onnx.ir_version".into(), MetaValue::Int(v as i64));
    }
    if let Some(v) = f.model_version {
        m.insert("onnx.model_version".into(), MetaValue::Int(v as i64));
    }
    for (k, v) in [
        ("onnx.producer_name", &f.producer_name),
        ("onnx.producer_version", &f.producer_version),
        ("onnx.domain", &f.domain),
        ("onnx.graph_name", &f.graph_name),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), s(v));
        }
    }
    if !f.opsets.is_empty() {
        let ops = f
            .opsets
            .iter()
            .map(|(d, v)| {
                let mut o = BTreeMap::new();
                if let Some(d) = d {
                    o.insert("domain".to_string(), s(d));
                }
                if let Some(v) = v {
                    o.insert("version".to_string(), MetaValue::Int(*v as i64));
                }
                MetaValue::Map(o)
            })
            .collect();
        m.insert("onnx.opset_import".into(), MetaValue::Array(ops));
    }
    m.insert("onnx.node_count".into(), MetaValue::UInt(f.node_count));
    m.insert("onnx.op_types".into(), list(&f.op_types));
    if let Some(v) = &f.inputs {
        m.insert("onnx.inputs".into(), list(v));
    }
    if let Some(v) = &f.outputs {
        m.insert("onnx.outputs".into(), list(v));
    }
    for (k, v) in &f.metadata_props {
        m.insert(format!("onnx.metadata_props.{k}"), s(v));
    }
    m
}
