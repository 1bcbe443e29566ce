//! `quantize`: float32 values to ggml blocks, as `gguf.quants.quantize` makes them.

use crate::errors::{raise, IntoPy};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tensorsmith::ggml_quant;
use tensorsmith::gguf::GgmlType;

/// The blocks of `values` (a C-contiguous float32 buffer, whole blocks) quantized to `qtype`
/// (`"Q8_0"`, `"mxfp4"`, …), bit-identical to `gguf.quants.quantize`.
#[pyfunction]
pub fn quantize<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    qtype: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let ty = GgmlType::from_name(&qtype.to_ascii_lowercase())
        .ok_or_else(|| raise(py, "OptionError", format!("unknown ggml type {qtype:?}")))?;
    ggml_quant::quantizer(ty).py_err(py)?;
    let buf = pyo3::buffer::PyBuffer::<f32>::get(values)?;
    if !buf.is_c_contiguous() {
        return Err(raise(
            py,
            "OptionError",
            "the values must be a C-contiguous float32 array".into(),
        ));
    }
    let n = buf.item_count();
    let (be, bb) = (ty.block_elements() as usize, ty.block_bytes() as usize);
    if n % be != 0 {
        // The library's error, naming the type and the count.
        ggml_quant::quantize(ty, &vec![0.0; n % be]).py_err(py)?;
    }
    // SAFETY: the buffer is C-contiguous and holds `n` f32 values (PyBuffer::<f32>::get
    // checked the format and item size); `buf` keeps it exported until it is dropped after
    // this call, and the GIL is held throughout, so no Python code changes it meanwhile.
    let values = unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const f32, n) };
    let out = PyBytes::new_with(py, n / be * bb, |out| {
        ggml_quant::quantize_into(ty, values, out).py_err(py)
    })?;
    drop(buf);
    Ok(out)
}
