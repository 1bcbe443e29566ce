//! Tensors every converter leaves out, with a note rather than an error: ONNX string
//! initializers, whose values are not numbers any output format holds.

use crate::index::{Layout, TensorInfo};
use crate::model::Model;
use crate::onnx::STRING_LAYOUT;

/// Whether `convert` leaves `t` out.
pub fn skipped(t: &TensorInfo) -> bool {
    matches!(&t.layout, Layout::Other(l) if &**l == STRING_LAYOUT)
}

/// The note for the tensors of `input` that `convert` leaves out; `None` when there are none.
pub fn note(input: &Model) -> Option<String> {
    let names: Vec<&str> = input
        .index
        .tensors
        .iter()
        .filter(|t| skipped(t))
        .map(|t| t.name.as_str())
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "{} string tensor(s) skipped (no output format holds strings): {}",
            names.len(),
            names.join(", ")
        )
    })
}
