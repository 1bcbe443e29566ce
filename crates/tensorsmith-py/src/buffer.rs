//! `Bytes`: read-only bytes exported to Python through the buffer protocol, so NumPy
//! (`np.frombuffer`) views them without a copy. The bytes are either a range of a memory map
//! (an opened model's, a dataset's shard: its owner is kept alive by the object) or an owned
//! buffer (decoded, decompressed, densified or gathered data).

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::any::Any;
use std::os::raw::c_int;
use std::sync::Arc;

enum Store {
    /// `len` bytes at address `addr` inside a mapping owned by `_owner`.
    Mapped {
        _owner: Arc<dyn Any + Send + Sync>,
        addr: usize,
        len: usize,
    },
    Owned(Vec<u8>),
    /// Native-endian f32 values (NumPy's `float32`), e.g. dequantized ggml blocks.
    OwnedF32(Vec<f32>),
}

#[pyclass(frozen, module = "tensorsmith._native")]
pub struct Bytes {
    store: Store,
}

impl Bytes {
    /// Bytes borrowed from a mapping `owner` keeps alive; `data` must point into it.
    pub fn mapped(owner: Arc<dyn Any + Send + Sync>, data: &[u8]) -> Bytes {
        Bytes {
            store: Store::Mapped {
                addr: data.as_ptr() as usize,
                len: data.len(),
                _owner: owner,
            },
        }
    }

    /// Borrowed bytes as a view that keeps `owner` alive, owned ones as they are.
    pub fn of(owner: &Arc<dyn Any + Send + Sync>, data: std::borrow::Cow<'_, [u8]>) -> Bytes {
        match data {
            std::borrow::Cow::Borrowed(b) => Bytes::mapped(Arc::clone(owner), b),
            std::borrow::Cow::Owned(v) => Bytes::owned(v),
        }
    }

    pub fn owned(data: Vec<u8>) -> Bytes {
        Bytes {
            store: Store::Owned(data),
        }
    }

    /// f32 values exported as their native bytes (no copy).
    pub fn owned_f32(data: Vec<f32>) -> Bytes {
        Bytes {
            store: Store::OwnedF32(data),
        }
    }

    fn as_ptr_len(&self) -> (*const u8, usize) {
        match &self.store {
            Store::Mapped { addr, len, .. } => (*addr as *const u8, *len),
            Store::Owned(v) => (v.as_ptr(), v.len()),
            Store::OwnedF32(v) => (v.as_ptr() as *const u8, std::mem::size_of_val(v.as_slice())),
        }
    }
}

#[pymethods]
impl Bytes {
    fn __len__(&self) -> usize {
        self.as_ptr_len().1
    }

    /// True when the bytes are a view of a file's memory map (no copy was made).
    #[getter]
    fn zero_copy(&self) -> bool {
        matches!(self.store, Store::Mapped { .. })
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("tensorsmith buffers are read-only"));
        }
        let (ptr, len) = slf.get().as_ptr_len();
        // SAFETY: `view` comes from the interpreter; the bytes stay valid while the exporter
        // (this object, referenced by the view) lives, and are never written.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                ptr as *mut std::ffi::c_void,
                len as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}
