//! ONNX behind the format seam. ONNX has no magic: a file is ONNX when its name ends in
//! `.onnx`, or when it starts as a `ModelProto` does (`ir_version` as a small varint, then a
//! model field's tag) with bytes 4 to 8 not all zero (which as safetensors would be a header of
//! 4 GiB or more, so no safetensors file is taken). Raw values are served as stored (zero-copy
//! from a map); typed fields are decoded here.

use super::data_type::Typed;
use super::graph::walk;
use super::to_index::to_index;
use super::typed;
use crate::bytes::ReadAt;
use crate::error::Result;
use crate::format::{FileFormat, OpenOptions};
use crate::index::{Encoding, Part, TensorIndex};
use std::borrow::Cow;

/// ONNX models (`ModelProto`): their initializers as tensors.
#[derive(Debug, Clone, Copy)]
pub struct Onnx;

/// The graph limit when no `--max-header-size` is given: protobuf's own 2 GiB.
pub const DEFAULT_MAX_GRAPH_LEN: u64 = 2 << 30;

/// Tags a `ModelProto` field may start with after `ir_version`: producer_name 2,
/// producer_version 3, domain 4, model_version 5, doc_string 6, graph 7, opset_import 8,
/// metadata_props 14, training_info 20, functions 25, configuration 26.
fn model_tag(b: u8) -> bool {
    matches!(
        b,
        0x12 | 0x1a | 0x22 | 0x28 | 0x32 | 0x3a | 0x42 | 0x72 | 0xa2 | 0xca | 0xd2
    )
}

impl FileFormat for Onnx {
    fn name(&self) -> &'static str {
        "onnx"
    }

    fn sniff(&self, first: &[u8]) -> bool {
        first.len() == crate::format::SNIFF_LEN
            && first[0] == 0x08
            && (1..0x80).contains(&first[1])
            && model_tag(first[2])
            && first[4..].iter().any(|&b| b != 0)
    }

    fn claims_name(&self, name: &str) -> bool {
        // On bytes: the last five of a name ending in a multi-byte character are not a
        // character boundary, and a `str` slice there would panic.
        let name = name.as_bytes();
        name.len() > 5 && name[name.len() - 5..].eq_ignore_ascii_case(b".onnx")
    }

    fn read_index(&self, bytes: &dyn ReadAt, opts: &OpenOptions) -> Result<TensorIndex> {
        let limit = opts.max_header_len_or(DEFAULT_MAX_GRAPH_LEN);
        let owned;
        let buf = match bytes.as_slice() {
            Some(s) => s,
            None => {
                owned = bytes.read(0..bytes.len())?;
                &owned
            }
        };
        let w = walk(buf, 0)?;
        to_index(w, bytes.len(), 0, limit)
    }

    fn part<'a>(&self, bytes: &'a dyn ReadAt, part: &Part, verify: bool) -> Result<Cow<'a, [u8]>> {
        let kind = match &part.encoding {
            Encoding::Other(e) => Typed::from_encoding(e),
            _ => None,
        };
        let Some(kind) = kind else {
            return crate::decode::decode_part(bytes, part, verify, crate::digest::spell);
        };
        let width = kind.layout_for(part.dtype, 0).map_or(1, |(_, w)| w);
        let span = bytes.read(part.range.clone())?;
        let out = typed::decode(
            &span,
            0..span.len(),
            part.range.start,
            kind,
            width,
            part.decoded_len,
        )?;
        Ok(Cow::Owned(out))
    }
}
