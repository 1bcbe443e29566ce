//! A Hugging Face model folder to GGUF (`hf_gguf`), then, for `--quantize`, llama-quantize's
//! step on the result: the folder's GGUF as `convert_hf_to_gguf.py` writes it (its output
//! type `auto` unless `--outtype` or `--dtype` says otherwise) is not written but read by range as it is computed
//! (`hf_gguf::converted_model`), and `convert_gguf` quantizes it as `llama-quantize` does: the
//! two reference steps' bytes in one pass, without the intermediate file.

use crate::error::{Error, ErrorKind, Result};
use crate::ggml_quant::mix::FileType;
use crate::hf_gguf::{self, HfOptions, OutType};
use crate::model::Model;
use crate::ops::convert::gguf::convert_gguf;
use crate::ops::convert::options::ConvertOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Converts `input`, the weights of the Hugging Face model folder `dir`, to the GGUF `out`.
pub fn convert_hf(
    dir: &hf_gguf::Folder,
    input: &Model,
    out: &Path,
    opts: &ConvertOptions,
) -> Result<Vec<(PathBuf, u64)>> {
    let from_dtype = opts.dtype.map(OutType::of_dtype).transpose()?;
    let out_type = match (opts.outtype, from_dtype) {
        (Some(o), Some(d)) if o != d => {
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "--dtype {} and --outtype {o:?} disagree: give one",
                opts.dtype.map(|d| d.to_string()).unwrap_or_default()
            ))))
        }
        (o, d) => o.or(d).unwrap_or(OutType::Auto),
    };
    if opts.rounding == crate::cast::Rounding::Truncate {
        return Err(Error::new(ErrorKind::Unsupported(
            "rounding 'truncate': a Hugging Face model folder to GGUF casts as llama.cpp's \
             converter does (to nearest)"
                .into(),
        )));
    }
    let quantizing = opts.quantize.is_some() || opts.quantize_mix.is_some();
    if out_type.is_quantized() && quantizing {
        return Err(Error::new(ErrorKind::Unsupported(format!(
            "--outtype {out_type:?} makes a quantized file, which llama-quantize does not quantize \
             again: --quantize starts from f32, f16, bf16 or auto"
        ))));
    }
    let hf = HfOptions {
        out_type,
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
    // The second step is llama-quantize's: a block type it names as a file type (Q6_K,
    // Q8_0, Q4_0, IQ4_XS, ...) is that file type, as if with --mix (alone it kept rows that
    // are not whole blocks in the checkpoint's float type and the converter's file_type).
    if let (Some(t), None) = (second.quantize, second.quantize_mix) {
        if let Some(ft) = FileType::from_name(&t.name().to_ascii_uppercase()) {
            second.quantize = None;
            second.quantize_mix = Some(ft);
        }
    }
    convert_gguf(&converted, out, &second)
}
