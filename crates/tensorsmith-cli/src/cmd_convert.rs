//! `tensorsmith convert IN OUT`: rewrites a file (safetensors for now), streaming tensor by
//! tensor, optionally casting float tensors with `--dtype` and `--rounding`.

use crate::{fail, OpenArgs, EXIT_OK};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tensorsmith::cast::Rounding;
use tensorsmith::dtype::DType;
use tensorsmith::ops::convert::{convert_safetensors, ConvertOptions};
use tensorsmith::safetensors::SafetensorsFile;

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
    #[command(flatten)]
    open: OpenArgs,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_safetensors_name(&s.to_ascii_uppercase(), false)
        .ok_or_else(|| format!("unknown dtype '{s}'"))
}

pub fn run(a: &ConvertArgs) -> u8 {
    let input = match SafetensorsFile::open_with(&a.input, &a.open.read_options()) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    let opts = ConvertOptions {
        dtype: a.dtype,
        rounding: match a.rounding {
            RoundingArg::Nearest => Rounding::Nearest,
            RoundingArg::Truncate => Rounding::Truncate,
        },
    };
    match convert_safetensors(&input, &a.output, &opts) {
        Ok(_) => EXIT_OK,
        Err(e) => fail(&e),
    }
}
