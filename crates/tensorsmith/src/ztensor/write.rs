//! The writer front shared by the three versions: collects named tensors (dense, sparse,
//! quantized, or any layout; bytes in memory or read on demand), checks them with the same
//! layout rules the readers apply, streams the parts through `stream.rs` in the version's
//! file order, then has the version's writer add the manifest; `write_file` ends through
//! [`crate::sink::write_atomically`].

use crate::digest::DigestKind;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{DigestScope, Layout, MetaValue, Part, PartExtra, Shape, TensorInfo, ZtVersion};
use crate::sink::{write_atomically, Rewind};
use crate::ztensor::part_source::{PartBytes, PartSource};
use crate::ztensor::prepared::{Placed, PlacedObject};
use crate::ztensor::stream::{self, Encode, PartJob, Placement};
use crate::ztensor::{layout, v01, v11, v2};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// How part bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Parts are stored raw, as their decoded bytes.
    #[default]
    None,
    /// zstd at a level of 1-22 (3 is the references' default): one frame per part for
    /// v0.1/v1.1, `zt.zstd-seekable/1` with 1 MiB frames for v2.
    Zstd {
        /// The zstd compression level, 1 (fastest) to 22 (smallest).
        level: i32,
    },
}

/// Options for a [`Writer`]: [`WriteOptions::new`] and `with_*` methods.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WriteOptions {
    /// The zTensor version to write (v2 by default).
    pub version: ZtVersion,
    /// Default for parts that do not say otherwise.
    pub compression: Compression,
    /// v0.1/v1.1: crc32c or sha256 (over stored bytes); v2: xxh3 or sha256 (over decoded
    /// bytes). `None` writes no digest (v2 canonical files always get xxh3).
    pub digest: Option<DigestKind>,
    /// v2 blob placement, a power of two of at least 4096 (default 4096; 65536 when canonical).
    pub align: Option<u64>,
    /// v2 canonical form: 64 KiB placement, objects in name order, raw parts, xxh3 digests.
    pub canonical: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            version: ZtVersion::V2,
            compression: Compression::None,
            digest: None,
            align: None,
            canonical: false,
        }
    }
}

impl WriteOptions {
    /// zTensor v2, raw parts, no digests, default placement.
    pub fn new() -> Self {
        Self::default()
    }

    /// The zTensor version to write: v0.1, v1.1 or v2.
    pub fn with_version(mut self, version: ZtVersion) -> Self {
        self.version = version;
        self
    }

    /// Default compression for parts that do not say otherwise.
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// The digest every part records (`None`: none; v2 canonical files always get xxh3).
    pub fn with_digest(mut self, digest: impl Into<Option<DigestKind>>) -> Self {
        self.digest = digest.into();
        self
    }

    /// v2 blob placement, a power of two of at least 4096.
    pub fn with_align(mut self, align: impl Into<Option<u64>>) -> Self {
        self.align = align.into();
        self
    }

    /// v2 canonical form: 64 KiB placement, objects in name order, raw parts, xxh3 digests.
    pub fn with_canonical(mut self, canonical: bool) -> Self {
        self.canonical = canonical;
        self
    }
}

/// One part to write: decoded little-endian bytes (or where to read them) and their element
/// type.
#[derive(Debug)]
pub struct PartData<'a> {
    /// The part's role in its tensor's layout (`data`, `values`, `indices`, `scales`, ...).
    pub role: String,
    /// Element type of the decoded bytes.
    pub dtype: DType,
    /// The decoded little-endian bytes, in memory or read on demand.
    pub data: PartBytes<'a>,
    /// Overrides the writer's default compression for this part.
    pub compression: Option<Compression>,
    /// A logical type name unknown to this library, written as is (v2 only); `dtype` is
    /// then the storage type.
    pub unknown_type: Option<String>,
}

impl<'a> PartData<'a> {
    /// A part whose decoded bytes are `data`, held in memory (borrowed or owned), with the
    /// writer's default compression.
    pub fn new(role: &str, dtype: DType, data: impl Into<Cow<'a, [u8]>>) -> Self {
        PartData {
            role: role.to_string(),
            dtype,
            data: PartBytes::Mem(data.into()),
            compression: None,
            unknown_type: None,
        }
    }

    /// A part whose bytes are read from `source` only when the writer reaches it.
    pub fn lazy(role: &str, dtype: DType, source: Box<dyn PartSource + 'a>) -> Self {
        PartData {
            role: role.to_string(),
            dtype,
            data: PartBytes::Lazy(source),
            compression: None,
            unknown_type: None,
        }
    }

    /// This part stored with `c`, whatever the writer's default.
    pub fn compressed(mut self, c: Compression) -> Self {
        self.compression = Some(c);
        self
    }
}

pub(crate) struct Object<'a> {
    pub name: String,
    pub shape: Shape,
    pub layout: Layout,
    pub attributes: BTreeMap<String, MetaValue>,
    pub parts: Vec<PartData<'a>>,
}

/// What [`Writer::stream_parts`] leaves for the manifest.
pub(crate) struct Streamed {
    pub objects: Vec<PlacedObject>,
    pub attributes: BTreeMap<String, MetaValue>,
    /// The v2 placement.
    pub align: u64,
}

/// Collects tensors and writes them as one zTensor file.
pub struct Writer<'a> {
    opts: WriteOptions,
    objects: Vec<Object<'a>>,
    names: HashSet<String>,
    attributes: BTreeMap<String, MetaValue>,
}

fn opt_err(version: ZtVersion, what: impl Into<String>) -> Error {
    ErrorKind::ZtUnsupportedOption {
        version: version.as_str(),
        what: what.into(),
    }
    .into()
}

/// A compression the writer can use: zstd levels 1-22, and nothing in a canonical file
/// (the writer's default and each part's own choice are held to the same rule).
fn check_compression(version: ZtVersion, c: Compression, canonical: bool) -> Result<()> {
    if let Compression::Zstd { level } = c {
        if !(1..=22).contains(&level) {
            return Err(opt_err(version, format!("zstd level {level} (use 1-22)")));
        }
        if canonical {
            return Err(opt_err(version, "compression in a canonical file"));
        }
    }
    Ok(())
}

/// v1.1 sparse index parts (`indices`, `indptr`, `coords`) become `u64`. The spec allows
/// any integer type, but the 1.1.1 reference reads every index part as u64 whatever its
/// declared dtype, so narrower indices would be misread; it writes u64 itself. Signed parts
/// are widened only when no value is negative (a negative index is the reader's error to
/// report, so such parts are left as they are).
/// Index parts read on demand are read here, whole (index parts are small beside values).
fn widen_sparse_indices(layout: &Layout, parts: &mut [PartData<'_>]) -> Result<()> {
    if !matches!(layout, Layout::SparseCsr | Layout::SparseCoo) {
        return Ok(());
    }
    for p in parts.iter_mut() {
        if !matches!(p.role.as_str(), "indices" | "indptr" | "coords") || p.dtype == DType::U64 {
            continue;
        }
        if let Some(wide) = widen_to_u64(p.dtype, &p.data.all()?) {
            p.dtype = DType::U64;
            p.data = PartBytes::Mem(Cow::Owned(wide));
        }
    }
    Ok(())
}

fn widen_to_u64(dtype: DType, bytes: &[u8]) -> Option<Vec<u8>> {
    fn collect<const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> Option<u64>) -> Option<Vec<u8>> {
        if b.len() % N != 0 {
            return None;
        }
        let mut out = Vec::with_capacity(b.len() / N * 8);
        for c in b.chunks_exact(N) {
            out.extend_from_slice(&f(c.try_into().unwrap())?.to_le_bytes());
        }
        Some(out)
    }
    match dtype {
        DType::U8 => collect::<1>(bytes, |c| Some(u64::from(c[0]))),
        DType::U16 => collect::<2>(bytes, |c| Some(u64::from(u16::from_le_bytes(c)))),
        DType::U32 => collect::<4>(bytes, |c| Some(u64::from(u32::from_le_bytes(c)))),
        DType::I8 => collect::<1>(bytes, |c| u64::try_from(c[0] as i8).ok()),
        DType::I16 => collect::<2>(bytes, |c| u64::try_from(i16::from_le_bytes(c)).ok()),
        DType::I32 => collect::<4>(bytes, |c| u64::try_from(i32::from_le_bytes(c)).ok()),
        DType::I64 => collect::<8>(bytes, |c| u64::try_from(i64::from_le_bytes(c)).ok()),
        _ => None,
    }
}

impl<'a> Writer<'a> {
    /// An empty writer with the options `opts` (checked when the file is written).
    pub fn new(opts: WriteOptions) -> Self {
        Writer {
            opts,
            objects: Vec::new(),
            names: HashSet::new(),
            attributes: BTreeMap::new(),
        }
    }

    /// The options the writer was made with.
    pub fn options(&self) -> &WriteOptions {
        &self.opts
    }

    /// The file attributes set so far.
    pub fn attributes(&self) -> &BTreeMap<String, MetaValue> {
        &self.attributes
    }

    /// File attributes (v1.1, v2; v0.1 has none).
    pub fn set_attributes(&mut self, a: BTreeMap<String, MetaValue>) -> Result<&mut Self> {
        if !a.is_empty() && self.opts.version == ZtVersion::V0_1 {
            return Err(opt_err(ZtVersion::V0_1, "file attributes"));
        }
        if self.opts.version == ZtVersion::V2 {
            for k in a.keys() {
                v2::read::check_name(v2::read::FILE_ATTRIBUTE, k)?;
            }
        }
        if self.opts.version == ZtVersion::V1_1 {
            // The spec says "map", but the 1.1.1 reference reads root attributes as
            // text-to-text and refuses the whole file otherwise.
            if let Some((k, _)) = a.iter().find(|(_, v)| !matches!(v, MetaValue::Str(_))) {
                return Err(opt_err(
                    ZtVersion::V1_1,
                    format!("a non-text file attribute ('{k}'): the 1.1 reference reads only text values"),
                ));
            }
        }
        self.attributes = a;
        Ok(self)
    }

    /// A dense tensor with the writer's default compression.
    pub fn add_dense(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[u64],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self> {
        self.add_object(
            name,
            shape,
            Layout::Dense,
            BTreeMap::new(),
            vec![PartData::new("data", dtype, data)],
        )
    }

    /// A CSR matrix: `values`, `indices` and `indptr` as (dtype, bytes).
    pub fn add_sparse_csr(
        &mut self,
        name: &str,
        shape: [u64; 2],
        values: (DType, Cow<'a, [u8]>),
        indices: (DType, Cow<'a, [u8]>),
        indptr: (DType, Cow<'a, [u8]>),
    ) -> Result<&mut Self> {
        self.add_object(
            name,
            &shape,
            Layout::SparseCsr,
            BTreeMap::new(),
            vec![
                PartData::new("values", values.0, values.1),
                PartData::new("indices", indices.0, indices.1),
                PartData::new("indptr", indptr.0, indptr.1),
            ],
        )
    }

    /// A COO tensor: `values` and `coords` (ndim x nnz indices, all of dimension 0 first).
    pub fn add_sparse_coo(
        &mut self,
        name: &str,
        shape: &[u64],
        values: (DType, Cow<'a, [u8]>),
        coords: (DType, Cow<'a, [u8]>),
    ) -> Result<&mut Self> {
        self.add_object(
            name,
            shape,
            Layout::SparseCoo,
            BTreeMap::new(),
            vec![
                PartData::new("values", values.0, values.1),
                PartData::new("coords", coords.0, coords.1),
            ],
        )
    }

    /// Any object: a layout, its attributes and its parts. Checked against the same layout
    /// rules the readers apply, so a file this writes always reads back.
    pub fn add_object(
        &mut self,
        name: &str,
        shape: &[u64],
        layout: Layout,
        attributes: BTreeMap<String, MetaValue>,
        mut parts: Vec<PartData<'a>>,
    ) -> Result<&mut Self> {
        if self.opts.version == ZtVersion::V1_1 {
            widen_sparse_indices(&layout, &mut parts).map_err(|e| e.at_tensor(name))?;
        }
        self.check_object(name, shape, &layout, &attributes, &parts)
            .map_err(|e| e.at_tensor(name))?;
        self.names.insert(name.to_string());
        self.objects.push(Object {
            name: name.to_string(),
            shape: Shape::from_slice(shape),
            layout,
            attributes,
            parts,
        });
        Ok(self)
    }

    fn check_object(
        &self,
        name: &str,
        shape: &[u64],
        layout: &Layout,
        attributes: &BTreeMap<String, MetaValue>,
        parts: &[PartData<'a>],
    ) -> Result<()> {
        let v = self.opts.version;
        if self.names.contains(name) {
            return Err(ErrorKind::DuplicateKey.into());
        }
        if name.is_empty() {
            return Err(ErrorKind::BadName("must not be empty").into());
        }
        if shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .is_none()
        {
            return Err(ErrorKind::ShapeOverflow.into());
        }
        match v {
            ZtVersion::V0_1 if *layout != Layout::Dense => {
                return Err(opt_err(v, "only dense tensors"))
            }
            ZtVersion::V0_1 if !attributes.is_empty() => {
                return Err(opt_err(v, "tensor attributes"))
            }
            ZtVersion::V1_1 if *layout == Layout::Mx => return Err(opt_err(v, "the mx layout")),
            ZtVersion::V2 => {
                v2::read::check_name("object", name)?;
                if shape.len() > v2::read::MAX_RANK {
                    return Err(ErrorKind::ZtSchema("rank exceeds 64".into()).into());
                }
                for k in attributes.keys() {
                    v2::read::check_name("attribute", k)?;
                }
            }
            _ => {}
        }
        if parts.is_empty() {
            return Err(ErrorKind::ZtSchema("object has no parts".into()).into());
        }
        let mut roles = HashSet::new();
        for p in parts {
            if !roles.insert(p.role.as_str()) {
                return Err(ErrorKind::ZtSchema(format!("part '{}' appears twice", p.role)).into());
            }
            if v == ZtVersion::V2 {
                v2::read::check_name("part", &p.role)?;
            }
            let named = match v {
                ZtVersion::V0_1 => p.dtype.ztensor_v01_name().is_some(),
                ZtVersion::V1_1 => p.dtype.ztensor_v11_name().is_some(),
                ZtVersion::V2 => p.dtype.ztensor_v2_names().is_some(),
            };
            if !named {
                return Err(ErrorKind::UnsupportedDtype(format!(
                    "{} to zTensor v{} (not in its dtype table)",
                    p.dtype,
                    v.as_str()
                ))
                .into());
            }
            if let Some(ty) = &p.unknown_type {
                if v != ZtVersion::V2 || p.dtype.ztensor_v2_names().is_some_and(|n| n.1.is_some()) {
                    return Err(opt_err(v, format!("logical type '{ty}'")));
                }
            }
            check_compression(
                v,
                p.compression.unwrap_or(self.opts.compression),
                self.opts.canonical,
            )?;
        }
        // The readers' rules, on what the reader will see.
        let info = TensorInfo {
            name: name.to_string(),
            dtype: parts[0].dtype,
            shape: Shape::from_slice(shape),
            layout: layout.clone(),
            parts: parts
                .iter()
                .map(|p| Part {
                    role: Cow::Owned(p.role.clone()),
                    dtype: p.dtype,
                    range: 0..0,
                    encoding: crate::index::Encoding::Raw,
                    decoded_len: p.data.len(),
                    big_endian: false,
                    extra: PartExtra {
                        unknown_type: p.unknown_type.clone(),
                        ..Default::default()
                    }
                    .boxed(),
                })
                .collect(),
            attributes: attributes.clone().into(),
        };
        let expected_dense =
            (*layout == Layout::Dense && parts.len() == 1 && parts[0].role == "data")
                .then(|| {
                    let n: u64 = shape.iter().product();
                    parts[0].dtype.ztensor_v2_bytes(n)
                })
                .flatten();
        match layout::check(&info, v) {
            Err(e)
                if matches!(e.kind(), ErrorKind::SizeMismatch { .. })
                    && expected_dense.is_some() =>
            {
                Err(ErrorKind::WrongDataLength {
                    expected: expected_dense.unwrap_or(0),
                    actual: parts[0].data.len(),
                }
                .into())
            }
            other => other,
        }
    }

    fn check_options(&self) -> Result<()> {
        let o = &self.opts;
        let v = o.version;
        match (v, o.digest) {
            (ZtVersion::V0_1 | ZtVersion::V1_1, Some(DigestKind::Xxh3)) => {
                return Err(opt_err(v, "xxh3 digests (use crc32c or sha256)"))
            }
            (ZtVersion::V2, Some(DigestKind::Crc32c)) => {
                return Err(opt_err(v, "crc32c digests (use xxh3 or sha256)"))
            }
            (ZtVersion::V2, Some(DigestKind::Sha256)) if o.canonical => {
                return Err(opt_err(v, "sha256 digests in a canonical file (xxh3 only)"))
            }
            _ => {}
        }
        if v != ZtVersion::V2 && (o.canonical || o.align.is_some()) {
            return Err(opt_err(v, "canonical form and alignment are v2 options"));
        }
        if let Some(a) = o.align {
            if !a.is_power_of_two()
                || a < v2::read::ALIGN
                || (o.canonical && a != v2::read::CANONICAL_ALIGN)
            {
                return Err(opt_err(v, format!("alignment {a}")));
            }
        }
        check_compression(v, o.compression, o.canonical)
    }

    /// Writes the file to `out`, which must start empty (the v2 writer cuts back a blob it
    /// finds it already wrote); returns the number of bytes written. Parts stream in file
    /// order, compressed a few ahead by worker threads; lazy parts are read as they go.
    pub fn write_to(self, out: &mut dyn Rewind) -> Result<u64> {
        self.check_options()?;
        let magic: &[u8] = match self.opts.version {
            ZtVersion::V0_1 => &v01::read::MAGIC[..],
            ZtVersion::V1_1 => &v11::read::MAGIC[..],
            ZtVersion::V2 => &v2::read::MAGIC[..],
        };
        out.write_all(magic)?;
        let mut pos = magic.len() as u64;
        let version = self.opts.version;
        let streamed = self.stream_parts(out, &mut pos)?;
        match version {
            ZtVersion::V0_1 => v01::write::finish(&streamed.objects, out, pos),
            ZtVersion::V1_1 => {
                v11::write::finish(&streamed.objects, &streamed.attributes, out, pos)
            }
            ZtVersion::V2 => v2::write::finish(
                &streamed.objects,
                &streamed.attributes,
                streamed.align,
                out,
                pos,
            ),
        }
    }

    /// The names of the objects added so far.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.objects.iter().map(|o| o.name.as_str())
    }

    /// Streams every part into `out` from `*pos` on (what is before is not touched), in the
    /// version's file order; returns where each went, for the manifest.
    pub(crate) fn stream_parts(self, out: &mut dyn Rewind, pos: &mut u64) -> Result<Streamed> {
        self.check_options()?;
        let mut opts = self.opts;
        if opts.version == ZtVersion::V2 && opts.canonical {
            opts.digest = Some(DigestKind::Xxh3);
        }
        let mut objects = self.objects;
        if opts.canonical {
            objects.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        }
        let v2_align = opts.align.unwrap_or(if opts.canonical {
            v2::read::CANONICAL_ALIGN
        } else {
            v2::read::ALIGN
        });
        let place = match opts.version {
            ZtVersion::V0_1 => Placement {
                align: v01::read::ALIGN,
                v2_blobs: false,
            },
            ZtVersion::V1_1 => Placement {
                align: v11::read::ALIGN,
                v2_blobs: false,
            },
            ZtVersion::V2 => Placement {
                align: v2_align,
                v2_blobs: true,
            },
        };
        // Each object's parts in the version's file order.
        let orders: Vec<Vec<usize>> = objects
            .iter()
            .map(|o| {
                let roles: Vec<&str> = o.parts.iter().map(|p| p.role.as_str()).collect();
                match opts.version {
                    ZtVersion::V0_1 => vec![0],
                    ZtVersion::V1_1 => v11::write::part_order(&o.layout, &roles),
                    ZtVersion::V2 => v2::write::part_order(&roles),
                }
            })
            .collect();
        // v2 digests cover the decoded bytes, the older versions' the stored ones.
        let scope = match opts.version {
            ZtVersion::V2 => DigestScope::Decoded,
            _ => DigestScope::Stored,
        };
        let jobs: Vec<PartJob<'_, 'a>> = objects
            .iter()
            .zip(&orders)
            .flat_map(|(o, order)| {
                order.iter().map(|&i| {
                    let p = &o.parts[i];
                    PartJob {
                        name: &o.name,
                        bytes: &p.data,
                        encode: match p.compression.unwrap_or(opts.compression) {
                            Compression::None => Encode::Raw,
                            Compression::Zstd { level } if opts.version == ZtVersion::V2 => {
                                Encode::Seekable(level)
                            }
                            Compression::Zstd { level } => Encode::Frame(level),
                        },
                        digest: opts.digest.map(|k| (k, scope)),
                        bool_bytes: p.dtype == DType::BOOL && p.unknown_type.is_none(),
                    }
                })
            })
            .collect();
        let written = stream::write_parts(&jobs, &place, out, pos)?;
        drop(jobs);
        let mut written = written.into_iter();
        let placed: Vec<PlacedObject> = objects
            .into_iter()
            .zip(&orders)
            .map(|(o, order)| {
                let mut parts: Vec<Placed> = Vec::with_capacity(order.len());
                let mut src: Vec<Option<PartData<'a>>> = o.parts.into_iter().map(Some).collect();
                for &i in order {
                    let p = src[i].take().expect("each part once");
                    let w = written.next().expect("one placement per part");
                    parts.push(Placed {
                        compressed: !matches!(
                            p.compression.unwrap_or(opts.compression),
                            Compression::None
                        ),
                        decoded_len: p.data.len(),
                        role: p.role,
                        dtype: p.dtype,
                        unknown_type: p.unknown_type,
                        offset: w.offset,
                        stored_len: w.stored_len,
                        digest: w.digest,
                    });
                }
                PlacedObject {
                    name: o.name,
                    shape: o.shape,
                    layout: o.layout,
                    attributes: o.attributes,
                    parts,
                }
            })
            .collect();
        Ok(Streamed {
            objects: placed,
            attributes: self.attributes,
            align: v2_align,
        })
    }

    /// The whole file in memory, as [`Writer::write_to`] writes it.
    pub fn to_bytes(self) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.write_to(&mut v)?;
        Ok(v)
    }

    /// Writes atomically: a temporary file in the same folder, renamed over `path` only
    /// when complete. Returns the number of bytes written.
    ///
    /// # Errors
    ///
    /// - [`ErrorKind::ZtUnsupportedOption`] when the options do not fit the version (an xxh3
    ///   digest in v1.1, compression in a canonical file, a zstd level outside 1-22, ...).
    /// - [`ErrorKind::Io`] when the file cannot be created, written or renamed, or a part read
    ///   on demand cannot be read; nothing is left under `path` then.
    pub fn write_file(self, path: impl AsRef<Path>) -> Result<u64> {
        write_atomically(path.as_ref(), |f| self.write_to(f))
    }

    /// As [`Writer::write_file`], to a local path or an `s3://` URL with the store settings
    /// `storage`. An upload is spooled to a local temporary file and uploaded at commit: the
    /// v2 writer cuts a duplicate blob back once it has streamed through, which may be
    /// further back than an upload's part in memory.
    pub fn write_file_with(
        self,
        path: impl AsRef<Path>,
        storage: &crate::bytes::StorageOptions,
    ) -> Result<u64> {
        crate::sink::write_atomically_spooled(path.as_ref(), storage, |f| self.write_to(f))
    }
}
