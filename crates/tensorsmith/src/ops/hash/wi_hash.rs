//! weight-inspect's structural hash, reproduced byte for byte (`hash --compat weight-inspect`),
//! quirks included: GGUF block-quantized tensors count 0 bytes, metadata values are strings
//! holding an inner encoding, floats are hashed by bit pattern. Safetensors, GGUF and ONNX
//! have a weight-inspect hash (ONNX: `onnx_wi.rs`, from the model facts on the index).
//!
//! The hashed document is compact JSON, fields in weight-inspect's declared order and its two
//! maps sorted by key: `{"format":F[,"gguf_version":V],"metadata":{K:S…},"tensors":{N:{"name":N,
//! "dtype":D,"shape":[…],"byte_length":L}…}}`; the hash is its SHA-256 in lower-case hex.
//!
//! Beyond weight-inspect: files it refuses to read get the hash its algorithm defines for them
//! (GGUF arrays of 64-bit numbers and nested arrays encode like its other arrays, arrays over
//! 100k entries and more than 100k tensors are fine, zero-byte safetensors tensors have
//! `byte_length` 0).

use crate::error::{Error, ErrorKind, Result};
use crate::index::{Format, Layout, MetaValue, TensorIndex, TensorInfo};
use crate::ops::hash::wi_json::{js, quote};
use sha2::{Digest, Sha256};

/// weight-inspect's answer for one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WiHash {
    /// 64 lower-case hex digits.
    pub hash: String,
    /// `wi:<format>:<gguf version or 0>:<first 8 hex digits>`.
    pub short_id: String,
}

/// The inner encoding of one metadata value.
pub fn inner(v: &MetaValue) -> String {
    match v {
        MetaValue::Str(s) => quote(s),
        MetaValue::Bool(b) => b.to_string(),
        MetaValue::Int(i) => i.to_string(),
        // Widened to i64: values above i64::MAX wrap negative.
        MetaValue::UInt(u) => (*u as i64).to_string(),
        MetaValue::F64(f) => f.to_bits().to_string(),
        MetaValue::F32(f) => format!("f32:{}", f64::from(*f).to_bits()),
        MetaValue::Array(a) => {
            let items: Vec<String> = a.iter().map(inner).collect();
            format!("[{}]", items.join(","))
        }
        MetaValue::Null => "null".to_string(),
        // Neither safetensors nor GGUF has these; given a form for completeness only.
        MetaValue::Bytes(b) => quote(&b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        MetaValue::Map(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}:{}", quote(k), inner(v)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
    }
}

/// A tensor's dtype name and byte length as weight-inspect records them.
fn dtype_and_length(t: &TensorInfo) -> (String, u64) {
    match &t.layout {
        // The quirk: quantized GGUF tensors have byte length 0.
        Layout::Ggml(g) => (g.name().to_string(), 0),
        _ => (t.type_name().to_ascii_lowercase(), t.byte_len()),
    }
}

/// The exact bytes weight-inspect hashes: compact JSON, top-level fields and tensor fields in
/// its declared order (`name`, `dtype`, `shape`, `byte_length`), the two maps sorted by key.
pub fn canonical_json(index: &TensorIndex) -> Result<String> {
    let (format, version) = match &index.format {
        Format::Safetensors => ("safetensors", None),
        Format::Gguf { version } => ("gguf", Some(*version)),
        Format::Onnx { .. } => return Ok(crate::ops::hash::onnx_wi::canonical_json(index)),
        other => {
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "weight-inspect has no hash for {} files",
                other.name()
            ))))
        }
    };
    let mut out = format!("{{\"format\":{}", js(format));
    if let Some(v) = version {
        out.push_str(&format!(",\"gguf_version\":{v}"));
    }
    out.push_str(",\"metadata\":{");
    // BTreeMap order is byte order of the UTF-8 keys.
    for (i, (k, v)) in index.metadata.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{}:{}", js(k), js(&inner(v))));
    }
    out.push_str("},\"tensors\":{");
    let mut tensors: Vec<&TensorInfo> = index.tensors.iter().collect();
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    for (i, t) in tensors.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let (dtype, len) = dtype_and_length(t);
        // GGUF shapes as the file stores them (ne[0] first); safetensors as written.
        let shape: Vec<String> = match index.format {
            Format::Gguf { .. } => t.shape.iter().rev().map(u64::to_string).collect(),
            _ => t.shape.iter().map(u64::to_string).collect(),
        };
        out.push_str(&format!(
            "{}:{{\"name\":{},\"dtype\":{},\"shape\":[{}],\"byte_length\":{len}}}",
            js(&t.name),
            js(&t.name),
            js(&dtype),
            shape.join(",")
        ));
    }
    out.push_str("}}");
    Ok(out)
}

/// weight-inspect's hash and short ID of a safetensors or GGUF model.
pub fn weight_inspect(index: &TensorIndex) -> Result<WiHash> {
    let json = canonical_json(index)?;
    let hash: String = Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let version = match index.format {
        Format::Gguf { version } => i64::from(version),
        Format::Onnx { ir_version } => ir_version,
        _ => 0,
    };
    let short_id = format!("wi:{}:{version}:{}", index.format.name(), &hash[..8]);
    Ok(WiHash { hash, short_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_encodings() {
        assert_eq!(inner(&MetaValue::Str("llama".into())), "\"llama\"");
        assert_eq!(
            inner(&MetaValue::Str("a\"b\\c\nd\u{1}\u{7f}é".into())),
            "\"a\\\"b\\\\c\\nd\\u0001\\u007fé\""
        );
        assert_eq!(inner(&MetaValue::UInt(u64::MAX)), "-1");
        assert_eq!(inner(&MetaValue::Int(-5)), "-5");
        assert_eq!(inner(&MetaValue::F64(2.0)), "4611686018427387904");
        assert_eq!(
            inner(&MetaValue::F32(1.5)),
            format!("f32:{}", 1.5f64.to_bits())
        );
        assert_eq!(inner(&MetaValue::Bool(true)), "true");
        assert_eq!(
            inner(&MetaValue::Array(vec![
                MetaValue::UInt(1),
                MetaValue::Str("x".into())
            ])),
            "[1,\"x\"]"
        );
    }
}
