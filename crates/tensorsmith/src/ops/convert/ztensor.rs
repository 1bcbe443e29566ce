//! Any model to zTensor (v0.1, v1.1 or v2): dense tensors with optional float casts, sparse
//! and group-quantized zTensor objects carried over part by part, metadata as file
//! attributes. Every part is handed to the writer as a [`PartSource`] over the model, read
//! (and cast) piece by piece only when the writer's window reaches it, so memory stays
//! bounded whatever the model size; raw parts of a memory-mapped input are not copied.

use crate::cast::{cast, Rounding};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Layout, MetaValue, TensorInfo, ZtVersion};
use crate::model::Model;
use crate::ops::convert::meta_carry;
use crate::ops::convert::options::ConvertOptions;
use crate::ops::convert::skip::skipped;
use crate::ops::inspect::meta_text;
use crate::ztensor::{Compression, PartData, PartSource, WriteOptions, Writer};
use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

/// Part `part` of tensor `t` in `model`, decoded, optionally cast from one float type to
/// another (then `range` is in cast bytes; the writer reads in pieces that are multiples of
/// 8 bytes, so pieces hold whole elements of either type).
struct ModelPart<'m> {
    model: &'m Model,
    t: &'m TensorInfo,
    part: usize,
    cast: Option<(DType, DType, Rounding)>,
}

impl ModelPart<'_> {
    /// Stored raw and little-endian: any sub-range can be read on its own.
    fn plain(&self) -> bool {
        self.t.parts[self.part].is_zero_copy()
    }

    fn scale(&self, n: u64) -> u64 {
        match self.cast {
            Some((from, to, _)) => n / (to.bits() / 8) as u64 * (from.bits() / 8) as u64,
            None => n,
        }
    }
}

impl PartSource for ModelPart<'_> {
    fn len(&self) -> u64 {
        match self.cast {
            Some((from, to, _)) => {
                self.t.parts[self.part].decoded_len / (from.bits() / 8) as u64
                    * (to.bits() / 8) as u64
            }
            None => self.t.parts[self.part].decoded_len,
        }
    }

    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let bytes = if self.plain() {
            let start = self.t.parts[self.part].range.start;
            self.model.read(
                self.t,
                start + self.scale(range.start)..start + self.scale(range.end),
            )?
        } else {
            // Decoded whole (`whole()` makes the writer ask for everything at once).
            let all = self.model.part_bytes(self.t, self.part)?;
            let r = self.scale(range.start) as usize..self.scale(range.end) as usize;
            match all {
                Cow::Borrowed(b) => Cow::Borrowed(&b[r]),
                Cow::Owned(mut v) if r.start == 0 => {
                    v.truncate(r.end);
                    Cow::Owned(v)
                }
                Cow::Owned(v) => Cow::Owned(v[r].to_vec()),
            }
        };
        match self.cast {
            Some((from, to, rounding)) => Ok(Cow::Owned(
                cast(&bytes, from, to, rounding).map_err(|e| {
                    e.at_tensor(&self.t.name)
                        .in_file(Path::new(&self.model.location))
                })?,
            )),
            None => Ok(bytes),
        }
    }

    fn whole(&self) -> bool {
        !self.plain()
    }
}

/// Writes `input` to `out` as zTensor; returns the bytes written.
pub fn convert_ztensor(input: &Model, out: &Path, opts: &ConvertOptions) -> Result<u64> {
    crate::ops::convert::digest_guard::before(input, opts)?;
    ztensor_writer(input, out, opts)?.write_file_with(out, &opts.storage)
}

/// Adds `input`'s tensors to the zTensor v2 file `existing` (crash-safe; names already in it
/// are refused); returns the new file's length. The read, copy and rename run under the lock
/// file `.NAME.lock` beside it (the file itself is replaced by the rename, so it cannot carry
/// the lock), so concurrent appends each land, one after the other.
pub fn append_ztensor(input: &Model, existing: &Path, opts: &ConvertOptions) -> Result<u64> {
    if opts.zt_version.is_some_and(|v| v != ZtVersion::V2) {
        return Err(Error::new(ErrorKind::Unsupported(
            "append: only to zTensor v2 files".into(),
        ))
        .in_file(existing));
    }
    crate::ops::convert::digest_guard::before(input, opts)?;
    let writer = ztensor_writer(input, existing, opts)?;
    let lock = crate::file_lock::FileLock::acquire(
        &crate::file_lock::beside(existing),
        crate::file_lock::DEFAULT_LOCK_TIMEOUT,
    )?;
    let written =
        refuse_conflicts(existing, &writer).and_then(|()| crate::ztensor::append(existing, writer));
    lock.release_and_remove();
    written
}

/// A file keeps one value per metadata key: an appended key the file has with another value
/// is refused (the writer underneath would keep the file's silently), naming both values.
fn refuse_conflicts(existing: &Path, w: &Writer<'_>) -> Result<()> {
    let at = |e: Error| e.in_file(existing);
    let file = crate::ztensor::open(existing, &crate::OpenOptions::new()).map_err(at)?;
    for (k, v) in w.attributes() {
        match file.index().metadata.get(k) {
            Some(old) if !old.same_value(v) => {
                return Err(at(Error::new(ErrorKind::MetadataConflict {
                    key: k.clone(),
                    detail: format!(
                        "append: the file has {} and the input {} (a file keeps one value per key: change or remove it in the input)",
                        shown(old),
                        shown(v)
                    ),
                })))
            }
            _ => {}
        }
    }
    Ok(())
}

fn shown(v: &MetaValue) -> String {
    match v {
        MetaValue::Str(s) => serde_json::Value::String(s.clone()).to_string(),
        other => meta_text(other),
    }
}

/// A writer holding every tensor of `input`, its bytes to be read as the writer reaches them.
fn ztensor_writer<'m>(input: &'m Model, out: &Path, opts: &ConvertOptions) -> Result<Writer<'m>> {
    let version = opts.zt_version.unwrap_or(ZtVersion::V2);
    let at = |e: Error| e.in_file(Path::new(&input.location));
    let mut w = Writer::new(
        WriteOptions::new()
            .with_version(version)
            .with_compression(opts.compression.unwrap_or(Compression::None))
            .with_digest(opts.digest),
    );
    let index = &input.index;
    // A GGUF file written from zTensor gives back its keys; a write id is not carried.
    let metadata = meta_carry::restored(index, meta_carry::ZTENSOR_PREFIX).map_err(at)?;
    if !metadata.is_empty() {
        if version == ZtVersion::V0_1 {
            if !opts.drop_metadata {
                return Err(at(Error::new(ErrorKind::Unsupported(format!(
                    "zTensor v0.1 has no file metadata and this model has {} keys (--drop-metadata drops them)",
                    metadata.len()
                )))));
            }
        } else if version == ZtVersion::V1_1 {
            // 1.1 readers take text values only: typed ones go as their JSON text, as they
            // do to safetensors.
            let text = metadata
                .iter()
                .map(|(k, v)| (k.clone(), MetaValue::Str(meta_text(v))))
                .collect();
            w.set_attributes(text).map_err(at)?;
        } else {
            w.set_attributes(metadata).map_err(at)?;
        }
    }
    for t in index.tensors.iter().filter(|t| !skipped(t)) {
        let with_name = |e: Error| e.at_tensor(&t.name).in_file(Path::new(&input.location));
        // What the writer refuses is about the output.
        let at_out = |e: Error| e.at_tensor(&t.name).in_file(out);
        let part = |i: usize, cast| ModelPart {
            model: input,
            t,
            part: i,
            cast,
        };
        match &t.layout {
            Layout::Dense => {
                let (dtype, how) = match opts.dtype {
                    Some(to) if to != t.dtype && t.dtype.is_castable_float() => {
                        if !to.is_castable_float() {
                            // The same refusal a cast of the bytes gives, before any is read.
                            cast(&[], t.dtype, to, opts.rounding).map_err(with_name)?;
                        }
                        (to, Some((t.dtype, to, opts.rounding)))
                    }
                    _ => (t.dtype, None),
                };
                w.add_object(
                    &t.name,
                    &t.shape,
                    Layout::Dense,
                    Default::default(),
                    vec![PartData::lazy("data", dtype, Box::new(part(0, how)))],
                )
                .map_err(at_out)?;
            }
            Layout::Ggml(_) => {
                // Block-quantized: dequantized to F32 (then cast), as for safetensors.
                let values = crate::ops::convert::dequantize::values_f32(input, t)?;
                let bytes = crate::ops::convert::dequantize::f32_bytes(&values);
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
                let parts = (0..t.parts.len())
                    .map(|i| {
                        PartData::lazy(&t.parts[i].role, t.parts[i].dtype, Box::new(part(i, None)))
                    })
                    .collect();
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
    Ok(w)
}
