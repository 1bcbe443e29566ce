//! `convert --quantize Q4_K_M` (a llama-quantize mix): the model's hyper-parameters read from a
//! GGUF input's `{arch}.*` keys, as llama.cpp's loader reads them, and each tensor's type
//! chosen by `ggml_quant::mix`. Inputs other than GGUF are refused by name: their tensors do not
//! carry llama.cpp's names, which the mixes go by.

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::ggml_quant::mix::{choose_types, FileType, MixModel, MixTensor};
use crate::ggml_type::GgmlType;
use crate::gguf::{Array, GgufHeader, GgufValue};
use crate::index::{Layout, Shape, TensorInfo};
use crate::model::Model;
use crate::ops::convert::dequantize;
use std::path::Path;

fn refuse(input: &Model, why: String) -> Error {
    Error::new(ErrorKind::Unsupported(why)).in_file(Path::new(&input.location))
}

/// A count the loader reads from `key`: a number, or for per-layer arrays the first layer's.
fn count(h: &GgufHeader, key: &str) -> Option<u64> {
    let v = h.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)?;
    match v {
        GgufValue::Array(Array::U32(a)) => a.first().map(|&x| x.into()),
        GgufValue::Array(Array::I32(a)) => a.first().and_then(|&x| u64::try_from(x).ok()),
        v => v.as_u64(),
    }
}

/// The hyper-parameters the mixes look at, from a GGUF input's header.
pub(crate) fn model_of(header: Option<&GgufHeader>, input: &Model) -> Result<MixModel> {
    let Some(h) = header else {
        return Err(refuse(
            input,
            "a llama-quantize mix (Q4_K_M, …) of a model that is not GGUF: the mixes go by llama.cpp's tensor names and its {arch}.* keys (convert to GGUF first, or give one block type)".into(),
        ));
    };
    let arch = h
        .metadata
        .iter()
        .find(|(k, _)| k == "general.architecture")
        .and_then(|(_, v)| v.as_str())
        .ok_or_else(|| {
            refuse(
                input,
                "a llama-quantize mix needs general.architecture, which this GGUF lacks".into(),
            )
        })?
        .to_string();
    let key = |k: &str| format!("{arch}.{k}");
    let n_layer = count(h, &key("block_count")).ok_or_else(|| {
        refuse(
            input,
            format!("a llama-quantize mix needs {arch}.block_count, which this GGUF lacks"),
        )
    })?;
    if n_layer == 0 || n_layer > 512 {
        return Err(refuse(
            input,
            format!("{arch}.block_count is {n_layer}: llama.cpp takes 1 to 512 layers"),
        ));
    }
    let n_head = count(h, &key("attention.head_count")).unwrap_or(0);
    Ok(MixModel {
        n_layer: n_layer as u32,
        n_head: n_head as u32,
        n_head_kv: count(h, &key("attention.head_count_kv")).unwrap_or(n_head) as u32,
        n_expert: count(h, &key("expert_count")).unwrap_or(0) as u32,
        arch,
    })
}

/// The type each of `tensors` gets (`None`: kept as it is).
pub(crate) fn types(
    m: &MixModel,
    ft: FileType,
    tensors: &[&TensorInfo],
    ne_of: &dyn Fn(&TensorInfo) -> Shape,
    has_imatrix: bool,
) -> Result<Vec<Option<GgmlType>>> {
    let nes: Vec<Shape> = tensors.iter().map(|t| ne_of(t)).collect();
    let mix: Vec<MixTensor> = tensors
        .iter()
        .zip(&nes)
        .map(|(t, ne)| MixTensor {
            name: &t.name,
            ne,
            float: t.layout == Layout::Dense
                && dequantize::block_type(t).is_none()
                && matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16),
        })
        .collect();
    choose_types(m, ft, &mix, has_imatrix)
}
