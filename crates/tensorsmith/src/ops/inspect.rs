//! The inspect summary: what a file holds, per dtype and per tensor, as a stable JSON value
//! (`schema: "tensorsmith.inspect/1"`; fields are only ever added, never renamed).

use crate::index::{MetaValue, TensorIndex};
use serde_json::{json, Map, Value};
use std::path::Path;

/// Version tag of the JSON form below.
pub const INSPECT_SCHEMA: &str = "tensorsmith.inspect/1";

/// A metadata value as JSON (strings stay strings; typed values keep their type).
pub fn meta_json(v: &MetaValue) -> Value {
    match v {
        MetaValue::Str(s) => Value::String(s.clone()),
        MetaValue::Bool(b) => Value::Bool(*b),
        MetaValue::Int(i) => json!(i),
        MetaValue::UInt(u) => json!(u),
        MetaValue::F32(f) => json!(f),
        MetaValue::F64(f) => json!(f),
        MetaValue::Array(a) => Value::Array(a.iter().map(meta_json).collect()),
        MetaValue::Null => Value::Null,
        MetaValue::Bytes(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            json!({ "bytes_hex": hex })
        }
        MetaValue::Map(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), meta_json(v))).collect())
        }
    }
}

/// The full inspect document for one file.
pub fn inspect_json(path: &Path, index: &TensorIndex) -> Value {
    let dtypes: Vec<Value> = index
        .dtype_totals()
        .into_iter()
        .map(|(d, count, elements, bytes)| {
            json!({"dtype": d.safetensors_name(), "tensors": count, "parameters": elements, "bytes": bytes})
        })
        .collect();
    let metadata: Map<String, Value> = index
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), meta_json(v)))
        .collect();
    let tensors: Vec<Value> = index
        .tensors
        .iter()
        .map(|t| {
            let r = t.data_range();
            json!({
                "name": t.name,
                "dtype": t.dtype.safetensors_name(),
                "shape": t.shape.as_slice(),
                "parameters": t.elements(),
                "byte_length": t.byte_len(),
                "data_offsets": [r.start - index.header_len, r.end - index.header_len],
            })
        })
        .collect();
    json!({
        "schema": INSPECT_SCHEMA,
        "file": path.display().to_string(),
        "format": index.format.name(),
        "file_size": index.file_len,
        "header_size": index.header_len,
        "tensor_count": index.tensors.len(),
        "total_parameters": index.total_elements(),
        "total_bytes": index.tensors.iter().map(|t| t.byte_len()).sum::<u64>(),
        "dtypes": dtypes,
        "metadata": metadata,
        "tensors": tensors,
    })
}
