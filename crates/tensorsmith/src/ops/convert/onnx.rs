//! Any model to ONNX through a template (`convert IN model.onnx --onnx-template T.onnx`): a
//! copy of the template's graph whose initializers take IN's tensors by name (same dims and
//! dtype; a float cast only where `--dtype` asks for the template's dtype). Every check runs
//! before a byte is written. Tensors of at most 1,024 bytes go inline, the rest into one
//! external data file (`NAME.onnx.data`, offsets aligned to 4096) written in bounded chunks;
//! `--external-data` sends every tensor there, as does an inline total over 2 GiB. Both files
//! are written atomically, the data file committed first.

use crate::cast::cast;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{FileFormat, OpenOptions};
use crate::index::{Layout, TensorInfo};
use crate::model::Model;
use crate::onnx::data_type::{code_of, stored_bytes};
use crate::onnx::write::{rewrite, NewTensor, Placement};
use crate::onnx::{Onnx, ATTR_GRAPH, SPARSE_LAYOUT, STRING_LAYOUT};
use crate::ops::convert::options::ConvertOptions;
use crate::sink::AtomicFile;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

/// Tensors of at most this many bytes go inline.
pub const INLINE_MAX: u64 = 1024;
/// Offsets in the external data file are multiples of this.
pub const DATA_ALIGN: u64 = 4096;
/// The inline total past which every tensor goes to the data file (protobuf's limit).
const INLINE_TOTAL_MAX: u64 = 2 << 30;
const CHUNK: u64 = 8 << 20;

fn refuse(at: &Path, tensor: Option<&str>, msg: String) -> Error {
    let e = Error::new(ErrorKind::Unsupported(msg)).in_file(at);
    match tensor {
        Some(t) => e.at_tensor(t),
        None => e,
    }
}

/// One template initializer and the input tensor that fills it.
struct Plan<'a> {
    name: String,
    src: &'a TensorInfo,
    to: DType,
    len: u64,
    external: bool,
}

/// Writes `input` through the template `opts.onnx_template` to `out`; returns the files written.
pub fn convert_onnx(
    input: &Model,
    out: &Path,
    opts: &ConvertOptions,
) -> Result<Vec<std::path::PathBuf>> {
    crate::ops::convert::digest_guard::before(input, opts)?;
    let tpath = opts.onnx_template.as_deref().ok_or_else(|| {
        refuse(
            out,
            None,
            "ONNX output needs --onnx-template (the graph to fill)".into(),
        )
    })?;
    let tbytes = std::fs::read(tpath).map_err(|e| Error::from(e).in_file(tpath))?;
    if !Onnx.sniff(&tbytes[..tbytes.len().min(8)]) && !Onnx.claims_name(&tpath.to_string_lossy()) {
        return Err(refuse(
            tpath,
            None,
            "the template is not an ONNX model".into(),
        ));
    }
    let tindex = Onnx
        .read_index(&tbytes, &OpenOptions::new())
        .map_err(|e| e.in_file(tpath))?;
    let by_name = input.index.by_name();
    let mut plans = Vec::new();
    let mut used = HashSet::new();
    for t in &tindex.tensors {
        let is = |l: &str| matches!(&t.layout, Layout::Other(x) if &**x == l);
        if is(STRING_LAYOUT) {
            continue; // kept as the template has it
        }
        if is(SPARSE_LAYOUT) || t.attributes.contains_key(ATTR_GRAPH) {
            return Err(refuse(
                tpath,
                Some(&t.name),
                "sparse and subgraph initializers in a template are not supported".into(),
            ));
        }
        let Some(&i) = by_name.get(&t.name) else {
            return Err(refuse(
                tpath,
                Some(&t.name),
                format!(
                    "the template's initializer is missing from {}",
                    input.location
                ),
            ));
        };
        let src = &input.index.tensors[i];
        used.insert(t.name.as_str());
        if src.shape != t.shape {
            return Err(refuse(
                out,
                Some(&t.name),
                format!(
                    "shape {:?} in {} but {:?} in the template",
                    src.shape.as_slice(),
                    input.location,
                    t.shape.as_slice()
                ),
            ));
        }
        if src.layout != Layout::Dense {
            return Err(refuse(
                out,
                Some(&t.name),
                format!(
                    "a tensor of layout {} cannot fill an ONNX initializer",
                    src.layout.name(crate::index::LayoutNames::Message)
                ),
            ));
        }
        let castable = opts.dtype == Some(t.dtype)
            && src.dtype.is_castable_float()
            && t.dtype.is_castable_float();
        if src.dtype != t.dtype && !castable {
            return Err(refuse(
                out,
                Some(&t.name),
                format!(
                    "dtype {} in {} but {} in the template (--dtype {} casts float tensors)",
                    src.dtype, input.location, t.dtype, t.dtype
                ),
            ));
        }
        let len = stored_bytes(t.dtype, t.elements()).ok_or(ErrorKind::ShapeOverflow)?;
        if src.dtype == t.dtype && src.byte_len() != len {
            return Err(refuse(
                out,
                Some(&t.name),
                format!("{} bytes in the input, ONNX stores {len}", src.byte_len()),
            ));
        }
        plans.push(Plan {
            name: t.name.clone(),
            src,
            to: t.dtype,
            len,
            external: opts.external_data || len > INLINE_MAX,
        });
    }
    if !opts.allow_extra {
        let extra: Vec<&str> = input
            .index
            .tensors
            .iter()
            .map(|t| t.name.as_str())
            .filter(|n| !used.contains(n))
            .collect();
        if !extra.is_empty() {
            return Err(refuse(
                out,
                None,
                format!(
                    "{} tensor(s) of {} are not in the template (--allow-extra leaves them out): {}",
                    extra.len(),
                    input.location,
                    extra.join(", ")
                ),
            ));
        }
    }
    let inline_total: u64 = plans.iter().filter(|p| !p.external).map(|p| p.len).sum();
    if inline_total > INLINE_TOTAL_MAX {
        plans.iter_mut().for_each(|p| p.external = true);
    }
    write(input, out, &tbytes, &plans, opts)
}

/// A tensor's values in the template's dtype, chunk by chunk.
fn each_chunk(
    input: &Model,
    p: &Plan,
    opts: &ConvertOptions,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let chunk = CHUNK - CHUNK % p.src.dtype.byte_size().unwrap_or(1).max(1) as u64;
    input.for_each_chunk(p.src, chunk, |c| {
        if p.src.dtype == p.to {
            f(c)
        } else {
            f(&cast(c, p.src.dtype, p.to, opts.rounding).map_err(|e| e.at_tensor(&p.name))?)
        }
    })
}

fn write(
    input: &Model,
    out: &Path,
    template: &[u8],
    plans: &[Plan],
    opts: &ConvertOptions,
) -> Result<Vec<std::path::PathBuf>> {
    let file_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model.onnx".into());
    let location = format!("{file_name}.data");
    let data_path = out.with_file_name(&location);
    let mut new = HashMap::with_capacity(plans.len());
    let mut data = None;
    let mut offset = 0u64;
    for p in plans {
        let placement = if p.external {
            let f = match &mut data {
                Some(f) => f,
                None => data.insert(AtomicFile::create(&data_path)?),
            };
            let pad = offset.next_multiple_of(DATA_ALIGN) - offset;
            f.write_all(&vec![0u8; pad as usize])
                .map_err(|e| Error::from(e).in_file(&data_path))?;
            offset += pad;
            let start = offset;
            each_chunk(input, p, opts, |c| {
                offset += c.len() as u64;
                f.write_all(c)
                    .map_err(|e| Error::from(e).in_file(&data_path))
            })?;
            Placement::External {
                location: location.clone(),
                offset: start,
                length: offset - start,
            }
        } else {
            let mut b = Vec::with_capacity(p.len as usize);
            each_chunk(input, p, opts, |c| {
                b.extend_from_slice(c);
                Ok(())
            })?;
            Placement::Inline(b)
        };
        new.insert(
            p.name.clone(),
            NewTensor {
                dims: p.src.shape.to_vec(),
                data_type: code_of(p.to).expect("template dtypes have codes"),
                placement,
            },
        );
    }
    let bytes = rewrite(template, &new)?;
    let mut model = AtomicFile::create(out)?;
    model
        .write_all(&bytes)
        .map_err(|e| Error::from(e).in_file(out))?;
    let mut written = Vec::new();
    if let Some(d) = data {
        d.commit()?;
        written.push(data_path);
    }
    model.commit()?;
    written.push(out.to_path_buf());
    Ok(written)
}
