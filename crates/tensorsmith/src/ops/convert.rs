//! Rewriting a file: every tensor streamed from the open source into the atomic writer,
//! optionally cast to another float dtype on the way (one chunk at a time, so memory stays
//! bounded whatever the tensor size).

use crate::cast::{cast, Rounding};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::MetaValue;
use crate::safetensors::{SafetensorsFile, SourceRange, TensorData, Writer};
use crate::source::Source;
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

/// Options for [`convert_safetensors`].
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Cast float tensors (F64, F32, F16, BF16) to this dtype; others are copied as they are.
    pub dtype: Option<DType>,
    pub rounding: Rounding,
}

/// Elements cast per chunk: 1 Mi elements keeps the buffers at a few MiB.
const CAST_CHUNK_ELEMENTS: u64 = 1 << 20;

struct CastRange<'a> {
    source: &'a Source,
    range: Range<u64>,
    from: DType,
    to: DType,
    rounding: Rounding,
}

impl TensorData for CastRange<'_> {
    fn len(&self) -> u64 {
        let n = (self.range.end - self.range.start) / self.from.byte_size().unwrap_or(1) as u64;
        n * self.to.byte_size().unwrap_or(1) as u64
    }

    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        let step = CAST_CHUNK_ELEMENTS * self.from.byte_size().expect("float") as u64;
        let mut off = self.range.start;
        while off < self.range.end {
            let end = (off + step).min(self.range.end);
            let bytes = self.source.bytes(off..end)?;
            out.write_all(&cast(&bytes, self.from, self.to, self.rounding)?)?;
            off = end;
        }
        Ok(())
    }
}

fn is_float16_32_64(d: DType) -> bool {
    matches!(d, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
}

/// Writes `input`'s tensors and metadata to `out` as safetensors.
pub fn convert_safetensors(
    input: &SafetensorsFile,
    out: &Path,
    opts: &ConvertOptions,
) -> Result<u64> {
    if let Some(to) = opts.dtype {
        if !is_float16_32_64(to) {
            return Err(Error::new(ErrorKind::UnsupportedCast {
                from: "float tensors".into(),
                to: to.to_string(),
            }));
        }
    }
    let mut w = Writer::new();
    w.allow_packed_ints(true);
    let index = input.index();
    if !index.metadata.is_empty() {
        let meta: BTreeMap<String, String> = index
            .metadata
            .iter()
            .map(|(k, v)| match v {
                MetaValue::Str(s) => (k.clone(), s.clone()),
                other => (k.clone(), crate::ops::inspect::meta_json(other).to_string()),
            })
            .collect();
        w.metadata(meta);
    }
    for t in &index.tensors {
        let range = t.data_range();
        match opts.dtype {
            Some(to) if to != t.dtype && is_float16_32_64(t.dtype) => {
                let data = CastRange {
                    source: input.source(),
                    range,
                    from: t.dtype,
                    to,
                    rounding: opts.rounding,
                };
                w.add(&t.name, to, &t.shape, data)?;
            }
            _ => {
                let data = SourceRange {
                    source: input.source(),
                    range,
                };
                w.add(&t.name, t.dtype, &t.shape, data)?;
            }
        }
    }
    w.write_file(out)
}
