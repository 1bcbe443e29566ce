//! The folder's GGUF (what `convert_hf_to_gguf.py` would write) as a file that is never
//! written: its header in memory, each range of tensor data computed from the checkpoint when
//! read. Opened as a [`Model`], it is the input of llama-quantize's step (`convert_gguf`), so
//! a folder becomes a quantized GGUF in one pass, with neither the intermediate file nor its
//! disk space, and the same bytes as the two reference steps (the values still go through
//! the intermediate type, F16 by default, as they do there).

use super::tensors::Values;
use super::{plan, HfOptions};
use crate::bytes::ReadAt;
use crate::error::{Error, ErrorKind, Result};
use crate::gguf;
use crate::model::Model;
use crate::safetensors::TensorData;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

#[derive(Debug)]
struct Part {
    start: u64,
    len: u64,
    ty: crate::ggml_type::GgmlType,
    values: Values,
}

pub(crate) struct VirtualGguf {
    header: Vec<u8>,
    parts: Vec<Part>,
    len: u64,
    model: Arc<Model>,
}

impl std::fmt::Debug for VirtualGguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VirtualGguf({} tensors, {} bytes)",
            self.parts.len(),
            self.len
        )
    }
}

/// A tensor's declared length, for the header: its bytes are never pulled from here.
struct Declared(u64);

impl TensorData for Declared {
    fn len(&self) -> u64 {
        self.0
    }

    fn write_to(&mut self, _: &mut dyn std::io::Write) -> Result<()> {
        Err(Error::new(ErrorKind::Unsupported(
            "the converted folder's data is read by range, not written".into(),
        )))
    }
}

impl ReadAt for VirtualGguf {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let end = range.end.min(self.len);
        let mut pos = range.start.min(end);
        let hl = self.header.len() as u64;
        if end <= hl {
            return Ok(Cow::Borrowed(&self.header[pos as usize..end as usize]));
        }
        let mut out = Vec::with_capacity((end - pos) as usize);
        if pos < hl {
            out.extend_from_slice(&self.header[pos as usize..]);
            pos = hl;
        }
        while pos < end {
            // The part at or after `pos`; padding before it reads as zeros.
            let i = self.parts.partition_point(|p| p.start + p.len <= pos);
            match self.parts.get(i) {
                Some(p) if p.start <= pos => {
                    let to = end.min(p.start + p.len);
                    out.extend(p.values.bytes(
                        &self.model,
                        p.ty,
                        p.len,
                        pos - p.start,
                        to - p.start,
                    )?);
                    pos = to;
                }
                Some(p) => {
                    let to = end.min(p.start);
                    out.resize(out.len() + (to - pos) as usize, 0);
                    pos = to;
                }
                None => {
                    out.resize(out.len() + (end - pos) as usize, 0);
                    pos = end;
                }
            }
        }
        Ok(Cow::Owned(out))
    }
}

/// The folder `dir` (its checkpoint opened as `model`) as a GGUF [`Model`] read by range.
pub fn converted_model(dir: &super::Folder, model: Arc<Model>, opts: &HfOptions) -> Result<Model> {
    let (meta, planned) = plan(dir, &model, opts)?;
    let mut w = gguf::Writer::new();
    for (k, v) in meta {
        w.set(k, v);
    }
    let align = w.alignment()?;
    let mut parts = Vec::with_capacity(planned.len());
    for p in planned {
        let len = super::byte_len(&p)?;
        w.add(p.name, p.ne, p.ty, Declared(len))?;
        parts.push((len, p.ty, p.src));
    }
    let header = w.header_bytes()?;
    let mut at = header.len() as u64;
    let parts: Vec<Part> = parts
        .into_iter()
        .map(|(len, ty, values)| {
            let p = Part {
                start: at,
                len,
                ty,
                values,
            };
            at += len.div_ceil(align) * align;
            p
        })
        .collect();
    let file = VirtualGguf {
        header,
        parts,
        len: at,
        model,
    };
    let location = format!("{} (converted)", dir.shown);
    crate::model::open_reader(&location, Box::new(file), &crate::OpenOptions::default())
}
