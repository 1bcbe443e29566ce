//! `tensorsmith convert IN OUT`: rewrites a file (safetensors for now), streaming tensor by
//! tensor, optionally casting float tensors with `--dtype` and `--rounding`.

use crate::{fail, OpenArgs, EXIT_OK};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tensorsmith::cast::Rounding;
use tensorsmith::dtype::DType;
use tensorsmith::ops::convert::{convert_safetensors, ConvertOptions};
use tensorsmith::ops::open::open;

#[derive(Clone, Copy, ValueEnum)]
enum RoundingArg {
    Nearest,
    Truncate,
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
    /// Write shards of at most this size (`5GB`, `500MB`, `2GiB`, bytes) named after OUT,
    /// plus OUT's `.index.json` (Hugging Face convention).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    shard_size: Option<u64>,
    #[command(flatten)]
    open: OpenArgs,
}

/// `5GB` (decimal, as Hugging Face means it), `2GiB` (binary), `123` (bytes).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad size '{s}'"))?;
    let mult: f64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1.0,
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KIB" => 1024.0,
        "MIB" => 1024.0 * 1024.0,
        "GIB" => 1024.0 * 1024.0 * 1024.0,
        "TIB" => 1024f64.powi(4),
        u => return Err(format!("unknown size unit '{u}' in '{s}'")),
    };
    let v = (n * mult).round();
    if !(1.0..=u64::MAX as f64).contains(&v) {
        return Err(format!("size '{s}' out of range"));
    }
    Ok(v as u64)
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
    };
    match convert_safetensors(&input, &a.output, &opts) {
        Ok(_) => EXIT_OK,
        Err(e) => fail(&e),
    }
}
