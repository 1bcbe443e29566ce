//! Input columns and how their rows become tensor samples. A column is one of:
//! - numbers in a list, large_list or fixed_size_list of any integer or float type; nested
//!   lists give the inner dimensions of the per-sample shape (fixed_size_lists by their type,
//!   variable-length lists, as Spark writes nested arrays, by their one length per sample);
//! - binary (bytes of the `dtype` option, little-endian);
//! - the tensor struct `struct<data: binary, shape: list<int32>, dtype: string>`.
//!
//! Every row of one tensor must have the same sample shape (and, for structs, dtype): a row
//! that does not is an error naming it. Nulls are errors too.

use crate::arrow_values::{self, leaf_dtype};
use crate::error::{DatasetError, Result};
use crate::finite_range::{first_overflow, value_text};
use crate::options::dataset_dtype;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::ops::Range;
use tensorsmith::cast::{cast, Rounding};
use tensorsmith::dtype::DType;

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Numbers: the leaf type and the inner dimensions: `Some(n)` for a nested fixed-size
    /// list, `None` for a nested variable-length list (Spark's nested arrays), whose lists
    /// must all have one length within a sample.
    Numeric {
        leaf: DType,
        inner: Vec<Option<u64>>,
    },
    Binary,
    TensorStruct,
}

/// A column to write, resolved against the input schema and the options.
#[derive(Debug, Clone)]
pub struct ColumnPlan {
    pub name: String,
    pub kind: Kind,
    /// Target dtype: the `dtype` option, or for structs the rows' own.
    pub dtype: Option<DType>,
    /// The `shapes` option for this column.
    pub shape: Option<Vec<u64>>,
    pub rounding: Rounding,
}

pub fn classify(field: &Field) -> Result<Kind> {
    let name = field.name();
    let bad = |m: String| DatasetError::column(name, m);
    match field.data_type() {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            let mut inner = Vec::new();
            let mut t = f.data_type();
            loop {
                match t {
                    DataType::FixedSizeList(g, n) => {
                        let n = u64::try_from(*n)
                            .map_err(|_| bad(format!("negative list size {n}")))?;
                        inner.push(Some(n));
                        t = g.data_type();
                    }
                    DataType::List(g) | DataType::LargeList(g) => {
                        inner.push(None);
                        t = g.data_type();
                    }
                    _ => break,
                }
            }
            match leaf_dtype(t) {
                Some(leaf) => Ok(Kind::Numeric { leaf, inner }),
                None => Err(bad(format!(
                    "lists of {t} are not tensors (lists of integers or floats, nested to any depth, are)"
                ))),
            }
        }
        DataType::Binary | DataType::LargeBinary | DataType::FixedSizeBinary(_) => Ok(Kind::Binary),
        DataType::Struct(fields) => {
            let has = |n: &str, ok: &dyn Fn(&DataType) -> bool| {
                fields.iter().any(|f| f.name() == n && ok(f.data_type()))
            };
            let data = has("data", &|t| {
                matches!(t, DataType::Binary | DataType::LargeBinary)
            });
            let shape = has("shape", &|t| match t {
                DataType::List(g) | DataType::LargeList(g) => {
                    matches!(g.data_type(), DataType::Int32 | DataType::Int64)
                }
                _ => false,
            });
            let dtype = has("dtype", &|t| {
                matches!(t, DataType::Utf8 | DataType::LargeUtf8)
            });
            if data && shape && dtype {
                Ok(Kind::TensorStruct)
            } else {
                Err(bad(
                    "a struct column must be the tensor struct struct<data: binary, shape: list<int32>, dtype: string>"
                        .into(),
                ))
            }
        }
        t => Err(bad(format!(
            "type {t} is not a tensor column (lists of numbers, binary, or the tensor struct)"
        ))),
    }
}

impl ColumnPlan {
    pub fn new(
        schema: &Schema,
        name: &str,
        dtype: Option<DType>,
        shape: Option<Vec<u64>>,
        rounding: Rounding,
    ) -> Result<Self> {
        let field = schema
            .field_with_name(name)
            .map_err(|_| DatasetError::column(name, "no such column in the input"))?;
        let kind = classify(field)?;
        let bad = |m: String| DatasetError::column(name, m);
        match &kind {
            Kind::Numeric { leaf, .. } => {
                let to = dtype.ok_or_else(|| {
                    bad(format!(
                        "Arrow type {}: a dtype is required, as in the connector (--dtype {leaf}, or the Python/Spark option dtype)",
                        field.data_type()
                    ))
                })?;
                arrow_values::convertible(*leaf, to).map_err(bad)?;
            }
            Kind::Binary => {
                if dtype.is_none() {
                    return Err(bad(format!(
                        "Arrow type {}: a dtype is required for raw bytes, as in the connector (--dtype F32, for example, or the Python/Spark option dtype)",
                        field.data_type()
                    )));
                }
            }
            Kind::TensorStruct => {}
        }
        Ok(ColumnPlan {
            name: name.to_string(),
            kind,
            dtype,
            shape,
            rounding,
        })
    }
}

/// One tensor being assembled from rows: its sample shape and dtype (set by the first row),
/// the number of samples and their bytes.
#[derive(Debug, Default)]
pub struct Samples {
    pub sample_shape: Option<Vec<u64>>,
    pub dtype: Option<DType>,
    pub count: u64,
    pub bytes: Vec<u8>,
    /// Samples expected (batch mode: the batch size): the first sample reserves room for
    /// all of them at once, so a shard's buffer is allocated once, at its exact size.
    pub expected: u64,
}

impl Samples {
    pub fn expecting(n: u64) -> Self {
        Samples {
            expected: n,
            ..Default::default()
        }
    }

    /// Zero samples to reach `n` (the pad tail strategy).
    pub fn pad_to(&mut self, n: u64) {
        if self.count < n {
            let per = self.bytes.len() as u64 / self.count.max(1);
            self.bytes
                .resize(self.bytes.len() + ((n - self.count) * per) as usize, 0);
            self.count = n;
        }
    }
}

fn elements(shape: &[u64]) -> u64 {
    shape.iter().product()
}

impl ColumnPlan {
    /// Appends rows `rows` of this column of `batch` to `out`. `row_base` is the input row
    /// number of the batch's row 0, for error messages.
    pub fn append_rows(
        &self,
        batch: &RecordBatch,
        rows: Range<usize>,
        row_base: u64,
        out: &mut Samples,
    ) -> Result<()> {
        let col = batch
            .column_by_name(&self.name)
            .ok_or_else(|| DatasetError::column(&self.name, "missing from a record batch"))?;
        let row_err = |r: usize, m: String| DatasetError::Input {
            file: None,
            column: Some(self.name.clone()),
            row: Some(row_base + r as u64),
            msg: m,
        };
        for r in rows.clone() {
            if col.is_null(r) {
                return Err(row_err(r, "is null".into()));
            }
        }
        match &self.kind {
            Kind::Numeric { inner, .. } => {
                let to = self.dtype.expect("checked in new");
                let (leaf, ranges, row_dims) =
                    leaf_ranges(col, rows.clone(), inner).map_err(|(r, m)| row_err(r, m))?;
                let fixed: Vec<u64> = inner.iter().map(|d| d.unwrap_or(0)).collect();
                for (i, (r, range)) in rows.clone().zip(ranges).enumerate() {
                    // Once the tensor has its sample shape, a row of as many elements has that
                    // shape when the inner dims are the column type's: no per-row shape to
                    // build. Variable-length inner lists give each row's dims.
                    let known = row_dims.is_none()
                        && out
                            .sample_shape
                            .as_deref()
                            .map(elements)
                            .is_some_and(|n| n > 0 && n == range.len() as u64);
                    if known {
                        out.count += 1;
                    } else {
                        let dims = row_dims.as_ref().map_or(&fixed[..], |d| &d[i][..]);
                        let natural: Vec<u64> =
                            std::iter::once(range.len() as u64 / elements(dims).max(1))
                                .chain(dims.iter().copied())
                                .collect();
                        let shape = self
                            .sample_shape_for(&natural, range.len() as u64)
                            .map_err(|m| row_err(r, m))?;
                        self.accept(out, shape, to).map_err(|m| row_err(r, m))?;
                    }
                    if leaf.null_count() > 0 && (range.start..range.end).any(|i| leaf.is_null(i)) {
                        return Err(row_err(r, "holds a null element".into()));
                    }
                    arrow_values::append(leaf.as_ref(), range, to, self.rounding, &mut out.bytes)
                        .map_err(|e| {
                        row_err(
                            r,
                            format!("element {} = {} does not fit in {to}", e.element, e.value),
                        )
                    })?;
                }
            }
            Kind::Binary => {
                let to = self.dtype.expect("checked in new");
                let size = to.byte_size().expect("whole bytes") as u64;
                for r in rows {
                    let b = binary_value(col.as_ref(), r);
                    if !(b.len() as u64).is_multiple_of(size) {
                        return Err(row_err(
                            r,
                            format!("{} bytes is not a whole number of {to} elements", b.len()),
                        ));
                    }
                    let n = b.len() as u64 / size;
                    let shape = self.sample_shape_for(&[n], n).map_err(|m| row_err(r, m))?;
                    self.accept(out, shape, to).map_err(|m| row_err(r, m))?;
                    out.bytes.extend_from_slice(b);
                }
            }
            Kind::TensorStruct => {
                let s = col.as_struct();
                let data = s.column_by_name("data").expect("classified");
                let shapes = s.column_by_name("shape").expect("classified");
                let dtypes = s.column_by_name("dtype").expect("classified");
                for r in rows {
                    if data.is_null(r) || shapes.is_null(r) || dtypes.is_null(r) {
                        return Err(row_err(r, "a field of the tensor struct is null".into()));
                    }
                    let name = match dtypes.data_type() {
                        DataType::LargeUtf8 => dtypes.as_string::<i64>().value(r),
                        _ => dtypes.as_string::<i32>().value(r),
                    };
                    let from = dataset_dtype(name).ok_or_else(|| {
                        row_err(r, format!("dtype '{name}' is not a dataset dtype"))
                    })?;
                    let shape = struct_shape(shapes.as_ref(), r).map_err(|m| row_err(r, m))?;
                    let b = binary_value(data.as_ref(), r);
                    let want = elements(&shape) * from.byte_size().expect("whole bytes") as u64;
                    if b.len() as u64 != want {
                        return Err(row_err(
                            r,
                            format!(
                                "data holds {} bytes, shape {shape:?} of {from} needs {want}",
                                b.len()
                            ),
                        ));
                    }
                    let shape = self
                        .sample_shape_for(&shape, elements(&shape))
                        .map_err(|m| row_err(r, m))?;
                    let to = self.dtype.unwrap_or(from);
                    if to != from && !(arrow_values::is_float(from) && arrow_values::is_float(to)) {
                        return Err(row_err(r, format!(
                            "the struct says {from} and the dtype option {to}: only float types convert into one another (bytes are never relabelled)"
                        )));
                    }
                    self.accept(out, shape, to).map_err(|m| row_err(r, m))?;
                    if to == from {
                        out.bytes.extend_from_slice(b);
                    } else {
                        let c = cast(b, from, to, self.rounding)?;
                        if let Some(i) = first_overflow(from, b, to, &c) {
                            return Err(row_err(
                                r,
                                format!(
                                    "element {i} = {} does not fit in {to}",
                                    value_text(from, b, i)
                                ),
                            ));
                        }
                        out.bytes.extend_from_slice(&c);
                    }
                }
            }
        }
        Ok(())
    }

    /// The sample shape of a row: the `shapes` option when given (its element count must
    /// match), else the row's own.
    fn sample_shape_for(&self, natural: &[u64], count: u64) -> Result<Vec<u64>, String> {
        match &self.shape {
            Some(s) if elements(s) != count => Err(format!(
                "has {count} elements, the shapes option {s:?} needs {}",
                elements(s)
            )),
            Some(s) => Ok(s.clone()),
            None => Ok(natural.to_vec()),
        }
    }

    fn accept(&self, out: &mut Samples, shape: Vec<u64>, dtype: DType) -> Result<(), String> {
        match (&out.sample_shape, out.dtype) {
            (None, _) => {
                let per = elements(&shape) * dtype.byte_size().expect("whole bytes") as u64;
                out.bytes
                    .reserve_exact((per * out.expected.max(1)).min(1 << 30) as usize);
                out.sample_shape = Some(shape);
                out.dtype = Some(dtype);
            }
            (Some(s), Some(d)) => {
                if *s != shape {
                    return Err(format!(
                        "sample shape {shape:?} differs from {s:?} of the rows before it in this tensor"
                    ));
                }
                if d != dtype {
                    return Err(format!(
                        "dtype {dtype} differs from {d} of the rows before it in this tensor"
                    ));
                }
            }
            (Some(_), None) => unreachable!("set together"),
        }
        out.count += 1;
        Ok(())
    }
}

fn binary_value(a: &dyn Array, r: usize) -> &[u8] {
    match a.data_type() {
        DataType::LargeBinary => a.as_binary::<i64>().value(r),
        DataType::FixedSizeBinary(_) => a.as_fixed_size_binary().value(r),
        _ => a.as_binary::<i32>().value(r),
    }
}

fn struct_shape(a: &dyn Array, r: usize) -> Result<Vec<u64>, String> {
    let vals: ArrayRef = match a.data_type() {
        DataType::LargeList(_) => a.as_list::<i64>().value(r),
        _ => a.as_list::<i32>().value(r),
    };
    if vals.null_count() > 0 {
        return Err("the shape holds a null".into());
    }
    let dims: Vec<i64> = match vals.data_type() {
        DataType::Int64 => vals.as_primitive::<Int64Type>().values().to_vec(),
        _ => vals
            .as_primitive::<Int32Type>()
            .values()
            .iter()
            .map(|&d| i64::from(d))
            .collect(),
    };
    dims.iter()
        .map(|&d| u64::try_from(d).map_err(|_| format!("negative dimension {d} in the shape")))
        .collect()
}

/// A leaf array, one element range per row and, when a level is a variable-length list,
/// each row's inner dimensions.
type LeafRanges = (ArrayRef, Vec<Range<usize>>, Option<Vec<Vec<u64>>>);

/// Each row's range of list entries in `col` (the outer list), and the entries' array.
fn outer_ranges(col: &ArrayRef, rows: Range<usize>) -> (ArrayRef, Vec<Range<usize>>) {
    match col.data_type() {
        DataType::FixedSizeList(_, n) => {
            let l = col.as_fixed_size_list();
            let n = *n as usize;
            let ranges = rows
                .map(|r| {
                    let s = l.value_offset_at(r);
                    s..s + n
                })
                .collect();
            (l.values().clone(), ranges)
        }
        _ => {
            let (values, o) = list_parts(col);
            (values, rows.map(|r| o.at(r)..o.at(r + 1)).collect())
        }
    }
}

/// A variable-length list's offsets.
enum Offsets<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl Offsets<'_> {
    fn at(&self, i: usize) -> usize {
        match self {
            Offsets::I32(o) => o[i] as usize,
            Offsets::I64(o) => o[i] as usize,
        }
    }
}

/// A variable-length list's entries and offsets.
fn list_parts(a: &ArrayRef) -> (ArrayRef, Offsets<'_>) {
    match a.data_type() {
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            (l.values().clone(), Offsets::I64(l.value_offsets()))
        }
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            (l.values().clone(), Offsets::I32(l.value_offsets()))
        }
        t => unreachable!("classified as a list: {t}"),
    }
}

/// The leaf (number) array below the nested `inner` lists, and for each row of `rows` its
/// range of leaf elements. Errors carry the batch row.
fn leaf_ranges(
    col: &ArrayRef,
    rows: Range<usize>,
    inner: &[Option<u64>],
) -> Result<LeafRanges, (usize, String)> {
    let (mut child, mut ranges) = outer_ranges(col, rows.clone());
    let mut dims: Option<Vec<Vec<u64>>> = inner
        .iter()
        .any(Option::is_none)
        .then(|| vec![Vec::with_capacity(inner.len()); ranges.len()]);
    for level in inner {
        if child.null_count() > 0 {
            for (r, range) in rows.clone().zip(&ranges) {
                if range.clone().any(|i| child.is_null(i)) {
                    return Err((r, "holds a null inner list".into()));
                }
            }
        }
        match level {
            Some(m) => {
                let l = child.as_fixed_size_list();
                let m = *m as usize;
                for range in ranges.iter_mut() {
                    let s = if range.start == range.end {
                        0
                    } else {
                        l.value_offset_at(range.start)
                    };
                    *range = s..s + range.len() * m;
                }
                if let Some(d) = dims.as_mut() {
                    d.iter_mut().for_each(|d| d.push(m as u64));
                }
                child = l.values().clone();
            }
            None => {
                let (values, o) = list_parts(&child);
                let len = |j: usize| o.at(j + 1) - o.at(j);
                for (i, (r, range)) in rows.clone().zip(ranges.iter_mut()).enumerate() {
                    let m = if range.start == range.end {
                        0
                    } else {
                        len(range.start)
                    };
                    if let Some(k) = range.clone().find(|&j| len(j) != m) {
                        return Err((
                            r,
                            format!(
                                "inner lists of {m} and {} elements: a tensor needs one length per dimension",
                                len(k)
                            ),
                        ));
                    }
                    *range = o.at(range.start)..o.at(range.end);
                    if let Some(d) = dims.as_mut() {
                        d[i].push(m as u64);
                    }
                }
                child = values;
            }
        }
    }
    Ok((child, ranges, dims))
}
