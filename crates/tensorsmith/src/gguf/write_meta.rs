//! GGUF metadata as bytes, as gguf-py's `GGUFWriter` packs it (v3, little-endian): strings
//! as a u64 length plus UTF-8, a value as its u32 type id then its bytes, an array as its
//! element type, u64 count, then the elements (nested arrays the same way, recursively).
//! Also `KEY=TYPE:VALUE` assignments (`convert --set`) parsed into typed values.

use super::value::{Array, GgufValue, ValueType};

pub(super) fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// One key-value entry: key, type id, value.
pub(super) fn put_entry(out: &mut Vec<u8>, key: &str, v: &GgufValue) {
    put_string(out, key);
    out.extend_from_slice(&(v.value_type() as u32).to_le_bytes());
    put_value(out, v);
}

fn put_value(out: &mut Vec<u8>, v: &GgufValue) {
    match v {
        GgufValue::U8(x) => out.push(*x),
        GgufValue::I8(x) => out.push(*x as u8),
        GgufValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::Bool(x) => out.push(*x as u8),
        GgufValue::String(s) => put_string(out, s),
        GgufValue::Array(a) => put_array(out, a),
        GgufValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&(a.element_type() as u32).to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => le!(v),
        Array::U16(v) => le!(v),
        Array::I16(v) => le!(v),
        Array::U32(v) => le!(v),
        Array::I32(v) => le!(v),
        Array::F32(v) => le!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| b as u8)),
        Array::String(v) => v.iter().for_each(|s| put_string(out, s)),
        Array::Array(v) => v.iter().for_each(|a| put_array(out, a)),
        Array::U64(v) => le!(v),
        Array::I64(v) => le!(v),
        Array::F64(v) => le!(v),
    }
}

/// The value type of a `--set` type name: gguf-py's (`UINT32`, `STRING`, …) or the short
/// forms `u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool str`, any case.
pub fn value_type_by_name(name: &str) -> Option<ValueType> {
    let n = name.to_ascii_lowercase();
    (0..13).filter_map(ValueType::from_id).find(|t| {
        let long = t.name().to_ascii_lowercase();
        let short = long
            .replace("uint", "u")
            .replace("int", "i")
            .replace("float", "f")
            .replace("string", "str");
        n == long || n == short
    })
}

/// `KEY=TYPE:VALUE` (`general.name=str:my model`, `llama.context_length=u32:4096`) as a key
/// and a typed value; the error says what is wrong. Arrays cannot be set this way.
pub fn parse_assignment(s: &str) -> Result<(String, GgufValue), String> {
    let bad = |why: &str| {
        Err(format!(
            "bad assignment {s:?}: {why} (expected KEY=TYPE:VALUE)"
        ))
    };
    let Some((key, rest)) = s.split_once('=') else {
        return bad("no '='");
    };
    let Some((ty, value)) = rest.split_once(':') else {
        return bad("no ':' after the type");
    };
    if key.is_empty() {
        return bad("empty key");
    }
    let Some(t) = value_type_by_name(ty) else {
        return bad(&format!("unknown value type {ty:?}"));
    };
    fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
        v.trim()
            .parse()
            .map_err(|_| format!("{v:?} is not a number of that type"))
    }
    let v = (|| -> Result<GgufValue, String> {
        Ok(match t {
            ValueType::U8 => GgufValue::U8(num(value)?),
            ValueType::I8 => GgufValue::I8(num(value)?),
            ValueType::U16 => GgufValue::U16(num(value)?),
            ValueType::I16 => GgufValue::I16(num(value)?),
            ValueType::U32 => GgufValue::U32(num(value)?),
            ValueType::I32 => GgufValue::I32(num(value)?),
            ValueType::U64 => GgufValue::U64(num(value)?),
            ValueType::I64 => GgufValue::I64(num(value)?),
            ValueType::F32 => GgufValue::F32(num(value)?),
            ValueType::F64 => GgufValue::F64(num(value)?),
            ValueType::Bool => match value.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => GgufValue::Bool(true),
                "false" | "0" => GgufValue::Bool(false),
                _ => return Err(format!("{value:?} is not true or false")),
            },
            ValueType::String => GgufValue::String(value.to_owned()),
            ValueType::Array => return Err("arrays cannot be set from the command line".into()),
        })
    })();
    match v {
        Ok(v) => Ok((key.to_owned(), v)),
        Err(why) => bad(&why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_packed_as_gguf_py_packs_them() {
        let mut b = Vec::new();
        put_entry(&mut b, "k", &GgufValue::U32(7));
        assert_eq!(b, [1, 0, 0, 0, 0, 0, 0, 0, b'k', 4, 0, 0, 0, 7, 0, 0, 0]);
        let mut b = Vec::new();
        let nested = Array::Array(vec![Array::Bool(vec![true]), Array::I16(vec![-2])]);
        put_entry(&mut b, "a", &GgufValue::Array(nested));
        #[rustfmt::skip]
        let want = [
            1, 0, 0, 0, 0, 0, 0, 0, b'a', 9, 0, 0, 0,           // key, ARRAY
            9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,                 // of 2 arrays
            7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1,              // [true]
            3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff,     // [-2i16]
        ];
        assert_eq!(b, want);
    }

    #[test]
    fn assignments_parse_every_scalar_type() {
        let ok = |s| parse_assignment(s).unwrap();
        assert_eq!(ok("a.b=u32:4096"), ("a.b".into(), GgufValue::U32(4096)));
        assert_eq!(ok("x=UINT8:255").1, GgufValue::U8(255));
        assert_eq!(ok("x=i64:-5").1, GgufValue::I64(-5));
        assert_eq!(ok("x=f32:0.5").1, GgufValue::F32(0.5));
        assert_eq!(ok("x=float64:2").1, GgufValue::F64(2.0));
        assert_eq!(ok("x=bool:true").1, GgufValue::Bool(true));
        assert_eq!(ok("x=str:a=b:c").1, GgufValue::String("a=b:c".into()));
        assert_eq!(ok("x=string:").1, GgufValue::String(String::new()));
    }

    #[test]
    fn bad_assignments_say_why() {
        for (s, why) in [
            ("x", "no '='"),
            ("x=u32", "no ':'"),
            ("=u32:1", "empty key"),
            ("x=u7:1", "unknown value type"),
            ("x=u8:256", "not a number"),
            ("x=bool:yes", "not true or false"),
            ("x=array:1", "arrays cannot"),
        ] {
            let e = parse_assignment(s).unwrap_err();
            assert!(e.contains(why) && e.contains(s), "{s}: {e}");
        }
    }
}
