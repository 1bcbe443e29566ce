//! Sparse tensors (zTensor CSR and COO, ONNX sparse initializers) made dense, for formats that only hold dense tensors
//! (`convert --densify`). Every index is checked against the shape; duplicates keep the last
//! value. Group-quantized tensors are not dequantized: the zTensor spec leaves the packing
//! order and zero-point convention open, and a guess would silently corrupt weights.

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Layout, TensorInfo};
use crate::model::Model;

/// Whether `t` is a sparse tensor [`densify`] makes dense: zTensor CSR/COO, ONNX sparse
/// initializers.
pub fn is_sparse(t: &TensorInfo) -> bool {
    match &t.layout {
        Layout::SparseCsr | Layout::SparseCoo => true,
        Layout::Other(l) => &**l == crate::onnx::SPARSE_LAYOUT,
        _ => false,
    }
}

fn err(t: &TensorInfo, msg: String) -> Error {
    Error::new(ErrorKind::Unsupported(msg)).at_tensor(&t.name)
}

/// Little-endian integers of `dtype` as u64 (negative values are errors).
fn indices(t: &TensorInfo, bytes: &[u8], dtype: DType) -> Result<Vec<u64>> {
    let size = dtype.byte_size().unwrap_or(0);
    let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    if !matches!(size, 1 | 2 | 4 | 8)
        || !(signed || matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64))
    {
        return Err(err(
            t,
            format!("index dtype {dtype} is not an integer type"),
        ));
    }
    bytes
        .chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(c);
            if signed && c[size - 1] & 0x80 != 0 {
                return Err(err(t, "negative sparse index".into()));
            }
            Ok(u64::from_le_bytes(b))
        })
        .collect()
}

/// The linear position in `t` of the coordinates `coord(d)` (dimension by dimension), each
/// checked against its dimension (`what` names them in the error).
fn linear_at(t: &TensorInfo, what: &str, coord: impl Fn(usize) -> u64) -> Result<u64> {
    let mut at = 0u64;
    for (d, &dim) in t.shape.iter().enumerate() {
        let x = coord(d);
        if x >= dim {
            return Err(err(
                t,
                format!("{what} {x} is outside dimension {d} of {dim}"),
            ));
        }
        at = at * dim + x;
    }
    Ok(at)
}

/// Walks an ONNX sparse initializer's values: `each(k, at)` for value `k` at linear position
/// `at` of the dense tensor. Its indices are int64, linear ([NNZ]) or one row of coordinates
/// per value ([NNZ, rank]); every one is checked against the shape (as onnx.checker does).
fn onnx_positions(
    model: &Model,
    t: &TensorInfo,
    n: usize,
    mut each: impl FnMut(usize, u64) -> Result<()>,
) -> Result<()> {
    let ii = t
        .parts
        .iter()
        .position(|p| p.role == "indices")
        .ok_or_else(|| err(t, "no part 'indices'".into()))?;
    let idx = indices(t, &model.part_bytes(t, ii)?, t.parts[ii].dtype)?;
    let rank = t.shape.len();
    let elements = t.elements();
    if idx.len() == n {
        for (k, &at) in idx.iter().enumerate() {
            if at >= elements {
                return Err(err(
                    t,
                    format!("sparse index {at} is outside {elements} elements"),
                ));
            }
            each(k, at)?;
        }
    } else if idx.len() == n * rank {
        for k in 0..n {
            each(k, linear_at(t, "index", |d| idx[k * rank + d])?)?;
        }
    } else {
        return Err(err(t, "indices do not match values and rank".into()));
    }
    Ok(())
}

/// Checks an ONNX sparse initializer's indices against its shape without making it dense
/// (`verify`'s data rule for them): the errors [`densify`] would give.
pub fn check_onnx_sparse(model: &Model, t: &TensorInfo) -> Result<()> {
    let vi = t
        .parts
        .iter()
        .position(|p| p.role == "values")
        .ok_or_else(|| err(t, "no part 'values'".into()))?;
    let v = &t.parts[vi];
    let size = v.dtype.byte_size().unwrap_or(1).max(1) as u64;
    let n = (v.decoded_len / size) as usize;
    onnx_positions(model, t, n, |_, _| Ok(()))
}

/// The dense little-endian bytes of a sparse tensor, and their dtype.
pub fn densify(model: &Model, t: &TensorInfo) -> Result<(DType, Vec<u8>)> {
    let part = |role: &str| -> Result<(usize, DType)> {
        let i = t
            .parts
            .iter()
            .position(|p| p.role == role)
            .ok_or_else(|| err(t, format!("no part '{role}'")))?;
        Ok((i, t.parts[i].dtype))
    };
    let (vi, vdtype) = part("values")?;
    let size = vdtype
        .byte_size()
        .ok_or_else(|| err(t, format!("values of {vdtype} are not whole bytes")))?;
    let values = model.part_bytes(t, vi)?;
    let n = values.len() / size;
    let elements = t.elements();
    let total = elements
        .checked_mul(size as u64)
        .filter(|&b| b <= isize::MAX as u64)
        .ok_or_else(|| err(t, "dense size overflows".into()))?;
    let mut dense = vec![0u8; total as usize];
    let mut put = |k: usize, at: u64| -> Result<()> {
        if at >= elements {
            return Err(err(
                t,
                format!("sparse index {at} is outside {} elements", elements),
            ));
        }
        let at = at as usize * size;
        dense[at..at + size].copy_from_slice(&values[k * size..(k + 1) * size]);
        Ok(())
    };
    match t.layout {
        Layout::SparseCsr => {
            let (rows, cols) = match t.shape.as_slice() {
                [r, c] => (*r, *c),
                _ => return Err(err(t, "CSR tensors are rank 2".into())),
            };
            let (ii, idt) = part("indices")?;
            let (pi, pdt) = part("indptr")?;
            let cols_of = indices(t, &model.part_bytes(t, ii)?, idt)?;
            let ptr = indices(t, &model.part_bytes(t, pi)?, pdt)?;
            if ptr.len() as u64 != rows + 1 || cols_of.len() != n {
                return Err(err(t, "CSR parts do not match the shape".into()));
            }
            for r in 0..rows as usize {
                let (a, b) = (ptr[r] as usize, ptr[r + 1] as usize);
                if a > b || b > n {
                    return Err(err(
                        t,
                        format!("indptr of row {r} is out of order or range"),
                    ));
                }
                for (k, &c) in cols_of.iter().enumerate().take(b).skip(a) {
                    if c >= cols {
                        return Err(err(t, format!("column {c} is outside {cols} columns")));
                    }
                    put(k, r as u64 * cols + c)?;
                }
            }
        }
        Layout::SparseCoo => {
            let (ci, cdt) = part("coords")?;
            let coords = indices(t, &model.part_bytes(t, ci)?, cdt)?;
            let rank = t.shape.len();
            if coords.len() != rank * n {
                return Err(err(
                    t,
                    "COO coordinates do not match values and rank".into(),
                ));
            }
            for k in 0..n {
                put(k, linear_at(t, "coordinate", |d| coords[d * n + k])?)?;
            }
        }
        Layout::Other(ref l) if &**l == crate::onnx::SPARSE_LAYOUT => {
            onnx_positions(model, t, n, put)?;
        }
        ref other => {
            return Err(err(
                t,
                format!(
                    "tensors of layout {} cannot be densified (only sparse CSR and COO)",
                    other.name(crate::index::LayoutNames::Message)
                ),
            ))
        }
    }
    Ok((vdtype, dense))
}
