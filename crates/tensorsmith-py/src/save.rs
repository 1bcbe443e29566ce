//! `serialize` / `serialize_file`: tensors handed over as Python buffers (NumPy arrays made
//! contiguous and little-endian by the Python side) written by the safetensors writer, byte
//! for byte as the reference writes them. Files are written atomically. A tensor may instead
//! come as a callable that returns its bytes when the writer reaches it (PyTorch tensors on a
//! GPU: each copied to the host in turn, so only one host copy exists at a time).

use crate::errors::{raise, IntoPy};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::BTreeMap;
use tensorsmith::digest::DigestKind;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

/// One tensor as Python gives it: name, safetensors dtype name, shape, bytes.
type PyTensor<'py> = (String, String, Vec<u64>, Bound<'py, PyAny>);

enum Source {
    /// A contiguous buffer, held for the writer's life.
    Buffer(PyBuffer<u8>),
    /// A callable returning the tensor's bytes (a buffer) when they are written.
    Lazy(Py<PyAny>),
}

struct Held {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    source: Source,
}

/// A tensor's bytes fetched from Python when the writer reaches it, then dropped.
struct Fetched<'a> {
    name: &'a str,
    len: u64,
    fetch: &'a Py<PyAny>,
}

impl tensorsmith::safetensors::TensorData for Fetched<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn write_to(&mut self, out: &mut dyn std::io::Write) -> tensorsmith::Result<()> {
        let fail = |msg: String| {
            tensorsmith::Error::new(tensorsmith::error::ErrorKind::Unsupported(msg))
                .at_tensor(self.name)
        };
        Python::attach(|py| {
            let obj = self
                .fetch
                .call0(py)
                .map_err(|e| fail(format!("fetching the tensor's bytes failed: {e}")))?;
            let buf = PyBuffer::<u8>::get(obj.bind(py))
                .map_err(|e| fail(format!("the fetched bytes are not a buffer: {e}")))?;
            if !buf.is_c_contiguous() || buf.len_bytes() as u64 != self.len {
                return Err(fail(format!(
                    "the fetched bytes are {} contiguous bytes, not {}",
                    buf.len_bytes(),
                    self.len
                )));
            }
            // SAFETY: `buf` holds the exporter's buffer (valid, unmoved) until it is dropped
            // at the end of this closure.
            let bytes =
                unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) };
            out.write_all(bytes)?;
            Ok(())
        })
    }
}

fn hold(py: Python<'_>, tensors: Vec<PyTensor<'_>>) -> PyResult<Vec<Held>> {
    tensors
        .into_iter()
        .map(|(name, dtype, shape, obj)| {
            let dt = DType::from_safetensors_name(&dtype, true).ok_or_else(|| {
                raise(
                    py,
                    "Unsupported",
                    format!("tensor '{name}': unknown dtype {dtype:?}"),
                )
            })?;
            let source = if obj.is_callable() {
                Source::Lazy(obj.unbind())
            } else {
                let buf = PyBuffer::<u8>::get(&obj)?;
                if !buf.is_c_contiguous() {
                    return Err(raise(
                        py,
                        "InvalidInput",
                        format!("tensor '{name}': the buffer is not contiguous"),
                    ));
                }
                Source::Buffer(buf)
            };
            Ok(Held {
                name,
                dtype: dt,
                shape,
                source,
            })
        })
        .collect()
}

/// The digest kind of Python's `digest=` ("xxh3", "sha256", "crc32c"; None: no record).
fn digest_kind(py: Python<'_>, digest: Option<&str>) -> PyResult<Option<DigestKind>> {
    Ok(match digest {
        None => None,
        Some("xxh3") => Some(DigestKind::Xxh3),
        Some("sha256") => Some(DigestKind::Sha256),
        Some("crc32c") => Some(DigestKind::Crc32c),
        Some(other) => {
            return Err(raise(
                py,
                "OptionError",
                format!("digest must be 'xxh3', 'sha256' or 'crc32c', not {other:?}"),
            ))
        }
    })
}

fn writer<'a>(
    held: &'a [Held],
    metadata: Option<BTreeMap<String, String>>,
    digest: Option<DigestKind>,
) -> tensorsmith::Result<Writer<'a>> {
    let mut w = Writer::new();
    w.allow_packed_ints(true).record_digests(digest);
    if let Some(m) = metadata {
        w.metadata(m);
    }
    for h in held {
        match &h.source {
            Source::Buffer(buf) => {
                // SAFETY: the buffer is held (and so valid and unmoved) for the writer's life.
                let bytes = unsafe {
                    std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes())
                };
                w.add(&h.name, h.dtype, &h.shape, bytes)?;
            }
            Source::Lazy(fetch) => {
                // The writer checks the shape against the dtype; a shape it refuses gets
                // its error there, so an overflow here only needs a length that cannot fit.
                let len = h
                    .shape
                    .iter()
                    .try_fold(1u64, |a, &d| a.checked_mul(d))
                    .and_then(|n| h.dtype.packed_bytes(n))
                    .unwrap_or(u64::MAX);
                let data = Fetched {
                    name: &h.name,
                    len,
                    fetch,
                };
                w.add(&h.name, h.dtype, &h.shape, data)?;
            }
        }
    }
    Ok(w)
}

#[pyfunction]
#[pyo3(signature = (tensors, metadata = None, digest = None))]
pub fn serialize<'py>(
    py: Python<'py>,
    tensors: Vec<PyTensor<'py>>,
    metadata: Option<BTreeMap<String, String>>,
    digest: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let digest = digest_kind(py, digest)?;
    let held = hold(py, tensors)?;
    let bytes = writer(&held, metadata, digest)
        .and_then(|w| w.to_bytes())
        .py_err(py)?;
    Ok(PyBytes::new(py, &bytes))
}

#[pyfunction]
#[pyo3(signature = (tensors, path, metadata = None, digest = None, storage = Vec::new()))]
pub fn serialize_file<'py>(
    py: Python<'py>,
    tensors: Vec<PyTensor<'py>>,
    path: std::path::PathBuf,
    metadata: Option<BTreeMap<String, String>>,
    digest: Option<&str>,
    storage: Vec<(String, String)>,
) -> PyResult<u64> {
    let digest = digest_kind(py, digest)?;
    let storage = crate::file::storage_options(py, storage)?;
    let held = hold(py, tensors)?;
    let w = writer(&held, metadata, digest).py_err(py)?;
    let w = SendWriter(w);
    py.detach(move || {
        let w = w;
        w.0.write_file_with(&path, &storage)
    })
    .py_err(py)
}

/// The writer only reads buffers that the calling thread keeps alive (and the GIL-free
/// section ends before they are released).
struct SendWriter<'a>(Writer<'a>);
// SAFETY: see above; the writer holds plain byte slices and its own state.
unsafe impl Send for SendWriter<'_> {}

/// A tensor of safetensors bytes: name, dtype, shape, begin and end offsets.
type Located = (String, &'static str, Vec<u64>, u64, u64);

/// Parses safetensors bytes (for `load`): `(name, dtype, shape, begin, end)` per tensor in
/// file order, offsets into `data`.
#[pyfunction]
pub fn parse_bytes(py: Python<'_>, data: PyBuffer<u8>) -> PyResult<Vec<Located>> {
    // SAFETY: `data` is held for the call.
    let bytes =
        unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
    let index = tensorsmith::safetensors::parse_bytes(bytes, &Default::default()).py_err(py)?;
    Ok(index
        .tensors
        .iter()
        .map(|t| {
            let r = &t.parts[0].range;
            (
                t.name.clone(),
                t.dtype.safetensors_name(),
                t.shape.to_vec(),
                r.start,
                r.end,
            )
        })
        .collect())
}
