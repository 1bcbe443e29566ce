//! `convert`: any model to any format we write, the output format chosen by the options or
//! the output's name (`.gguf`: GGUF, `.zt`: zTensor, else safetensors), and options that do not apply to that
//! format refused before anything is written.

pub use crate::ops::convert::gguf::{convert_gguf, writes_gguf};
pub use crate::ops::convert::onnx::convert_onnx;
pub use crate::ops::convert::options::{parse_size, ConvertOptions};
pub use crate::ops::convert::safetensors::{convert_safetensors, Written};
pub use crate::ops::convert::ztensor::{append_ztensor, convert_ztensor};

use crate::error::{Error, ErrorKind, Result};
use crate::model::Model;
use std::path::{Path, PathBuf};

/// Whether `out` is written as zTensor: a zTensor version was asked for, or its name ends in
/// `.zt` (any case).
pub fn writes_ztensor(out: &Path, opts: &ConvertOptions) -> bool {
    opts.zt_version.is_some()
        || out
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zt"))
}

/// Refuses an `s3://` output the sink cannot write as one object (several files, a lock
/// beside them, an existing file to extend), by name, before anything is read or written.
pub fn refuse_remote_outputs(out: &str, opts: &ConvertOptions) -> Result<()> {
    use crate::bytes::refuse_remote;
    let path = Path::new(out);
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        return refuse_remote(out, "ONNX output (a model and its external data file)");
    }
    if opts.append {
        return refuse_remote(out, "appending to a zTensor file");
    }
    if writes_gguf(path)
        && (opts.shard_size.is_some() || opts.split_max_tensors.is_some() || opts.split_small_first)
    {
        return refuse_remote(out, "a split GGUF model");
    }
    if opts.shard_size.is_some() {
        return refuse_remote(out, "a sharded checkpoint (--shard-size)");
    }
    Ok(())
}

/// Writes `input` as the format [`writes_ztensor`] picks; returns the files written.
///
/// Each output file is written atomically, so a failed conversion leaves no partial file
/// under an output name.
///
/// # Errors
///
/// - [`ErrorKind::Unsupported`] when options contradict each other or the output format
///   (compression for safetensors, a zTensor version for a `.gguf` name, ...), or a tensor
///   cannot be written in that format (a sparse one without densifying, ...); refused before
///   anything is written.
/// - [`ErrorKind::UnsupportedCast`] or [`ErrorKind::UnsupportedDtype`] when a tensor's dtype
///   cannot be cast as asked or has no name in the output format;
///   [`ErrorKind::CannotDequantize`] / [`ErrorKind::CannotQuantize`] for ggml types without a
///   (de)quantizer.
/// - [`ErrorKind::MetadataConflict`] when carried metadata disagrees with what the output
///   must record.
/// - [`ErrorKind::DigestMismatch`] when an input tensor no longer matches the digest its file
///   records (unless `with_skip_digest_check`).
/// - The input's read errors (see [`Model::tensor_bytes`]) and [`ErrorKind::Io`] for a failed
///   write; for an `s3://` output, the remote kinds.
pub fn convert(input: &Model, out: &Path, opts: &ConvertOptions) -> Result<Vec<PathBuf>> {
    let refuse = |what: &str| Err(Error::new(ErrorKind::Unsupported(what.into())).in_file(out));
    let name = out.to_string_lossy();
    crate::bytes::refuse_write(&name)?;
    refuse_remote_outputs(&name, opts)?;
    let several = opts.shard_size.is_some()
        || opts.split_max_tensors.is_some()
        || opts.split_small_first
        || opts.external_data;
    if several && out.file_name().is_some_and(|f| f.to_str().is_none()) {
        return refuse("the output's name is not UTF-8, and the files of a sharded or split output are named inside them in UTF-8 (the index, the split parts, ONNX external data): name the output in UTF-8");
    }
    let gguf_only =
        opts.quantize.is_some() || opts.quantize_mix.is_some() || !opts.gguf_set.is_empty();
    let onnx_out = out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
    let onnx_only = opts.onnx_template.is_some() || opts.external_data || opts.allow_extra;
    if onnx_out {
        if gguf_only || opts.zt_version.is_some() || opts.shard_size.is_some() || opts.append {
            return refuse("GGUF, zTensor and shard options do not apply to ONNX output");
        }
        return convert_onnx(input, out, opts);
    }
    if onnx_only {
        return refuse("--onnx-template, --external-data and --allow-extra apply to ONNX output (a name ending in .onnx)");
    }
    if writes_gguf(out) && opts.zt_version.is_some() {
        return refuse("a zTensor version contradicts an output name ending in .gguf (GGUF): name the output .zt, or drop the version");
    }
    let safetensors_name = out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
    if safetensors_name && opts.zt_version.is_some() {
        return refuse("a zTensor version contradicts an output name ending in .safetensors: name the output .zt, or drop the version");
    }
    if opts.rounding == crate::cast::Rounding::Truncate && opts.dtype.is_none() {
        return refuse("rounding 'truncate' applies to casts: give the dtype to cast float tensors to (--dtype)");
    }
    if !writes_gguf(out) && opts.outtype.is_some() {
        return refuse("--outtype applies to GGUF output of a Hugging Face model folder (a name ending in .gguf)");
    }
    if writes_gguf(out) {
        if opts.append || opts.compression.is_some() || opts.digest.is_some() {
            return refuse("append, compression and digests apply to zTensor output");
        }
        let folder = match opts.keep_names {
            true => None,
            false => crate::hf_gguf::folder_of(&input.location, &opts.storage)?,
        };
        if folder.is_none() && opts.outtype.is_some() {
            return refuse("--outtype is the Hugging Face converter's (a model folder with a config.json to GGUF): for this input, cast with --dtype or quantize with --quantize");
        }
        if let Some(folder) = folder {
            return Ok(
                crate::ops::convert::hf::convert_hf(&folder, input, out, opts)?
                    .into_iter()
                    .map(|(p, _)| p)
                    .collect(),
            );
        }
        return Ok(convert_gguf(input, out, opts)?
            .into_iter()
            .map(|(p, _)| p)
            .collect());
    }
    if opts.split_max_tensors.is_some() || opts.split_small_first {
        return refuse("--split-max-tensors and --split-small-first apply to GGUF output (a name ending in .gguf)");
    }
    if gguf_only {
        return refuse(
            "quantize and metadata keys (--set) apply to GGUF output (a name ending in .gguf)",
        );
    }
    if writes_ztensor(out, opts) {
        if opts.shard_size.is_some() {
            return refuse("a shard size applies to safetensors output");
        }
        if opts.append {
            append_ztensor(input, out, opts)?;
        } else {
            convert_ztensor(input, out, opts)?;
        }
        Ok(vec![out.to_path_buf()])
    } else {
        if opts.append {
            return refuse("append applies to zTensor v2 output (a name ending in .zt)");
        }
        if opts.compression.is_some() {
            return refuse("compression applies to zTensor output (a name ending in .zt, or a zTensor version)");
        }
        Ok(convert_safetensors(input, out, opts)?.files)
    }
}
