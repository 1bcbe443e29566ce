//! A Hugging Face model folder to GGUF (`hf_gguf`), then, for `--quantize`, llama-quantize's
//! step on the result: the folder's GGUF as `convert_hf_to_gguf.py` writes it (F16 unless
//! `--dtype` says F32 or BF16) is not written but read by range as it is computed
//! (`hf_gguf::converted_model`), and `convert_gguf` quantizes it as `llama-quantize` does: the
//! two reference steps' bytes in one pass, without the intermediate file.

use super::convert_gguf::convert_gguf;
use super::convert_options::ConvertOptions;
use crate::dtype::DType;
use crate::error::Result;
use crate::hf_gguf::{self, HfOptions};
use crate::model::Model;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Converts `input`, the weights of the Hugging Face model folder `dir`, to the GGUF `out`.
pub fn convert_hf(
    dir: &hf_gguf::Folder,
    input: &Model,
    out: &Path,
    opts: &ConvertOptions,
) -> Result<Vec<(PathBuf, u64)>> {
    let hf = HfOptions {
        out_type: opts.dtype.unwrap_or(DType::F16),
        pre_tokenizer: opts.pre_tokenizer.clone(),
    };
    if opts.quantize.is_none() && opts.quantize_mix.is_none() && opts.gguf_set.is_empty() {
        return hf_gguf::convert(dir, input, out, &hf);
    }
    // The checkpoint again, owned by the converted file that reads it.
    let again = Arc::new(crate::open(
        &input.location,
        &crate::OpenOptions::default().with_storage_options(opts.storage.clone()),
    )?);
    let converted = hf_gguf::converted_model(dir, again, &hf)?;
    let mut second = opts.clone();
    second.dtype = None;
    second.keep_names = true;
    convert_gguf(&converted, out, &second)
}
