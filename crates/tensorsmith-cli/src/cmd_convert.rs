//! `tensorsmith convert IN OUT`: any model (safetensors, GGUF, zTensor, shards) to safetensors
//! (one file or `--shard-size` shards) or to zTensor (OUT ending in `.zt`, or `--zt-version`),
//! optionally casting float tensors with `--dtype` and `--rounding`.

use crate::{fail, OpenArgs, EXIT_OK};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tensorsmith::cast::Rounding;
use tensorsmith::dtype::DType;
use tensorsmith::index::ZtVersion;
use tensorsmith::open;
use tensorsmith::ops::convert::{convert_safetensors, parse_size, ConvertOptions};
use tensorsmith::ops::convert_ztensor::{convert_ztensor, ZtConvertOptions};
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
    input: PathBuf,
    output: PathBuf,
    /// Cast float tensors (F64, F32, F16, BF16) to this safetensors dtype.
    #[arg(long, value_parser = parse_dtype)]
    dtype: Option<DType>,
    /// How casts to F16/BF16 round.
    #[arg(long, value_enum, default_value = "nearest")]
    rounding: RoundingArg,
    /// Write zTensor of this version (the default for an OUT ending in `.zt` is 2).
    #[arg(long, value_parser = ["0.1", "1.1", "2"])]
    zt_version: Option<String>,
    /// zTensor compression: `zstd` (level 3) or `zstd:LEVEL` (1-22).
    #[arg(long, value_parser = parse_compress, value_name = "zstd[:LEVEL]")]
    compress: Option<Compression>,
    /// zTensor digest: crc32c or sha256 (v0.1, v1.1), xxh3 or sha256 (v2).
    #[arg(long, value_enum)]
    digest: Option<DigestArg>,
    /// Write sparse tensors dense (for safetensors).
    #[arg(long)]
    densify: bool,
    /// Drop file metadata where the output format has none (zTensor v0.1).
    #[arg(long)]
    drop_metadata: bool,
    /// Write shards of at most this size (`5GB`, `500MB`, `2GiB`, bytes) named after OUT,
    /// plus OUT's `.index.json` (Hugging Face convention).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    shard_size: Option<u64>,
    #[command(flatten)]
    open: OpenArgs,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_safetensors_name(&s.to_ascii_uppercase(), false)
        .ok_or_else(|| format!("unknown dtype '{s}'"))
}

pub fn run(a: &ConvertArgs) -> u8 {
    let input = match open(&a.input.to_string_lossy(), &a.open.open_options()) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let opts = ConvertOptions {
        dtype: a.dtype,
        rounding: match a.rounding {
            RoundingArg::Nearest => Rounding::Nearest,
            RoundingArg::Truncate => Rounding::Truncate,
        },
        shard_size: a.shard_size,
        densify: a.densify,
    };
    let to_zt = a.zt_version.is_some() || a.output.extension().is_some_and(|e| e == "zt");
    if !to_zt {
        if a.compress.is_some() || a.digest.is_some() {
            return fail(&"--compress and --digest apply to zTensor output (OUT ending in .zt, or --zt-version)");
        }
        return match convert_safetensors(&input, &a.output, &opts) {
            Ok(_) => EXIT_OK,
            Err(e) => fail(&e),
        };
    }
    if a.shard_size.is_some() {
        return fail(&"--shard-size applies to safetensors output");
    }
    let version = match a.zt_version.as_deref() {
        Some("0.1") => ZtVersion::V0_1,
        Some("1.1") => ZtVersion::V1_1,
        _ => ZtVersion::V2,
    };
    let zopts = ZtConvertOptions {
        version,
        compression: a.compress.unwrap_or(Compression::None),
        digest: a.digest.map(|d| match d {
            DigestArg::Crc32c => DigestKind::Crc32c,
            DigestArg::Sha256 => DigestKind::Sha256,
            DigestArg::Xxh3 => DigestKind::Xxh3,
        }),
        dtype: opts.dtype,
        rounding: opts.rounding,
        drop_metadata: a.drop_metadata,
    };
    match convert_ztensor(&input, &a.output, &zopts) {
        Ok(_) => EXIT_OK,
        Err(e) => fail(&e),
    }
}
