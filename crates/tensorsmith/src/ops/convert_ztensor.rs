//! Any model to zTensor (v0.1, v1.1 or v2): dense tensors with optional float casts, sparse
//! and group-quantized zTensor objects carried over part by part, metadata as file
//! attributes. Raw parts of a memory-mapped input are handed to the writer without a copy.

use super::convert_options::ConvertOptions;
use crate::cast::cast;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Layout, MetaValue, ZtVersion};
use crate::model::Model;
use crate::ops::inspect::meta_text;
use crate::ztensor::{Compression, PartData, WriteOptions, Writer};
use std::path::Path;

/// Writes `input` to `out` as zTensor; returns the bytes written.
pub fn convert_ztensor(input: &Model, out: &Path, opts: &ConvertOptions) -> Result<u64> {
    let version = opts.zt_version.unwrap_or(ZtVersion::V2);
    let at = |e: Error| e.in_file(Path::new(&input.location));
    let mut w = Writer::new(
        WriteOptions::new()
            .with_version(version)
            .with_compression(opts.compression.unwrap_or(Compression::None))
            .with_digest(opts.digest),
    );
    let index = &input.index;
    if !index.metadata.is_empty() {
        if version == ZtVersion::V0_1 {
            if !opts.drop_metadata {
                return Err(at(Error::new(ErrorKind::Unsupported(format!(
                    "zTensor v0.1 has no file metadata and this model has {} keys (--drop-metadata drops them)",
                    index.metadata.len()
                )))));
            }
        } else if version == ZtVersion::V1_1 {
            // 1.1 readers take text values only: typed ones go as their JSON text, as they
            // do to safetensors.
            let text = index
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), MetaValue::Str(meta_text(v))))
                .collect();
            w.set_attributes(text).map_err(at)?;
        } else {
            w.set_attributes(index.metadata.clone()).map_err(at)?;
        }
    }
    for t in &index.tensors {
        let with_name = |e: Error| e.at_tensor(&t.name).in_file(Path::new(&input.location));
        // What the writer refuses is about the output.
        let at_out = |e: Error| e.at_tensor(&t.name).in_file(out);
        match &t.layout {
            Layout::Dense => {
                let bytes = input.tensor_bytes(t)?;
                match opts.dtype {
                    Some(to) if to != t.dtype && t.dtype.is_castable_float() => {
                        let data = cast(&bytes, t.dtype, to, opts.rounding).map_err(with_name)?;
                        w.add_dense(&t.name, to, &t.shape, data).map_err(at_out)?;
                    }
                    _ => {
                        w.add_dense(&t.name, t.dtype, &t.shape, bytes)
                            .map_err(at_out)?;
                    }
                }
            }
            Layout::Ggml(_) => {
                // Block-quantized: dequantized to F32 (then cast), as for safetensors.
                let values = crate::ops::dequantize::values_f32(input, t)?;
                let bytes = crate::ops::dequantize::f32_bytes(&values);
                drop(values);
                let to = opts.dtype.unwrap_or(DType::F32);
                let data = if to == DType::F32 {
                    bytes
                } else {
                    cast(&bytes, DType::F32, to, opts.rounding).map_err(with_name)?
                };
                w.add_dense(&t.name, to, &t.shape, data).map_err(at_out)?;
            }
            layout => {
                let mut parts = Vec::with_capacity(t.parts.len());
                for (i, p) in t.parts.iter().enumerate() {
                    parts.push(PartData::new(&p.role, p.dtype, input.part_bytes(t, i)?));
                }
                w.add_object(
                    &t.name,
                    &t.shape,
                    layout.clone(),
                    t.attributes.to_map(),
                    parts,
                )
                .map_err(at_out)?;
            }
        }
    }
    w.write_file(out)
}
