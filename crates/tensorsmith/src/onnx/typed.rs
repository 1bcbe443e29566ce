//! Typed value fields (`float_data`, `int32_data`, ...) decoded to the little-endian bytes
//! `raw_data` would hold: each entry narrowed to its dtype's width (int32_data carries int8,
//! uint16, float16 bit patterns and packed sub-byte bytes; uint64_data carries uint32).

use super::data_type::Typed;
use super::wire::{varint, Fields, Value};
use crate::error::{OnnxRule, Result};
use std::ops::Range;

/// The values of field `kind` inside `buf[span]` (a `TensorProto` stretch starting at a tag),
/// each entry written as `width` little-endian bytes; exactly `len` bytes or an error.
pub(crate) fn decode(
    buf: &[u8],
    span: Range<usize>,
    base: u64,
    kind: Typed,
    width: usize,
    len: u64,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len.min(buf.len() as u64 * 8) as usize);
    // Width 0: 6-bit values packed low bits first, as raw_data holds them.
    let mut bit = 0usize;
    let mut put = |v: u64| {
        if width > 0 {
            return out.extend_from_slice(&v.to_le_bytes()[..width]);
        }
        let v = (v & 0x3f) as u16;
        let shift = bit % 8;
        if shift == 0 {
            out.push(0);
        }
        let last = out.len() - 1;
        out[last] |= (v << shift) as u8;
        if shift > 2 {
            out.push((v >> (8 - shift)) as u8);
        }
        bit += 6;
    };
    for f in Fields::new(buf, span, base) {
        let f = f?;
        if f.number != kind.field() {
            continue;
        }
        match (&f.value, kind.fixed_width()) {
            (Value::Len(r), Some(w)) => {
                for c in buf[r.clone()].chunks_exact(w) {
                    let mut b = [0u8; 8];
                    b[..w].copy_from_slice(c);
                    put(u64::from_le_bytes(b));
                }
            }
            (Value::Len(r), None) => {
                let mut p = r.start;
                while p < r.end {
                    let (v, q) = varint(buf, p, r.end, base)?;
                    put(v);
                    p = q;
                }
            }
            (Value::Fixed32(v), _) => put(u64::from(*v)),
            (Value::Fixed64(v), _) | (Value::Varint(v), _) => put(*v),
        }
    }
    if out.len() as u64 != len {
        return Err(OnnxRule::DataLength {
            field: kind.name(),
            expected: len,
            actual: out.len() as u64,
        }
        .into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrows_int32_entries_to_their_width() {
        // int32_data packed [1, 300, -1 as 10-byte varint]
        let mut buf = vec![0x2a, 13, 1, 0xac, 0x02];
        buf.extend([0xff; 9]);
        buf.push(0x01);
        let out = decode(&buf, 0..buf.len(), 0, Typed::Int32, 2, 6).unwrap();
        assert_eq!(out, [1, 0, 0x2c, 0x01, 0xff, 0xff]);
    }

    #[test]
    fn packs_six_bit_entries_low_bits_first() {
        // float6 e2m3 1.0 (0x08) four times packs to 08 82 20, as onnx's raw_data.
        let buf = [0x2a, 4, 8, 8, 8, 8];
        let out = decode(&buf, 0..buf.len(), 0, Typed::Int32, 0, 3).unwrap();
        assert_eq!(out, [0x08, 0x82, 0x20]);
    }

    #[test]
    fn reads_packed_floats_and_scalar_doubles() {
        let mut buf = vec![0x22, 8];
        buf.extend(1.5f32.to_le_bytes());
        buf.extend(2.5f32.to_le_bytes());
        let out = decode(&buf, 0..buf.len(), 0, Typed::Float, 4, 8).unwrap();
        assert_eq!(out[4..], 2.5f32.to_le_bytes());
        let mut d = vec![0x51];
        d.extend(3.0f64.to_le_bytes());
        let out = decode(&d, 0..d.len(), 0, Typed::Double, 8, 8).unwrap();
        assert_eq!(out, 3.0f64.to_le_bytes());
    }
}
