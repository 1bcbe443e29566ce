//! `inspect`, `hash`, `diff`, `convert` and `report`: the CLI's operations, returning plain Python
//! values (JSON text that the Python side turns into dicts, or strings).

use crate::errors::{raise, IntoPy};
use crate::file::parse_backend;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use tensorsmith::cast::Rounding;
use tensorsmith::dtype::DType;
use tensorsmith::index::ZtVersion;
use tensorsmith::ops::convert::{self as convert_op, writes_ztensor, ConvertOptions};
use tensorsmith::ztensor::{Compression, DigestKind};
use tensorsmith::{open, Model, OpenOptions};

/// A model, with `storage_options` pairs for s3:// and hf:// URLs.
fn open_stored(
    py: Python<'_>,
    target: &str,
    backend: &str,
    storage: Vec<(String, String)>,
) -> PyResult<Model> {
    open_part(py, target, backend, false, storage)
}

/// As `open_stored`; with `part_only`, a split GGUF part is read alone.
fn open_part(
    py: Python<'_>,
    target: &str,
    backend: &str,
    part_only: bool,
    storage: Vec<(String, String)>,
) -> PyResult<Model> {
    let opts = OpenOptions::default()
        .with_backend(parse_backend(py, backend)?)
        .with_part_only(part_only)
        .with_storage_options(crate::file::storage_options(py, storage)?);
    py.detach(|| open(target, &opts)).py_err(py)
}

/// `inspect --json` of a file, folder of shards, shard index or URL (`tensorsmith.inspect/1`).
#[pyfunction]
#[pyo3(signature = (target, backend = "mmap", storage = Vec::new()))]
pub fn inspect_json(
    py: Python<'_>,
    target: &str,
    backend: &str,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    let m = open_stored(py, target, backend, storage)?;
    Ok(tensorsmith::ops::inspect::inspect_json_text(
        Path::new(target),
        &m,
    ))
}

/// `(structural_id, content_digest or None)`, or with `compat="weight-inspect"` the pair
/// `(hash, short id)` of weight-inspect's algorithm.
#[pyfunction]
#[pyo3(signature = (target, content = false, compat = None, backend = "mmap", storage = Vec::new()))]
pub fn hash(
    py: Python<'_>,
    target: &str,
    content: bool,
    compat: Option<&str>,
    backend: &str,
    storage: Vec<(String, String)>,
) -> PyResult<(String, Option<String>)> {
    // weight-inspect hashes the one file it is given, a split GGUF part included.
    let m = open_part(py, target, backend, compat.is_some(), storage)?;
    match compat {
        Some("weight-inspect") => {
            let wi = tensorsmith::ops::hash::wi_hash::weight_inspect(&m.index).py_err(py)?;
            Ok((wi.hash, Some(wi.short_id)))
        }
        Some(other) => Err(raise(
            py,
            "OptionError",
            format!("compat must be 'weight-inspect' or None, not {other:?}"),
        )),
        None => {
            let id = tensorsmith::ops::hash::structural_id(&m.index);
            let c = if content {
                Some(
                    py.detach(|| tensorsmith::ops::hash::content_id(&m))
                        .py_err(py)?,
                )
            } else {
                None
            };
            Ok((id, c))
        }
    }
}

/// The diff of two models as `tensorsmith.diff/1` JSON text. `rename` holds `FROM=TO` rules
/// for A's names, `name_map` is "auto", "llama" or "none"; with `values`, `html` also writes
/// the diff page there (every pair listed). `storage` serves both A and B.
#[pyfunction]
#[pyo3(signature = (a, b, values = false, all = false, rename = Vec::new(), name_map = "auto", html = None, storage = Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn diff_json(
    py: Python<'_>,
    a: &str,
    b: &str,
    values: bool,
    all: bool,
    rename: Vec<String>,
    name_map: &str,
    html: Option<std::path::PathBuf>,
    storage: Vec<(String, String)>,
) -> PyResult<String> {
    use tensorsmith::ops::diff::pairing::{pair_tensors, NameMap, PairOptions, RenameRule};
    let value_error = |m: String| pyo3::exceptions::PyValueError::new_err(m);
    let name_map = match name_map {
        "auto" => NameMap::Auto,
        "llama" => NameMap::Llama,
        "none" => NameMap::None,
        other => {
            return Err(value_error(format!(
                "name_map must be 'auto', 'llama' or 'none', not {other:?}"
            )))
        }
    };
    if html.is_some() && !values {
        return Err(value_error("html= needs values=True".to_owned()));
    }
    let rules = rename
        .iter()
        .map(|r| RenameRule::parse(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(value_error)?;
    let (ma, mb) = (
        open_stored(py, a, "mmap", storage.clone())?,
        open_stored(py, b, "mmap", storage)?,
    );
    let opts = PairOptions { rules, name_map };
    let pairing = pair_tensors(&ma.index, &mb.index, &opts).map_err(value_error)?;
    let mut d = tensorsmith::ops::diff::diff_paired(&ma.index, &mb.index, &pairing);
    if values {
        let all = all || html.is_some();
        py.detach(|| tensorsmith::ops::diff::compare_paired(&mut d, &ma, &mb, &pairing, all))
            .py_err(py)?;
    }
    let json = tensorsmith::ops::diff::json::to_json(a, b, &d);
    if let Some(page) = html {
        let title = format!("diff {a} → {b}");
        py.detach(|| tensorsmith::ops::diff::page::write_diff_page(&page, &title, &json))
            .py_err(py)?;
    }
    Ok(json.to_string())
}

/// `report`: the HTML page of a model written to `output`; `stats_json`, a JSON object from
/// tensor name to that tensor's statistics (`tensorsmith.stats/1`), adds stats columns.
/// Returns the page's length in bytes.
#[pyfunction]
#[pyo3(signature = (target, output, title = None, stats_json = None, backend = "mmap", storage = Vec::new()))]
pub fn report(
    py: Python<'_>,
    target: &str,
    output: PathBuf,
    title: Option<String>,
    stats_json: Option<&str>,
    backend: &str,
    storage: Vec<(String, String)>,
) -> PyResult<u64> {
    use tensorsmith::ops::report::{write_report, ReportOptions};
    let m = open_stored(py, target, backend, storage)?;
    let mut opts = ReportOptions::new();
    if let Some(t) = title {
        opts = opts.with_title(t);
    }
    if let Some(s) = stats_json {
        let stats = serde_json::from_str(s).map_err(|e| {
            raise(
                py,
                "OptionError",
                format!("stats must map tensor names to objects: {e}"),
            )
        })?;
        opts = opts.with_stats("tensorsmith.stats/1", stats);
    }
    py.detach(|| write_report(&m, &output, &opts)).py_err(py)
}

fn dtype_arg(py: Python<'_>, s: Option<&str>) -> PyResult<Option<DType>> {
    s.map(|s| {
        DType::from_safetensors_name(&s.to_ascii_uppercase(), false)
            .ok_or_else(|| raise(py, "OptionError", format!("unknown dtype {s:?}")))
    })
    .transpose()
}

/// Converts `src` (any readable model) to `dst`: safetensors (one file, or shards of at most
/// `shard_size` bytes plus their index), or zTensor when `zt_version` is given or `dst` ends in
/// `.zt`, or GGUF v3 when `dst` ends in `.gguf` (`quantize`: one block type, or a
/// llama-quantize mix such as `"Q4_K_M"`, or with `mix` any llama-quantize name; `imatrix`,
/// llama-imatrix's file for the mix; `gguf_set`),
/// or ONNX when `dst`
/// ends in `.onnx` (`onnx_template`, `external_data`, `allow_extra`). Returns the files
/// written.
#[pyfunction]
#[pyo3(signature = (src, dst, dtype = None, rounding = "nearest", zt_version = None,
    compress = None, digest = None, densify = false, drop_metadata = false, shard_size = None,
    append = false, quantize = None, gguf_set = Vec::new(), split_max_tensors = None,
    split_small_first = false, onnx_template = None, external_data = false,
    allow_extra = false, storage = Vec::new(), mix = false, imatrix = None,
    pre_tokenizer = None, keep_names = false, outtype = None))]
#[allow(clippy::too_many_arguments)]
pub fn convert(
    py: Python<'_>,
    src: &str,
    dst: PathBuf,
    dtype: Option<&str>,
    rounding: &str,
    zt_version: Option<&str>,
    compress: Option<i32>,
    digest: Option<&str>,
    densify: bool,
    drop_metadata: bool,
    shard_size: Option<u64>,
    append: bool,
    quantize: Option<&str>,
    gguf_set: Vec<String>,
    split_max_tensors: Option<u64>,
    split_small_first: bool,
    onnx_template: Option<PathBuf>,
    external_data: bool,
    allow_extra: bool,
    storage: Vec<(String, String)>,
    mix: bool,
    imatrix: Option<PathBuf>,
    pre_tokenizer: Option<String>,
    keep_names: bool,
    outtype: Option<&str>,
) -> PyResult<Vec<PathBuf>> {
    let opt = |msg: String| raise(py, "OptionError", msg);
    let rounding = match rounding {
        "nearest" => Rounding::Nearest,
        "truncate" => Rounding::Truncate,
        r => {
            return Err(opt(format!(
                "rounding must be 'nearest' or 'truncate', not {r:?}"
            )))
        }
    };
    let dtype = dtype_arg(py, dtype)?;
    // One call, one set of store settings: for a URL input and an s3:// output alike.
    let out_storage = crate::file::storage_options(py, storage.clone())?;
    let m = open_stored(py, src, "mmap", storage)?;
    let version = match zt_version {
        None => None,
        Some("0.1") => Some(ZtVersion::V0_1),
        Some("1.1") => Some(ZtVersion::V1_1),
        Some("2") => Some(ZtVersion::V2),
        Some(v) => {
            return Err(opt(format!(
                "zt_version must be '0.1', '1.1' or '2', not {v:?}"
            )))
        }
    };
    let compression = match compress {
        None => None,
        Some(level @ 1..=22) => Some(Compression::Zstd { level }),
        Some(l) => return Err(opt(format!("compress is a zstd level 1-22, not {l}"))),
    };
    let digest = match digest {
        None => None,
        Some("crc32c") => Some(DigestKind::Crc32c),
        Some("sha256") => Some(DigestKind::Sha256),
        Some("xxh3") => Some(DigestKind::Xxh3),
        Some(d) => {
            return Err(opt(format!(
                "digest must be crc32c, sha256 or xxh3, not {d:?}"
            )))
        }
    };
    let (quantize, mix) = match quantize {
        None => (None, None),
        Some(q) => tensorsmith::ggml_quant::mix::parse_quantize(q, mix)
            .map_err(|e| opt(format!("quantize={e}")))?,
    };
    let mut o = ConvertOptions::new()
        .with_quantize(quantize)
        .with_quantize_mix(mix)
        .with_imatrix(imatrix)
        .with_outtype(match outtype {
            None => None,
            Some(t) => Some(tensorsmith::hf_gguf::OutType::parse(t).ok_or_else(|| {
                opt(format!(
                    "outtype must be one of {}, not {t:?}",
                    tensorsmith::hf_gguf::OutType::NAMES
                ))
            })?),
        })
        .with_pre_tokenizer(pre_tokenizer)
        .with_keep_names(keep_names)
        .with_dtype(dtype)
        .with_rounding(rounding)
        .with_shard_size(shard_size)
        .with_split_max_tensors(split_max_tensors.filter(|&n| n > 0))
        .with_split_small_first(split_small_first)
        .with_densify(densify)
        .with_drop_metadata(drop_metadata)
        .with_zt_version(version)
        .with_compression(compression)
        .with_digest(digest)
        .with_append(append)
        .with_onnx_template(onnx_template)
        .with_external_data(external_data)
        .with_allow_extra(allow_extra)
        .with_storage_options(out_storage);
    for a in &gguf_set {
        let (k, v) = tensorsmith::gguf::parse_assignment(a).map_err(opt)?;
        o = o.with_gguf_key(k, v);
    }
    // The library refuses these too; as OptionError here, before the input is read.
    if writes_ztensor(&dst, &o) {
        if shard_size.is_some() {
            return Err(opt("shard_size applies to safetensors output".into()));
        }
    } else if compress.is_some() {
        return Err(opt("compress applies to zTensor output".into()));
    } else if append {
        return Err(opt("append applies to zTensor v2 output".into()));
    }
    py.detach(|| convert_op::convert(&m, &dst, &o)).py_err(py)
}

/// `"5GB"` (decimal), `"2GiB"` (binary) or `"123"` (bytes) as a byte count.
#[pyfunction]
pub fn parse_size(py: Python<'_>, s: &str) -> PyResult<u64> {
    tensorsmith::ops::convert::parse_size(s).map_err(|m| raise(py, "OptionError", m))
}
