//! weight-inspect's structural hash, reproduced byte for byte (`hash --compat weight-inspect`),
//! quirks included: GGUF block-quantized tensors count 0 bytes, metadata values are strings
//! holding an inner encoding, floats are hashed by bit pattern. Only safetensors and GGUF
//! have a weight-inspect hash.
//!
//! The hashed document is compact JSON with object keys in byte order:
//! `{"format":F[,"gguf_version":V],"metadata":{K:S…},"tensors":{N:{"byte_length":L,"dtype":D,
//! "name":N,"shape":[…]}…}}`, and the hash is its SHA-256 in lower-case hex.

use crate::error::{Error, ErrorKind, Result};
use crate::index::{Format, Layout, MetaValue, TensorIndex, TensorInfo};
use serde_json::{Map, Value};
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

/// `"` + escaped + `"`: `\"`, `\\`, `\n`, `\r`, `\t`; other ASCII controls and DEL as
/// `\u00xx`; everything else (including non-ASCII) as it is.
fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                o.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A tensor's dtype name and byte length as weight-inspect records them.
fn dtype_and_length(t: &TensorInfo) -> (String, u64) {
    match &t.layout {
        // The quirk: quantized GGUF tensors have byte length 0.
        Layout::Ggml(g) => (g.name().to_string(), 0),
        _ => (t.type_name().to_ascii_lowercase(), t.byte_len()),
    }
}

/// The document weight-inspect hashes.
pub fn document(index: &TensorIndex) -> Result<Value> {
    let (format, version) = match &index.format {
        Format::Safetensors => ("safetensors", None),
        Format::Gguf { version } => ("gguf", Some(*version)),
        #[allow(unreachable_patterns)]
        other => {
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "weight-inspect has no hash for {} files",
                other.name()
            ))))
        }
    };
    let mut tensors = Map::new();
    for t in &index.tensors {
        let (dtype, len) = dtype_and_length(t);
        // GGUF shapes as the file stores them (ne[0] first); safetensors as written.
        let shape: Vec<u64> = match index.format {
            Format::Gguf { .. } => t.shape.iter().rev().copied().collect(),
            _ => t.shape.to_vec(),
        };
        let mut o = Map::new();
        o.insert("byte_length".into(), len.into());
        o.insert("dtype".into(), dtype.into());
        o.insert("name".into(), t.name.clone().into());
        o.insert("shape".into(), shape.into());
        tensors.insert(t.name.clone(), Value::Object(o));
    }
    let metadata: Map<String, Value> = index
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(inner(v))))
        .collect();
    let mut doc = Map::new();
    doc.insert("format".into(), format.into());
    if let Some(v) = version {
        doc.insert("gguf_version".into(), v.into());
    }
    doc.insert("metadata".into(), Value::Object(metadata));
    doc.insert("tensors".into(), Value::Object(tensors));
    Ok(Value::Object(doc))
}

/// weight-inspect's hash and short ID of a safetensors or GGUF model.
pub fn weight_inspect(index: &TensorIndex) -> Result<WiHash> {
    // serde_json's Map is a BTreeMap here (no `preserve_order`): keys come out in byte order.
    let bytes = serde_json::to_vec(&document(index)?).expect("JSON values serialize");
    let hash: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let version = match index.format {
        Format::Gguf { version } => version,
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
