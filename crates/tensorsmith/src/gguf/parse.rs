//! The GGUF header parser: magic, version, counts, metadata, tensor infos, alignment and the
//! checks that tie them to the file. It works over a prefix of the file (the whole file when
//! memory-mapped, the first bytes when read with pread or over HTTP) and says when it needs
//! more; every count is checked against what the rest of the *file* can hold before anything
//! is allocated, and allocations grow with bytes actually parsed.

use super::value::{Array, GgufValue, ValueType};
use super::{GgufHeader, GgufTensor};
use crate::error::GgufRule;
use crate::error::{Error, ErrorKind, Result};
use crate::format::OpenOptions;
use crate::ggml_type::GgmlType;
use crate::index::Shape;

/// ggml's GGML_MAX_DIMS.
pub const MAX_DIMS: u32 = 4;
/// Alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Why parsing stopped early.
pub(super) enum Stop {
    /// The prefix ends before the header does; parse again with at least this many bytes.
    NeedMore(u64),
    Err(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Err(e)
    }
}

fn rule(r: GgufRule) -> Stop {
    Stop::Err(Error::new(ErrorKind::Gguf(r)))
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    file_len: u64,
    /// v1 uses 32-bit counts and lengths.
    wide: bool,
}

impl<'a> Cursor<'a> {
    /// Bytes left in the file (not just the buffer) from the current position.
    fn file_left(&self) -> u64 {
        self.file_len.saturating_sub(self.pos as u64)
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], Stop> {
        if n > self.file_left() {
            return Err(rule(GgufRule::Truncated {
                what,
                offset: self.pos as u64,
                needed: n - self.file_left(),
            }));
        }
        let end = self.pos + n as usize; // n <= file_left, which fits in memory's address space
        if end > self.buf.len() {
            // Ask for a little more than needed so long runs of small reads don't refetch.
            return Err(Stop::NeedMore((end as u64).max(self.buf.len() as u64 * 2)));
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Stop> {
        Ok(self.take(N as u64, what)?.try_into().expect("N bytes"))
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, Stop> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, Stop> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, Stop> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count or length: u64, or u32 in version 1.
    fn len(&mut self, what: &'static str) -> Result<u64, Stop> {
        if self.wide {
            self.u64(what)
        } else {
            Ok(self.u32(what)?.into())
        }
    }

    /// Checks that `count` items of at least `min_size` bytes each fit in the rest of the file
    /// and returns a capacity to reserve: no more than the buffered bytes could hold.
    fn count(&self, count: u64, min_size: u64, what: &'static str) -> Result<usize, Stop> {
        if count > self.file_left() / min_size {
            return Err(rule(GgufRule::CountPastEnd {
                what,
                count,
                offset: self.pos as u64,
            }));
        }
        let buffered = (self.buf.len() - self.pos.min(self.buf.len())) as u64 / min_size;
        Ok(count.min(buffered) as usize)
    }

    fn string(&mut self, what: &'static str) -> Result<String, Stop> {
        let len = self.len(what)?;
        let at = self.pos as u64;
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(rule(GgufRule::NotUtf8 { what, offset: at })),
        }
    }

    fn len_size(&self) -> u64 {
        if self.wide {
            8
        } else {
            4
        }
    }
}

/// Parses the header from `buf`, the first bytes (or all) of a file of `file_len` bytes.
pub(super) fn parse(buf: &[u8], file_len: u64, opts: &OpenOptions) -> Result<GgufHeader, Stop> {
    let mut c = Cursor {
        buf,
        pos: 0,
        file_len,
        wide: true,
    };
    let magic: [u8; 4] = c.array("the magic")?;
    if &magic != b"GGUF" {
        return Err(rule(GgufRule::BadMagic(magic)));
    }
    let version = c.u32("the version")?;
    if !(1..=3).contains(&version) {
        if (1..=3).contains(&version.swap_bytes()) {
            return Err(rule(GgufRule::BigEndian(version.swap_bytes())));
        }
        return Err(rule(GgufRule::UnsupportedVersion(version)));
    }
    c.wide = version >= 2;
    let tensor_count = c.len("the tensor count")?;
    let kv_count = c.len("the metadata count")?;

    // Smallest metadata entry: key length, empty key, type, one byte of value.
    let ls = c.len_size();
    let cap = c.count(kv_count, ls + 4 + 1, "the metadata table")?;
    let mut metadata: Vec<(String, GgufValue)> = Vec::with_capacity(cap);
    let mut keys = std::collections::HashSet::with_capacity(cap);
    for _ in 0..kv_count {
        let key = c.string("a metadata key")?;
        let type_id = c.u32("a metadata value type")?;
        let value = read_value(&mut c, &key, type_id, 0, opts)?;
        if !keys.insert(key.clone()) {
            return Err(rule(GgufRule::DuplicateKey(key)));
        }
        metadata.push((key, value));
    }
    drop(keys);

    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, GgufValue::U32(a))) if a.is_power_of_two() => u64::from(*a),
        Some((_, v)) => return Err(rule(GgufRule::BadAlignment(v.describe()))),
    };

    // Smallest tensor info: name length, empty name, n_dims, type, offset.
    let cap = c.count(tensor_count, ls + 4 + 4 + 8, "the tensor-info table")?;
    let mut tensors: Vec<GgufTensor> = Vec::with_capacity(cap);
    for _ in 0..tensor_count {
        let name = c.string("a tensor name")?;
        let t = read_tensor_info(&mut c, name)?;
        tensors.push(t);
    }
    let infos_end = c.pos as u64;
    let data_start = infos_end.div_ceil(alignment) * alignment;

    locate(&mut tensors, data_start, alignment, file_len)?;
    Ok(GgufHeader {
        version,
        metadata,
        tensors,
        alignment,
        data_start,
        file_len,
    })
}

fn read_tensor_info(c: &mut Cursor, name: String) -> Result<GgufTensor, Stop> {
    let at = |e: Stop, name: &str| match e {
        Stop::Err(e) => Stop::Err(e.at_tensor(name)),
        more => more,
    };
    let n_dims = c
        .u32("a tensor's dimension count")
        .map_err(|e| at(e, &name))?;
    if n_dims > MAX_DIMS {
        return Err(at(
            rule(GgufRule::TooManyDims {
                dims: n_dims,
                max: MAX_DIMS,
            }),
            &name,
        ));
    }
    let mut ne: Shape = Shape::new();
    for _ in 0..n_dims {
        let d = c.len("a tensor dimension").map_err(|e| at(e, &name))?;
        ne.push(d);
    }
    let type_id = c.u32("a tensor type").map_err(|e| at(e, &name))?;
    let offset = c.u64("a tensor offset").map_err(|e| at(e, &name))?;
    let ggml_type = GgmlType::from_id(type_id)
        .ok_or_else(|| at(rule(GgufRule::UnknownGgmlType(type_id)), &name))?;
    let elements = ne
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| at(rule(GgufRule::ShapeOverflow), &name))?;
    let block = ggml_type.block_elements();
    let ne0 = ne.first().copied().unwrap_or(1);
    if ne0 % u64::from(block) != 0 {
        return Err(at(
            rule(GgufRule::PartialBlock {
                elements,
                ne0,
                block,
                ggml_type: ggml_type.name(),
            }),
            &name,
        ));
    }
    let byte_len = ggml_type
        .byte_len(elements)
        .ok_or_else(|| at(rule(GgufRule::ShapeOverflow), &name))?;
    Ok(GgufTensor {
        name,
        ne,
        ggml_type,
        offset,
        byte_len,
        range: 0..0,
    })
}

/// Places every tensor in the file and checks alignment, bounds, overlaps and names.
fn locate(
    tensors: &mut [GgufTensor],
    data_start: u64,
    alignment: u64,
    file_len: u64,
) -> Result<(), Stop> {
    let with = |r: GgufRule, name: &str| Stop::Err(Error::new(ErrorKind::Gguf(r)).at_tensor(name));
    for t in tensors.iter_mut() {
        if t.offset % alignment != 0 {
            return Err(with(
                GgufRule::Misaligned {
                    offset: t.offset,
                    alignment,
                },
                &t.name,
            ));
        }
        let start = data_start.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.byte_len));
        match (start, end) {
            (Some(start), Some(end)) if end <= file_len => t.range = start..end,
            _ => {
                return Err(with(
                    GgufRule::DataPastEnd {
                        start: data_start.saturating_add(t.offset),
                        end: data_start
                            .saturating_add(t.offset)
                            .saturating_add(t.byte_len),
                        file_len,
                    },
                    &t.name,
                ))
            }
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| (tensors[i].range.start, tensors[i].range.end));
    let mut prev: Option<usize> = None;
    for &i in &order {
        if tensors[i].range.is_empty() {
            continue;
        }
        if let Some(p) = prev {
            if tensors[i].range.start < tensors[p].range.end {
                let r = tensors[i].range.clone();
                return Err(with(
                    GgufRule::Overlap {
                        start: r.start,
                        end: r.end,
                        other: tensors[p].name.clone(),
                    },
                    &tensors[i].name,
                ));
            }
        }
        prev = Some(i);
    }
    let mut names = std::collections::HashSet::with_capacity(tensors.len());
    for t in tensors.iter() {
        if !names.insert(t.name.as_str()) {
            return Err(with(GgufRule::DuplicateTensor, &t.name));
        }
    }
    Ok(())
}

fn read_value(
    c: &mut Cursor,
    key: &str,
    type_id: u32,
    depth: usize,
    opts: &OpenOptions,
) -> Result<GgufValue, Stop> {
    let ty = ValueType::from_id(type_id).ok_or_else(|| {
        rule(GgufRule::BadValueType {
            key: key.to_owned(),
            id: type_id,
        })
    })?;
    const W: &str = "a metadata value";
    Ok(match ty {
        ValueType::U8 => GgufValue::U8(c.u8(W)?),
        ValueType::I8 => GgufValue::I8(c.u8(W)? as i8),
        ValueType::U16 => GgufValue::U16(u16::from_le_bytes(c.array(W)?)),
        ValueType::I16 => GgufValue::I16(i16::from_le_bytes(c.array(W)?)),
        ValueType::U32 => GgufValue::U32(c.u32(W)?),
        ValueType::I32 => GgufValue::I32(i32::from_le_bytes(c.array(W)?)),
        ValueType::F32 => GgufValue::F32(f32::from_le_bytes(c.array(W)?)),
        ValueType::U64 => GgufValue::U64(c.u64(W)?),
        ValueType::I64 => GgufValue::I64(i64::from_le_bytes(c.array(W)?)),
        ValueType::F64 => GgufValue::F64(f64::from_le_bytes(c.array(W)?)),
        ValueType::Bool => GgufValue::Bool(read_bool(c, key)?),
        ValueType::String => GgufValue::String(c.string("a metadata string")?),
        ValueType::Array => GgufValue::Array(read_array(c, key, depth + 1, opts)?),
    })
}

fn read_bool(c: &mut Cursor, key: &str) -> Result<bool, Stop> {
    match c.u8("a metadata bool")? {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(rule(GgufRule::BadBool {
            key: key.to_owned(),
            value,
        })),
    }
}

fn read_array(c: &mut Cursor, key: &str, depth: usize, opts: &OpenOptions) -> Result<Array, Stop> {
    if depth > opts.max_array_depth() {
        return Err(rule(GgufRule::NestingTooDeep {
            key: key.to_owned(),
            limit: opts.max_array_depth(),
        }));
    }
    let type_id = c.u32("an array element type")?;
    let ty = ValueType::from_id(type_id).ok_or_else(|| {
        rule(GgufRule::BadValueType {
            key: key.to_owned(),
            id: type_id,
        })
    })?;
    let count = c.len("an array length")?;
    let ls = c.len_size();
    let min_size = match ty {
        ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
        ValueType::U16 | ValueType::I16 => 2,
        ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
        ValueType::U64 | ValueType::I64 | ValueType::F64 => 8,
        ValueType::String => ls,
        ValueType::Array => 4 + ls,
    };
    let cap = c.count(count, min_size, "an array")?;
    const W: &str = "an array element";

    /// Reads `count` fixed-size little-endian numbers in one bounds check.
    macro_rules! numbers {
        ($t:ty, $variant:ident) => {{
            const SIZE: usize = std::mem::size_of::<$t>();
            let bytes = c.take(count * SIZE as u64, W)?;
            Array::$variant(
                bytes
                    .chunks_exact(SIZE)
                    .map(|b| <$t>::from_le_bytes(b.try_into().expect("SIZE bytes")))
                    .collect(),
            )
        }};
    }
    Ok(match ty {
        ValueType::U8 => Array::U8(c.take(count, W)?.to_vec()),
        ValueType::I8 => numbers!(i8, I8),
        ValueType::U16 => numbers!(u16, U16),
        ValueType::I16 => numbers!(i16, I16),
        ValueType::U32 => numbers!(u32, U32),
        ValueType::I32 => numbers!(i32, I32),
        ValueType::F32 => numbers!(f32, F32),
        ValueType::U64 => numbers!(u64, U64),
        ValueType::I64 => numbers!(i64, I64),
        ValueType::F64 => numbers!(f64, F64),
        ValueType::Bool => {
            let mut v = Vec::with_capacity(cap);
            for _ in 0..count {
                v.push(read_bool(c, key)?);
            }
            Array::Bool(v)
        }
        ValueType::String => {
            let mut v = Vec::with_capacity(cap);
            for _ in 0..count {
                v.push(c.string("an array string")?);
            }
            Array::String(v)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(cap);
            for _ in 0..count {
                v.push(read_array(c, key, depth + 1, opts)?);
            }
            Array::Array(v)
        }
    })
}
