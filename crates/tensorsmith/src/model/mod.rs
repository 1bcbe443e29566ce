//! The model: a validated [`TensorIndex`] plus the bytes behind it, one file or the shards of
//! a checkpoint seen as one. [`open`] makes one from a path, a folder, a shard index or an
//! `http(s)://` URL; every operation (inspect, hash, diff, convert, verify) takes a [`Model`]
//! and reads through it, whatever the format and wherever the bytes are.

pub(crate) mod checkpoint;
mod digest_check;
mod file;
mod gguf_split;
mod onnx_external;
mod open;
pub mod write_id;

pub use checkpoint::{is_index, parse_index, shard_notice, INDEX_SUFFIX, MAX_INDEX_LEN};
pub use file::ModelFile;
pub use open::{open, open_reader};

use crate::error::{Error, ErrorKind, Result};
use crate::index::{Layout, TensorIndex, TensorInfo};
use crate::rank_plan::{Coalesce, Elements, RankPlan};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

/// An opened, validated model: one file, or the shards of a checkpoint seen as one.
#[derive(Debug)]
pub struct Model {
    /// The path or URL as given.
    pub location: String,
    /// Every tensor; byte ranges are within each tensor's own file.
    pub index: TensorIndex,
    /// The files holding the tensors: one, or every shard of a checkpoint (every part of a
    /// split GGUF, in order; an ONNX model then its external data files).
    pub files: Vec<ModelFile>,
    /// For a sharded model: which of `files` holds each tensor, by name.
    shard_of: Option<HashMap<String, usize>>,
    /// For a split GGUF model opened whole: the split, whose keys are not in the metadata.
    split: Option<Split>,
}

/// A split GGUF model's split: `split.count` parts (the model's `files`, in order) holding
/// `split.tensors.count` tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Number of parts (`split.count`).
    pub count: u64,
    /// Tensors over all parts (`split.tensors.count`).
    pub tensors: u64,
}

impl Model {
    /// A model of one file.
    fn single(location: &str, index: TensorIndex, file: ModelFile) -> Model {
        Model {
            location: location.to_owned(),
            index,
            files: vec![file],
            shard_of: None,
            split: None,
        }
    }

    /// A model whose tensors live in several files: `shard_of` names each tensor's.
    fn with_files(
        location: &str,
        index: TensorIndex,
        files: Vec<ModelFile>,
        shard_of: HashMap<String, usize>,
    ) -> Model {
        Model {
            location: location.to_owned(),
            index,
            files,
            shard_of: Some(shard_of),
            split: None,
        }
    }

    /// The split of a split GGUF model opened whole; `None` otherwise (a part read alone
    /// with `part_only` keeps its `split.*` keys in its metadata).
    pub fn split(&self) -> Option<Split> {
        self.split
    }

    /// Whether the tensors live in several files (a sharded checkpoint, a split GGUF opened
    /// whole, an ONNX model with external data).
    pub fn is_sharded(&self) -> bool {
        self.shard_of.is_some()
    }

    /// The file holding tensor `t`.
    pub fn file_of(&self, t: &TensorInfo) -> &ModelFile {
        match &self.shard_of {
            None => &self.files[0],
            Some(m) => &self.files[m[&t.name]],
        }
    }

    /// Stored bytes of `range` in the file of tensor `t` (zero-copy from a memory map;
    /// fetched for a remote file). For tensors that are not [`Model::is_plain`], stored bytes
    /// are not the values: use [`Model::part_bytes`].
    ///
    /// # Errors
    ///
    /// Errors name the file and the tensor. [`ErrorKind::Truncated`] when the range runs past
    /// the end of the file; [`ErrorKind::Io`] when a local read fails; for a remote file, the
    /// remote kinds ([`ErrorKind::Unreachable`], [`ErrorKind::Http`], ...) and
    /// [`ErrorKind::ChangedDuringRead`] when the object was replaced since it was opened.
    pub fn read(&self, t: &TensorInfo, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let f = self.file_of(t);
        f.bytes()
            .read(range)
            .map_err(|e| f.at(e.at_tensor(&t.name)))
    }

    /// The bytes before the tensor data of file `i` (for safetensors: the length and the
    /// JSON header).
    ///
    /// # Errors
    ///
    /// As [`Model::read`], naming the file.
    pub fn header_bytes(&self, i: usize) -> Result<Cow<'_, [u8]>> {
        let f = &self.files[i];
        f.bytes().read(0..f.header_len).map_err(|e| f.at(e))
    }

    /// The JSON header of file `i`, for formats whose header is JSON; `None` for others.
    pub fn json_header(&self, i: usize) -> Result<Option<Cow<'_, [u8]>>> {
        let f = &self.files[i];
        f.format()
            .json_header(f.bytes(), f.header_len)
            .map_err(|e| f.at(e))
    }

    /// The per-rank read plan of the part `cut` of tensor `t` (ranges along its leading
    /// dimensions; empty: the whole tensor), by the coalescing rule of its file's kind
    /// ([`Coalesce::REMOTE`] for URLs, [`Coalesce::LOCAL`] otherwise). Tensors not stored as
    /// one raw run (compressed, big-endian, sparse) are refused by name, as are cuts that
    /// do not fall on whole bytes (see [`crate::rank_plan`]).
    pub fn part_plan(&self, t: &TensorInfo, cut: &[Range<u64>]) -> Result<RankPlan> {
        self.part_plan_with(t, cut, None)
    }

    /// [`Model::part_plan`] with neighbouring runs merged only across gaps of at most
    /// `max_gap` bytes (`None`: the file's default, 4 KiB local, 256 KiB remote; 0: exactly
    /// the kept bytes).
    pub fn part_plan_with(
        &self,
        t: &TensorInfo,
        cut: &[Range<u64>],
        max_gap: Option<u64>,
    ) -> Result<RankPlan> {
        let f = self.file_of(t);
        if !self.is_plain(t) {
            return Err(f.at(Error::new(ErrorKind::Unsupported(
                "a per-rank read of a tensor that is not stored as one raw little-endian run \
                 (compressed, byte-swapped or in several parts): read it whole"
                    .into(),
            ))
            .at_tensor(&t.name)));
        }
        let mut rule = if crate::bytes::is_url(&f.location) {
            Coalesce::REMOTE
        } else {
            Coalesce::LOCAL
        };
        if let Some(g) = max_gap {
            rule.max_gap = g;
        }
        Elements::of(t.dtype, &t.layout)
            .and_then(|el| RankPlan::new(el, &t.shape, t.data_range(), cut, rule))
            .map_err(|e| f.at(e.at_tensor(&t.name)))
    }

    /// One part stored raw and little-endian in this file: its stored bytes are its values,
    /// and any sub-range can be read on its own.
    pub fn is_plain(&self, t: &TensorInfo) -> bool {
        t.parts.len() == 1 && t.parts[0].is_zero_copy()
    }

    /// Part `i` of tensor `t`, decoded (decompressed, little-endian); zero-copy when stored
    /// raw in a mapped file. Digests are not checked here (see `verify`).
    ///
    /// # Errors
    ///
    /// Errors name the file and the tensor. Those of [`Model::read`], and for an encoded
    /// part: [`ErrorKind::ZtCompression`] (a corrupt zstd stream),
    /// [`ErrorKind::ZtDecodedLength`] (decoded to the wrong length), [`ErrorKind::ZtSeekTable`],
    /// [`ErrorKind::ZtUnknownEncoding`] (an encoding this library cannot decode).
    pub fn part_bytes(&self, t: &TensorInfo, i: usize) -> Result<Cow<'_, [u8]>> {
        self.part_bytes_checked(t, i, false)
    }

    /// A dense tensor's values (decoded), or a GGUF block-quantized tensor's stored blocks.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unsupported`] for a tensor of another layout (sparse, group-quantized,
    /// ...: read its parts with [`Model::part_bytes`]); otherwise as [`Model::part_bytes`].
    pub fn tensor_bytes(&self, t: &TensorInfo) -> Result<Cow<'_, [u8]>> {
        if t.layout != Layout::Dense && !matches!(t.layout, Layout::Ggml(_)) {
            return Err(self
                .file_of(t)
                .at(Error::new(ErrorKind::Unsupported(format!(
                    "tensors of layout {} have no single run of values (read their parts)",
                    t.layout.name(crate::index::LayoutNames::Message)
                )))
                .at_tensor(&t.name)));
        }
        self.part_bytes(t, 0)
    }

    /// Writes `t`'s bytes (as `tensor_bytes` gives them) to `out`: a plain tensor of a
    /// remote file through the file's streaming copy (parallel ranged GETs written as they
    /// come, no re-chunking), any other as [`Model::for_each_chunk`] gives them, `chunk`
    /// bytes at a time.
    ///
    /// # Errors
    ///
    /// As [`Model::tensor_bytes`], and [`ErrorKind::Io`] when writing to `out` fails.
    pub fn copy_to(&self, t: &TensorInfo, chunk: u64, out: &mut dyn std::io::Write) -> Result<()> {
        let f = self.file_of(t);
        if self.is_plain(t) && is_remote(f.bytes()) {
            return f
                .bytes()
                .copy_to(t.data_range(), out)
                .map_err(|e| f.at(e.at_tensor(&t.name)));
        }
        self.for_each_chunk(t, chunk, |b| Ok(out.write_all(b)?))
    }

    /// Calls `each` on `t`'s bytes (as `tensor_bytes` gives them) `chunk` bytes at a time:
    /// read from the file piece by piece when stored plain, so memory stays bounded whatever
    /// the tensor size (from a remote file, through its parallel streaming copy); decoded
    /// whole, then cut, otherwise. The last piece may be shorter.
    ///
    /// # Errors
    ///
    /// As [`Model::tensor_bytes`], and the first error `each` returns (which stops the
    /// reading).
    pub fn for_each_chunk(
        &self,
        t: &TensorInfo,
        chunk: u64,
        mut each: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let chunk = chunk.max(1);
        if !self.is_plain(t) {
            let bytes = self.tensor_bytes(t)?;
            return bytes.chunks(chunk as usize).try_for_each(each);
        }
        let r = t.data_range();
        let f = self.file_of(t);
        if is_remote(f.bytes()) {
            // A remote file: its own streaming copy (parallel ranged GETs), cut to size.
            return crate::bytes::for_each_chunk(f.bytes(), r, chunk, &mut each)
                .map_err(|e| f.at(e.at_tensor(&t.name)));
        }
        let mut off = r.start;
        while off < r.end {
            let end = (off + chunk).min(r.end);
            each(&self.read(t, off..end)?)?;
            off = end;
        }
        Ok(())
    }
}

/// Bytes that are neither mapped nor a local file: a remote file (or a reader the caller
/// gave), read best through its own streaming copy.
fn is_remote(bytes: &dyn crate::bytes::ReadAt) -> bool {
    bytes.local_file().is_none() && bytes.as_slice().is_none()
}
