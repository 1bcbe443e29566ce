//! `tensorsmith convert IN OUT`: any model (safetensors, GGUF, zTensor, shards) to safetensors
//! (one file or `--shard-size` shards) or to zTensor (OUT ending in `.zt`, or `--zt-version`),
//! optionally casting float tensors with `--dtype` and `--rounding`; `--append` adds to an
//! existing zTensor v2 file. OUT ending in `.gguf` writes GGUF v3: `--quantize TYPE` makes
//! float tensors ggml blocks, `--set KEY=TYPE:VALUE` (repeatable) sets metadata keys.

use crate::progress_view::{size_and_time, with_bar, QuietArgs};
use crate::render::count;
use crate::{fail, shown, OpenArgs, EXIT_OK};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tensorsmith::cast::Rounding;
use tensorsmith::dtype::DType;
use tensorsmith::ggml_quant::mix::parse_quantize as parse_quantize_mix;
use tensorsmith::gguf::{parse_assignment, GgufValue};
use tensorsmith::index::ZtVersion;
use tensorsmith::ops::convert::{convert, parse_size, ConvertOptions};
use tensorsmith::ztensor::{Compression, DigestKind};

#[derive(Clone, Copy, ValueEnum)]
enum RoundingArg {
    Nearest,
    Truncate,
}

#[derive(Clone, Copy, ValueEnum)]
enum DigestArg {
    Crc32c,
    Sha256,
    Xxh3,
}

fn parse_compress(s: &str) -> Result<Compression, String> {
    let level = match s {
        "zstd" => 3,
        _ => s
            .strip_prefix("zstd:")
            .and_then(|l| l.parse::<i32>().ok())
            .filter(|l| (1..=22).contains(l))
            .ok_or_else(|| format!("'{s}': expected zstd or zstd:LEVEL with LEVEL 1-22"))?,
    };
    Ok(Compression::Zstd { level })
}

#[derive(Args)]
pub struct ConvertArgs {
    /// The input: a path (any file name, a pipe such as /dev/stdin), a URL, or - for stdin
    /// (a pipe is read whole into a temporary file first: formats are read by position).
    input: PathBuf,
    /// The output: a path, or an s3://, az:// (abfs(s)://) or gs:// URL (one file, uploaded as
    /// it is written and visible only once complete). Not - : an output is written under a
    /// temporary name and renamed into place when complete, which stdout cannot be (./- is a
    /// file named -).
    output: PathBuf,
    /// Cast float tensors (F64, F32, F16, BF16) to this safetensors dtype.
    #[arg(long, value_parser = parse_dtype)]
    dtype: Option<DType>,
    /// Copy tensors without checking the digests the input records (safetensors'
    /// tensorsmith.digest, zTensor checksums). By default a tensor whose bytes no longer
    /// match its digest fails the conversion, naming it, and nothing is written.
    #[arg(long)]
    no_digest_check: bool,
    /// How casts to F16/BF16 round (nearest by default); applies to --dtype casts.
    #[arg(long, value_enum, requires = "dtype")]
    rounding: Option<RoundingArg>,
    /// Write zTensor of this version (the default for an OUT ending in `.zt` is 2).
    #[arg(long, value_parser = ["0.1", "1.1", "2"])]
    zt_version: Option<String>,
    /// zTensor compression: `zstd` (level 3) or `zstd:LEVEL` (1-22).
    #[arg(long, value_parser = parse_compress, value_name = "zstd[:LEVEL]")]
    compress: Option<Compression>,
    /// Digest per part: zTensor crc32c or sha256 (v0.1, v1.1), xxh3 or sha256 (v2); safetensors
    /// any of the three, one per tensor in `__metadata__` (`tensorsmith.digest`).
    #[arg(long, value_enum)]
    digest: Option<DigestArg>,
    /// Write sparse tensors dense (for safetensors).
    #[arg(long)]
    densify: bool,
    /// Drop file metadata where the output format has none (zTensor v0.1).
    #[arg(long)]
    drop_metadata: bool,
    /// ONNX output (a name ending in .onnx): the model whose graph is written, its
    /// initializers taking the input's tensors by name (same dims and dtype; --dtype casts
    /// floats to the template's dtype). Tensors over 1,024 bytes go to OUTPUT.data.
    #[arg(long, value_name = "T.onnx")]
    onnx_template: Option<PathBuf>,
    /// ONNX output: every tensor in the external data file.
    #[arg(long)]
    external_data: bool,
    /// ONNX output: leave out input tensors the template lacks instead of refusing them.
    #[arg(long)]
    allow_extra: bool,
    /// Write shards of at most this size (`5GB`, `500MB`, `2GiB`, bytes) named after OUT,
    /// plus OUT's `.index.json` (Hugging Face convention). GGUF output: parts of at most this
    /// many tensor bytes (headers not counted, as gguf-py's `split_max_size`), named
    /// `STEM-00001-of-0000N.gguf`.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    shard_size: Option<u64>,
    /// GGUF output: parts of at most N tensors (gguf-py's `split_max_tensors`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    split_max_tensors: Option<u64>,
    /// GGUF output: a first part with the metadata and no tensor (gguf-py's
    /// `small_first_shard`).
    #[arg(long)]
    split_small_first: bool,
    /// Add IN's tensors to the existing zTensor v2 file OUT (names already in it are
    /// refused; a crash leaves the old file or the new one).
    #[arg(long)]
    append: bool,
    /// GGUF output: quantize float tensors (2+ dims, rows of whole blocks) to Q4_0, Q4_1,
    /// Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4 (as gguf-py does), or Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
    /// IQ4_NL, IQ4_XS (as ggml does; rows of whole 256-value blocks, 32 for IQ4_NL); other
    /// tensors keep their float type. A llama-quantize mix name (Q3_K_S, Q3_K_M, Q3_K_L,
    /// Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, MXFP4_MOE; Q2_K_S with --imatrix) chooses each tensor's type as llama-quantize
    /// does (a GGUF input with llama.cpp's names; see --mix). From a Hugging Face model
    /// folder every name llama-quantize takes is its file type, as with --mix.
    #[arg(long, value_parser = parse_quantize, value_name = "TYPE")]
    quantize: Option<String>,
    /// GGUF output: take the --quantize name as llama-quantize's file type (its `Q6_K`, `Q4_0`,
    /// `IQ4_XS`, `Q4_K` = `Q4_K_M`, …): the output and embedding tensors, attention V and FFN
    /// down get the types it gives them, and rows that are not whole blocks fall back as it
    /// does. Implied by the `_S`, `_M`, `_L` names.
    #[arg(long, requires = "quantize")]
    mix: bool,
    /// GGUF output with a llama-quantize mix: llama-imatrix's importance matrix (its GGUF
    /// file, or a legacy .dat), used as `llama-quantize --imatrix FILE` uses it: the mix as
    /// chosen with one, each tensor quantized with its weights, `quantize.imatrix.*` keys
    /// recorded. Needed by the Q2_K_S mix.
    #[arg(long, requires = "quantize", value_name = "FILE")]
    imatrix: Option<std::path::PathBuf>,
    /// A Hugging Face model folder (config.json, tokenizer, safetensors) to GGUF: the output
    /// type, as llama.cpp's `convert_hf_to_gguf.py --outtype` names it: f32, f16, bf16, q8_0,
    /// tq1_0, tq2_0, or auto (its default, and ours: bf16 or f16 as the checkpoint's first
    /// matrix is, else f16). `--dtype F32|F16|BF16` says the same for those three.
    #[arg(long, value_parser = parse_outtype, value_name = "TYPE")]
    outtype: Option<tensorsmith::hf_gguf::OutType>,
    /// A Hugging Face model folder (config.json, tokenizer, safetensors) to GGUF: the
    /// llama.cpp name of its BPE pre-tokenizer (llama-bpe, qwen2, gpt-2, ...), for a
    /// tokenizer.json whose pre-tokenizer is not recognised (llama.cpp's converter says "BPE
    /// pre-tokenizer was not recognized").
    #[arg(long, value_name = "NAME")]
    pre_tokenizer: Option<String>,
    /// A Hugging Face model folder to GGUF: write its tensors under their own names and types
    /// instead of as llama.cpp's converter writes them.
    #[arg(long)]
    keep_names: bool,
    /// GGUF output: set a metadata key (repeatable), e.g. `general.name=str:my model`,
    /// `llama.context_length=u32:4096`. Types: u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool str.
    #[arg(long = "set", value_parser = parse_assignment, value_name = "KEY=TYPE:VALUE")]
    set: Vec<(String, GgufValue)>,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    progress: QuietArgs,
}

/// The name as given, once it is known to be one (with or without `--mix`).
fn parse_quantize(s: &str) -> Result<String, String> {
    match parse_quantize_mix(s, false) {
        Ok(_) => Ok(s.to_string()),
        Err(e) => parse_quantize_mix(s, true)
            .map(|_| s.to_string())
            .map_err(|_| e),
    }
}

fn parse_outtype(s: &str) -> Result<tensorsmith::hf_gguf::OutType, String> {
    tensorsmith::hf_gguf::OutType::parse(s).ok_or_else(|| {
        format!(
            "unknown output type '{s}' (one of {})",
            tensorsmith::hf_gguf::OutType::NAMES
        )
    })
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_safetensors_name(&s.to_ascii_uppercase(), false)
        .ok_or_else(|| format!("unknown dtype '{s}'"))
}

pub fn run(a: &ConvertArgs) -> u8 {
    let (quantize, mix) = match &a.quantize {
        None => (None, None),
        Some(q) => match parse_quantize_mix(q, a.mix) {
            Ok(q) => q,
            Err(e) => {
                eprintln!("tensorsmith: --quantize {e}");
                return crate::EXIT_ERROR;
            }
        },
    };
    let mut opts = ConvertOptions::new()
        .with_skip_digest_check(a.no_digest_check)
        .with_max_header_len(a.open.max_header_size())
        .with_quantize(quantize)
        .with_quantize_mix(mix)
        .with_imatrix(a.imatrix.clone())
        .with_outtype(a.outtype)
        .with_pre_tokenizer(a.pre_tokenizer.clone())
        .with_keep_names(a.keep_names)
        .with_dtype(a.dtype)
        .with_rounding(match a.rounding {
            Some(RoundingArg::Truncate) => Rounding::Truncate,
            _ => Rounding::Nearest,
        })
        .with_shard_size(a.shard_size)
        .with_split_max_tensors(a.split_max_tensors)
        .with_split_small_first(a.split_small_first)
        .with_densify(a.densify)
        .with_drop_metadata(a.drop_metadata)
        .with_onnx_template(a.onnx_template.clone())
        .with_external_data(a.external_data)
        .with_allow_extra(a.allow_extra)
        .with_append(a.append)
        .with_zt_version(a.zt_version.as_deref().map(|v| match v {
            "0.1" => ZtVersion::V0_1,
            "1.1" => ZtVersion::V1_1,
            _ => ZtVersion::V2,
        }))
        .with_storage_options(a.open.storage_options())
        .with_compression(a.compress)
        .with_digest(a.digest.map(|d| match d {
            DigestArg::Crc32c => DigestKind::Crc32c,
            DigestArg::Sha256 => DigestKind::Sha256,
            DigestArg::Xxh3 => DigestKind::Xxh3,
        }));
    for (k, v) in &a.set {
        opts = opts.with_gguf_key(k.clone(), v.clone());
    }
    // An output this build cannot write, or an s3:// output of several files, is refused
    // before the input is opened.
    let out = a.output.to_string_lossy();
    if a.output.as_os_str() == "-" {
        eprintln!(
            "tensorsmith: output '-': convert does not write to stdout (it writes a file under \
             a temporary name and renames it into place when complete); name a file, or ./- \
             for a file named '-'"
        );
        return crate::EXIT_ERROR;
    }
    if let Err(e) = tensorsmith::bytes::refuse_write(&out)
        .and_then(|()| tensorsmith::ops::convert::refuse_remote_outputs(&out, &opts))
    {
        return fail(&e);
    }
    let input = match crate::input_arg::open_input(a.input.as_os_str(), &a.open.open_options()) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let show = a.progress.shows();
    let (r, took) = with_bar(show, "convert", || convert(&input, &a.output, &opts));
    match r {
        Ok(files) => {
            // Notices always print, whatever --quiet says.
            if let Some(note) = tensorsmith::ops::convert::skip::note(&input) {
                eprintln!("tensorsmith: note: {}", crate::render::printable(&note));
            }
            if show {
                let bytes: u64 = match tensorsmith::bytes::is_url(&out) {
                    // An uploaded object: the tensor bytes the writer counted.
                    true => tensorsmith::progress::snapshot().1,
                    false => files
                        .iter()
                        .filter_map(|f| std::fs::metadata(f).ok())
                        .map(|m| m.len())
                        .sum(),
                };
                let what = match files.len() {
                    1 => shown(&files[0]),
                    n => format!("{} ({})", shown(&a.output), count(n, "file")),
                };
                eprintln!(
                    "wrote {what}: {}, {}",
                    count(input.index.tensors.len(), "tensor"),
                    size_and_time(bytes, took)
                );
            }
            EXIT_OK
        }
        Err(e) => fail(&e),
    }
}
