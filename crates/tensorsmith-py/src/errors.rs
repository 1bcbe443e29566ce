//! Rust errors as Python exceptions. The classes live in `tensorsmith/errors.py` (so they can
//! also derive from the built-in exception a Python user expects: `FileNotFoundError`,
//! `KeyError`, `ValueError`); every one derives from `TensorsmithError` and carries the Rust
//! error's message, which names the file, the tensor and the rule.

use pyo3::prelude::*;
use tensorsmith::ErrorKind;
use tensorsmith_dataset::DatasetError;

/// Raises `tensorsmith.errors.<class>` with `msg`.
pub fn raise(py: Python<'_>, class: &str, msg: String) -> PyErr {
    match py
        .import("tensorsmith.errors")
        .and_then(|m| m.getattr(class))
    {
        Ok(cls) => PyErr::from_type(cls.cast_into().expect("an exception class"), msg),
        Err(e) => e,
    }
}

pub fn from_core(py: Python<'_>, e: tensorsmith::Error) -> PyErr {
    let class = match e.kind() {
        ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => "FileNotFound",
        ErrorKind::NoSuchBucket(_) | ErrorKind::RemoteNotFound(_) => "FileNotFound",
        ErrorKind::AccessDenied(_) => "AccessDenied",
        ErrorKind::BadStorageOption(_) => "OptionError",
        ErrorKind::Io(_) | ErrorKind::Http(_) | ErrorKind::Unreachable(_) => "IOFailure",
        ErrorKind::NoSuchTensor => "TensorNotFound",
        ErrorKind::Unsupported(_) | ErrorKind::UnsupportedDtype(_) => "Unsupported",
        ErrorKind::BadSlice(_) => "BadSlice",
        ErrorKind::BadPattern(_) => "OptionError",
        _ if e.is_invalid_input() => "InvalidFile",
        _ => "TensorsmithError",
    };
    raise(py, class, e.to_string())
}

pub fn from_dataset(py: Python<'_>, e: DatasetError) -> PyErr {
    let class = match &e {
        DatasetError::Option { .. } => "OptionError",
        DatasetError::Exists(_) => "DatasetExists",
        DatasetError::NoSuchKey(_) => "DatasetKeyError",
        DatasetError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            "DatasetNotFound"
        }
        DatasetError::Io { .. } => "DatasetIOError",
        // A missing input object or bucket (also a FileNotFoundError).
        DatasetError::Tensor(t)
            if matches!(
                t.kind(),
                ErrorKind::NoSuchBucket(_) | ErrorKind::RemoteNotFound(_)
            ) =>
        {
            "DatasetNotFound"
        }
        DatasetError::Input { .. }
        | DatasetError::DuplicateKey { .. }
        | DatasetError::DuplicateKeyInTasks { .. }
        | DatasetError::Empty(_) => "DatasetInputError",
        DatasetError::Corrupt { .. }
        | DatasetError::Parquet { .. }
        | DatasetError::Arrow { .. } => "DatasetCorrupt",
        _ => "DatasetFailure",
    };
    raise(py, class, e.to_string())
}

/// `Result` helpers: `.py_err(py)?` at the boundary.
pub trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for tensorsmith::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| from_core(py, e))
    }
}

impl<T> IntoPy<T> for Result<T, DatasetError> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| from_dataset(py, e))
    }
}
