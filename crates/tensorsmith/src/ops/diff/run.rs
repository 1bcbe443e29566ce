//! Structural and value comparison of two models in any formats: tensors added, removed and
//! changed (type, shape, byte length), metadata added, removed and changed, and with
//! [`compare_values`] the element-wise difference of matching tensors across dtypes, with
//! error metrics (`diff_metrics`). Tensors pair by name, or through rename rules and the llama
//! name map ([`diff_paired`], [`compare_paired`] over a `diff_pairing::Pairing`).

use crate::dtype::DType;
use crate::error::Result;
use crate::index::{Layout, MetaValue, TensorIndex, TensorInfo};
use crate::model::Model;
use crate::ops::diff::metrics::{ErrorSums, Metrics};
use crate::ops::diff::pairing::{pair_tensors, NameMap, PairOptions, Pairing, RowOrder};
use std::borrow::Cow;
use std::collections::BTreeSet;

/// A tensor as the diff describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorDesc {
    /// The tensor's name in its model.
    pub name: String,
    /// The element type as shown to people (`F32`, or the ggml type such as `q4_0`).
    pub dtype: &'static str,
    /// Dimension sizes, outermost first.
    pub shape: Vec<u64>,
    /// Bytes the decoded tensor takes.
    pub byte_length: u64,
}

impl TensorDesc {
    fn of(t: &TensorInfo) -> TensorDesc {
        TensorDesc {
            name: t.name.clone(),
            dtype: t.type_name(),
            shape: t.shape.to_vec(),
            byte_length: t.byte_len(),
        }
    }
}

/// A tensor present in both with different structure.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorChange {
    /// The tensor in model A.
    pub a: TensorDesc,
    /// The tensor it is paired with in model B.
    pub b: TensorDesc,
}

impl TensorChange {
    /// Which of `dtype`, `shape`, `byte_length` differ (names may differ too: a pair by
    /// rename rules or a name map, which is no change in itself).
    pub fn fields(&self) -> Vec<&'static str> {
        let mut f = Vec::new();
        if self.a.dtype != self.b.dtype {
            f.push("dtype");
        }
        if self.a.shape != self.b.shape {
            f.push("shape");
        }
        if self.a.byte_length != self.b.byte_length {
            f.push("byte_length");
        }
        f
    }
}

/// The element-wise comparison of one tensor present in both.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueDiff {
    /// A's name for the tensor (B's is in `b_name` when it differs).
    pub name: String,
    /// Same number of elements and every element equal (as values: +0 equals -0, and NaN
    /// equals NaN here, so a bit-identical tensor is always identical).
    pub identical: bool,
    /// Elements compared (the tensors' common element count).
    pub elements: u64,
    /// Elements whose values differ (NaN against NaN does not count).
    pub differing: u64,
    /// Largest absolute difference over all elements (infinite where one side is NaN or infinite
    /// and the other is not).
    pub max_abs_diff: f64,
    /// Sum of absolute differences divided by `elements` (0 for an empty tensor).
    pub mean_abs_diff: f64,
    /// B's name when it differs from A's (`name`): paired by rename rules or a name map.
    pub b_name: Option<String>,
    /// RMSE, relative RMSE, cosine and SNR (see `diff_metrics` for the conventions).
    pub metrics: Metrics,
    /// One side's rows were read in the other's order (llama Q/K, `diff_llama`).
    pub reordered: bool,
}

/// Why a tensor's values were not compared.
#[derive(Debug, Clone, PartialEq)]
pub struct NotCompared {
    /// The tensor's name (A's, for a pair).
    pub name: String,
    /// Why, in words (different element counts, a layout or dtype whose values are not decoded).
    pub reason: String,
}

/// The result of comparing two models: structural differences, and value differences once
/// [`compare_values`] or [`compare_paired`] has filled them in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    /// Tensors only in B.
    pub added: Vec<TensorDesc>,
    /// Tensors only in A.
    pub removed: Vec<TensorDesc>,
    /// Paired tensors whose dtype, shape or byte length differ.
    pub changed: Vec<TensorChange>,
    /// Metadata keys only in B, with B's value.
    pub meta_added: Vec<(String, MetaValue)>,
    /// Metadata keys only in A, with A's value.
    pub meta_removed: Vec<(String, MetaValue)>,
    /// Metadata keys in both with different values: key, A's value, B's value.
    pub meta_changed: Vec<(String, MetaValue, MetaValue)>,
    /// Filled by [`compare_values`]: only tensors whose values differ, or all with `all`.
    pub values: Vec<ValueDiff>,
    /// Paired tensors whose values could not be compared, and why.
    pub not_compared: Vec<NotCompared>,
    /// Whether values were compared at all (set by [`compare_paired`]); when false, `values` and
    /// `not_compared` are empty because nobody looked.
    pub values_compared: bool,
    /// `Some("llama")` when tensors were paired through the llama name map.
    pub name_map: Option<&'static str>,
}

impl Diff {
    /// No structural difference and, if values were compared, no value difference.
    pub fn is_same(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.meta_added.is_empty()
            && self.meta_removed.is_empty()
            && self.meta_changed.is_empty()
            && self.values.iter().all(|v| v.identical)
            && self.not_compared.is_empty()
    }
}

/// Tensors paired by their names alone.
pub fn by_name(a: &TensorIndex, b: &TensorIndex) -> Pairing {
    let opts = PairOptions {
        rules: Vec::new(),
        name_map: NameMap::None,
    };
    pair_tensors(a, b, &opts).unwrap_or_default()
}

/// Compares structure: names in byte order, metadata by key.
pub fn diff_structure(a: &TensorIndex, b: &TensorIndex) -> Diff {
    diff_paired(a, b, &by_name(a, b))
}

/// Compares structure with tensors paired by `p`: a pair whose type, shape or byte length
/// differ is changed (a name alone is not); tensors without a pair are removed or added.
pub fn diff_paired(a: &TensorIndex, b: &TensorIndex, p: &Pairing) -> Diff {
    let mut d = Diff {
        name_map: p.name_map,
        ..Diff::default()
    };
    for &i in &p.only_a {
        d.removed.push(TensorDesc::of(&a.tensors[i]));
    }
    for pair in &p.pairs {
        let (x, y) = (
            TensorDesc::of(&a.tensors[pair.a]),
            TensorDesc::of(&b.tensors[pair.b]),
        );
        let c = TensorChange { a: x, b: y };
        if !c.fields().is_empty() {
            d.changed.push(c);
        }
    }
    for &i in &p.only_b {
        d.added.push(TensorDesc::of(&b.tensors[i]));
    }
    // A checkpoint's write id names a write, not the model: two writes of one model are equal.
    let keys: BTreeSet<&String> = a
        .metadata
        .keys()
        .chain(b.metadata.keys())
        .filter(|k| *k != crate::ops::write_id::WRITE_ID_KEY)
        .collect();
    for k in keys {
        match (a.metadata.get(k), b.metadata.get(k)) {
            (Some(x), None) => d.meta_removed.push((k.clone(), x.clone())),
            (None, Some(y)) => d.meta_added.push((k.clone(), y.clone())),
            (Some(x), Some(y)) if !x.same_value(y) => {
                d.meta_changed.push((k.clone(), x.clone(), y.clone()))
            }
            _ => {}
        }
    }
    d
}

/// Decodes one little-endian element to f64, for the dtypes whose values it can represent
/// (every integer up to 2^53 exactly; 64-bit integers beyond that approximately, so integer
/// pairs are also compared exactly, through `IntDecoder`).
type Decoder = (usize, fn(&[u8]) -> f64);

fn decoder(d: DType) -> Option<Decoder> {
    use half::{bf16, f16};
    Some(match d {
        DType::BOOL | DType::U8 => (1, |b| f64::from(b[0])),
        DType::I8 => (1, |b| f64::from(b[0] as i8)),
        DType::U16 => (2, |b| f64::from(u16::from_le_bytes([b[0], b[1]]))),
        DType::I16 => (2, |b| f64::from(i16::from_le_bytes([b[0], b[1]]))),
        DType::F16 => (2, |b| {
            f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()
        }),
        DType::BF16 => (2, |b| {
            bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()
        }),
        DType::U32 => (4, |b| {
            f64::from(u32::from_le_bytes(b[..4].try_into().unwrap()))
        }),
        DType::I32 => (4, |b| {
            f64::from(i32::from_le_bytes(b[..4].try_into().unwrap()))
        }),
        DType::F32 => (4, |b| {
            f64::from(f32::from_le_bytes(b[..4].try_into().unwrap()))
        }),
        DType::U64 => (8, |b| u64::from_le_bytes(b[..8].try_into().unwrap()) as f64),
        DType::I64 => (8, |b| i64::from_le_bytes(b[..8].try_into().unwrap()) as f64),
        DType::F64 => (8, |b| f64::from_le_bytes(b[..8].try_into().unwrap())),
        _ => return None,
    })
}

/// Decodes one little-endian integer element exactly (64-bit ones too, which f64 cannot hold
/// beyond 2^53).
type IntDecoder = fn(&[u8]) -> i128;

fn int_decoder(d: DType) -> Option<IntDecoder> {
    Some(match d {
        DType::BOOL | DType::U8 => |b| i128::from(b[0]),
        DType::I8 => |b| i128::from(b[0] as i8),
        DType::U16 => |b| i128::from(u16::from_le_bytes([b[0], b[1]])),
        DType::I16 => |b| i128::from(i16::from_le_bytes([b[0], b[1]])),
        DType::U32 => |b| i128::from(u32::from_le_bytes(b[..4].try_into().unwrap())),
        DType::I32 => |b| i128::from(i32::from_le_bytes(b[..4].try_into().unwrap())),
        DType::U64 => |b| i128::from(u64::from_le_bytes(b[..8].try_into().unwrap())),
        DType::I64 => |b| i128::from(i64::from_le_bytes(b[..8].try_into().unwrap())),
        _ => return None,
    })
}

/// Compares the values of every tensor present in both models with equal element counts.
/// Tensors are read one at a time (bounded memory: two tensors at once).
pub fn compare_values(d: &mut Diff, a: &Model, b: &Model, all: bool) -> Result<()> {
    let p = by_name(&a.index, &b.index);
    compare_paired(d, a, b, &p, all)
}

/// [`compare_values`] over the pairs of `p` (in its order: A's names).
pub fn compare_paired(d: &mut Diff, a: &Model, b: &Model, p: &Pairing, all: bool) -> Result<()> {
    d.values_compared = true;
    let work = |t: &TensorInfo, u: &TensorInfo| t.byte_len() + u.byte_len();
    let tensors = |pair: &crate::ops::diff::pairing::Pair| {
        (&a.index.tensors[pair.a], &b.index.tensors[pair.b])
    };
    crate::progress::expect(
        p.pairs
            .iter()
            .map(|pair| {
                let (t, u) = tensors(pair);
                work(t, u)
            })
            .sum(),
    );
    for pair in &p.pairs {
        let (t, u) = tensors(pair);
        crate::progress::advance(work(t, u));
        let skip = |reason: String| NotCompared {
            name: t.name.clone(),
            reason,
        };
        if t.elements() != u.elements() {
            d.not_compared.push(skip(format!(
                "{} elements against {}",
                t.elements(),
                u.elements()
            )));
            continue;
        }
        let dense =
            |x: &TensorInfo| x.layout == Layout::Dense || matches!(x.layout, Layout::Ggml(_));
        if !dense(t) || !dense(u) {
            let why = format!(
                "values of layouts {} and {} are not compared",
                t.layout.name(crate::index::LayoutNames::Message),
                u.layout.name(crate::index::LayoutNames::Message)
            );
            d.not_compared.push(skip(why));
            continue;
        }
        let order = match &pair.rows {
            Ok(o) => *o,
            Err(why) => {
                d.not_compared.push(skip(why.clone()));
                continue;
            }
        };
        let b_name = (u.name != t.name).then(|| u.name.clone());
        let same_layout = t.layout == u.layout && t.dtype == u.dtype;
        let xa = a.tensor_bytes(t)?;
        let xb = b.tensor_bytes(u)?;
        let same_bytes = order.is_none() && same_layout && xa == xb;
        if same_bytes && !all {
            continue;
        }
        let (va, vb) = match (side(a, t, xa)?, side(b, u, xb)?) {
            (Some(va), Some(vb)) => (va, vb),
            _ if same_bytes => {
                // Equal bytes of a type no decoder covers: identical, without metrics.
                d.values.push(ValueDiff {
                    name: t.name.clone(),
                    identical: true,
                    elements: t.elements(),
                    differing: 0,
                    max_abs_diff: 0.0,
                    mean_abs_diff: 0.0,
                    b_name,
                    metrics: Metrics::default(),
                    reordered: false,
                });
                continue;
            }
            _ => {
                let why = format!(
                    "values of {} and {} are not decoded",
                    t.type_name(),
                    u.type_name()
                );
                d.not_compared.push(skip(why));
                continue;
            }
        };
        let (ia, ib) = match order {
            Some(o) if o.in_b => (va.iter(), vb.rows(o)),
            Some(o) => (va.rows(o), vb.iter()),
            None => (va.iter(), vb.iter()),
        };
        let mut v = compare_iter(&t.name, ia, ib);
        // Integers on both sides: which elements differ, and by how much, counted exactly.
        let ints = match order {
            Some(o) if o.in_b => va.ints().zip(vb.int_rows(o)),
            Some(o) => va.int_rows(o).zip(vb.ints()),
            None => va.ints().zip(vb.ints()),
        };
        if let Some((ia, ib)) = ints {
            count_int_differences(&mut v, ia, ib);
        }
        v.b_name = b_name;
        v.reordered = order.is_some();
        if all || !v.identical {
            d.values.push(v);
        }
    }
    Ok(())
}

/// One side's values: stored elements with their decoder (and their exact one, for
/// integers), or dequantized ggml blocks.
enum Side<'a> {
    Stored(Cow<'a, [u8]>, Decoder, Option<IntDecoder>),
    Dequantized(Vec<f32>),
}

impl Side<'_> {
    fn iter(&self) -> Box<dyn Iterator<Item = f64> + '_> {
        self.range(0, usize::MAX)
    }

    fn len(&self) -> usize {
        match self {
            Side::Stored(bytes, (size, _), _) => bytes.len() / size,
            Side::Dequantized(v) => v.len(),
        }
    }

    /// Elements `start..start + len` (cut at the end).
    fn range(&self, start: usize, len: usize) -> Box<dyn Iterator<Item = f64> + '_> {
        let end = start.saturating_add(len).min(self.len());
        match self {
            Side::Stored(bytes, (size, f), _) => {
                Box::new(bytes[start * size..end * size].chunks_exact(*size).map(*f))
            }
            Side::Dequantized(v) => Box::new(v[start..end].iter().map(|&x| f64::from(x))),
        }
    }

    /// The elements with their rows read in Hugging Face order (`o`: this side is permuted).
    fn rows(&self, o: RowOrder) -> Box<dyn Iterator<Item = f64> + '_> {
        let cols = (self.len() as u64 / o.rows) as usize;
        Box::new((0..o.rows).flat_map(move |r| {
            let g = crate::ops::diff::llama::gguf_row(r, o.rows, o.groups) as usize;
            self.range(g * cols, cols)
        }))
    }

    /// Integer elements `start..start + len` (cut at the end), exactly; `None` for floats.
    fn int_range(&self, start: usize, len: usize) -> Option<Box<dyn Iterator<Item = i128> + '_>> {
        let end = start.saturating_add(len).min(self.len());
        match self {
            Side::Stored(bytes, (size, _), Some(f)) => Some(Box::new(
                bytes[start * size..end * size].chunks_exact(*size).map(*f),
            )),
            _ => None,
        }
    }

    fn ints(&self) -> Option<Box<dyn Iterator<Item = i128> + '_>> {
        self.int_range(0, usize::MAX)
    }

    /// [`Side::rows`] of integers, exactly.
    fn int_rows(&self, o: RowOrder) -> Option<Box<dyn Iterator<Item = i128> + '_>> {
        if !matches!(self, Side::Stored(_, _, Some(_))) {
            return None;
        }
        let cols = (self.len() as u64 / o.rows) as usize;
        Some(Box::new((0..o.rows).flat_map(move |r| {
            let g = crate::ops::diff::llama::gguf_row(r, o.rows, o.groups) as usize;
            self.int_range(g * cols, cols).into_iter().flatten()
        })))
    }
}

/// The values of `t` for comparison: dense tensors decoded per dtype, ggml block-quantized
/// ones dequantized to F32 (as gguf-py does); `None` for what neither covers.
fn side<'a>(m: &Model, t: &TensorInfo, stored: Cow<'a, [u8]>) -> Result<Option<Side<'a>>> {
    if let Some(g) = crate::ops::convert::dequantize::block_type(t) {
        if !crate::ggml_quant::can_dequantize(g) {
            return Ok(None);
        }
        drop(stored);
        return Ok(Some(Side::Dequantized(
            crate::ops::convert::dequantize::values_f32(m, t)?,
        )));
    }
    Ok(match (&t.layout, decoder(t.dtype)) {
        (Layout::Dense, Some(dec)) => Some(Side::Stored(stored, dec, int_decoder(t.dtype))),
        _ => None,
    })
}

#[cfg(test)]
fn compare(name: &str, a: &[u8], (sa, fa): Decoder, b: &[u8], (sb, fb): Decoder) -> ValueDiff {
    compare_iter(name, a.chunks_exact(sa).map(fa), b.chunks_exact(sb).map(fb))
}

/// Sets which elements differ and the absolute differences from the exact integers (the f64
/// comparison calls 2^64 - 1 and 2^64 - 2 equal); the error metrics stay those of the f64
/// values.
fn count_int_differences(
    v: &mut ValueDiff,
    a: impl Iterator<Item = i128>,
    b: impl Iterator<Item = i128>,
) {
    let (mut differing, mut max, mut sum) = (0u64, 0u128, 0f64);
    for (x, y) in a.zip(b) {
        if x != y {
            differing += 1;
            let d = x.abs_diff(y);
            max = max.max(d);
            sum += d as f64;
        }
    }
    v.differing = differing;
    v.identical = differing == 0;
    v.max_abs_diff = max as f64;
    v.mean_abs_diff = if v.elements == 0 {
        0.0
    } else {
        sum / v.elements as f64
    };
}

fn compare_iter(
    name: &str,
    a: impl Iterator<Item = f64>,
    b: impl Iterator<Item = f64>,
) -> ValueDiff {
    let (mut differing, mut max, mut sum, mut n) = (0u64, 0f64, 0f64, 0u64);
    let mut sums = ErrorSums::new();
    for (x, y) in a.zip(b) {
        n += 1;
        sums.add(x, y);
        if x == y || (x.is_nan() && y.is_nan()) {
            continue;
        }
        differing += 1;
        let diff = (x - y).abs();
        // Inf against a finite value or NaN against a number: an infinite difference.
        let diff = if diff.is_nan() { f64::INFINITY } else { diff };
        max = max.max(diff);
        sum += diff;
    }
    ValueDiff {
        name: name.to_owned(),
        identical: differing == 0,
        elements: n,
        differing,
        max_abs_diff: max,
        mean_abs_diff: if n == 0 { 0.0 } else { sum / n as f64 },
        b_name: None,
        metrics: sums.finish(),
        reordered: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn element_differences_across_dtypes() {
        let a = f32s(&[1.0, 2.0, f32::NAN, 4.0]);
        let b: Vec<u8> = [1.0f64, 2.5, f64::NAN, 3.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let v = compare(
            "t",
            &a,
            decoder(DType::F32).unwrap(),
            &b,
            decoder(DType::F64).unwrap(),
        );
        assert_eq!((v.elements, v.differing, v.identical), (4, 2, false));
        assert_eq!(v.max_abs_diff, 1.0);
        assert_eq!(v.mean_abs_diff, 1.5 / 4.0);
        let c = f32s(&[0.0]);
        let d = f32s(&[-0.0]);
        let v = compare(
            "z",
            &c,
            decoder(DType::F32).unwrap(),
            &d,
            decoder(DType::F32).unwrap(),
        );
        assert!(v.identical, "+0 and -0 are equal values");
    }
}
