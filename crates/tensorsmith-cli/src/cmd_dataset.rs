//! `tensorsmith dataset write|info`: tensor datasets in the safetensors-spark layout.

use crate::render::count;
use crate::{fail, shown, EXIT_OK};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use tensorsmith_dataset::{
    format_utc, write_dataset_to, Input, InputKind, JobOptions, Progress, WriteMode, WriteOptions,
};

#[derive(Subcommand)]
pub enum DatasetCommand {
    /// Write Parquet or Arrow IPC input as a dataset: safetensors shards, dataset_manifest.json
    /// and with --generate-index _tensor_index.parquet.
    Write(Box<WriteArgs>),
    /// Summarise a dataset: its current version, its versions, retired shards and their bytes.
    Info(InfoArgs),
    /// Check every shard of the current version (or --version N) against its manifest
    /// (presence, sizes, headers, schema, sample counts) and the index; exit 0 sound, 1
    /// problems found, 2 unreadable. Files no version lists (a killed writer's shards, a
    /// user's own) are noted, not failed on.
    Verify(VerifyArgs),
    /// Remove what is retired or abandoned for longer than --older-than: versions superseded
    /// that long ago and the shards only they list, shards of commits killed before their
    /// commit point, staging folders of dead writers (a live writer's, renewed every minute,
    /// is never taken: at least 3m idle). Repairs dataset_manifest.json after a killed commit.
    Clean(CleanArgs),
    /// Make a dataset_manifest.json that another writer (safetensors-spark) committed over
    /// the current version the next version, each shard it added checked (present, its
    /// size, its header). Readers refuse such a manifest until it is adopted; writers adopt it.
    Adopt(AdoptArgs),
    /// Write a dataset back to one Parquet file (batch mode: a row per sample; KV mode: a
    /// row per tensor with the tensor struct).
    Export(ExportArgs),
}

/// Settings of a dataset on object storage.
#[derive(Args, Clone)]
pub struct StoreArgs {
    /// A setting for s3://, az:// and gs:// datasets, KEY=VALUE (repeatable): key, secret,
    /// token, endpoint_url, region, profile, anon, account_name, account_key, sas_token,
    /// connection_string, max_concurrency, part_size… (and the aws_* spellings). Unset ones
    /// come from the environment (AWS_*, AZURE_STORAGE_*, STORAGE_EMULATOR_HOST…) and ~/.aws.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = crate::StorageOptionParser)]
    storage_option: Vec<tensorsmith::bytes::StorageOption>,
}

impl StoreArgs {
    fn options(&self) -> tensorsmith::bytes::StorageOptions {
        self.storage_option.iter().cloned().collect()
    }
}

/// A dataset location as text: a local folder or a URL (`s3://`, `az://`, `gs://` prefix).
fn location(p: &std::path::Path) -> Result<&str, u8> {
    p.to_str()
        .ok_or_else(|| fail(&format!("{}: a dataset path must be UTF-8", shown(p))))
}

#[derive(Args)]
pub struct ExportArgs {
    dir: PathBuf,
    out: PathBuf,
    #[command(flatten)]
    store: StoreArgs,
    /// KV datasets: export only this name (every tensor NAME__COLUMN) or full tensor key
    /// (repeat for more), in the order given; only the shards holding them are opened (found
    /// through the tensor index).
    #[arg(long = "key", value_name = "NAME|KEY")]
    keys: Vec<String>,
    /// Batch datasets: export only this column (repeat for more), in the shards' column
    /// order; on a store only its bytes are read, by range.
    #[arg(long = "column", value_name = "NAME")]
    columns: Vec<String>,
    /// The KV separator the dataset was written with, between a name and its column.
    #[arg(long, default_value = "__")]
    kv_separator: String,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Error,
    Overwrite,
    Append,
}

#[derive(Args)]
pub struct WriteArgs {
    /// Input files (Parquet, Arrow IPC file or stream), read in order. Inputs may be URLs
    /// (s3://, az://, gs://, hf://, http(s)://, read by range with the --storage-option
    /// settings); a folder, or a store prefix ending with `/`, gives its files in name order
    /// (names starting with `_` or `.` skipped).
    #[arg(required = true, num_args = 1.., value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// The dataset folder to write: a path, or an s3://, az:// or gs:// prefix.
    #[arg(required = true, value_name = "OUT_DIR")]
    out: PathBuf,
    /// Batch mode: rows per shard.
    #[arg(long)]
    batch_size: Option<String>,
    /// KV mode: the column whose values name the tensors.
    #[arg(long)]
    name_col: Option<String>,
    /// Target dtype (F16 F32 F64 BF16 U8 I8 U16 I16 U32 I32 U64 I64).
    #[arg(long)]
    dtype: Option<String>,
    /// Columns to write, comma-separated (default: all but --name-col).
    #[arg(long)]
    columns: Option<String>,
    /// Per-sample shapes as JSON: `{"col": [dims]}`.
    #[arg(long)]
    shapes: Option<String>,
    /// drop, pad or write (default write).
    #[arg(long)]
    tail_strategy: Option<String>,
    /// fail or lastWin (default fail).
    #[arg(long)]
    duplicates_strategy: Option<String>,
    /// KV mode shard size, 50-1000 (default 300).
    #[arg(long)]
    target_shard_size_mb: Option<String>,
    /// Also write _tensor_index.parquet.
    #[arg(long)]
    generate_index: bool,
    /// KV key separator (default "__").
    #[arg(long)]
    kv_separator: Option<String>,
    /// F16/BF16 rounding: nearest (default) or truncate.
    #[arg(long)]
    f16_rounding: Option<String>,
    /// Record per-tensor digests in each shard (`tensorsmith.digest`, checked by `verify`):
    /// true (xxh3), xxh3, sha256 or crc32c.
    #[arg(long)]
    digest: Option<String>,
    /// Any option by its safetensors-spark name, as NAME=VALUE (repeatable).
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE")]
    options: Vec<String>,
    /// When the folder already holds a dataset: error (default), overwrite or append.
    #[arg(long, value_enum, default_value = "error")]
    mode: ModeArg,
    /// Worker threads, one task each (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// After the commit, remove retired shards and versions superseded for longer than this
    /// (as `dataset clean --older-than`; 0: now).
    #[arg(long, value_parser = tensorsmith_dataset::parse_duration, default_value = "24h")]
    retain: std::time::Duration,
    /// How long the commit waits for another writer's commit (the dataset's commit lock).
    #[arg(long, value_parser = tensorsmith_dataset::parse_duration, default_value = "10m")]
    lock_timeout: std::time::Duration,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    progress: crate::progress_view::QuietArgs,
    /// Read Parquet only through the Parquet reader, never copying or decoding shards
    /// straight from pages (same output; for comparisons).
    #[arg(long, hide = true)]
    parquet_reader_only: bool,
    /// Write remote Parquet inputs through the page plan too (their page headers scanned by
    /// small ranged reads; slower on object stores than the reader; same output; for tests).
    #[arg(long, hide = true)]
    parquet_remote_pages: bool,
}

#[derive(Args)]
pub struct InfoArgs {
    dir: PathBuf,
    #[command(flatten)]
    store: StoreArgs,
    /// Print the manifest as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct VerifyArgs {
    dir: PathBuf,
    #[command(flatten)]
    store: StoreArgs,
    /// Check this version instead of the current one.
    #[arg(long)]
    version: Option<u64>,
    /// Write dataset_manifest.json and _tensor_index.parquet again from the current version
    /// when a commit was killed after its commit point, before checking.
    #[arg(long)]
    repair: bool,
    /// Report staging folders whose writer's heartbeat is older than this (24h, 30m, 90s).
    #[arg(long, value_parser = tensorsmith_dataset::parse_duration, default_value = "24h")]
    stale_after: std::time::Duration,
}

#[derive(Args)]
pub struct CleanArgs {
    dir: PathBuf,
    #[command(flatten)]
    store: StoreArgs,
    /// Remove what has been retired or abandoned for longer than this (24h, 30m, 90s; 0: now).
    #[arg(long, value_parser = tensorsmith_dataset::parse_duration, default_value = "24h")]
    older_than: std::time::Duration,
    /// How long to wait for a commit in progress (the dataset's commit lock).
    #[arg(long, value_parser = tensorsmith_dataset::parse_duration, default_value = "10m")]
    lock_timeout: std::time::Duration,
}

#[derive(Args)]
pub struct AdoptArgs {
    dir: PathBuf,
    #[command(flatten)]
    store: StoreArgs,
    /// How long to wait for a commit in progress (the dataset's commit lock).
    #[arg(long, value_parser = tensorsmith_dataset::parse_duration, default_value = "10m")]
    lock_timeout: std::time::Duration,
}

fn adopt(a: &AdoptArgs) -> u8 {
    let dir = match location(&a.dir) {
        Ok(d) => d,
        Err(code) => return code,
    };
    match tensorsmith_dataset::adopt_at(dir, &a.store.options(), a.lock_timeout) {
        Ok(Some(v)) => {
            outln!(
                "adopted: {}: the other writer's dataset_manifest.json is version {v}",
                shown(&a.dir)
            );
            EXIT_OK
        }
        Ok(None) => {
            outln!(
                "{}: dataset_manifest.json is the current version's: nothing to adopt",
                shown(&a.dir)
            );
            EXIT_OK
        }
        Err(e) => fail(&e),
    }
}

pub fn run(c: &DatasetCommand) -> u8 {
    match c {
        DatasetCommand::Write(a) => write(a),
        DatasetCommand::Info(a) => info(a),
        DatasetCommand::Verify(a) => verify(a),
        DatasetCommand::Clean(a) => clean(a),
        DatasetCommand::Adopt(a) => adopt(a),
        DatasetCommand::Export(a) => match location(&a.dir).map(|dir| {
            tensorsmith_dataset::export_at(
                dir,
                &a.store.options(),
                &a.out,
                (!a.keys.is_empty()).then_some(&a.keys[..]),
                (!a.columns.is_empty()).then_some(&a.columns[..]),
                &a.kv_separator,
            )
        }) {
            Err(code) => code,
            Ok(Ok(rows)) => {
                eprintln!("{}: {}", shown(&a.out), count(rows, "row"));
                EXIT_OK
            }
            Ok(Err(e)) => fail(&e),
        },
    }
}

fn clean(a: &CleanArgs) -> u8 {
    let dir = match location(&a.dir) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let r = match tensorsmith_dataset::clean_at(
        dir,
        &a.store.options(),
        a.older_than,
        a.older_than.max(tensorsmith_dataset::STAGING_FLOOR),
        a.lock_timeout,
    ) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    for p in &r.staging {
        outln!("removed {}", shown(p));
    }
    for v in &r.versions {
        outln!("removed version {v}");
    }
    for (s, b) in &r.shards {
        outln!("removed {} ({b} bytes)", crate::render::printable(s));
    }
    for u in &r.uploads {
        outln!("aborted {}", crate::render::printable(u));
    }
    if r.repaired {
        outln!("repaired dataset_manifest.json from the current version");
    }
    for k in &r.kept {
        outln!(
            "kept {} for now: a clean from {} takes it",
            crate::render::printable(&k.what),
            tensorsmith_dataset::format_utc(k.from_ms)
        );
    }
    outln!(
        "{}: {}, {}, {}, {} ({} bytes) removed",
        shown(&a.dir),
        count(r.staging.len(), "stale staging folder"),
        count(r.uploads.len(), "unfinished upload"),
        count(r.versions.len(), "version"),
        count(r.shards.len(), "shard"),
        r.shards.iter().map(|(_, b)| b).sum::<u64>()
    );
    EXIT_OK
}

fn verify(a: &VerifyArgs) -> u8 {
    let dir = match location(&a.dir) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let storage = a.store.options();
    if a.repair {
        match tensorsmith_dataset::repair_at(
            dir,
            &storage,
            tensorsmith_dataset::DEFAULT_LOCK_TIMEOUT,
        ) {
            Ok(true) => outln!(
                "repaired: {}: dataset_manifest.json made a version (another writer's) or written again from the current version",
                shown(&a.dir)
            ),
            Ok(false) => {}
            Err(e) => return fail(&e),
        }
    }
    match tensorsmith_dataset::verify_at(dir, &storage, a.version, a.stale_after) {
        Ok(r) => {
            if r.is_ok() {
                outln!(
                    "ok: {} ({}, {})",
                    shown(&a.dir),
                    count(r.shards, "shard"),
                    count(r.tensors, "tensor")
                );
            }
            for p in &r.problems {
                outln!("{}: {}", shown(&a.dir), crate::render::printable(p));
            }
            // Files beside the dataset that no version lists: noted, not failed on.
            for n in &r.notes {
                outln!("{}: note: {}", shown(&a.dir), crate::render::printable(n));
            }
            if r.is_ok() {
                EXIT_OK
            } else {
                crate::EXIT_NO
            }
        }
        Err(e) => fail(&e),
    }
}

fn write(a: &WriteArgs) -> u8 {
    let (inputs, out) = (&a.inputs, &a.out);
    let out_loc = match location(out) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    let flags = [
        ("batch_size", &a.batch_size),
        ("name_col", &a.name_col),
        ("dtype", &a.dtype),
        ("columns", &a.columns),
        ("shapes", &a.shapes),
        ("tail_strategy", &a.tail_strategy),
        ("duplicatesStrategy", &a.duplicates_strategy),
        ("target_shard_size_mb", &a.target_shard_size_mb),
        ("kv_separator", &a.kv_separator),
        ("f16_rounding", &a.f16_rounding),
        ("digest", &a.digest),
    ];
    for (k, v) in flags {
        if let Some(v) = v {
            pairs.push((k.to_string(), v.clone()));
        }
    }
    if a.generate_index {
        pairs.push(("generate_index".into(), "true".into()));
    }
    for o in &a.options {
        match o.split_once('=') {
            Some((k, v)) => pairs.push((k.to_string(), v.to_string())),
            None => return fail(&format!("--option {o}: expected NAME=VALUE")),
        }
    }
    let opts = match WriteOptions::parse(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    // Local files and folders, and URLs (a prefix ending with `/` lists its objects), read
    // with the same storage options as the output.
    let mut names = Vec::with_capacity(inputs.len());
    for p in inputs {
        match p.to_str() {
            Some(s) => names.push(s.to_owned()),
            None => {
                return fail(&format!(
                    "{}: the name is not UTF-8, and dataset write finds its inputs (and the \
                     files of an input folder) by UTF-8 names: rename it",
                    shown(p)
                ))
            }
        }
    }
    let inputs = names;
    let input = match Input::open_at(&inputs, &a.store.options()) {
        Ok(i) => i.with_remote_pages(a.parquet_remote_pages),
        Err(e) => return fail(&e),
    };
    let mut job = JobOptions::new()
        .with_mode(match a.mode {
            ModeArg::Error => WriteMode::ErrorIfExists,
            ModeArg::Overwrite => WriteMode::Overwrite,
            ModeArg::Append => WriteMode::Append,
        })
        .with_reader_only(a.parquet_reader_only);
    if let Some(n) = a.threads {
        job = job.with_threads(n);
    }
    job = job.with_retain(a.retain).with_lock_timeout(a.lock_timeout);
    let progress = Progress::default();
    let t = std::time::Instant::now();
    let result = with_progress_bar(a.progress.shows(), &progress, || {
        write_dataset_to(&input, out_loc, &a.store.options(), &opts, &job, &progress)
    });
    match result {
        Ok(_) if a.progress.quiet => EXIT_OK,
        Ok(m) => {
            let secs = t.elapsed().as_secs_f64();
            let copied = progress.direct_shards.load(Ordering::Relaxed);
            let decoded = progress.decoded_shards.load(Ordering::Relaxed);
            let written = progress.shards.load(Ordering::Relaxed);
            let reader = written.saturating_sub(copied + decoded);
            let retries = count(progress.commit_retries.load(Ordering::Relaxed), "retry");
            // Its conflicts: versions other writers created first.
            let commit = format!("commit: {retries}");
            let parquet = input.files().iter().any(|f| f.kind == InputKind::Parquet);
            let arrow = input.files().iter().any(|f| f.kind != InputKind::Parquet);
            let how = match (parquet, arrow) {
                (true, false) => format!("{copied} copied from Parquet pages, {decoded} decoded from Parquet pages, {reader} through the Parquet reader"),
                (true, true) => format!("{copied} copied from Parquet pages, {decoded} decoded from Parquet pages, {reader} through the Parquet and Arrow IPC readers"),
                (false, _) => format!("{reader} through the Arrow IPC reader"),
            };
            eprintln!(
                "{}: {} in {} ({how}), {} bytes, {:.2} s ({:.0} MB/s); {commit}",
                shown(out),
                count(m.total_samples, "sample"),
                count(m.shards.len(), "shard"),
                m.total_bytes,
                secs,
                m.total_bytes as f64 / 1e6 / secs.max(1e-9),
            );
            EXIT_OK
        }
        Err(e) => fail(&e),
    }
}

fn info(a: &InfoArgs) -> u8 {
    let dir = match location(&a.dir) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let (m, versions, retired) = match tensorsmith_dataset::info_at(dir, &a.store.options()) {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    if a.json {
        out!("{}", m.to_json());
        return EXIT_OK;
    }
    outln!("dataset: {}", shown(&a.dir));
    if let Some(v) = versions.last() {
        outln!("version: {} (of {} kept)", v.version, versions.len());
    }
    outln!("samples: {}", m.total_samples);
    outln!("shards:  {} ({} bytes)", m.shards.len(), m.total_bytes);
    for (k, s) in &m.schema {
        outln!(
            "  {}  {} {:?}",
            crate::render::printable(k),
            s.dtype,
            s.shape
        );
    }
    if !versions.is_empty() {
        outln!("versions:");
        for v in &versions {
            let state = match v.superseded_ms {
                Some(t) => format!("superseded {}", format_utc(t)),
                None => "current".into(),
            };
            outln!(
                "  {:>8}  {:<9} {}  {}, {}, {} bytes  ({state})",
                v.version,
                version_made_by(&v.mode),
                format_utc(v.committed_ms),
                count(v.shards, "shard"),
                count(v.samples, "sample"),
                v.bytes
            );
        }
    }
    if !retired.is_empty() {
        outln!(
            "retired shards: {} ({} bytes; `dataset clean` removes them once past the retention)",
            retired.len(),
            retired.iter().map(|r| r.bytes).sum::<u64>()
        );
        for r in &retired {
            outln!(
                "  {}  {} bytes  (last in version {})",
                crate::render::printable(&r.shard_path),
                r.bytes,
                r.last_version
            );
        }
    }
    EXIT_OK
}

/// What made a version, in words: the write mode `error` (the default, which refuses an
/// existing dataset) made a new dataset; in a column of versions the bare word reads as a
/// failure.
fn version_made_by(mode: &str) -> &str {
    match mode {
        "error" => "created",
        "overwrite" => "overwrote",
        "append" => "appended",
        other => other,
    }
}

/// Runs `f` while a progress line (rows, bytes written, rate) is drawn on stderr, when `show`
/// (stderr is a terminal and no --quiet).
fn with_progress_bar<T>(show: bool, p: &Progress, f: impl FnOnce() -> T) -> T {
    if !show {
        return f();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
            .expect("a valid template"),
    );
    let done = std::sync::atomic::AtomicBool::new(false);
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let rows = p.rows.load(Ordering::Relaxed);
                let bytes = p.bytes.load(Ordering::Relaxed);
                let secs = start.elapsed().as_secs_f64().max(1e-3);
                bar.set_message(format!(
                    "{}, {}, {:.1} MB written, {:.0} rows/s, {:.0} MB/s",
                    count(rows, "row"),
                    count(p.shards.load(Ordering::Relaxed), "shard"),
                    bytes as f64 / 1e6,
                    rows as f64 / secs,
                    bytes as f64 / 1e6 / secs
                ));
                bar.tick();
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        let r = f();
        done.store(true, Ordering::Relaxed);
        bar.finish_and_clear();
        r
    })
}
