//! Errors of dataset writing and reading. Each names what it is about: the option, the input
//! file, the column and row, or the shard, and the rule that failed.

use std::path::PathBuf;

/// The result of dataset writing and reading: a value, or a [`DatasetError`].
pub type Result<T, E = DatasetError> = std::result::Result<T, E>;

/// What went wrong writing, reading, verifying or cleaning a dataset. Each variant is one
/// kind of failure, so callers can tell them apart without matching on message text.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A write or read option is missing, unknown or out of range.
    #[error("option {name}: {msg}")]
    Option {
        /// The option's name, as the safetensors-spark connector spells it (`batch_size`,
        /// `duplicatesStrategy`, …), or as the caller gave an unknown one.
        name: String,
        /// What is wrong with its value.
        msg: String,
    },
    /// The input cannot become tensors: a column type, a row's length, a null.
    #[error("{}{}{msg}", file_prefix(.file), at(.column, .row))]
    Input {
        /// The input file the rows came from, when the input is a file.
        file: Option<PathBuf>,
        /// The column at fault, when one is.
        column: Option<String>,
        /// The row at fault, counted from 0 over the whole input, or over `file` once
        /// [`DatasetError::in_file_from`] names it, when one is.
        row: Option<u64>,
        /// The rule the input broke.
        msg: String,
    },
    /// Two rows give the same tensor key (duplicatesStrategy=fail).
    #[error("duplicate tensor key '{key}' (rows {first} and {second}); use duplicatesStrategy=lastWin to keep the last")]
    DuplicateKey {
        /// The tensor key the two rows share.
        key: String,
        /// The earlier row, counted from 0 over the whole input.
        first: u64,
        /// The later row, the first repeat in input order.
        second: u64,
    },
    /// Two tasks of a job wrote the same tensor key (duplicatesStrategy=fail).
    #[error("duplicate tensor key '{key}' (written by tasks {first} and {second}); use duplicatesStrategy=lastWin to keep the last")]
    DuplicateKeyInTasks {
        /// The tensor key both tasks wrote.
        key: String,
        /// The task id of the task that wrote it first (Spark: its partition id).
        first: u64,
        /// The task id of the later task.
        second: u64,
    },
    /// A task gave up because another one failed (that one's error is the one to report).
    #[error("stopped: another task failed")]
    Stopped,
    /// A KV dataset has no tensor of this key.
    #[error("no tensor '{0}' in the dataset")]
    NoSuchKey(
        /// The key asked for.
        String,
    ),
    /// The input holds no rows (or every row was dropped): no dataset is written.
    #[error("{0}")]
    Empty(
        /// Why there are no rows (none read, or all dropped, and by what).
        String,
    ),
    /// The output folder already holds a dataset and the mode does not allow replacing it.
    #[error("{}: already holds a dataset (dataset_manifest.json); use --mode overwrite or append", .0.display())]
    Exists(
        /// The output folder (or store location).
        PathBuf,
    ),
    /// A reader's version was removed by `dataset clean` (its retired shards with it).
    #[error("version {version} of {} was removed by `dataset clean` at {at}; open the current version (or keep versions longer: clean --older-than, write --retain)", .dir.display())]
    VersionRemoved {
        /// The dataset's folder (or store location).
        dir: PathBuf,
        /// The version the reader had open or asked for.
        version: u64,
        /// When the clean removed it, in UTC (`2026-11-25 09:49:53 UTC`).
        at: String,
    },
    /// The dataset changed under a commit in a way it cannot be merged with (other writers
    /// committed, or a clean took this write's shards), or the output folder holds what a
    /// write will not go beside (files named like shards, a manifest written by another
    /// writer that must be adopted first). Nothing of the write was committed.
    #[error("{}: {msg}", .dir.display())]
    Conflict {
        /// The dataset's folder (or store location).
        dir: PathBuf,
        /// What changed or what is in the way, and what to do about it.
        msg: String,
    },
    /// A dataset that is not what its records say: no dataset at the location, no version of
    /// the number asked for, shards or an index that do not match the manifest, a version or
    /// index file that cannot be read; also an input file that is neither Parquet nor Arrow
    /// IPC, or whose structures are damaged (malformed Parquet, a damaged Arrow IPC stream).
    #[error("{}: {msg}", .path.display())]
    Corrupt {
        /// The file (or folder) at fault.
        path: PathBuf,
        /// What does not match, or what is malformed.
        msg: String,
    },
    /// Reading or writing a file (or an object of a store) failed in the operating system
    /// or the store.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or object the operation was on.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A safetensors shard could not be read or written; the tensorsmith error names the
    /// file, the tensor and the rule.
    #[error(transparent)]
    Tensor(#[from] tensorsmith::Error),
    /// The Parquet reader or writer failed on a file (an input, the tensor index, an
    /// export's output).
    #[error("{}: {source}", .path.display())]
    Parquet {
        /// The Parquet file.
        path: PathBuf,
        /// The Parquet library's error.
        source: parquet::errors::ParquetError,
    },
    /// Arrow failed on a file's data: record batches that cannot be read, cut or built (an
    /// input file's rows, the tensor index's).
    #[error("{}: {source}", .path.display())]
    Arrow {
        /// The file whose data it was.
        path: PathBuf,
        /// The Arrow library's error.
        source: arrow_schema::ArrowError,
    },
}

fn file_prefix(f: &Option<PathBuf>) -> String {
    f.as_ref()
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default()
}

fn at(column: &Option<String>, row: &Option<u64>) -> String {
    match (column, row) {
        (Some(c), Some(r)) => format!("column '{c}', row {r}: "),
        (Some(c), None) => format!("column '{c}': "),
        (None, Some(r)) => format!("row {r}: "),
        (None, None) => String::new(),
    }
}

impl DatasetError {
    /// An [`Option`](DatasetError::Option) error about the option `name`.
    pub fn option(name: &str, msg: impl Into<String>) -> Self {
        DatasetError::Option {
            name: name.to_string(),
            msg: msg.into(),
        }
    }

    /// An [`Input`](DatasetError::Input) error that names no file, column or row yet.
    pub fn input(msg: impl Into<String>) -> Self {
        DatasetError::Input {
            file: None,
            column: None,
            row: None,
            msg: msg.into(),
        }
    }

    /// An [`Input`](DatasetError::Input) error about `column` (no file or row yet).
    pub fn column(column: &str, msg: impl Into<String>) -> Self {
        DatasetError::Input {
            file: None,
            column: Some(column.to_string()),
            row: None,
            msg: msg.into(),
        }
    }

    /// An [`Io`](DatasetError::Io) error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DatasetError::Io {
            path: path.into(),
            source,
        }
    }

    /// A Parquet file whose structures the pre-check (parquet_guard) refused.
    pub fn malformed_parquet(path: &std::path::Path, why: String) -> Self {
        DatasetError::Corrupt {
            path: path.to_path_buf(),
            msg: format!("malformed Parquet: {why}"),
        }
    }

    /// Adds the input file to an input error that has none.
    pub fn in_file(mut self, path: &std::path::Path) -> Self {
        if let DatasetError::Input { file, .. } = &mut self {
            if file.is_none() {
                *file = Some(path.to_path_buf());
            }
        }
        self
    }

    /// As [`DatasetError::in_file`], for rows of an input file whose first row is row
    /// `first_row` of the whole input: the row is told within the file, with its place in
    /// the whole input after the message (row 13 of the input is row 3 of the second file of
    /// 10 rows).
    pub fn in_file_from(mut self, path: &std::path::Path, first_row: u64) -> Self {
        if let DatasetError::Input { file, row, msg, .. } = &mut self {
            if file.is_none() {
                if let Some(r) = row.as_mut().filter(|r| first_row > 0 && **r >= first_row) {
                    msg.push_str(&format!(" (row {r} of the whole input)"));
                    *r -= first_row;
                }
            }
        }
        self.in_file(path)
    }

    /// Shifts a batch-relative row number by `offset` (rows before this batch).
    pub fn at_row_offset(mut self, offset: u64) -> Self {
        if let DatasetError::Input { row: Some(r), .. } = &mut self {
            *r += offset;
        }
        self
    }

    /// True when the input or the options are at fault (exit 1 in the CLI would be wrong:
    /// the CLI uses 2 for every error); kept for callers that sort errors.
    pub fn is_usage(&self) -> bool {
        matches!(self, DatasetError::Option { .. })
    }
}

/// Runs `f`, turning a panic inside it into an error about `path`. The Parquet reader
/// (arrow-rs) panics on some malformed files instead of returning an error; a reader of
/// files from strangers must not.
pub fn guard_parquet<T>(path: &std::path::Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown failure".into());
            Err(DatasetError::Corrupt {
                path: path.to_path_buf(),
                msg: format!("malformed Parquet (the Parquet reader failed: {msg})"),
            })
        }
    }
}
