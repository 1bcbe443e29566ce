//! A template model written again with new initializers: every byte of the template is
//! copied as it is (fields in their order, unknown ones included) except the main graph's
//! initializers named in the replacement map, which are written anew (dims, data_type, name,
//! the template tensor's other fields such as doc_string, then raw_data or external_data).
//! The graph's length is encoded again; nothing else changes.

use super::tensor::read_tensor;
use super::wire::Fields;
use crate::error::Result;
use std::collections::HashMap;

/// Where a new initializer's values go.
#[derive(Debug, Clone)]
pub enum Placement {
    /// In `raw_data`.
    Inline(Vec<u8>),
    /// In the data file `location` (relative to the model's folder), at `offset`.
    External {
        /// Path of the data file, relative to the model's folder.
        location: String,
        /// Byte offset of the values in the data file.
        offset: u64,
        /// Byte length of the values.
        length: u64,
    },
}

/// One initializer to write in place of the template's of the same name.
#[derive(Debug, Clone)]
pub struct NewTensor {
    /// The tensor's dimensions, outermost first.
    pub dims: Vec<u64>,
    /// The ONNX `TensorProto.data_type` code of its values (see [`crate::onnx::data_type`]).
    pub data_type: i32,
    /// Where its values are written.
    pub placement: Placement,
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn len_field(n: u32, payload: &[u8], out: &mut Vec<u8>) {
    varint((u64::from(n) << 3) | 2, out);
    varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

fn int_field(n: u32, v: u64, out: &mut Vec<u8>) {
    varint(u64::from(n) << 3, out);
    varint(v, out);
}

/// TensorProto fields the writer sets itself; every other field of the template tensor is
/// kept (doc_string 12, metadata_props 16, ...).
const REPLACED: &[u32] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14];

fn tensor_bytes(name: &str, t: &NewTensor, kept: &[u8], out: &mut Vec<u8>) {
    let mut dims = Vec::new();
    for &d in &t.dims {
        varint(d, &mut dims);
    }
    if !t.dims.is_empty() {
        len_field(1, &dims, out);
    }
    int_field(2, t.data_type as i64 as u64, out);
    len_field(8, name.as_bytes(), out);
    out.extend_from_slice(kept);
    match &t.placement {
        Placement::Inline(b) => len_field(9, b, out),
        Placement::External {
            location,
            offset,
            length,
        } => {
            for (k, v) in [
                ("location", location.clone()),
                ("offset", offset.to_string()),
                ("length", length.to_string()),
            ] {
                let mut e = Vec::new();
                len_field(1, k.as_bytes(), &mut e);
                len_field(2, v.as_bytes(), &mut e);
                len_field(13, &e, out);
            }
            int_field(14, 1, out);
        }
    }
}

/// The template's bytes with the main graph's initializers named in `new` replaced.
pub fn rewrite(template: &[u8], new: &HashMap<String, NewTensor>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(template.len());
    for f in Fields::new(template, 0..template.len(), 0) {
        let f = f?;
        let super::wire::Value::Len(graph) = &f.value else {
            out.extend_from_slice(&template[f.start..f.end]);
            continue;
        };
        if f.number != 7 {
            out.extend_from_slice(&template[f.start..f.end]);
            continue;
        }
        let mut g = Vec::with_capacity(graph.len());
        for h in Fields::new(template, graph.clone(), 0) {
            let h = h?;
            let super::wire::Value::Len(r) = &h.value else {
                g.extend_from_slice(&template[h.start..h.end]);
                continue;
            };
            let raw = (h.number == 5)
                .then(|| read_tensor(template, r.clone(), 0))
                .transpose()?;
            let replaced = raw.as_ref().and_then(|raw| {
                let name = raw.name.as_deref().unwrap_or("");
                new.get(name).map(|t| (name, t))
            });
            let Some((name, t)) = replaced else {
                g.extend_from_slice(&template[h.start..h.end]);
                continue;
            };
            let mut kept = Vec::new();
            for k in Fields::new(template, r.clone(), 0) {
                let k = k?;
                if !REPLACED.contains(&k.number) {
                    kept.extend_from_slice(&template[k.start..k.end]);
                }
            }
            let mut tb = Vec::new();
            tensor_bytes(name, t, &kept, &mut tb);
            len_field(5, &tb, &mut g);
        }
        len_field(7, &g, &mut out);
    }
    Ok(out)
}
