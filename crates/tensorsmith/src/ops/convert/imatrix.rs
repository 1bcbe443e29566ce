//! `convert --quantize MIX --imatrix FILE`: which importance weights each tensor is quantized
//! with, and the rules llama-quantize (`llama_model_quantize` as the `llama-quantize` tool
//! calls it) applies to them, by hand from reading llama.cpp's `src/llama-quant.cpp`:
//! weights are looked up by the tensor's own name, only for tensors whose type changes; a
//! tensor with the wrong number of weights stops the run (the token embeddings are quantized
//! without); Q2_K tensors of a Q2_K_S file other than `token_embd`/`output` need weights.
//! The tool records the file in `quantize.imatrix.*` keys after `general.file_type`.

use crate::error::{Error, ErrorKind, Result};
use crate::ggml_quant::imatrix::{self, Imatrix};
use crate::ggml_quant::mix::FileType;
use crate::ggml_type::{Block, GgmlType};
use crate::gguf::{self, GgufValue};
use std::path::Path;

fn refuse(why: String) -> Error {
    Error::new(ErrorKind::BadImatrix(why))
}

/// The importance matrix of `path` (only with a mix, as llama-quantize is the tool it feeds).
pub(crate) fn load(path: Option<&Path>, mix: Option<FileType>) -> Result<Option<Imatrix>> {
    let Some(path) = path else {
        return Ok(None);
    };
    if mix.is_none() {
        return Err(refuse(
            "an importance matrix goes with a llama-quantize mix (--quantize Q4_K_M, or a type \
             with --mix)"
                .into(),
        ));
    }
    imatrix::read_imatrix(path).map(Some)
}

/// llama-quantize's `quantize.imatrix.*` keys: the path as given (at most 127 bytes), the first
/// dataset, the number of entries, and the chunk count where positive.
pub(crate) fn set_keys(w: &mut gguf::Writer, path: &Path, m: &Imatrix) {
    let short = |s: &str| {
        let mut end = s.len().min(127);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_string()
    };
    let file = path.to_string_lossy();
    w.set_last("quantize.imatrix.file", GgufValue::String(short(&file)));
    if let Some(d) = m.datasets.first() {
        w.set_last("quantize.imatrix.dataset", GgufValue::String(short(d)));
    }
    w.set_last(
        "quantize.imatrix.entries_count",
        GgufValue::U32(m.entries.len() as u32),
    );
    if m.chunk_count > 0 {
        w.set_last(
            "quantize.imatrix.chunks_count",
            GgufValue::U32(m.chunk_count as u32),
        );
    }
}

/// Whether llama-quantize insists on weights for a tensor `name` becoming `ty` in file type
/// `ft` (of the types our mixes choose, only Q2_K in Q2_K_S).
/// llama.cpp's `tensor_requires_imatrix`: IQ3_XXS (and the IQ1/IQ2 types) anywhere, Q2_K in a
/// Q2_K_S file, but never the token embedding or the output.
fn requires(ft: FileType, name: &str, ty: GgmlType) -> bool {
    let needs = match ty.block() {
        Some(Block::IQ3_XXS | Block::IQ2_XXS | Block::IQ2_XS | Block::IQ2_S)
        | Some(Block::IQ1_S | Block::IQ1_M) => true,
        Some(Block::Q2_K) => ft.name == "Q2_K_S",
        _ => false,
    };
    needs && !imatrix::is_token_embd(name) && name != "output.weight"
}

/// The weights tensor `name` (dims `ne`, ggml order) is quantized to `ty` with; `changes`:
/// whether its type changes at all (llama-quantize looks only then). Errors where
/// llama-quantize stops.
pub(crate) fn weights_for<'a>(
    m: Option<&'a Imatrix>,
    ft: FileType,
    name: &str,
    ne: &[u64],
    ty: GgmlType,
    changes: bool,
) -> Result<Option<&'a [f32]>> {
    if !changes {
        return Ok(None);
    }
    let Some(m) = m else {
        if requires(ft, name, ty) {
            return Err(refuse(format!(
                "the {} mix needs an importance matrix (--imatrix) for {} tensors such as '{name}', \
                 as llama-quantize does",
                ft.name,
                ty.name()
            )));
        }
        return Ok(None);
    };
    let w = imatrix::weights_for(m, name, ne)?;
    if w.is_none() && requires(ft, name, ty) {
        return Err(refuse(format!(
            "no weights for tensor '{name}', which the {} mix makes {} (llama-quantize refuses \
             such a very low-bit tensor without them)",
            ft.name,
            ty.name()
        )));
    }
    let Some(w) = w else {
        return Ok(None);
    };
    // ggml's Q4_0, Q4_1, Q5_0, Q5_1, K-quant and IQ4 quantizers use the weights; every other
    // type it makes here (Q8_0, TQ1_0, TQ2_0, MXFP4, floats) ignores them.
    Ok(crate::ggml_quant::takes_imatrix(ty).then_some(w))
}
