//! One `TensorProto` read off the wire: its name, dims, data_type and where its values are
//! (a `raw_data` range, the span of a typed field, external data keys, string entries),
//! before any rule about them is checked (`to_index.rs` does that).

use super::data_type::Typed;
use super::wire::{count_varints, Field, Fields, Value};
use crate::error::{OnnxRule, Result};
use std::ops::Range;

/// Where a tensor's values are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Values {
    None,
    Raw(Range<usize>),
    /// A typed field: from its first occurrence's tag to its last's end (other fields in
    /// between are skipped when decoding), and the number of entries it holds.
    Typed {
        kind: Typed,
        span: Range<usize>,
        count: u64,
    },
    /// `data_location` EXTERNAL: the `external_data` entries, in order.
    External(Vec<(String, String)>),
    /// `string_data` entries (their count).
    Strings(u64),
}

/// A `TensorProto` as the wire has it.
#[derive(Debug, Clone)]
pub(crate) struct RawTensor {
    pub name: Option<String>,
    pub dims: Vec<i64>,
    pub data_type: Option<i64>,
    pub values: Values,
    pub segment: bool,
    /// Bytes of values stored in the `.onnx` itself (not counted as graph bytes).
    pub weight_bytes: u64,
}

/// Checks that `f` has wire type `want` (0 varint, 2 length-delimited).
pub(crate) fn expect(
    f: &Field,
    want: u8,
    message: &'static str,
    field: &'static str,
    base: u64,
) -> Result<()> {
    if f.value.wire_type() == want {
        return Ok(());
    }
    Err(OnnxRule::WrongWireType {
        message,
        field,
        offset: base + f.start as u64,
        wire_type: f.value.wire_type(),
        expected: match want {
            0 => "varint",
            1 => "fixed64",
            5 => "fixed32",
            _ => "length-delimited",
        },
    }
    .into())
}

/// The UTF-8 text of a length-delimited field.
pub(crate) fn text(
    buf: &[u8],
    f: &Field,
    message: &'static str,
    what: &'static str,
    base: u64,
) -> Result<String> {
    expect(f, 2, message, what, base)?;
    let Value::Len(r) = &f.value else {
        unreachable!("checked above")
    };
    std::str::from_utf8(&buf[r.clone()])
        .map(str::to_owned)
        .map_err(|_| {
            OnnxRule::NotUtf8 {
                what,
                offset: base + r.start as u64,
            }
            .into()
        })
}

/// The payload range of a length-delimited field.
pub(crate) fn payload(
    f: &Field,
    message: &'static str,
    field: &'static str,
    base: u64,
) -> Result<Range<usize>> {
    expect(f, 2, message, field, base)?;
    match &f.value {
        Value::Len(r) => Ok(r.clone()),
        _ => unreachable!("checked above"),
    }
}

/// A varint field's value.
pub(crate) fn int(f: &Field, message: &'static str, field: &'static str, base: u64) -> Result<u64> {
    expect(f, 0, message, field, base)?;
    match f.value {
        Value::Varint(v) => Ok(v),
        _ => unreachable!("checked above"),
    }
}

/// Reads the `TensorProto` in `buf[range]`.
pub(crate) fn read_tensor(buf: &[u8], range: Range<usize>, base: u64) -> Result<RawTensor> {
    const M: &str = "TensorProto";
    let mut t = RawTensor {
        name: None,
        dims: Vec::new(),
        data_type: None,
        values: Values::None,
        segment: false,
        weight_bytes: 0,
    };
    let mut raw: Option<Range<usize>> = None;
    let mut typed: Option<(Typed, Range<usize>, u64)> = None;
    let mut external: Vec<(String, String)> = Vec::new();
    let mut strings = 0u64;
    let mut location = 0u64;
    for f in Fields::new(buf, range, base) {
        let f = f?;
        match f.number {
            1 => match &f.value {
                Value::Varint(v) => t.dims.push(*v as i64),
                Value::Len(r) => {
                    let mut p = r.start;
                    while p < r.end {
                        let (v, q) = super::wire::varint(buf, p, r.end, base)?;
                        t.dims.push(v as i64);
                        p = q;
                    }
                }
                _ => expect(&f, 0, M, "dims", base)?,
            },
            2 => t.data_type = Some(int(&f, M, "data_type", base)? as i64),
            3 => t.segment = true,
            8 => t.name = Some(text(buf, &f, M, "tensor name", base)?),
            9 => raw = Some(payload(&f, M, "raw_data", base)?),
            6 => {
                payload(&f, M, "string_data", base)?;
                strings += 1;
            }
            13 => external.push(read_entry(buf, &f, base)?),
            14 => location = int(&f, M, "data_location", base)?,
            n => {
                let Some(kind) = Typed::of_field(n) else {
                    continue;
                };
                let count = typed_entries(buf, &f, kind, base)?;
                match &mut typed {
                    None => typed = Some((kind, f.start..f.end, count)),
                    Some((k, span, n)) if *k == kind => {
                        span.end = f.end;
                        *n += count;
                    }
                    Some((k, _, _)) => {
                        return Err(OnnxRule::TwoValueFields {
                            first: k.name(),
                            second: kind.name(),
                        }
                        .into())
                    }
                }
            }
        }
    }
    let two = |a: &'static str, b: &'static str| -> crate::Error {
        OnnxRule::TwoValueFields {
            first: a,
            second: b,
        }
        .into()
    };
    t.values = match (raw, typed, location == 1, strings) {
        (Some(_), Some((k, ..)), ..) => return Err(two("raw_data", k.name())),
        (Some(r), None, false, 0) => {
            t.weight_bytes = r.len() as u64;
            Values::Raw(r)
        }
        (None, Some((kind, span, count)), false, 0) => {
            t.weight_bytes = span.len() as u64;
            Values::Typed { kind, span, count }
        }
        (Some(r), None, true, _) if !r.is_empty() => return Err(two("raw_data", "external_data")),
        (None, Some((k, ..)), true, _) => return Err(two(k.name(), "external_data")),
        (_, None, true, _) => Values::External(external),
        (None, None, false, 0) => Values::None,
        (Some(_), None, false, _) => return Err(two("raw_data", "string_data")),
        (None, Some((k, ..)), false, _) => return Err(two(k.name(), "string_data")),
        (None, None, false, n) => Values::Strings(n),
    };
    Ok(t)
}

/// The entries one occurrence of a typed field holds (packed or one scalar).
fn typed_entries(buf: &[u8], f: &Field, kind: Typed, base: u64) -> Result<u64> {
    const M: &str = "TensorProto";
    match (&f.value, kind.fixed_width()) {
        (Value::Len(r), Some(w)) => {
            if r.len() % w != 0 {
                return Err(OnnxRule::DataLength {
                    field: kind.name(),
                    expected: (r.len() / w * w) as u64,
                    actual: r.len() as u64,
                }
                .into());
            }
            Ok((r.len() / w) as u64)
        }
        (Value::Len(r), None) => count_varints(buf, r.clone(), base),
        (Value::Fixed32(_), Some(4)) | (Value::Fixed64(_), Some(8)) | (Value::Varint(_), None) => {
            Ok(1)
        }
        _ => {
            let want = match kind.fixed_width() {
                Some(4) => 5,
                Some(_) => 1,
                None => 0,
            };
            expect(f, want, M, kind.name(), base).map(|_| 0)
        }
    }
}

/// One `StringStringEntryProto` (key 1, value 2).
pub(crate) fn read_entry(buf: &[u8], f: &Field, base: u64) -> Result<(String, String)> {
    const M: &str = "StringStringEntryProto";
    let r = payload(f, "TensorProto", "external_data", base)?;
    let (mut k, mut v) = (String::new(), String::new());
    for e in Fields::new(buf, r, base) {
        let e = e?;
        match e.number {
            1 => k = text(buf, &e, M, "key", base)?,
            2 => v = text(buf, &e, M, "value", base)?,
            _ => {}
        }
    }
    Ok((k, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_packed_and_unpacked_dims_and_raw_data() {
        // dims packed [2, 3], dims 4 unpacked, data_type 1, name "w", raw_data 2 bytes
        let buf = [
            0x0a, 2, 2, 3, 0x08, 4, 0x10, 1, 0x42, 1, b'w', 0x4a, 2, 9, 9,
        ];
        let t = read_tensor(&buf, 0..buf.len(), 0).unwrap();
        assert_eq!(t.dims, vec![2, 3, 4]);
        assert_eq!(t.data_type, Some(1));
        assert_eq!(t.name.as_deref(), Some("w"));
        assert_eq!(t.values, Values::Raw(13..15));
    }

    #[test]
    fn typed_spans_cover_scattered_entries() {
        // int32_data 1, name, int32_data packed [2, 3]
        let buf = [0x28, 1, 0x42, 1, b'x', 0x2a, 2, 2, 3];
        let t = read_tensor(&buf, 0..buf.len(), 0).unwrap();
        assert_eq!(
            t.values,
            Values::Typed {
                kind: Typed::Int32,
                span: 0..9,
                count: 3
            }
        );
    }

    #[test]
    fn refuses_two_value_fields() {
        let buf = [0x28, 1, 0x4a, 1, 0];
        let e = read_tensor(&buf, 0..buf.len(), 0).unwrap_err();
        assert!(matches!(
            e.kind(),
            crate::ErrorKind::Onnx(OnnxRule::TwoValueFields { .. })
        ));
    }
}
