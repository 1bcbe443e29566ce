//! `quantize`: float32 rows to ggml blocks, as `gguf.quants.quantize` makes them (the types it
//! can quantize) or as ggml's `ggml_quantize_chunk` does (K-quants, IQ4_NL, IQ4_XS; with an
//! importance matrix too).

use crate::errors::{raise, IntoPy};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tensorsmith::ggml_quant;
use tensorsmith::gguf::GgmlType;

/// A C-contiguous float32 buffer, or an OptionError naming `what`.
fn floats<'py>(py: Python<'py>, v: &Bound<'py, PyAny>, what: &str) -> PyResult<PyBuffer<f32>> {
    let buf = PyBuffer::<f32>::get(v)?;
    if !buf.is_c_contiguous() {
        return Err(raise(
            py,
            "OptionError",
            format!("the {what} must be a C-contiguous float32 array"),
        ));
    }
    Ok(buf)
}

/// The blocks of `values` (a C-contiguous float32 buffer of rows of `n_per_row` values, each
/// whole blocks) quantized to `qtype` (`"Q8_0"`, `"Q4_K"`, …), with `imatrix` (float32, one
/// weight per position of a row) for the types that take one.
#[pyfunction]
#[pyo3(signature = (values, qtype, n_per_row, imatrix=None))]
pub fn quantize<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    qtype: &str,
    n_per_row: usize,
    imatrix: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let ty = GgmlType::from_name(&qtype.to_ascii_lowercase())
        .ok_or_else(|| raise(py, "OptionError", format!("unknown ggml type {qtype:?}")))?;
    if imatrix.is_none() || !ggml_quant::takes_imatrix(ty) {
        ggml_quant::quantizer(ty).py_err(py)?;
    }
    let buf = floats(py, values, "values")?;
    let wbuf = imatrix.map(|w| floats(py, w, "imatrix")).transpose()?;
    let n = buf.item_count();
    let (be, bb) = (ty.block_elements() as usize, ty.block_bytes() as usize);
    // SAFETY: each buffer is C-contiguous and holds `item_count()` f32 values
    // (PyBuffer::<f32>::get checked the format and item size); the buffers stay exported until
    // they are dropped after this call, and the GIL is held throughout, so no Python code
    // changes them meanwhile.
    let values = unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const f32, n) };
    let weights = wbuf
        .as_ref()
        .map(|w| unsafe { std::slice::from_raw_parts(w.buf_ptr() as *const f32, w.item_count()) });
    // Rows that are not whole blocks, or not whole rows, are refused by the library before it
    // writes anything (its error names the type and the counts).
    let out = PyBytes::new_with(py, n / be * bb, |out| {
        ggml_quant::quantize_rows_into(ty, values, n_per_row, weights, out).py_err(py)
    })?;
    drop(buf);
    drop(wbuf);
    Ok(out)
}
