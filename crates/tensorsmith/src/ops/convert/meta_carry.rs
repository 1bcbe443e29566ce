//! File metadata carried from one format to another. GGUF output keeps safetensors and zTensor
//! metadata under one prefix per format (`safetensors.metadata.KEY`, `ztensor.metadata.KEY`),
//! so it never mixes with GGUF's own keys; converting such a GGUF file back to that format
//! restores the original keys (`format: pt`, which transformers checks, comes back as
//! `format`). A sharded checkpoint's write id describes one write and is never carried.

use crate::error::{Error, ErrorKind, Result};
use crate::index::{Format, MetaValue, TensorIndex};
use crate::ops::write_id::WRITE_ID_KEY;
use std::collections::BTreeMap;

/// The GGUF key prefix of safetensors metadata.
pub const SAFETENSORS_PREFIX: &str = "safetensors.metadata.";
/// The GGUF key prefix of zTensor metadata.
pub const ZTENSOR_PREFIX: &str = "ztensor.metadata.";

/// The prefix GGUF output gives the metadata of an input in `format` (ONNX's keys are already
/// namespaced: `onnx.ir_version`).
pub fn gguf_prefix(format: &Format) -> &'static str {
    match format {
        Format::Safetensors => SAFETENSORS_PREFIX,
        Format::Ztensor { .. } => ZTENSOR_PREFIX,
        Format::Gguf { .. } => "gguf.metadata.",
        Format::Onnx { .. } => "",
    }
}

/// Whether a key is carried to another file at all: not the write id (it names one write),
/// nor a digest record (it describes the input's bytes; an output records its own when asked).
pub fn carried(key: &str) -> bool {
    key != WRITE_ID_KEY && key != crate::safetensors::digest_record::DIGEST_KEY
}

/// The metadata an output of the format whose GGUF prefix is `prefix` gets from `index`:
/// without the write id, and from a GGUF input, `PREFIX + KEY` back under `KEY`. A key present
/// both ways with different values is an error naming both keys.
pub fn restored(index: &TensorIndex, prefix: &str) -> Result<BTreeMap<String, MetaValue>> {
    let gguf = matches!(index.format, Format::Gguf { .. });
    let mut out: BTreeMap<String, MetaValue> = BTreeMap::new();
    for (k, v) in index.metadata.iter().filter(|(k, _)| carried(k)) {
        let key = match k.strip_prefix(prefix) {
            Some(rest) if gguf && !rest.is_empty() => rest,
            _ => k.as_str(),
        };
        if let Some(old) = out.get(key) {
            if !old.same_value(v) {
                return Err(Error::new(ErrorKind::MetadataConflict {
                    key: key.to_owned(),
                    detail: format!(
                        "the input has both '{key}' and '{prefix}{key}' with different values"
                    ),
                }));
            }
            continue;
        }
        out.insert(key.to_owned(), v.clone());
    }
    Ok(out)
}
