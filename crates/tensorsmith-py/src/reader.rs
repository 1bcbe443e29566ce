//! Python file objects as the byte layer sees them: `PyReader` reads any object with `read`,
//! `seek` and `tell` (fsspec and S3 files, `io.BytesIO`) by positioned reads under the GIL;
//! `dup_fd` turns a real descriptor (`fileno()`) into a `File` to map or `pread`.

use pyo3::prelude::*;
use std::borrow::Cow;
use std::fs::File;
use std::ops::Range;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::{Mutex, TryLockError};
use tensorsmith::bytes::ReadAt;
use tensorsmith::{Error, ErrorKind, Result};

/// A Python file object read with `seek` + `read`; its length from `seek(0, 2)`.
pub struct PyReader {
    obj: Py<PyAny>,
    len: u64,
    /// One seek-and-read at a time (the object has one position).
    lock: Mutex<()>,
}

impl std::fmt::Debug for PyReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PyReader({} bytes)", self.len)
    }
}

fn io_err(e: PyErr) -> Error {
    Error::from(std::io::Error::other(e.to_string()))
}

impl PyReader {
    pub fn new(obj: Bound<'_, PyAny>) -> PyResult<PyReader> {
        let len: u64 = obj.call_method1("seek", (0, 2))?.extract()?;
        let _ = obj.call_method0("tell")?;
        Ok(PyReader {
            obj: obj.unbind(),
            len,
            lock: Mutex::new(()),
        })
    }
}

impl ReadAt for PyReader {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        if range.start > range.end || range.end > self.len {
            return Err(ErrorKind::Truncated {
                needed: range.end,
                available: self.len,
            }
            .into());
        }
        let want = (range.end - range.start) as usize;
        Python::attach(|py| {
            // The GIL first, then the lock, waiting for it without the GIL: a thread holding
            // the lock may be waiting for the GIL (its `read` released it for I/O).
            let _guard = loop {
                match self.lock.try_lock() {
                    Ok(g) => break g,
                    Err(TryLockError::Poisoned(e)) => break e.into_inner(),
                    Err(TryLockError::WouldBlock) => py.detach(std::thread::yield_now),
                }
            };
            let f = self.obj.bind(py);
            f.call_method1("seek", (range.start,)).map_err(io_err)?;
            let mut out = Vec::with_capacity(want);
            while out.len() < want {
                let chunk = f
                    .call_method1("read", (want - out.len(),))
                    .map_err(io_err)?;
                let chunk: Cow<'_, [u8]> = chunk.extract().map_err(io_err)?;
                if chunk.is_empty() {
                    return Err(ErrorKind::Truncated {
                        needed: range.end,
                        available: range.start + out.len() as u64,
                    }
                    .into());
                }
                out.extend_from_slice(&chunk);
            }
            Ok(Cow::Owned(out))
        })
    }
}

/// A new descriptor for the same open file (the caller keeps its own).
pub fn dup_fd(fd: RawFd) -> std::io::Result<File> {
    // SAFETY: the caller's object holds `fd` open for this call.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    Ok(File::from(borrowed.try_clone_to_owned()?))
}
