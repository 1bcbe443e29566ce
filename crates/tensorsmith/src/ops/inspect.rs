//! The inspect summary: what a file holds, per dtype and per tensor, as a stable JSON value
//! (`schema: "tensorsmith.inspect/1"`; fields are only ever added, never renamed).

use crate::index::{MetaValue, TensorIndex};
use crate::model::Model;
use serde_json::{json, Map, Value};
use std::path::Path;

/// Version tag of the JSON form below.
pub const INSPECT_SCHEMA: &str = "tensorsmith.inspect/1";

/// A metadata value as JSON (strings stay strings; typed values keep their type). JSON has no
/// NaN or infinities: those floats are the strings `"NaN"`, `"Infinity"` and `"-Infinity"`
/// (the spelling pandas and Spark write), never `null`.
pub fn meta_json(v: &MetaValue) -> Value {
    match v {
        MetaValue::Str(s) => Value::String(s.clone()),
        MetaValue::Bool(b) => Value::Bool(*b),
        MetaValue::Int(i) => json!(i),
        MetaValue::UInt(u) => json!(u),
        MetaValue::F32(f) => match non_finite(f64::from(*f), JSON_SPELLING) {
            Some(name) => Value::String(name.to_owned()),
            // Through the shortest decimal that round-trips as f32 (0.1, not 0.10000000149011612).
            None => json!(format!("{f}").parse::<f64>().unwrap_or(f64::from(*f))),
        },
        MetaValue::F64(f) => match non_finite(*f, JSON_SPELLING) {
            Some(name) => Value::String(name.to_owned()),
            None => json!(f),
        },
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

/// NaN, +inf and -inf as JSON output spells them (pandas', Spark's).
const JSON_SPELLING: [&str; 3] = ["NaN", "Infinity", "-Infinity"];
/// NaN, +inf and -inf as Python's `repr` spells them.
const TEXT_SPELLING: [&str; 3] = ["nan", "inf", "-inf"];

/// `spelling`'s word for a float JSON cannot hold (`None` for a finite one).
fn non_finite(f: f64, spelling: [&'static str; 3]) -> Option<&'static str> {
    if f.is_nan() {
        Some(spelling[0])
    } else if f.is_infinite() {
        Some(if f > 0.0 { spelling[1] } else { spelling[2] })
    } else {
        None
    }
}

/// A metadata value as text, for formats whose metadata is text only (safetensors, zTensor
/// v1.1) and for text output: strings as they are, anything else as its compact JSON, except
/// that NaN and infinities, alone or inside arrays and maps, are spelled as Python's `repr`
/// spells them: `nan`, `inf`, `-inf`.
pub fn meta_text(v: &MetaValue) -> String {
    match v {
        MetaValue::Str(s) => s.clone(),
        other => {
            let mut s = String::new();
            text_into(&mut s, other);
            s
        }
    }
}

/// A metadata value as an item of a list shown as text: strings quoted as JSON, anything else
/// as [`meta_text`].
pub fn meta_item_text(v: &MetaValue) -> String {
    let mut s = String::new();
    text_into(&mut s, v);
    s
}

fn text_into(s: &mut String, v: &MetaValue) {
    let float = match v {
        MetaValue::F32(f) => non_finite(f64::from(*f), TEXT_SPELLING),
        MetaValue::F64(f) => non_finite(*f, TEXT_SPELLING),
        _ => None,
    };
    if let Some(t) = float {
        s.push_str(t);
        return;
    }
    match v {
        MetaValue::Array(a) => {
            s.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                text_into(s, x);
            }
            s.push(']');
        }
        MetaValue::Map(m) => {
            s.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&Value::String(k.clone()).to_string());
                s.push(':');
                text_into(s, x);
            }
            s.push('}');
        }
        other => s.push_str(&meta_json(other).to_string()),
    }
}

/// Tensors, parameters, bytes and bits per weight of each stored type, as the inspect document
/// and the report page list them.
pub fn dtype_totals_json(index: &TensorIndex) -> Vec<Value> {
    index
        .dtype_totals()
        .into_iter()
        .map(|(d, count, elements, bytes)| {
            json!({"dtype": d, "tensors": count, "parameters": elements, "bytes": bytes,
                   "bits_per_weight": bits_per_weight(bytes, elements)})
        })
        .collect()
}

/// The full inspect document for one model (a file, or a sharded checkpoint), as indented
/// JSON text with one line per tensor. Written directly, not through a JSON tree: a header of
/// 100,000 tensors must print faster than other tools can merely parse it.
pub fn inspect_json_text(path: &Path, model: &Model) -> String {
    use std::fmt::Write as _;
    let index = &model.index;
    let dtypes = dtype_totals_json(index);
    let metadata: Map<String, Value> = index
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), meta_json(v)))
        .collect();
    let total_bytes: u64 = index.tensors.iter().map(|t| t.byte_len()).sum();
    let mut head = json!({
        "schema": INSPECT_SCHEMA,
        "file": path.display().to_string(),
        "format": index.format.name(),
        "format_version": index.format.version(),
        "file_size": index.file_len,
        "header_size": index.header_len,
        "tensor_count": index.tensors.len(),
        "total_parameters": index.total_elements(),
        "total_bytes": total_bytes,
        "bits_per_weight": bits_per_weight(total_bytes, index.total_elements()),
        "dtypes": dtypes,
        "metadata": metadata,
    });
    if model.is_sharded() {
        head["shards"] = model.files.iter().map(|f| json!(f.name)).collect();
    }
    if let Some(split) = model.split() {
        head["split"] = json!({"count": split.count, "tensors": split.tensors});
    }
    let mut out = serde_json::to_string_pretty(&head).expect("JSON values serialize");
    out.truncate(out.len() - 2); // "\n}"
    out.reserve(index.tensors.len() * 160);
    out.push_str(",\n  \"tensors\": [");
    for (i, t) in index.tensors.iter().enumerate() {
        let r = t.data_range();
        let file = model.file_of(t);
        out.push_str(if i == 0 { "\n    " } else { ",\n    " });
        out.push_str("{\"name\": ");
        out.push_str(&serde_json::to_string(&t.name).expect("strings serialize"));
        let _ = write!(out, ", \"dtype\": \"{}\", \"shape\": [", t.type_name());
        for (j, d) in t.shape.iter().enumerate() {
            let _ = write!(out, "{}{d}", if j == 0 { "" } else { ", " });
        }
        let _ = write!(
            out,
            "], \"parameters\": {}, \"byte_length\": {}, \"data_offsets\": [{}, {}]",
            t.elements(),
            t.byte_len(),
            r.start.saturating_sub(file.header_len),
            r.end.saturating_sub(file.header_len)
        );
        if model.is_sharded() {
            out.push_str(", \"shard\": ");
            out.push_str(&serde_json::to_string(&file.name).expect("strings serialize"));
        }
        out.push('}');
    }
    out.push_str(if index.tensors.is_empty() {
        "]\n}\n"
    } else {
        "\n  ]\n}\n"
    });
    out
}

/// Stored bits per element (4.5 for q4_0, 16 for F16); null when there are no elements.
pub fn bits_per_weight(bytes: u64, elements: u64) -> Option<f64> {
    (elements > 0).then(|| bytes as f64 * 8.0 / elements as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use MetaValue::*;

    #[test]
    fn floats_json_cannot_hold_are_spelled_not_null() {
        let v = Array(vec![
            F32(0.0),
            F32(f32::NEG_INFINITY),
            F64(f64::NAN),
            F64(f64::INFINITY),
        ]);
        assert_eq!(meta_json(&v), json!([0.0, "-Infinity", "NaN", "Infinity"]));
        assert_eq!(meta_text(&v), "[0.0,-inf,nan,inf]");
        assert_eq!(meta_text(&F32(f32::NAN)), "nan");
        assert_eq!(meta_text(&F32(0.1)), "0.1");
        assert_eq!(meta_text(&Str("nan".into())), "nan");
        assert_eq!(meta_item_text(&Str("a".into())), "\"a\"");
        let m = Map([("k".to_string(), F64(f64::NEG_INFINITY))].into());
        assert_eq!(meta_text(&m), "{\"k\":-inf}");
    }
}
