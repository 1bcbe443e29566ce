//! `File`: an opened model (safetensors, zTensor of any version, GGUF, a sharded checkpoint or
//! an http(s) URL) as the Python `safe_open` sees it: names, dtype and shape per tensor,
//! metadata, and each tensor's bytes (a zero-copy view of the map when stored raw).

use crate::buffer::Bytes;
use crate::errors::{from_core, raise, IntoPy};
use crate::reader::{dup_fd, PyReader};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::IntoPyObjectExt;
use std::borrow::Cow;
use std::sync::Arc;
use tensorsmith::bytes::{
    read_plans, resident_fraction, Backend, Counted, DirectFile, LocalFile, PartRead, ReadAt,
    ReadCounter,
};
use tensorsmith::index::{Format, Layout, LayoutNames, MetaValue, TensorInfo};
use tensorsmith::model::open_reader;
use tensorsmith::ops::inspect::meta_json;
use tensorsmith::{open, Model, OpenOptions};

/// A metadata value as Python: the value of its JSON form (`meta_json`: strings, bools, ints,
/// floats, lists, dicts, None, bytes as `{"bytes_hex": ...}`), except that NaN and ±Inf are
/// floats, not the strings JSON spells them as.
fn meta_py<'py>(py: Python<'py>, v: &MetaValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        MetaValue::Str(s) => s.into_bound_py_any(py)?,
        MetaValue::Bool(b) => b.into_bound_py_any(py)?,
        MetaValue::Int(i) => i.into_bound_py_any(py)?,
        MetaValue::UInt(u) => u.into_bound_py_any(py)?,
        // Through the shortest decimal that round-trips as f32 (0.1, not 0.10000000149011612),
        // as `meta_json` writes it.
        MetaValue::F32(f) if f.is_finite() => format!("{f}")
            .parse::<f64>()
            .unwrap_or(f64::from(*f))
            .into_bound_py_any(py)?,
        MetaValue::F32(f) => f64::from(*f).into_bound_py_any(py)?,
        MetaValue::F64(f) => f.into_bound_py_any(py)?,
        MetaValue::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(meta_py(py, x)?)?;
            }
            l.into_any()
        }
        MetaValue::Null => py.None().into_bound(py),
        MetaValue::Bytes(_) => {
            let loads = py.import("json")?.getattr("loads")?;
            loads.call1((meta_json(v).to_string(),))?
        }
        MetaValue::Map(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, meta_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

#[pyclass(frozen, module = "tensorsmith._native")]
pub struct File {
    model: Arc<Model>,
    /// Opened by its path (not through a descriptor or a file object): its local files can
    /// be mapped again by name (PyTorch's `UntypedStorage.from_file`).
    by_path: bool,
    by_name: std::collections::HashMap<String, usize>,
    /// Whether a safetensors header declares an empty `__metadata__` (looked up once, on
    /// the first `metadata()` call that needs it).
    empty_metadata_object: std::sync::OnceLock<bool>,
    /// Bytes and reads of tensor data asked of the byte layer through `read_into` and
    /// `read_part_into` (`bytes_read`, for tests of per-rank loads).
    counter: ReadCounter,
    /// Each file opened again with `O_DIRECT` (`read_into_direct`), on first use; `None`
    /// where that cannot be done (a URL, a descriptor, a filesystem refusing it).
    direct: Vec<std::sync::OnceLock<Option<DirectFile>>>,
}

impl File {
    fn of(model: Model) -> File {
        let by_name = model.index.by_name();
        let direct = model.files.iter().map(|_| Default::default()).collect();
        File {
            direct,
            model: Arc::new(model),
            by_path: false,
            by_name,
            empty_metadata_object: std::sync::OnceLock::new(),
            counter: ReadCounter::default(),
        }
    }

    fn info(&self, py: Python<'_>, name: &str) -> PyResult<&TensorInfo> {
        match self.by_name.get(name) {
            Some(&i) => Ok(&self.model.index.tensors[i]),
            None => Err(raise(
                py,
                "TensorNotFound",
                format!(
                    "{}: File does not contain tensor {name}",
                    self.model.location
                ),
            )),
        }
    }
}

impl File {
    /// File `i` of the model, or the error naming the index.
    fn nth_file(&self, py: Python<'_>, i: usize) -> PyResult<&tensorsmith::model::ModelFile> {
        self.model
            .files
            .get(i)
            .ok_or_else(|| raise(py, "OptionError", format!("no file {i}")))
    }

    /// The per-rank plan of part `cut` of tensor `name`, with its file's index.
    fn plan(
        &self,
        py: Python<'_>,
        name: &str,
        cut: &[(u64, u64)],
        max_gap: Option<u64>,
    ) -> PyResult<(usize, tensorsmith::rank_plan::RankPlan)> {
        let t = self.info(py, name)?;
        let cut: Vec<std::ops::Range<u64>> = cut.iter().map(|&(a, b)| a..b).collect();
        let plan = self.model.part_plan_with(t, &cut, max_gap).py_err(py)?;
        let file = self.model.file_of(t);
        let i = self
            .model
            .files
            .iter()
            .position(|f| std::ptr::eq(f, file))
            .expect("a tensor's file is one of the model's");
        Ok((i, plan))
    }
}

/// A part for `read_parts_into`: tensor name, cut, destination address and length.
type PartAt = (String, Vec<(u64, u64)>, usize, usize);

/// The `storage_options` pairs (keys and values as text; Python turns the dict into them),
/// checked: an unknown key is an `OptionError` naming it.
pub fn storage_options(
    py: Python<'_>,
    pairs: Vec<(String, String)>,
) -> PyResult<tensorsmith::bytes::StorageOptions> {
    let mut o = tensorsmith::bytes::StorageOptions::new();
    for (k, v) in pairs {
        o.set(&k, &v)
            .map_err(|e| raise(py, "OptionError", format!("storage_options: {}", e.kind())))?;
    }
    Ok(o)
}

pub fn parse_backend(py: Python<'_>, backend: &str) -> PyResult<Backend> {
    match backend {
        "mmap" => Ok(Backend::Mmap),
        "pread" => Ok(Backend::Pread),
        other => Err(raise(
            py,
            "OptionError",
            format!("backend must be 'mmap' or 'pread', not {other:?}"),
        )),
    }
}

/// A ggml block tensor's stored bytes as rows: `[..., bytes per row]` (a 1-D tensor is one
/// row).
fn stored_rows(t: &TensorInfo) -> Vec<u64> {
    let outer = &t.shape[..t.shape.len().saturating_sub(1)];
    let rows: u64 = outer.iter().product();
    let row_bytes = t.byte_len().checked_div(rows).unwrap_or(0);
    let mut shape = outer.to_vec();
    shape.push(row_bytes);
    shape
}

/// Whether a safetensors header has the key `"__metadata__"` with an object for its value (a
/// string inside a tensor name would have its quotes escaped; as a value, the string is not
/// followed by ':'). `"__metadata__": null` is no metadata, as the reference reads it.
fn has_metadata_object(header: &[u8]) -> bool {
    let key = b"\"__metadata__\"";
    let after_ws = |mut i: usize| {
        while header.get(i).is_some_and(|b| b" \t\n\r".contains(b)) {
            i += 1;
        }
        i
    };
    header.windows(key.len()).enumerate().any(|(i, w)| {
        if w != key || (i > 0 && header[i - 1] == b'\\') {
            return false;
        }
        let colon = after_ws(i + key.len());
        header.get(colon) == Some(&b':') && header.get(after_ws(colon + 1)) == Some(&b'{')
    })
}

#[pymethods]
impl File {
    #[new]
    #[pyo3(signature = (path, backend = "mmap", storage = Vec::new()))]
    fn new(
        py: Python<'_>,
        path: &str,
        backend: &str,
        storage: Vec<(String, String)>,
    ) -> PyResult<Self> {
        let opts = OpenOptions::default()
            .with_backend(parse_backend(py, backend)?)
            .with_storage_options(storage_options(py, storage)?);
        let target = path.to_owned();
        let model = py.detach(|| open(&target, &opts)).py_err(py)?;
        Ok(File {
            by_path: true,
            ..File::of(model)
        })
    }

    /// A model read from an open descriptor (a Python file's `fileno()`): duplicated, then
    /// mapped or read with `pread` as a path would be. `name` names it in errors.
    #[staticmethod]
    #[pyo3(signature = (fd, name, backend = "mmap"))]
    fn from_fd(py: Python<'_>, fd: i32, name: &str, backend: &str) -> PyResult<Self> {
        let backend = parse_backend(py, backend)?;
        let opts = OpenOptions::default().with_backend(backend);
        let file = dup_fd(fd).map_err(|e| from_core(py, e.into()))?;
        let name = name.to_owned();
        let model = py
            .detach(|| {
                let bytes = LocalFile::from_file(file, backend)?;
                open_reader(&name, Box::new(bytes), &opts)
            })
            .py_err(py)?;
        Ok(File::of(model))
    }

    /// A model read through a Python file object's `seek`, `tell` and `read` (fsspec and S3
    /// files, `io.BytesIO`): only the header and the tensors asked for are read.
    #[staticmethod]
    fn from_reader(py: Python<'_>, obj: Bound<'_, PyAny>, name: &str) -> PyResult<Self> {
        let reader = PyReader::new(obj)?;
        let model = open_reader(name, Box::new(reader), &OpenOptions::default()).py_err(py)?;
        Ok(File::of(model))
    }

    /// `(format name, version or None)`: ("safetensors", None), ("ztensor", "1.1"), ("gguf", "3").
    fn format(&self) -> (&'static str, Option<String>) {
        let f = &self.model.index.format;
        (f.name(), f.version())
    }

    /// Tensor names in the order of their data in the file.
    fn names(&self) -> Vec<String> {
        self.model
            .index
            .tensors
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// `(dtype name, shape, layout)` of one tensor; dtype names are safetensors' ("F32"). A
    /// ggml block tensor is its stored blocks: U8 of shape `[..., bytes per row]` (its rows,
    /// `ne[0]` values each, are whole blocks), so that `get_dtype`, `get_shape`, `get_tensor`
    /// and slicing agree; its values' shape is `value_shape`.
    fn info_of(&self, py: Python<'_>, name: &str) -> PyResult<(&'static str, Vec<u64>, String)> {
        let t = self.info(py, name)?;
        let shape = match t.layout {
            Layout::Ggml(_) => stored_rows(t),
            _ => t.shape.to_vec(),
        };
        Ok((
            t.dtype.safetensors_name(),
            shape,
            t.layout.name(LayoutNames::Python).into_owned(),
        ))
    }

    /// The shape of a tensor's values (a ggml block tensor's once dequantized).
    fn value_shape(&self, py: Python<'_>, name: &str) -> PyResult<Vec<u64>> {
        Ok(self.info(py, name)?.shape.to_vec())
    }

    /// File metadata: safetensors' strings as `str`; typed values of other formats as the
    /// Python value of their JSON form. None when there is none.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let meta = &self.model.index.metadata;
        if meta.is_empty() {
            // safetensors tells an empty `__metadata__` ({}) from none (None); the neutral
            // index does not, so the header is looked at, once.
            let empty_object = match self.empty_metadata_object.get() {
                Some(&b) => b,
                None => {
                    let b = self.model.index.format == Format::Safetensors
                        && !self.model.is_sharded()
                        && has_metadata_object(&self.model.header_bytes(0).py_err(py)?);
                    *self.empty_metadata_object.get_or_init(|| b)
                }
            };
            return Ok(empty_object.then(|| PyDict::new(py)));
        }
        let d = PyDict::new(py);
        for (k, v) in meta {
            d.set_item(k, meta_py(py, v)?)?;
        }
        Ok(Some(d))
    }

    /// Checks `name` against the digests its file records (safetensors' `tensorsmith.digest`,
    /// zTensor checksums), when it records any: `get_tensor` calls it before making the
    /// tensor, so a flipped bit is an error naming the tensor rather than wrong values.
    fn check_digests(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let t = self.info(py, name)?;
        if !self.model.has_digest(t) {
            return Ok(());
        }
        let model = &self.model;
        py.detach(|| model.check_digests(t)).py_err(py)
    }

    /// A tensor's values as little-endian bytes: a view of the file's map when stored raw
    /// (no copy), else decoded (zstd) or made dense (sparse zTensor objects).
    fn tensor_bytes(&self, py: Python<'_>, name: &str) -> PyResult<Bytes> {
        let t = self.info(py, name)?;
        let model = &self.model;
        // Decoding (zstd, densify) runs without the GIL; a raw part comes back borrowed.
        let bytes = py
            .detach(|| match t.layout {
                Layout::SparseCsr | Layout::SparseCoo => {
                    tensorsmith::ops::convert::densify::densify(model, t)
                        .map(|(_, v)| Cow::Owned(v))
                }
                _ => model.tensor_bytes(t),
            })
            .py_err(py)?;
        Ok(match bytes {
            Cow::Borrowed(b) => {
                Bytes::mapped(Arc::clone(model) as Arc<dyn std::any::Any + Send + Sync>, b)
            }
            Cow::Owned(v) => Bytes::owned(v),
        })
    }

    /// Dequantizes a ggml block-quantized tensor into `out`, a writable C-contiguous float32
    /// buffer of the tensor's element count that NumPy allocated (NumPy asks the kernel for
    /// huge pages; a buffer of our own would take a page fault per 4 KiB). Values are
    /// bit-identical to `gguf.quants.dequantize`; other tensors are refused.
    fn dequantize_into(&self, py: Python<'_>, name: &str, out: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = self.info(py, name)?;
        let buf = pyo3::buffer::PyBuffer::<f32>::get(out)?;
        if buf.readonly() || !buf.is_c_contiguous() || buf.item_count() as u64 != t.elements() {
            return Err(raise(
                py,
                "OptionError",
                format!(
                    "tensor '{name}': the output must be a writable C-contiguous float32 array of {} values",
                    t.elements()
                ),
            ));
        }
        // SAFETY: the buffer is writable, C-contiguous and holds `item_count` f32 values
        // (PyBuffer::<f32>::get checked the format and item size); `buf` keeps it alive and
        // exported until it is dropped after this call, and nothing else touches it meanwhile
        // (the caller made it and waits for us).
        let ptr = buf.buf_ptr() as usize;
        let len = buf.item_count();
        let model = &self.model;
        py.detach(|| {
            let values = unsafe { std::slice::from_raw_parts_mut(ptr as *mut f32, len) };
            tensorsmith::ops::convert::dequantize::values_into(model, t, values)
        })
        .py_err(py)?;
        drop(buf);
        Ok(())
    }

    /// `(file index, start, end)`: where a tensor's values lie as one raw little-endian run
    /// of stored bytes (absolute offsets in its file); None when they must be decoded (zstd,
    /// big-endian, sparse, several parts).
    fn raw_range(&self, py: Python<'_>, name: &str) -> PyResult<Option<(usize, u64, u64)>> {
        let t = self.info(py, name)?;
        let m = &self.model;
        if !m.is_plain(t) {
            return Ok(None);
        }
        let file = m.file_of(t);
        let i = m
            .files
            .iter()
            .position(|f| std::ptr::eq(f, file))
            .expect("a tensor's file is one of the model's");
        let r = t.data_range();
        Ok(Some((i, r.start, r.end)))
    }

    /// `(path, length)` of file `i` when it is a local file opened by its path (so it can be
    /// mapped again by name); None for URLs, descriptors and file objects.
    fn local_file(&self, i: usize) -> Option<(String, u64)> {
        let f = self.model.files.get(i)?;
        (self.by_path && !tensorsmith::bytes::is_url(&f.location))
            .then(|| (f.location.clone(), f.file_len))
    }

    /// The number of files (shards, parts) behind the model.
    fn file_count(&self) -> usize {
        self.model.files.len()
    }

    /// How many reads of file `i` should be in flight at once to keep it busy: a URL's
    /// `max_concurrency`; None for local files (the caller picks by its cores).
    fn parallel_reads(&self, i: usize) -> Option<usize> {
        self.model.files.get(i)?.bytes().parallel_reads()
    }

    /// The fraction (0 to 1) of local file `i`'s pages in the page cache (`mincore`), None
    /// for URLs and file objects: a cold file is read with `read_into_direct`.
    fn resident(&self, py: Python<'_>, i: usize) -> PyResult<Option<f64>> {
        let f = self.nth_file(py, i)?;
        match f.bytes().local_file() {
            Some(file) => resident_fraction(file)
                .map(Some)
                .map_err(|e| e.in_file(std::path::Path::new(&f.location)))
                .py_err(py),
            None => Ok(None),
        }
    }

    /// Reads `len` bytes at `offset` of local file `i` bypassing the page cache (`O_DIRECT`)
    /// into memory at `addr` (a multiple of 4096, `cap` bytes: at least the aligned span,
    /// up to 8 KiB more than `len`), without the GIL, and returns where the bytes start
    /// there; None (nothing read) where the file cannot be read so (a URL, a descriptor or
    /// file object, a filesystem refusing `O_DIRECT`). For the PyTorch paths only: `addr`
    /// is a buffer the caller owns and keeps alive until this returns.
    fn read_into_direct(
        &self,
        py: Python<'_>,
        i: usize,
        offset: u64,
        len: usize,
        addr: usize,
        cap: usize,
    ) -> PyResult<Option<usize>> {
        let f = self.nth_file(py, i)?;
        if addr == 0 {
            return Err(raise(
                py,
                "OptionError",
                "read_into_direct: null address".into(),
            ));
        }
        let direct = self.direct[i].get_or_init(|| {
            let (path, _) = self.local_file(i)?;
            DirectFile::open(std::path::Path::new(&path)).ok().flatten()
        });
        let Some(direct) = direct else {
            return Ok(None);
        };
        let got = py.detach(|| {
            // SAFETY: a live buffer of `cap` bytes that the caller (tensorsmith's Python
            // code) owns and nothing else touches during this call.
            let buf = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, cap) };
            direct
                .read(offset, len, buf)
                .map_err(|e| e.in_file(std::path::Path::new(&f.location)))
        });
        let at = got.py_err(py)?;
        self.counter.add(len as u64);
        Ok(Some(at))
    }

    /// Reads `len` bytes at `offset` of file `i` into memory at address `addr`, without the
    /// GIL (positioned reads for local files, ranges for URLs). For the PyTorch paths only:
    /// `addr` is the data pointer of a CPU buffer of at least `len` bytes (a tensor's storage,
    /// a pinned staging buffer) that the caller owns and keeps alive until this returns.
    fn read_into(
        &self,
        py: Python<'_>,
        i: usize,
        offset: u64,
        len: usize,
        addr: usize,
    ) -> PyResult<()> {
        let f = self.nth_file(py, i)?;
        if addr == 0 && len > 0 {
            return Err(raise(py, "OptionError", "read_into: null address".into()));
        }
        py.detach(|| {
            // SAFETY: the caller (tensorsmith's PyTorch code, never user code) passes the
            // data pointer of a live CPU buffer of at least `len` bytes that nothing else
            // touches until this call returns.
            let buf = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) };
            Counted::new(f.bytes(), &self.counter)
                .read_exact_at(offset, buf)
                .map_err(|e| e.in_file(std::path::Path::new(&f.location)))
        })
        .py_err(py)
    }

    /// The per-rank read plan of the part `cut` of a tensor (`(start, stop)` along each
    /// leading dimension; empty: the whole tensor), as `(file index, part shape, bytes kept,
    /// bytes per run, runs, reads as (start, end) file offsets, the rule's bound on bytes
    /// read, (max_gap, max_read))`. Refused: tensors not stored as one raw run, cuts that do
    /// not fall on whole bytes (packed dtypes, ggml blocks), cuts out of the shape.
    #[allow(clippy::type_complexity)]
    #[pyo3(signature = (name, cut, max_gap = None))]
    fn part_plan(
        &self,
        py: Python<'_>,
        name: &str,
        cut: Vec<(u64, u64)>,
        max_gap: Option<u64>,
    ) -> PyResult<(
        usize,
        Vec<u64>,
        u64,
        u64,
        usize,
        Vec<(u64, u64)>,
        u64,
        (u64, u64),
    )> {
        let (i, plan) = self.plan(py, name, &cut, max_gap)?;
        Ok((
            i,
            plan.shape.clone(),
            plan.len,
            plan.run_len,
            plan.runs.len(),
            plan.reads
                .iter()
                .map(|r| (r.range.start, r.range.end))
                .collect(),
            plan.bound(),
            (plan.rule.max_gap, plan.rule.max_read),
        ))
    }

    /// `(file index, start, end)` when the part `cut` of a tensor is one contiguous span of
    /// its file (the whole tensor, a first-dimension cut), else None.
    fn part_span(
        &self,
        py: Python<'_>,
        name: &str,
        cut: Vec<(u64, u64)>,
    ) -> PyResult<Option<(usize, u64, u64)>> {
        let (i, plan) = self.plan(py, name, &cut, None)?;
        Ok(plan.span().map(|r| (i, r.start, r.end)))
    }

    /// Reads the part `cut` of a tensor into memory at `addr` (`len` bytes, the part's size)
    /// in the part's contiguous layout, by its per-rank plan: only the planned spans are
    /// read, several at once, without the GIL (`read_parts_into` of one part). For
    /// tensorsmith's own Python code only: `addr` is the data pointer of a CPU buffer of
    /// `len` bytes (a new tensor or array) that the caller owns and keeps alive until this
    /// returns. `max_gap`: merge runs across gaps of at most this many bytes (default: the
    /// file's rule).
    #[pyo3(signature = (name, cut, addr, len, max_gap = None))]
    fn read_part_into(
        &self,
        py: Python<'_>,
        name: &str,
        cut: Vec<(u64, u64)>,
        addr: usize,
        len: usize,
        max_gap: Option<u64>,
    ) -> PyResult<()> {
        self.read_parts_into(py, vec![(name.to_owned(), cut, addr, len)], max_gap)
    }

    /// Reads parts `(name, cut, addr, len)` as `read_part_into` does, the reads of all of
    /// them in one queue: as many at once as the files' `max_concurrency` for URLs (so a
    /// rank's many small parts keep the store as busy as one large part would), up to 4
    /// threads for local files. The same contract on each `addr` as `read_part_into`'s, and
    /// the parts' buffers do not overlap.
    #[pyo3(signature = (parts, max_gap = None))]
    fn read_parts_into(
        &self,
        py: Python<'_>,
        parts: Vec<PartAt>,
        max_gap: Option<u64>,
    ) -> PyResult<()> {
        let mut plans = Vec::with_capacity(parts.len());
        for (name, cut, addr, len) in &parts {
            let (i, plan) = self.plan(py, name, cut, max_gap)?;
            if plan.len != *len as u64 {
                return Err(raise(
                    py,
                    "OptionError",
                    format!("read_part_into: {len} bytes for a part of {}", plan.len),
                ));
            }
            if *addr == 0 && *len > 0 {
                return Err(raise(
                    py,
                    "OptionError",
                    "read_part_into: null address".into(),
                ));
            }
            if *len > 0 {
                plans.push((i, plan, *addr, *len));
            }
        }
        let local = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let concurrency = plans
            .iter()
            .map(|(i, ..)| {
                self.model.files[*i]
                    .bytes()
                    .parallel_reads()
                    .unwrap_or(local)
            })
            .max()
            .unwrap_or(1);
        let files = &self.model.files;
        let counted: Vec<_> = files
            .iter()
            .map(|f| Counted::new(f.bytes(), &self.counter))
            .collect();
        let named: Vec<_> = files
            .iter()
            .map(|f| move |e: tensorsmith::Error| e.in_file(std::path::Path::new(&f.location)))
            .collect();
        py.detach(|| {
            let reads = plans
                .iter()
                .map(|(i, plan, addr, len)| PartRead {
                    src: &counted[*i],
                    plan,
                    // SAFETY: as for `read_into`: a live CPU buffer of `len` bytes that the
                    // caller (tensorsmith's Python code) owns, that no other part's buffer
                    // overlaps, and that nothing else touches during this call.
                    out: unsafe { std::slice::from_raw_parts_mut(*addr as *mut u8, *len) },
                    at: &named[*i],
                })
                .collect();
            read_plans(reads, concurrency)
        })
        .py_err(py)
    }

    /// `(bytes, reads)` of tensor data read through `read_into` and `read_part_into` since
    /// the file was opened or `reset_bytes_read` was called (the header read at open is not
    /// counted; mapped views handed out without a read are not reads).
    fn bytes_read(&self) -> (u64, u64) {
        (self.counter.bytes(), self.counter.reads())
    }

    fn reset_bytes_read(&self) {
        self.counter.reset();
    }

    /// Where the file or shards live (as given).
    #[getter]
    fn location(&self) -> &str {
        &self.model.location
    }
}
