//! The protobuf wire format, read by hand over a borrowed buffer. A protobuf crate (prost,
//! protobuf) decodes whole messages into owned vectors: it would copy every `raw_data` out of
//! the map (weights must stay zero-copy ranges of the file), forget which fields were present
//! (weight-inspect's hash tells a missing `domain` from an empty one), recurse with no depth
//! limit of ours, allocate repeated fields before knowing the file holds them, and could not
//! count the graph's bytes apart from the weights (`--max-header-size`). So fields are walked
//! here, as ranges of the buffer, and each message takes only what it needs.

use crate::error::{OnnxRule, Result};
use std::ops::Range;

/// A field's value as the wire carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// Length-delimited: the payload's range in the buffer.
    Len(Range<usize>),
}

impl Value {
    pub(crate) fn wire_type(&self) -> u8 {
        match self {
            Value::Varint(_) => 0,
            Value::Fixed64(_) => 1,
            Value::Len(_) => 2,
            Value::Fixed32(_) => 5,
        }
    }
}

/// One field: its number, value and where it starts (its tag) and ends in the buffer.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub number: u32,
    pub value: Value,
    pub start: usize,
    pub end: usize,
}

/// The fields of one message, `buf[range]`, in wire order. `base` is the buffer's offset in
/// the file, for error positions.
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    base: u64,
    failed: bool,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(buf: &'a [u8], range: Range<usize>, base: u64) -> Self {
        Fields {
            buf,
            pos: range.start,
            end: range.end.min(buf.len()),
            base,
            failed: false,
        }
    }

    fn at(&self, pos: usize) -> u64 {
        self.base + pos as u64
    }

    fn next_field(&mut self) -> Result<Field> {
        let start = self.pos;
        let (tag, p) = varint(self.buf, self.pos, self.end, self.base)?;
        let number = tag >> 3;
        let wire_type = (tag & 7) as u8;
        if number == 0 {
            return Err(OnnxRule::FieldZero {
                offset: self.at(start),
            }
            .into());
        }
        let number = u32::try_from(number).map_err(|_| OnnxRule::BadWireType {
            wire_type,
            offset: self.at(start),
        })?;
        let fixed = |n: usize| -> Result<usize> {
            if self.end - p < n {
                return Err(past_end(
                    "fixed-width value",
                    self.at(p),
                    n as u64,
                    self.end - p,
                ));
            }
            Ok(p + n)
        };
        let (value, end) = match wire_type {
            0 => {
                let (v, e) = varint(self.buf, p, self.end, self.base)?;
                (Value::Varint(v), e)
            }
            1 => {
                let e = fixed(8)?;
                let v = u64::from_le_bytes(self.buf[p..e].try_into().expect("8 bytes"));
                (Value::Fixed64(v), e)
            }
            5 => {
                let e = fixed(4)?;
                let v = u32::from_le_bytes(self.buf[p..e].try_into().expect("4 bytes"));
                (Value::Fixed32(v), e)
            }
            2 => {
                let (len, q) = varint(self.buf, p, self.end, self.base)?;
                let left = (self.end - q) as u64;
                if len > left {
                    return Err(past_end(
                        "length-delimited field",
                        self.at(start),
                        len,
                        left as usize,
                    ));
                }
                let e = q + len as usize;
                (Value::Len(q..e), e)
            }
            _ => {
                return Err(OnnxRule::BadWireType {
                    wire_type,
                    offset: self.at(start),
                }
                .into())
            }
        };
        self.pos = end;
        Ok(Field {
            number,
            value,
            start,
            end,
        })
    }
}

impl Iterator for Fields<'_> {
    type Item = Result<Field>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let r = self.next_field();
        self.failed = r.is_err();
        Some(r)
    }
}

fn past_end(what: &'static str, offset: u64, needed: impl Into<u64>, left: usize) -> crate::Error {
    OnnxRule::PastEnd {
        what,
        offset,
        needed: needed.into(),
        available: left as u64,
    }
    .into()
}

/// The varint at `buf[pos..end]` and the position after it: at most 10 bytes.
pub(crate) fn varint(buf: &[u8], pos: usize, end: usize, base: u64) -> Result<(u64, usize)> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let p = pos + i;
        if p >= end {
            return Err(past_end("varint", base + pos as u64, 1u64, 0));
        }
        let b = buf[p];
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((v, p + 1));
        }
    }
    Err(OnnxRule::VarintTooLong {
        offset: base + pos as u64,
    }
    .into())
}

/// The number of varints in a packed payload, checking that the last one ends inside it and
/// none is longer than 10 bytes.
pub(crate) fn count_varints(buf: &[u8], range: Range<usize>, base: u64) -> Result<u64> {
    let mut n = 0u64;
    let mut run = 0usize;
    for (i, b) in buf[range.clone()].iter().enumerate() {
        run += 1;
        if run > 10 {
            return Err(OnnxRule::VarintTooLong {
                offset: base + (range.start + i + 1 - run) as u64,
            }
            .into());
        }
        if b & 0x80 == 0 {
            n += 1;
            run = 0;
        }
    }
    if run != 0 {
        return Err(past_end("packed varint", base + range.end as u64, 1u64, 0));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(buf: &[u8]) -> Result<Vec<Field>> {
        Fields::new(buf, 0..buf.len(), 0).collect()
    }

    #[test]
    fn reads_every_wire_type() {
        let buf = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 0x02, b'h', b'i', // 3: "hi"
            0x25, 2, 0, 0, 0, // 4: fixed32 2
        ];
        let f = all(&buf).unwrap();
        assert_eq!(f[0].value, Value::Varint(150));
        assert_eq!(f[1].value, Value::Fixed64(1));
        assert_eq!(f[2].value, Value::Len(14..16));
        assert_eq!((f[3].number, f[3].value.clone()), (4, Value::Fixed32(2)));
    }

    #[test]
    fn rejects_an_eleven_byte_varint() {
        let buf = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let e = all(&buf).unwrap_err();
        assert!(matches!(
            e.kind(),
            crate::ErrorKind::Onnx(OnnxRule::VarintTooLong { offset: 1 })
        ));
    }

    #[test]
    fn rejects_a_length_past_the_end() {
        let e = all(&[0x0a, 0x05, 1, 2]).unwrap_err();
        assert!(matches!(
            e.kind(),
            crate::ErrorKind::Onnx(OnnxRule::PastEnd {
                needed: 5,
                available: 2,
                ..
            })
        ));
    }

    #[test]
    fn rejects_groups_and_field_zero() {
        assert!(matches!(
            all(&[0x0b]).unwrap_err().kind(),
            crate::ErrorKind::Onnx(OnnxRule::BadWireType { wire_type: 3, .. })
        ));
        assert!(matches!(
            all(&[0x00, 0x00]).unwrap_err().kind(),
            crate::ErrorKind::Onnx(OnnxRule::FieldZero { .. })
        ));
    }

    #[test]
    fn counts_packed_varints() {
        assert_eq!(count_varints(&[1, 0x80, 1, 2], 0..4, 0).unwrap(), 3);
        assert!(count_varints(&[1, 0x80], 0..2, 0).is_err());
    }
}
