//! The `tensorsmith` binary: parses arguments, calls the library, renders, and maps outcomes
//! to exit codes (0 success or "same", 1 a negative answer such as "invalid", 2 an error, 3 a
//! remote input that changed during the read).

/// `println!` to stdout through [`emit`]: a closed stdout ends the program quietly.
macro_rules! outln {
    () => { $crate::emit(format_args!("\n")) };
    ($($t:tt)*) => { $crate::emit(format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` to stdout through [`emit`].
macro_rules! out {
    ($($t:tt)*) => { $crate::emit(format_args!($($t)*)) };
}

mod cmd_convert;
mod cmd_dataset;
mod cmd_diff;
mod cmd_hash;
mod cmd_inspect;
mod cmd_report;
mod cmd_stats;
mod cmd_validate;
mod cmd_verify;
mod input_arg;
mod malloc_tuning;
mod progress_view;
mod render;
mod schema;

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;
use tensorsmith::bytes::Backend;
use tensorsmith::OpenOptions;

/// Exit code for success (or "same").
pub const EXIT_OK: u8 = 0;
/// Exit code for a negative answer (a file is invalid, files differ).
pub const EXIT_NO: u8 = 1;
/// Exit code for an error (unreadable input, bad arguments).
pub const EXIT_ERROR: u8 = 2;
/// Exit code for a remote input replaced on its server during the read (its `ETag`,
/// `Last-Modified` or length changed, or the server refused a conditional read): nothing was
/// written, and running again reads one version.
pub const EXIT_CHANGED: u8 = 3;

#[derive(Parser)]
#[command(
    name = "tensorsmith",
    version,
    about = "Inspect, validate and convert tensor files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Summarise a file: format, header, tensors, parameters and bytes per dtype, metadata.
    Inspect(cmd_inspect::InspectArgs),
    /// Check files against every rule of their format; one line per file (`ok:` or
    /// `invalid:`, `-q` prints only the invalid ones). Exit 0 all valid, 1 any invalid.
    Validate(cmd_validate::ValidateArgs),
    /// Rewrite a model as safetensors (one file or shards), zTensor (0.1, 1.1, 2) or GGUF
    /// (one file or split parts), optionally casting float tensors to another dtype.
    Convert(cmd_convert::ConvertArgs),
    /// Check every digest a file records (zTensor parts, safetensors `tensorsmith.digest`, ONNX
    /// checksums) and the data rules a full read enforces.
    Verify(cmd_verify::VerifyArgs),
    /// Compare two models (any formats, files or URLs): tensors, metadata, and with --values
    /// the values. Exit 0 same, 1 different, 2 error.
    Diff(cmd_diff::DiffArgs),
    /// Value statistics of every tensor: count, min, max, mean, std, NaN/Inf/zero/subnormal
    /// counts, binary exponents, and the share that would overflow or flush to zero in
    /// F16, BF16 and FP8. `--check` exits 1 naming tensors with NaN, Inf or all zeros.
    Stats(cmd_stats::StatsArgs),
    /// Print a format-neutral structural ID per model (`--content`: also a digest of the
    /// tensor bytes; `--compat weight-inspect`: weight-inspect's hash).
    Hash(cmd_hash::HashArgs),
    /// Write one self-contained HTML page about a model: summary, treemap of parameters by
    /// name, bits per weight by layer, and a sortable, filterable table of every tensor.
    Report(cmd_report::ReportArgs),
    /// Tensor datasets in the safetensors-spark layout: write (from Parquet/Arrow), info,
    /// verify, clean, export.
    #[command(subcommand)]
    Dataset(cmd_dataset::DatasetCommand),
}

/// Options shared by every command that opens files.
#[derive(Args, Clone)]
pub struct OpenArgs {
    /// Largest header accepted, in bytes, for every format: safetensors' JSON header (default
    /// 100 MB, the reference's limit; also the longest a safetensors output writes), zTensor's manifest (default 1 GiB, the spec's), GGUF's
    /// metadata and tensor infos (default: no limit but the file's length) and an ONNX graph
    /// (the protobuf bytes outside the weights; default 2 GiB).
    #[arg(long, value_name = "BYTES")]
    max_header_size: Option<u64>,
    /// Read with positioned reads instead of a memory map (network filesystems).
    #[arg(long)]
    pread: bool,
    /// Read one part of a split GGUF model alone (by default a part opens every part of the
    /// model, and a part that cannot is refused).
    #[arg(long)]
    part_only: bool,
    /// A setting for URLs, KEY=VALUE (repeatable): for s3:// and hf://, key, secret, token,
    /// endpoint_url, region, profile, anon (and the aws_* spellings; unset ones come from the
    /// environment (AWS_*, HF_TOKEN, HF_ENDPOINT) and ~/.aws); for every URL, http(s) too,
    /// max_concurrency, part_size, max_attempts, timeout, connect_timeout.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = StorageOptionParser)]
    storage_option: Vec<tensorsmith::bytes::StorageOption>,
}

/// Parses `--storage-option KEY=VALUE`; a refusal names the key, never echoes the value (it
/// may be a secret).
#[derive(Clone)]
pub(crate) struct StorageOptionParser;

impl clap::builder::TypedValueParser for StorageOptionParser {
    type Value = tensorsmith::bytes::StorageOption;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let refuse = |msg: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("--storage-option: {msg}\n"),
            )
            .with_cmd(cmd)
        };
        let s = value
            .to_str()
            .ok_or_else(|| refuse("not UTF-8".to_owned()))?;
        s.parse()
            .map_err(|e: tensorsmith::Error| refuse(e.to_string()))
    }
}

impl OpenArgs {
    /// `--max-header-size`, when given (a safetensors output's limit too).
    pub fn max_header_size(&self) -> Option<u64> {
        self.max_header_size
    }

    /// Options for opening any format.
    pub fn open_options(&self) -> OpenOptions {
        let opts = match self.max_header_size {
            Some(n) => OpenOptions::new().with_max_header_len(n),
            None => OpenOptions::new(),
        };
        opts.with_backend(if self.pread {
            Backend::Pread
        } else {
            Backend::Mmap
        })
        .with_part_only(self.part_only)
        .with_storage_options(self.storage_options())
    }

    /// The `--storage-option` settings (for URL inputs and `s3://`, `az://`, `gs://` outputs).
    pub fn storage_options(&self) -> tensorsmith::bytes::StorageOptions {
        self.storage_option.iter().cloned().collect()
    }
}

/// Opens a model as `tensorsmith::open` does; a file that is one shard of a sharded
/// safetensors checkpoint is read alone (the user named it), with a line on stderr saying so,
/// whatever `--quiet` says.
pub fn open_model(target: &str, opts: &OpenOptions) -> tensorsmith::Result<tensorsmith::Model> {
    if let Some(note) = tensorsmith::model::shard_notice(target) {
        eprintln!("tensorsmith: note: {}", render::printable(&note));
    }
    tensorsmith::open(target, opts)
}

/// Path as given, for messages.
pub fn shown(p: &std::path::Path) -> String {
    render::printable(&p.display().to_string())
}

/// The signal that interrupted a write (its exit code is 128 + it, as shells report it).
static SIGNAL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

/// SIGINT and SIGTERM handled as a failed write: a write in progress stops at its next chunk
/// and removes what it started (`tensorsmith::interrupt`), then the command exits 128 + the
/// signal (130, 143); with
/// none in progress, or one that has not stopped within 10 s, or on a second signal, the
/// program ends at once (as without the handler).
fn handle_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return; // the default handlers stay
    };
    std::thread::spawn(move || {
        let mut seen = false;
        for sig in signals.forever() {
            let code = 128 + sig;
            SIGNAL.store(sig as u8, std::sync::atomic::Ordering::SeqCst);
            if seen || !tensorsmith::interrupt::request() {
                std::process::exit(code);
            }
            seen = true;
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(10));
                std::process::exit(code);
            });
        }
    });
}

fn main() -> ExitCode {
    malloc_tuning::cap_arenas();
    handle_signals();
    let cli = Cli::parse();
    // Where it was measured to help (a streaming convert); a dataset write holds more with it.
    if let Command::Convert(_) = &cli.command {
        malloc_tuning::keep_freed_buffers();
    }
    let code = match cli.command {
        Command::Inspect(a) => cmd_inspect::run(&a),
        Command::Validate(a) => cmd_validate::run(&a),
        Command::Convert(a) => cmd_convert::run(&a),
        Command::Verify(a) => cmd_verify::run(&a),
        Command::Diff(a) => cmd_diff::run(&a),
        Command::Hash(a) => cmd_hash::run(&a),
        Command::Report(a) => cmd_report::run(&a),
        Command::Stats(a) => cmd_stats::run(&a),
        Command::Dataset(c) => cmd_dataset::run(&c),
    };
    ExitCode::from(code)
}

/// Writes to stdout. A closed stdout (the reader of a pipe went away, as with `| head`) ends
/// the program at once, quietly, with exit 0: the user asked for no more output. Any other
/// failure to write is an error (exit 2).
pub fn emit(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(i32::from(EXIT_OK));
        }
        eprintln!("tensorsmith: writing to stdout: {e}");
        std::process::exit(i32::from(EXIT_ERROR));
    }
}

/// Prints an error to stderr and gives the exit code for it: [`error_code`] for the
/// library's errors (a dataset error's too, such as a shard changed mid-read), [`EXIT_ERROR`]
/// for any other.
pub fn fail<E: std::fmt::Display + 'static>(e: &E) -> u8 {
    eprintln!("tensorsmith: {}", render::printable(&e.to_string()));
    let any = e as &dyn std::any::Any;
    if let Some(tensorsmith_dataset::DatasetError::Tensor(t)) =
        any.downcast_ref::<tensorsmith_dataset::DatasetError>()
    {
        return error_code(t);
    }
    any.downcast_ref::<tensorsmith::Error>()
        .map_or(EXIT_ERROR, error_code)
}

/// The exit code for a library error: [`EXIT_CHANGED`] for an input that changed during the
/// read, [`EXIT_ERROR`] for any other.
pub fn error_code(e: &tensorsmith::Error) -> u8 {
    match e.kind() {
        tensorsmith::ErrorKind::ChangedDuringRead { .. } => EXIT_CHANGED,
        tensorsmith::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::Interrupted => {
            128 + SIGNAL.load(std::sync::atomic::Ordering::SeqCst)
        }
        _ => EXIT_ERROR,
    }
}
