//! The known formats, in the order [`crate::open`] tries them: the one place a new format is
//! registered. Safetensors has no magic, so it comes last and takes what no other claims (its
//! reader then says precisely why a file is not safetensors either).

use crate::format::{FileFormat, SNIFF_LEN};

/// Every format, most specific magic first.
pub(crate) static FORMATS: &[&dyn FileFormat] = &[
    &crate::gguf::Gguf,
    &crate::ztensor::Ztensor,
    &crate::onnx::Onnx,
    &crate::safetensors::Safetensors,
];

/// The format of a file named `name` that starts with `first`: one that claims the name,
/// else one that recognises the bytes.
pub(crate) fn sniff_named(name: &str, first: &[u8]) -> &'static dyn FileFormat {
    FORMATS
        .iter()
        .copied()
        .find(|f| f.claims_name(name))
        .unwrap_or_else(|| sniff(first))
}

/// The format of a file that starts with `first`.
pub(crate) fn sniff(first: &[u8]) -> &'static dyn FileFormat {
    let first = &first[..first.len().min(SNIFF_LEN)];
    FORMATS
        .iter()
        .copied()
        .find(|f| f.sniff(first))
        .unwrap_or(&crate::safetensors::Safetensors)
}
