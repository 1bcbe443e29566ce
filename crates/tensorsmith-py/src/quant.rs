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
    let buf = pyo3::buffer::PyBuffer::<f32>::get(values)?;
    if !buf.is_c_contiguous() {
        return Err(raise(
            py,
            "OptionError",
            "the values must be a C-contiguous float32 array".into(),
        ));
    }
    let v = buf.to_vec(py)?;
    let out = py.detach(|| ggml_quant::quantize(ty, &v)).py_err(py)?;
    Ok(PyBytes::new(py, &out))
}
