//! Importance-matrix files of llama.cpp's `llama-imatrix`, read as the pinned `llama-quantize`
//! (llama.cpp vendored by llama-cpp-python 0.3.36: `common/imatrix-loader.cpp` and
//! `tools/quantize/quantize.cpp`) reads them, into the per-column weights it hands
//! `llama_model_quantize`: one row of `ne[0]` weights per tensor, one per expert for 3D ones.
//!
//! Written by hand from reading those sources (no code taken), because the rules are few and
//! the weights must be the very floats llama-quantize divides out:
//!
//! - GGUF (any file that starts with the GGUF magic): per tensor `NAME.in_sum2` (sums of
//!   squared activations) and `NAME.counts` (tokens seen, per expert), both F32; the keys
//!   `imatrix.datasets`, `imatrix.chunk_count` and `imatrix.chunk_size` must all be present
//!   (the two counts U32). The weights are `sum / count` per expert slice of
//!   `nval / ncounts` values (counts rounded to the nearest integer; a count of 0 or less gives
//!   weights of 1).
//! - Legacy `.dat` (anything else), little-endian: i32 entry count (1 or more); per entry an
//!   i32 name length, the name (up to its first NUL), i32 `ncall`, i32 `nval` (1 or more) and
//!   `nval` f32 (already means times `ncall`); optionally an i32 chunk count, an i32 length
//!   and a dataset name. The weights are the values divided by `ncall` where it is positive.
//!
//! Then every weight must be finite (llama_model_quantize's check).

use crate::error::{Error, ErrorKind, Result};
use crate::gguf::{self, Array, GgufValue};
use crate::OpenOptions;
use std::collections::HashMap;
use std::path::Path;

/// An importance matrix as llama-quantize hands it to `llama_model_quantize`.
#[derive(Debug, Clone, Default)]
pub struct Imatrix {
    /// Weights by tensor name (`ne[0]` per expert, experts one after another).
    pub entries: HashMap<String, Vec<f32>>,
    /// The datasets it was computed on (llama-quantize records the first).
    pub datasets: Vec<String>,
    /// Chunks it was computed on (recorded where positive).
    pub chunk_count: i64,
    /// Whether it came from a legacy `.dat` file.
    pub legacy: bool,
}

/// Reads the importance-matrix file at `path` (GGUF or legacy `.dat`); a file that breaks a
/// rule is an error naming the file and the rule.
pub fn read_imatrix(path: &Path) -> Result<Imatrix> {
    let bytes = std::fs::read(path).map_err(|e| Error::from(e).in_file(path))?;
    parse(&bytes).map_err(|e| e.in_file(path))
}

fn bad(why: impl Into<String>) -> Error {
    Error::new(ErrorKind::BadImatrix(why.into()))
}

/// The importance matrix in `bytes` (GGUF when it starts with the magic, else legacy).
pub fn parse(bytes: &[u8]) -> Result<Imatrix> {
    let m = if bytes.starts_with(b"GGUF") {
        parse_gguf(bytes)?
    } else {
        parse_legacy(bytes)?
    };
    if m.entries.is_empty() {
        return Err(bad(
            "no entries (no NAME.in_sum2 / NAME.counts tensor pairs)",
        ));
    }
    let mut names: Vec<&String> = m.entries.keys().collect();
    names.sort();
    for name in names {
        if let Some(v) = m.entries[name].iter().find(|v| !v.is_finite()) {
            return Err(bad(format!(
                "'{name}' has a non-finite weight ({v}); llama-quantize refuses it"
            )));
        }
    }
    Ok(m)
}

fn parse_gguf(bytes: &[u8]) -> Result<Imatrix> {
    let h = gguf::read_header(&bytes, &OpenOptions::default())?;
    if h.tensors.is_empty() {
        return Err(bad("a GGUF importance matrix without tensors"));
    }
    let (datasets, count, size) = (
        h.get("imatrix.datasets"),
        h.get("imatrix.chunk_count"),
        h.get("imatrix.chunk_size"),
    );
    if datasets.is_none() || count.is_none() || size.is_none() {
        return Err(bad(
            "a GGUF importance matrix needs the keys imatrix.datasets, imatrix.chunk_count and \
             imatrix.chunk_size (llama-quantize's 'missing imatrix metadata')",
        ));
    }
    let u32_of = |key: &str, v: Option<&GgufValue>| match v {
        Some(GgufValue::U32(n)) => Ok(i64::from(*n)),
        _ => Err(bad(format!("{key} must be a U32"))),
    };
    let chunk_count = u32_of("imatrix.chunk_count", count)?;
    u32_of("imatrix.chunk_size", size)?;
    let datasets = match datasets {
        Some(GgufValue::Array(Array::String(s))) => s.clone(),
        _ => Vec::new(),
    };
    // (sums, counts) per name, in name order as llama-quantize's loader visits them.
    let mut pairs: std::collections::BTreeMap<&str, [Option<&gguf::GgufTensor>; 2]> =
        Default::default();
    for t in &h.tensors {
        if let Some(n) = t.name.strip_suffix(".in_sum2") {
            pairs.entry(n).or_default()[0] = Some(t);
        } else if let Some(n) = t.name.strip_suffix(".counts") {
            pairs.entry(n).or_default()[1] = Some(t);
        }
    }
    let floats = |t: &gguf::GgufTensor| -> Vec<f32> {
        let b = &bytes[t.range.start as usize..t.range.end as usize];
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    };
    let mut entries = HashMap::new();
    for (name, [sums, counts]) in pairs {
        let (Some(sums), Some(counts)) = (sums, counts) else {
            return Err(bad(format!(
                "'{name}' needs both {name}.in_sum2 and {name}.counts"
            )));
        };
        let f32 = Some(crate::dtype::DType::F32);
        if sums.ggml_type.dtype() != f32 || counts.ggml_type.dtype() != f32 {
            return Err(bad(format!("{name}.in_sum2 and {name}.counts must be F32")));
        }
        let (sums, counts) = (floats(sums), floats(counts));
        if counts.is_empty() {
            return Err(bad(format!("{name}.counts has no values")));
        }
        if let Some(c) = counts.iter().find(|c| !c.is_finite()) {
            return Err(bad(format!("{name}.counts holds {c}, not a count")));
        }
        // C's lround: halves away from zero, as Rust's round.
        let counts: Vec<i64> = counts.iter().map(|c| c.round() as i64).collect();
        let ne0 = sums.len() / counts.len();
        let mut w = vec![0f32; sums.len()];
        for (j, &c) in counts.iter().enumerate() {
            let c = c as f32;
            for i in j * ne0..(j + 1) * ne0 {
                w[i] = if c > 0.0 { sums[i] / c } else { 1.0 };
            }
        }
        entries.insert(name.to_string(), w);
    }
    Ok(Imatrix {
        entries,
        datasets,
        chunk_count,
        legacy: false,
    })
}

/// A little-endian reader over the legacy layout, as a C++ istream reads it.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|s| i32::from_le_bytes(s.try_into().expect("4 bytes")))
    }
}

/// The text before the first NUL (as a C string).
fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn parse_legacy(bytes: &[u8]) -> Result<Imatrix> {
    let mut r = Cursor { b: bytes, at: 0 };
    let n =
        match r.i32() {
            Some(n) if n >= 1 => n,
            _ => return Err(bad(
                "neither GGUF nor a legacy .dat importance matrix: a .dat starts with an entry \
                 count of 1 or more",
            )),
        };
    let mut entries = HashMap::new();
    for i in 1..=n {
        let name = r
            .i32()
            .and_then(|len| r.take(usize::try_from(len).ok()?))
            .map(c_str)
            .ok_or_else(|| bad(format!("legacy .dat: entry {i}'s name is cut short")))?;
        let ncall = r.i32();
        let nval = match (ncall, r.i32()) {
            (Some(_), Some(v)) if v >= 1 => v as usize,
            _ => {
                return Err(bad(format!(
                    "legacy .dat: entry {i} ('{name}') needs a value count of 1 or more"
                )))
            }
        };
        let ncall = i64::from(ncall.expect("read"));
        let vals = r.take(nval.saturating_mul(4)).ok_or_else(|| {
            bad(format!(
                "legacy .dat: entry {i} ('{name}') has fewer than its {nval} values"
            ))
        })?;
        let w = vals
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .map(|v| if ncall > 0 { v / ncall as f32 } else { v })
            .collect();
        // A repeated name: the later entry replaces the earlier, as in llama-quantize.
        entries.insert(name, w);
    }
    // The optional tail: a chunk count (bytes short of four fill its low bytes, as an
    // istream's short read does), then a dataset name.
    let mut chunk_count = 0i64;
    let mut datasets = Vec::new();
    let rest = &bytes[r.at..];
    if !rest.is_empty() {
        let mut c = [0u8; 4];
        let k = rest.len().min(4);
        c[..k].copy_from_slice(&rest[..k]);
        chunk_count = i64::from(i32::from_le_bytes(c));
        r.at += k;
        if let Some(len) = r.i32().filter(|&l| l > 0) {
            if let Some(s) = r.take(len as usize) {
                datasets.push(c_str(s));
            }
        }
    }
    Ok(Imatrix {
        entries,
        datasets,
        chunk_count,
        legacy: true,
    })
}

/// Whether `name` is llama.cpp's token embeddings (`token_embd.weight` or its per-layer
/// sibling): the mixes' TOKEN_EMBD category, and the tensors whose weight-count mismatch
/// llama-quantize passes over.
pub fn is_token_embd(name: &str) -> bool {
    name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

/// The weights `llama_model_quantize` uses for tensor `name` of dims `ne` (ggml order): its
/// entry when it has `ne[0] * ne[2]` of them; none when it has no entry (or the wrong count
/// for the token embeddings); otherwise an error, as llama-quantize stops there.
pub fn weights_for<'a>(m: &'a Imatrix, name: &str, ne: &[u64]) -> Result<Option<&'a [f32]>> {
    let Some(w) = m.entries.get(name) else {
        return Ok(None);
    };
    let want = ne.first().copied().unwrap_or(1) * ne.get(2).copied().unwrap_or(1);
    if w.len() as u64 == want {
        return Ok(Some(w));
    }
    if is_token_embd(name) {
        return Ok(None);
    }
    Err(bad(format!(
        "{} weights for tensor '{name}', which needs {want} (ne[0] x experts); llama-quantize \
         stops here",
        w.len()
    )))
}
