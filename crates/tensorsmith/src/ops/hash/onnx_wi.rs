//! weight-inspect's hash of an ONNX model: its metadata rebuilt from the `onnx.*` facts the
//! reader put on the index (present fields only, as weight-inspect's proto2 decoding sees
//! them), its tensors the main graph's initializers with weight-inspect's dtype names and
//! element sizes. Weight bytes and external data play no part.

use crate::index::{Format, Layout, MetaValue, TensorIndex};
use crate::onnx::data_type::{code_of, wi_name_and_size, STRING};
use crate::onnx::{ATTR_GRAPH, SPARSE_LAYOUT, STRING_LAYOUT};
use crate::ops::hash::wi_json::{js, quote};
use std::collections::BTreeMap;

/// Strings of a list value, as Rust's `{:?}` of a `Vec<String>` writes them (what
/// weight-inspect stores), quoted as its inner string encoding.
fn debug_list(v: Option<&MetaValue>) -> String {
    let items: Vec<String> = match v {
        Some(MetaValue::Array(a)) => a
            .iter()
            .filter_map(|x| match x {
                MetaValue::Str(s) => Some(s.clone()),
                MetaValue::Int(i) => Some(i.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    quote(&format!("{items:?}"))
}

fn int_of(v: &MetaValue) -> Option<i64> {
    match v {
        MetaValue::Int(i) => Some(*i),
        MetaValue::UInt(u) => Some(*u as i64),
        _ => None,
    }
}

/// The exact JSON weight-inspect hashes for an ONNX index.
pub(crate) fn canonical_json(index: &TensorIndex) -> String {
    let m = &index.metadata;
    let get = |k: &str| m.get(&format!("onnx.{k}"));
    let mut meta: BTreeMap<&str, String> = BTreeMap::new();
    for k in ["ir_version", "model_version"] {
        if let Some(i) = get(k).and_then(int_of) {
            meta.insert(k, i.to_string());
        }
    }
    for k in ["producer_name", "producer_version", "domain"] {
        if let Some(MetaValue::Str(s)) = get(k) {
            meta.insert(k, quote(s));
        }
    }
    if let Some(MetaValue::Array(ops)) = get("opset_import") {
        let versions: Vec<MetaValue> = ops
            .iter()
            .filter_map(|o| match o {
                MetaValue::Map(o) => o.get("version").and_then(int_of).map(MetaValue::Int),
                _ => None,
            })
            .collect();
        if !ops.is_empty() {
            meta.insert(
                "opset_imports",
                debug_list(Some(&MetaValue::Array(versions))),
            );
        }
    }
    let nodes = get("node_count").and_then(int_of).unwrap_or(0);
    if nodes > 0 {
        let mut types: Vec<MetaValue> = match get("op_types") {
            Some(MetaValue::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        types.sort_by(|a, b| match (a, b) {
            (MetaValue::Str(a), MetaValue::Str(b)) => a.cmp(b),
            _ => std::cmp::Ordering::Equal,
        });
        meta.insert("node_types", debug_list(Some(&MetaValue::Array(types))));
        meta.insert("node_count", nodes.to_string());
    }
    if get("inputs").is_some() {
        meta.insert("input_names", debug_list(get("inputs")));
    }
    if get("outputs").is_some() {
        meta.insert("output_names", debug_list(get("outputs")));
    }
    let version = match index.format {
        Format::Onnx { ir_version } => ir_version,
        _ => 0,
    };
    let mut out = format!("{{\"format\":\"onnx\",\"gguf_version\":{version},\"metadata\":{{");
    for (i, (k, v)) in meta.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{}:{}", js(k), js(v)));
    }
    out.push_str("},\"tensors\":{");
    let mut tensors: Vec<_> = index
        .tensors
        .iter()
        .filter(|t| {
            !t.attributes.contains_key(ATTR_GRAPH)
                && t.layout != Layout::Other(SPARSE_LAYOUT.into())
        })
        .collect();
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    for (i, t) in tensors.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let code = if t.layout == Layout::Other(STRING_LAYOUT.into()) {
            STRING
        } else {
            code_of(t.dtype).unwrap_or(0)
        };
        let (dtype, size) = wi_name_and_size(code);
        let len = t
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(size))
            .unwrap_or(0);
        let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "{}:{{\"name\":{},\"dtype\":{},\"shape\":[{}],\"byte_length\":{len}}}",
            js(&t.name),
            js(&t.name),
            js(&dtype),
            shape.join(",")
        ));
    }
    out.push_str("}}");
    out
}
