//! Errors of dataset writing and reading. Each names what it is about: the option, the input
//! file, the column and row, or the shard, and the rule that failed.

use std::path::PathBuf;

pub type Result<T, E = DatasetError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A write or read option is missing, unknown or out of range.
    #[error("option {name}: {msg}")]
    Option { name: String, msg: String },
    /// The input cannot become tensors: a column type, a row's length, a null.
    #[error("{}{}{msg}", file_prefix(.file), at(.column, .row))]
    Input {
        file: Option<PathBuf>,
        column: Option<String>,
        row: Option<u64>,
        msg: String,
    },
    /// Two rows give the same tensor key (duplicatesStrategy=fail).
    #[error("duplicate tensor key '{key}' (rows {first} and {second}); use duplicatesStrategy=lastWin to keep the last")]
    DuplicateKey {
        key: String,
        first: u64,
        second: u64,
    },
    /// Two tasks of a job wrote the same tensor key (duplicatesStrategy=fail).
    #[error("duplicate tensor key '{key}' (written by tasks {first} and {second}); use duplicatesStrategy=lastWin to keep the last")]
    DuplicateKeyInTasks {
        key: String,
        first: u64,
        second: u64,
    },
    /// A task gave up because another one failed (that one's error is the one to report).
    #[error("stopped: another task failed")]
    Stopped,
    /// A KV dataset has no tensor of this key.
    #[error("no tensor '{0}' in the dataset")]
    NoSuchKey(String),
    /// The input holds no rows (or every row was dropped): no dataset is written.
    #[error("{0}")]
    Empty(String),
    /// The output folder already holds a dataset and the mode does not allow replacing it.
    #[error("{}: already holds a dataset (dataset_manifest.json); use --mode overwrite or append", .0.display())]
    Exists(PathBuf),
    /// A reader's version was removed by `dataset clean` (its retired shards with it).
    #[error("version {version} of {} was removed by `dataset clean` at {at}; open the current version (or keep versions longer: clean --older-than, write --retain)", .dir.display())]
    VersionRemoved {
        dir: PathBuf,
        version: u64,
        at: String,
    },
    /// The dataset changed under a commit in a way it cannot be merged with.
    #[error("{}: {msg}", .dir.display())]
    Conflict { dir: PathBuf, msg: String },
    /// A dataset on disk does not match its manifest.
    #[error("{}: {msg}", .path.display())]
    Corrupt { path: PathBuf, msg: String },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tensor(#[from] tensorsmith::Error),
    #[error("{}: {source}", .path.display())]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    #[error("{}: {source}", .path.display())]
    Arrow {
        path: PathBuf,
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
    pub fn option(name: &str, msg: impl Into<String>) -> Self {
        DatasetError::Option {
            name: name.to_string(),
            msg: msg.into(),
        }
    }

    pub fn input(msg: impl Into<String>) -> Self {
        DatasetError::Input {
            file: None,
            column: None,
            row: None,
            msg: msg.into(),
        }
    }

    pub fn column(column: &str, msg: impl Into<String>) -> Self {
        DatasetError::Input {
            file: None,
            column: Some(column.to_string()),
            row: None,
            msg: msg.into(),
        }
    }

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
