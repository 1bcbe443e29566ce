//! A Hugging Face model folder to GGUF (`hf_gguf`), then, for `--quantize`, llama-quantize's
//! step on the result: the folder is written as `convert_hf_to_gguf.py` writes it (F16 unless
//! `--dtype` says F32 or BF16) to a temporary file beside the output, which `convert_gguf`
//! quantizes as `llama-quantize` does, and which is removed afterwards. The two steps give the
//! reference pipeline's bytes; the intermediate file costs the disk space of the F16 model.

use super::convert_gguf::convert_gguf;
use super::convert_options::ConvertOptions;
use crate::dtype::DType;
use crate::error::Result;
use crate::hf_gguf::{self, HfOptions};
use crate::model::Model;
use std::path::{Path, PathBuf};

/// Removes the intermediate file however the conversion ends.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn convert_hf(input: &Model, out: &Path, opts: &ConvertOptions) -> Result<Vec<(PathBuf, u64)>> {
    let dir =
        &hf_gguf::hf_folder(&input.location).unwrap_or_else(|| PathBuf::from(&input.location));
    let hf = HfOptions {
        out_type: opts.dtype.unwrap_or(DType::F16),
        pre_tokenizer: opts.pre_tokenizer.clone(),
    };
    if opts.quantize.is_none() && opts.quantize_mix.is_none() && opts.gguf_set.is_empty() {
        return hf_gguf::convert(dir, input, out, &hf);
    }
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = out.with_file_name(format!(".{name}.{}.hf.gguf", std::process::id()));
    let _remove = Remove(tmp.clone());
    hf_gguf::convert(dir, input, &tmp, &hf)?;
    let converted = crate::open(&tmp.to_string_lossy(), &crate::OpenOptions::default())?;
    let mut second = opts.clone();
    second.dtype = None;
    second.keep_names = true;
    convert_gguf(&converted, out, &second)
}
