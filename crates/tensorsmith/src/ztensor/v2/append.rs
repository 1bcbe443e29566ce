//! Adding objects to an existing zTensor v2 file: the old blobs, then the new parts, then a
//! manifest of old and new objects and a new footer. Crash-safe: the result is built under a
//! temporary name and renamed over the file, so a kill leaves the old file or the new one.
//!
//! Why not in place: a v2 reader finds the footer at the end of the file. Writing new blobs
//! past the old footer makes the file's last 40 bytes something other than a footer until the
//! new footer is complete, and overwriting the old manifest (as ztensor 2.x's `append` does)
//! destroys the old file before the new one exists; either way a kill leaves a file no reader
//! opens. So the old bytes up to the old manifest are copied by the kernel
//! (`copy_file_range`: a reflink on filesystems that share extents, an in-kernel copy
//! elsewhere; nothing passes through this process and nothing is decompressed), the new
//! parts stream after them, and the temporary file is fsynced and renamed.

use crate::bytes::{Backend, LocalFile, ReadAt};
use crate::error::{Error, ErrorKind, Result};
use crate::format::OpenOptions;
use crate::index::{Encoding, TensorIndex, ZtVersion};
use crate::sink::write_atomically;
use crate::ztensor::format::parse_with;
use crate::ztensor::prepared::{Placed, PlacedObject};
use crate::ztensor::v2::write;
use crate::ztensor::write::Writer;
use std::collections::BTreeMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

fn refuse(what: String) -> Error {
    Error::new(ErrorKind::Unsupported(format!("append: {what}")))
}

/// The old objects as the v2 writer describes them (offsets, lengths, digests as they are).
fn old_objects(index: &TensorIndex) -> Result<Vec<PlacedObject>> {
    index
        .tensors
        .iter()
        .map(|t| {
            let parts = t
                .parts
                .iter()
                .map(|p| {
                    if p.shard().is_some() {
                        return Err(refuse(format!(
                            "object '{}' keeps its bytes in a shard file",
                            t.name
                        )));
                    }
                    let compressed = match &p.encoding {
                        Encoding::Raw => false,
                        Encoding::ZstdSeekable => true,
                        other => {
                            return Err(refuse(format!(
                                "object '{}' has a part in encoding '{}', which this writer does not write",
                                t.name,
                                other.name()
                            )))
                        }
                    };
                    Ok(Placed {
                        role: p.role.to_string(),
                        dtype: p.dtype,
                        unknown_type: p.unknown_type().map(str::to_string),
                        offset: p.range.start,
                        stored_len: p.range.end - p.range.start,
                        compressed,
                        decoded_len: p.decoded_len,
                        digest: p.digest().map(|d| d.0),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(PlacedObject {
                name: t.name.clone(),
                shape: t.shape.clone(),
                layout: t.layout.clone(),
                attributes: t.attributes.to_map(),
                parts,
            })
        })
        .collect()
}

/// Appends the objects of `w` (a v2 writer) to the v2 file at `path`; names already in the
/// file are refused, file attributes of `w` are added where the file has no such key (the
/// file's own values win; `convert --append` refuses a key the file has with another value
/// before this runs). Returns the new file's length.
pub fn append(path: &Path, w: Writer<'_>) -> Result<u64> {
    let at = |e: Error| e.in_file(path);
    if w.options().version != ZtVersion::V2 {
        return Err(at(refuse(format!(
            "only to zTensor v2 files (this writer is v{})",
            w.options().version.as_str()
        ))));
    }
    if w.options().canonical {
        return Err(at(refuse(
            "a canonical file's objects are in name order, which appending breaks".into(),
        )));
    }
    let src = LocalFile::open(path, Backend::Pread)?;
    let (version, parsed) = parse_with(&src, &OpenOptions::new()).map_err(at)?;
    if version != ZtVersion::V2 {
        return Err(at(refuse(format!(
            "only to zTensor v2 files (this one is v{})",
            version.as_str()
        ))));
    }
    let old = old_objects(&parsed.index).map_err(at)?;
    let old_attrs = parsed.index.metadata.clone();
    let old_manifest = src.read(parsed.manifest_range.clone()).map_err(at)?;
    // Rewritten from the index, the old manifest must come out byte for byte: otherwise it
    // holds something this writer would drop, and appending would lose it.
    if write::manifest(&old, &old_attrs) != *old_manifest {
        return Err(at(refuse(
            "the file's manifest holds fields this writer does not reproduce".into(),
        )));
    }
    let keep = parsed.manifest_range.start;
    if let Some(o) = old
        .iter()
        .find(|o| o.parts.iter().any(|p| p.offset + p.stored_len > keep))
    {
        return Err(at(refuse(format!(
            "object '{}' has bytes after the manifest",
            o.name
        ))));
    }
    let known: std::collections::HashSet<&str> = old.iter().map(|o| o.name.as_str()).collect();
    if let Some(dup) = w.names().find(|n| known.contains(n)) {
        return Err(at(refuse(format!(
            "an object named '{dup}' is already in the file (appended names must be new)"
        ))
        .at_tensor(dup)));
    }
    write_atomically(path, |f| {
        let mut from: &std::fs::File = src.file();
        from.seek(SeekFrom::Start(0))?;
        let copied = io::copy(&mut from.take(keep), f.file()?)?;
        if copied != keep {
            return Err(ErrorKind::Truncated {
                needed: keep,
                available: copied,
            }
            .into());
        }
        let mut pos = keep;
        let streamed = w.stream_parts(f, &mut pos)?;
        let mut attributes: BTreeMap<_, _> = streamed.attributes;
        attributes.extend(old_attrs);
        let mut objects = old;
        objects.extend(streamed.objects);
        write::finish(&objects, &attributes, streamed.align, f, pos)
    })
}
