//! Layout rules: which parts a layout has and how their decoded sizes follow from the shape
//! and attributes (checked at open, before any data is read), and the data rules checked
//! when verifying (bool bytes, sparse index ranges, ...).
//!
//! v2 follows the registry profiles (`spec/profiles/zt.*.md` in the zTensor repository).
//! One deviation: the quant_group profile's formula gives `groups = shape[axis]` for
//! `group_size == 0`, but its prose ("per-channel: one scale per row") and the reference's
//! own file (`v2/quant_group.zt`) have one group per lane; this follows the file. zt.mx/1's
//! `scale_form` is not required, because the reference writes files without it.

use crate::dtype::DType;
use crate::error::{ErrorKind, Result};
use crate::index::{Layout, LayoutNames, MetaValue, Part, TensorInfo, ZtVersion};

fn rule(t: &TensorInfo, msg: impl Into<String>) -> crate::Error {
    ErrorKind::ZtLayoutRule {
        layout: t.layout.name(LayoutNames::Message).into_owned(),
        rule: msg.into(),
    }
    .into()
}

fn elements(t: &TensorInfo) -> u64 {
    // Readers checked the product does not overflow when they parsed the shape.
    t.shape.iter().product()
}

/// Decoded bytes of `n` elements of a part's type; `None` if the type is unknown (no rule
/// can be checked) and an error on overflow.
fn size_of(t: &TensorInfo, p: &Part, n: u64) -> Result<Option<u64>> {
    if p.unknown_type().is_some() {
        return Ok(None);
    }
    p.dtype
        .ztensor_v2_bytes(n)
        .map(Some)
        .ok_or_else(|| rule(t, format!("size of {n} {} elements overflows", p.dtype)))
}

fn width(p: &Part) -> u64 {
    u64::from(p.dtype.bits() / 8).max(1)
}

fn need<'t>(t: &'t TensorInfo, role: &str) -> Result<&'t Part> {
    t.part(role)
        .ok_or_else(|| rule(t, format!("part '{role}' is missing")))
}

/// The parts must be exactly `roles` (`optional` may also appear).
fn exact_parts(t: &TensorInfo, roles: &[&str], optional: &[&str]) -> Result<()> {
    for r in roles {
        need(t, r)?;
    }
    if let Some(p) = t
        .parts
        .iter()
        .find(|p| !roles.contains(&p.role.as_ref()) && !optional.contains(&p.role.as_ref()))
    {
        return Err(rule(t, format!("unexpected part '{}'", p.role)));
    }
    Ok(())
}

fn expect_size(t: &TensorInfo, p: &Part, want: Option<u64>) -> Result<()> {
    match want {
        Some(w) if w != p.decoded_len => Err(crate::Error::from(ErrorKind::SizeMismatch {
            expected: w,
            actual: p.decoded_len,
        })
        .at_tensor(&t.name)),
        _ => Ok(()),
    }
}

fn is_index_dtype(d: DType, version: ZtVersion) -> bool {
    match version {
        ZtVersion::V2 => matches!(d, DType::U32 | DType::U64),
        _ => matches!(
            d,
            DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
                | DType::I8
                | DType::I16
                | DType::I32
                | DType::I64
        ),
    }
}

fn plain_index(t: &TensorInfo, p: &Part, version: ZtVersion) -> Result<()> {
    if !is_index_dtype(p.dtype, version) || p.unknown_type().is_some() {
        return Err(rule(
            t,
            format!(
                "part '{}' must be a plain integer index type, not {}",
                p.role, p.dtype
            ),
        ));
    }
    Ok(())
}

/// Metadata rules of the tensor's layout (sizes, parts, dtypes).
pub fn check(t: &TensorInfo, version: ZtVersion) -> Result<()> {
    match &t.layout {
        Layout::Dense => {
            exact_parts(t, &["data"], &[])?;
            let p = &t.parts[0];
            expect_size(t, p, size_of(t, p, elements(t))?)
        }
        Layout::SparseCsr => check_csr(t, version),
        Layout::SparseCoo => check_coo(t, version),
        Layout::QuantizedGroup if version == ZtVersion::V2 => check_quant_v2(t),
        Layout::QuantizedGroup => check_quant_v11(t),
        Layout::Mx => check_mx(t),
        Layout::Ggml(_) => Err(rule(
            t,
            "ggml block-quantized tensors cannot be stored in zTensor",
        )),
        Layout::Other(_) => Ok(()),
    }
}

fn check_csr(t: &TensorInfo, version: ZtVersion) -> Result<()> {
    if t.shape.len() != 2 {
        return Err(rule(t, format!("rank must be 2, not {}", t.shape.len())));
    }
    exact_parts(t, &["values", "indices", "indptr"], &[])?;
    let (values, indices, indptr) = (need(t, "values")?, need(t, "indices")?, need(t, "indptr")?);
    plain_index(t, indices, version)?;
    plain_index(t, indptr, version)?;
    if indptr.dtype != indices.dtype {
        return Err(rule(t, "indptr must have the dtype of indices"));
    }
    let w = width(indices);
    let rows1 = t.shape[0]
        .checked_add(1)
        .and_then(|r| r.checked_mul(w))
        .ok_or_else(|| rule(t, "indptr size overflows"))?;
    expect_size(t, indptr, Some(rows1))?;
    if indices.decoded_len % w != 0 {
        return Err(rule(t, "indices size is not a whole number of elements"));
    }
    let nnz = indices.decoded_len / w;
    expect_size(t, values, size_of(t, values, nnz)?)
}

fn check_coo(t: &TensorInfo, version: ZtVersion) -> Result<()> {
    if t.shape.is_empty() {
        return Err(rule(t, "rank must be at least 1"));
    }
    exact_parts(t, &["values", "coords"], &[])?;
    let (values, coords) = (need(t, "values")?, need(t, "coords")?);
    plain_index(t, coords, version)?;
    let per = width(coords) * t.shape.len() as u64;
    if coords.decoded_len % per != 0 {
        return Err(rule(t, "coords size is not ndim x nnz indices"));
    }
    expect_size(t, values, size_of(t, values, coords.decoded_len / per)?)
}

fn attr_u64(
    t: &TensorInfo,
    m: &std::collections::BTreeMap<String, MetaValue>,
    key: &str,
) -> Result<u64> {
    match m.get(key) {
        Some(MetaValue::UInt(v)) => Ok(*v),
        Some(MetaValue::Int(v)) if *v >= 0 => Ok(*v as u64),
        Some(_) => Err(rule(
            t,
            format!("attribute '{key}' must be an unsigned integer"),
        )),
        None => Err(rule(t, format!("attribute '{key}' is missing"))),
    }
}

fn attr_str<'m>(
    t: &TensorInfo,
    m: &'m std::collections::BTreeMap<String, MetaValue>,
    key: &str,
) -> Result<&'m str> {
    match m.get(key) {
        Some(MetaValue::Str(s)) => Ok(s),
        Some(_) => Err(rule(t, format!("attribute '{key}' must be text"))),
        None => Err(rule(t, format!("attribute '{key}' is missing"))),
    }
}

fn attr_map<'m>(
    t: &TensorInfo,
    m: &'m std::collections::BTreeMap<String, MetaValue>,
    key: &str,
) -> Result<&'m std::collections::BTreeMap<String, MetaValue>> {
    match m.get(key) {
        Some(MetaValue::Map(x)) => Ok(x),
        Some(_) => Err(rule(t, format!("attribute '{key}' must be a map"))),
        None => Err(rule(t, format!("attribute '{key}' is missing"))),
    }
}

/// v1.1 `quantized_group`: the spec names the parts and attributes `bits`, `group_size`
/// but gives no size equations; when both attributes are present, the ones its example
/// satisfies are applied (codes packed densely, one scale and zero per group).
fn check_quant_v11(t: &TensorInfo) -> Result<()> {
    exact_parts(t, &["packed_weight", "scales", "zeros"], &[])?;
    let a = &t.attributes;
    if !(a.contains_key("bits") && a.contains_key("group_size")) {
        return Ok(());
    }
    let bits = attr_u64(t, a, "bits")?;
    let group = attr_u64(t, a, "group_size")?;
    if !(1..=32).contains(&bits) || group == 0 {
        return Err(rule(t, "bits must be 1..=32 and group_size positive"));
    }
    let n = elements(t);
    let packed = n
        .checked_mul(bits)
        .map(|b| b.div_ceil(8))
        .ok_or_else(|| rule(t, "packed size overflows"))?;
    expect_size(t, need(t, "packed_weight")?, Some(packed))?;
    if n % group != 0 {
        return Err(rule(t, "group_size does not divide the element count"));
    }
    for role in ["scales", "zeros"] {
        let p = need(t, role)?;
        expect_size(t, p, size_of(t, p, n / group)?)?;
    }
    Ok(())
}

/// `zt.quant_group/1`.
fn check_quant_v2(t: &TensorInfo) -> Result<()> {
    let a = &t.attributes;
    let bits = attr_u64(t, a, "bits")?;
    let group = attr_u64(t, a, "group_size")?;
    let axis = attr_u64(t, a, "axis")?;
    let packing = attr_map(t, a, "packing")?;
    let word = attr_str(t, packing, "word")?;
    let order = attr_str(t, packing, "order")?;
    let per_word = attr_u64(t, packing, "per_word")?;
    let scale_form = attr_str(t, a, "scale_form")?;
    let zp = attr_map(t, a, "zero_point")?;
    let form = attr_str(t, zp, "form")?;
    let with_zeros = match form {
        "none" => false,
        "implied" => {
            match zp.get("value") {
                Some(MetaValue::UInt(_) | MetaValue::Int(_)) => {}
                _ => {
                    return Err(rule(
                        t,
                        "zero_point.value must be an integer for form 'implied'",
                    ))
                }
            }
            false
        }
        "tensor" => true,
        other => return Err(rule(t, format!("unknown zero_point.form '{other}'"))),
    };
    if with_zeros {
        exact_parts(t, &["data", "scales", "zeros"], &[])?;
    } else {
        exact_parts(t, &["data", "scales"], &[])?;
    }
    let data = need(t, "data")?;
    let word_dtype = match word {
        "u8" => DType::U8,
        "u16" => DType::U16,
        "u32" => DType::U32,
        "u64" => DType::U64,
        other => return Err(rule(t, format!("unknown packing.word '{other}'"))),
    };
    let unsigned_of = |d: DType| match d {
        DType::I8 => DType::U8,
        DType::I16 => DType::U16,
        DType::I32 => DType::U32,
        DType::I64 => DType::U64,
        d => d,
    };
    if unsigned_of(data.dtype) != word_dtype || data.unknown_type().is_some() {
        return Err(rule(
            t,
            format!(
                "data dtype {} does not match packing.word {word}",
                data.dtype
            ),
        ));
    }
    if order != "lsb_first" && order != "msb_first" {
        return Err(rule(t, format!("unknown packing.order '{order}'")));
    }
    let word_bits = u64::from(word_dtype.bits());
    if ![2, 3, 4, 5, 6, 8].contains(&bits) || word_bits % bits != 0 || per_word != word_bits / bits
    {
        return Err(rule(
            t,
            format!("bits {bits} and per_word {per_word} do not fit a {word} word"),
        ));
    }
    let scales = need(t, "scales")?;
    match scale_form {
        "f32_factors" | "f16_factors" => {
            if !scales.dtype.is_float() || scales.unknown_type().is_some() {
                return Err(rule(t, "scales must be a float type"));
            }
        }
        "e8m0_exponent" => {
            if scales.dtype != DType::F8_E8M0 {
                return Err(rule(t, "e8m0_exponent scales must be u8 with type f8_e8m0"));
            }
        }
        other => return Err(rule(t, format!("unknown scale_form '{other}'"))),
    }
    if axis >= t.shape.len() as u64 {
        return Err(rule(
            t,
            format!("axis {axis} is not below the rank {}", t.shape.len()),
        ));
    }
    let along = t.shape[axis as usize];
    let codes = elements(t);
    let groups = if group == 0 {
        1
    } else if along % group == 0 {
        along / group
    } else {
        return Err(rule(
            t,
            format!("group_size {group} does not divide shape[{axis}] = {along}"),
        ));
    };
    let lanes = codes.checked_div(along).unwrap_or(0);
    if codes % per_word != 0 {
        return Err(rule(t, "the code count is not a whole number of words"));
    }
    let wbytes = word_bits / 8;
    expect_size(t, data, Some(codes / per_word * wbytes))?;
    let per_group = groups
        .checked_mul(lanes)
        .ok_or_else(|| rule(t, "group count overflows"))?;
    expect_size(t, scales, size_of(t, scales, per_group)?)?;
    if with_zeros {
        let zeros = need(t, "zeros")?;
        let want = match zp.get("packing") {
            Some(MetaValue::Str(s)) if s == "plain" => size_of(t, zeros, per_group)?,
            Some(MetaValue::Str(s)) if s == "same_as_data" => {
                if per_group % per_word != 0 {
                    return Err(rule(t, "packed zeros are not a whole number of words"));
                }
                Some(per_group / per_word * wbytes)
            }
            _ => {
                return Err(rule(
                    t,
                    "zero_point.packing must be 'plain' or 'same_as_data'",
                ))
            }
        };
        expect_size(t, zeros, want)?;
    }
    Ok(())
}

/// `zt.mx/1`.
fn check_mx(t: &TensorInfo) -> Result<()> {
    exact_parts(t, &["data", "scales"], &[])?;
    let (data, scales) = (need(t, "data")?, need(t, "scales")?);
    if scales.dtype != DType::F8_E8M0 {
        return Err(rule(t, "scales must be u8 with type f8_e8m0"));
    }
    if !matches!(
        data.dtype,
        DType::F4 | DType::F8_E4M3 | DType::F8_E5M2 | DType::I8
    ) || data.unknown_type().is_some()
    {
        return Err(rule(
            t,
            format!("data type {} is not an MX element type", data.dtype),
        ));
    }
    let block = attr_u64(t, &t.attributes, "block_size")?;
    let rank = t.shape.len() as u64;
    if rank == 0 {
        return Err(rule(t, "rank must be at least 1"));
    }
    let axis = match t.attributes.get("axis") {
        None => rank - 1,
        Some(_) => attr_u64(t, &t.attributes, "axis")?,
    };
    if axis >= rank {
        return Err(rule(t, format!("axis {axis} is not below the rank {rank}")));
    }
    if block < 2 || t.shape[axis as usize] % block != 0 {
        return Err(rule(
            t,
            format!("block_size {block} must be at least 2 and divide shape[{axis}]"),
        ));
    }
    let n = elements(t);
    expect_size(t, data, size_of(t, data, n)?)?;
    expect_size(t, scales, Some(n / block))
}

// ------------------------------------------------------------------------------------------
// Data rules

fn data_err(msg: impl Into<String>) -> crate::Error {
    ErrorKind::ZtLayoutData(msg.into()).into()
}

/// Reads little-endian integer `i` of an index part as u64 (negative values are errors).
fn index_at(p: &Part, bytes: &[u8], i: usize) -> Result<u64> {
    let w = width(p) as usize;
    let b = &bytes[i * w..(i + 1) * w];
    let mut raw = [0u8; 8];
    raw[..w].copy_from_slice(b);
    let v = u64::from_le_bytes(raw);
    let signed = matches!(p.dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    if signed && b[w - 1] & 0x80 != 0 {
        return Err(data_err(format!("negative index in '{}'", p.role)));
    }
    Ok(v)
}

/// The first byte of a bool part's `bytes` that is neither 0x00 nor 0x01 (zTensor's bool
/// rule: readers refuse the part, writers refuse to write it).
pub(crate) fn first_bad_bool(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b > 1)
}

/// Element-level rules of one part's decoded bytes.
pub fn check_part_data(p: &Part, bytes: &[u8], elements_hint: Option<u64>) -> Result<()> {
    match p.dtype {
        DType::BOOL if p.unknown_type().is_none() => {
            if let Some(i) = first_bad_bool(bytes) {
                return Err(data_err(format!(
                    "bool bytes must be 0x00 or 0x01 (part '{}', byte {i} is {:#04x})",
                    p.role, bytes[i]
                )));
            }
        }
        DType::F4 if p.unknown_type().is_none() => {
            if let Some(n) = elements_hint {
                if n % 2 == 1 && bytes.last().is_some_and(|b| b >> 4 != 0) {
                    return Err(data_err("the odd final f4_e2m1 nibble must be zero"));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Data rules of a whole tensor, given its parts' decoded bytes (in `t.parts` order).
pub fn check_data(t: &TensorInfo, bytes: &[&[u8]]) -> Result<()> {
    for (p, b) in t.parts.iter().zip(bytes) {
        let hint = (t.layout == Layout::Dense || t.layout == Layout::Mx && p.role == "data")
            .then(|| elements(t));
        check_part_data(p, b, hint)?;
    }
    let get = |role: &str| -> Option<(&Part, &[u8])> {
        let i = t.parts.iter().position(|p| p.role == role)?;
        Some((&t.parts[i], bytes[i]))
    };
    match t.layout {
        Layout::SparseCsr => {
            let (Some((ip, ib)), Some((xp, xb))) = (get("indptr"), get("indices")) else {
                return Ok(());
            };
            let (rows, cols) = (t.shape[0] as usize, t.shape[1]);
            let nnz = xp.decoded_len / width(xp);
            if index_at(ip, ib, 0)? != 0 {
                return Err(data_err("indptr[0] must be 0"));
            }
            let mut prev = 0u64;
            for r in 0..rows {
                let (a, b) = (index_at(ip, ib, r)?, index_at(ip, ib, r + 1)?);
                if b < a || b > nnz {
                    return Err(data_err(format!(
                        "indptr must be non-decreasing and at most nnz (row {r})"
                    )));
                }
                let mut last: Option<u64> = None;
                for k in a..b {
                    let c = index_at(xp, xb, k as usize)?;
                    if c >= cols {
                        return Err(data_err(format!(
                            "column index {c} out of range in row {r}"
                        )));
                    }
                    if last.is_some_and(|l| c <= l) {
                        return Err(data_err(format!(
                            "column indices of row {r} must increase strictly"
                        )));
                    }
                    last = Some(c);
                }
                prev = b;
            }
            if prev != nnz {
                return Err(data_err(format!("indptr[R] is {prev}, nnz is {nnz}")));
            }
        }
        Layout::SparseCoo => {
            let Some((cp, cb)) = get("coords") else {
                return Ok(());
            };
            let ndim = t.shape.len();
            let nnz = (cp.decoded_len / width(cp)) as usize / ndim;
            let mut seen = std::collections::HashSet::with_capacity(nnz);
            for i in 0..nnz {
                let mut coord = Vec::with_capacity(ndim);
                for d in 0..ndim {
                    let c = index_at(cp, cb, d * nnz + i)?;
                    if c >= t.shape[d] {
                        return Err(data_err(format!(
                            "coordinate {c} out of range in dimension {d}"
                        )));
                    }
                    coord.push(c);
                }
                if !seen.insert(coord) {
                    return Err(data_err(format!("element {i} repeats a coordinate")));
                }
            }
        }
        _ => {}
    }
    Ok(())
}
