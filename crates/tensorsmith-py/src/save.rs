//! `serialize` / `serialize_file`: tensors handed over as Python buffers (NumPy arrays made
//! contiguous and little-endian by the Python side) written by the safetensors writer, byte
//! for byte as the reference writes them. Files are written atomically.

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

struct Held {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    buf: PyBuffer<u8>,
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
            let buf = PyBuffer::<u8>::get(&obj)?;
            if !buf.is_c_contiguous() {
                return Err(raise(
                    py,
                    "InvalidInput",
                    format!("tensor '{name}': the buffer is not contiguous"),
                ));
            }
            Ok(Held {
                name,
                dtype: dt,
                shape,
                buf,
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
        // SAFETY: the buffer is held (and so valid and unmoved) for the writer's life.
        let bytes =
            unsafe { std::slice::from_raw_parts(h.buf.buf_ptr() as *const u8, h.buf.len_bytes()) };
        w.add(&h.name, h.dtype, &h.shape, bytes)?;
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
#[pyo3(signature = (tensors, path, metadata = None, digest = None))]
pub fn serialize_file<'py>(
    py: Python<'py>,
    tensors: Vec<PyTensor<'py>>,
    path: std::path::PathBuf,
    metadata: Option<BTreeMap<String, String>>,
    digest: Option<&str>,
) -> PyResult<u64> {
    let digest = digest_kind(py, digest)?;
    let held = hold(py, tensors)?;
    let w = writer(&held, metadata, digest).py_err(py)?;
    let w = SendWriter(w);
    py.detach(move || {
        let w = w;
        w.0.write_file(&path)
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
