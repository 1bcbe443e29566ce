//! A small CBOR decoder and encoder over byte slices, written for zTensor manifests.
//!
//! Hand-written rather than taken from a crate because the format needs what general CBOR
//! crates do not expose: v2 readers must *reject* non-deterministic encodings (non-shortest
//! heads, indefinite lengths, unsorted or duplicate keys by encoded bytes, wide floats, tags),
//! and byte-identical writing needs exact control of map key order (serde field order for
//! v0.1, BTreeMap order for v1.1, encoded-bytes order for v2) and of definite vs indefinite
//! maps. Decoding never allocates more than the input could hold and never recurses deeper
//! than a fixed limit, so it is safe on any input.

use crate::error::{ErrorKind, Result};
use crate::index::MetaValue;
use std::collections::BTreeMap;

/// A decoded CBOR item borrowing its strings from the input.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// An unsigned integer (major type 0).
    UInt(u64),
    /// A negative integer `-1 - n`.
    NInt(u64),
    /// A byte string (major type 2).
    Bytes(&'a [u8]),
    /// A UTF-8 text string (major type 3).
    Text(&'a str),
    /// An array of items (major type 4).
    Array(Vec<Value<'a>>),
    /// Entries in encoded order.
    Map(Vec<(Value<'a>, Value<'a>)>),
    /// `true` or `false`.
    Bool(bool),
    /// CBOR `null`.
    Null,
    /// A float of any encoded width (half, single or double), widened to f64.
    Float(f64),
}

/// Decoding rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// RFC 7049 as serde_cbor writes it: indefinite arrays and maps accepted. Duplicate keys
    /// are still rejected.
    Lenient,
    /// RFC 8949 §4.2.1 core deterministic encoding, as zTensor v2 requires.
    Deterministic,
}

/// Deepest nesting accepted: zTensor v2 allows 32 levels from the manifest root; lenient
/// decoding allows a little more but still bounds the recursion.
const MAX_DEPTH_DETERMINISTIC: usize = 32;
const MAX_DEPTH_LENIENT: usize = 64;

/// Decodes exactly one item filling all of `bytes`.
pub fn decode(bytes: &[u8], mode: Mode) -> Result<Value<'_>> {
    let mut d = Decoder {
        b: bytes,
        pos: 0,
        mode,
        max_depth: match mode {
            Mode::Lenient => MAX_DEPTH_LENIENT,
            Mode::Deterministic => MAX_DEPTH_DETERMINISTIC,
        },
    };
    let v = d.item(1)?;
    if d.pos != bytes.len() {
        return Err(d.syntax("trailing bytes after the manifest item"));
    }
    Ok(v)
}

struct Decoder<'a> {
    b: &'a [u8],
    pos: usize,
    mode: Mode,
    max_depth: usize,
}

/// What a head byte and its argument say.
enum Head {
    Arg(u8, u64),
    Indefinite(u8),
    Float(f64, u8),
    Simple(u8),
}

impl<'a> Decoder<'a> {
    fn syntax(&self, msg: &str) -> crate::Error {
        ErrorKind::Cbor {
            msg: msg.to_string(),
            offset: self.pos,
        }
        .into()
    }

    fn nondet(&self, msg: &'static str, offset: usize) -> crate::Error {
        ErrorKind::CborNotDeterministic { msg, offset }.into()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.b.len() => {
                let s = &self.b[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(self.syntax("item runs past the end of the manifest")),
        }
    }

    fn head(&mut self) -> Result<Head> {
        let start = self.pos;
        let ib = self.take(1)?[0];
        let (major, ai) = (ib >> 5, ib & 31);
        let det = self.mode == Mode::Deterministic;
        if major == 7 {
            return match ai {
                0..=23 => Ok(Head::Simple(ai)),
                24 => {
                    let v = self.take(1)?[0];
                    if det && v < 32 {
                        return Err(self.nondet("non-shortest simple value", start));
                    }
                    Ok(Head::Simple(v))
                }
                25 => {
                    let x = self.take(2)?;
                    let h = half::f16::from_bits(u16::from_be_bytes([x[0], x[1]]));
                    if det && h.is_nan() && h.to_bits() != 0x7e00 {
                        return Err(self.nondet("NaN other than f9 7e00", start));
                    }
                    Ok(Head::Float(h.to_f64(), 2))
                }
                26 => {
                    let x = self.take(4)?;
                    let f = f32::from_be_bytes(x.try_into().expect("4 bytes"));
                    Ok(Head::Float(f64::from(f), 4))
                }
                27 => {
                    let x = self.take(8)?;
                    Ok(Head::Float(
                        f64::from_be_bytes(x.try_into().expect("8 bytes")),
                        8,
                    ))
                }
                31 => Err(self.syntax("unexpected break")),
                _ => Err(self.syntax("reserved additional information")),
            };
        }
        let arg = match ai {
            0..=23 => u64::from(ai),
            24..=27 => {
                let n = 1usize << (ai - 24);
                let x = self.take(n)?;
                let v = x.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
                let min = match n {
                    1 => 24,
                    2 => 1 << 8,
                    4 => 1 << 16,
                    _ => 1 << 32,
                };
                if det && v < min {
                    return Err(self.nondet("non-shortest head", start));
                }
                v
            }
            31 if matches!(major, 2..=5) => {
                if det {
                    return Err(self.nondet("indefinite length", start));
                }
                return Ok(Head::Indefinite(major));
            }
            _ => return Err(self.syntax("reserved additional information")),
        };
        Ok(Head::Arg(major, arg))
    }

    fn is_break(&self) -> bool {
        self.b.get(self.pos) == Some(&0xff)
    }

    fn item(&mut self, depth: usize) -> Result<Value<'a>> {
        if depth > self.max_depth {
            return Err(self.syntax("nesting too deep"));
        }
        let start = self.pos;
        match self.head()? {
            Head::Simple(20) => Ok(Value::Bool(false)),
            Head::Simple(21) => Ok(Value::Bool(true)),
            Head::Simple(22) => Ok(Value::Null),
            Head::Simple(_) => Err(self.syntax("unsupported simple value")),
            Head::Float(f, width) => {
                if self.mode == Mode::Deterministic && !f.is_nan() {
                    let fits_half = half::f16::from_f64(f).to_f64() == f;
                    let fits_single = f64::from(f as f32) == f;
                    if (width > 2 && fits_half) || (width > 4 && fits_single) {
                        return Err(self.nondet("float wider than its value needs", start));
                    }
                }
                if self.mode == Mode::Deterministic && f.is_nan() && width != 2 {
                    return Err(self.nondet("NaN other than f9 7e00", start));
                }
                Ok(Value::Float(f))
            }
            Head::Arg(0, v) => Ok(Value::UInt(v)),
            Head::Arg(1, v) => Ok(Value::NInt(v)),
            Head::Arg(2, n) => Ok(Value::Bytes(self.take_len(n)?)),
            Head::Arg(3, n) => {
                let s = self.take_len(n)?;
                std::str::from_utf8(s)
                    .map(Value::Text)
                    .map_err(|_| self.syntax("text string is not UTF-8"))
            }
            Head::Arg(4, n) => {
                // Every item takes at least one byte: the count cannot exceed what is left.
                let mut v = Vec::with_capacity(self.bounded(n)?);
                for _ in 0..n {
                    v.push(self.item(depth + 1)?);
                }
                Ok(Value::Array(v))
            }
            Head::Arg(5, n) => {
                let cap = self.bounded(n.saturating_mul(2))? / 2;
                let mut m = Vec::with_capacity(cap);
                let mut prev: Option<(usize, usize)> = None;
                for _ in 0..n {
                    prev = Some(self.entry(depth, &mut m, prev)?);
                }
                self.check_duplicates(&m)?;
                Ok(Value::Map(m))
            }
            Head::Indefinite(4) => {
                let mut v = Vec::new();
                while !self.is_break() {
                    v.push(self.item(depth + 1)?);
                }
                self.pos += 1;
                Ok(Value::Array(v))
            }
            Head::Indefinite(5) => {
                let mut m = Vec::new();
                let mut prev = None;
                while !self.is_break() {
                    prev = Some(self.entry(depth, &mut m, prev)?);
                }
                self.pos += 1;
                self.check_duplicates(&m)?;
                Ok(Value::Map(m))
            }
            Head::Indefinite(_) => Err(self.syntax("indefinite-length strings are not supported")),
            Head::Arg(6, _) => {
                if self.mode == Mode::Deterministic {
                    Err(self.nondet("tags are not allowed", start))
                } else {
                    Err(self.syntax("tags are not supported"))
                }
            }
            Head::Arg(..) => Err(self.syntax("unknown major type")),
        }
    }

    /// Reads one key/value pair; in deterministic mode checks the key sorts after `prev`
    /// (the previous key's encoded span). Returns this key's span.
    fn entry(
        &mut self,
        depth: usize,
        m: &mut Vec<(Value<'a>, Value<'a>)>,
        prev: Option<(usize, usize)>,
    ) -> Result<(usize, usize)> {
        let ks = self.pos;
        let k = self.item(depth + 1)?;
        let span = (ks, self.pos);
        if self.mode == Mode::Deterministic {
            if let Some((ps, pe)) = prev {
                match self.b[ps..pe].cmp(&self.b[span.0..span.1]) {
                    std::cmp::Ordering::Less => {}
                    std::cmp::Ordering::Equal => {
                        return Err(self.nondet("duplicate map key", ks));
                    }
                    std::cmp::Ordering::Greater => {
                        return Err(self.nondet("map keys not in canonical order", ks));
                    }
                }
            }
        }
        let v = self.item(depth + 1)?;
        m.push((k, v));
        Ok(span)
    }

    /// Lenient maps may come in any order; duplicates are still an error (they would let
    /// two readers see different values). Sorted keys make this one pass.
    fn check_duplicates(&self, m: &[(Value<'a>, Value<'a>)]) -> Result<()> {
        if self.mode == Mode::Deterministic || m.len() < 2 {
            return Ok(());
        }
        let mut keys: Vec<String> = m.iter().map(|(k, _)| format!("{k:?}")).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(crate::Error::new(ErrorKind::Cbor {
                msg: format!("duplicate map key {}", w[0]),
                offset: self.pos,
            }));
        }
        Ok(())
    }

    fn take_len(&mut self, n: u64) -> Result<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| self.syntax("length too large"))?;
        self.take(n)
    }

    fn bounded(&self, n: u64) -> Result<usize> {
        let left = (self.b.len() - self.pos) as u64;
        if n > left {
            return Err(self.syntax("more items than bytes left"));
        }
        Ok(n as usize)
    }
}

impl<'a> Value<'a> {
    /// The string of a `Text` item; `None` for any other item.
    pub fn as_text(&self) -> Option<&'a str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The value of a `UInt` item; `None` for any other item (negative integers included).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::UInt(v) => Some(*v),
            _ => None,
        }
    }

    /// The items of an `Array`; `None` for any other item.
    pub fn as_array(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The entries of a `Map`, in encoded order; `None` for any other item.
    pub fn as_map(&self) -> Option<&[(Value<'a>, Value<'a>)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The value under text key `key` of a map.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_text() == Some(key))
            .map(|(_, v)| v)
    }

    /// Converts to a metadata value. Maps must have text keys.
    pub fn to_meta(&self) -> Result<MetaValue> {
        Ok(match self {
            Value::UInt(v) => MetaValue::UInt(*v),
            Value::NInt(n) => match i64::try_from(*n) {
                Ok(n) => MetaValue::Int(-1 - n),
                Err(_) => {
                    return Err(ErrorKind::ZtSchema(
                        "attribute integer below i64::MIN is not supported".into(),
                    )
                    .into())
                }
            },
            Value::Bytes(b) => MetaValue::Bytes(b.to_vec()),
            Value::Text(s) => MetaValue::Str((*s).to_string()),
            Value::Array(a) => {
                MetaValue::Array(a.iter().map(|v| v.to_meta()).collect::<Result<_>>()?)
            }
            Value::Map(m) => {
                let mut out = BTreeMap::new();
                for (k, v) in m {
                    let k = k.as_text().ok_or_else(|| {
                        ErrorKind::ZtSchema("attribute map keys must be text".into())
                    })?;
                    out.insert(k.to_string(), v.to_meta()?);
                }
                MetaValue::Map(out)
            }
            Value::Bool(b) => MetaValue::Bool(*b),
            Value::Null => MetaValue::Null,
            Value::Float(f) => MetaValue::F64(*f),
        })
    }
}

// ------------------------------------------------------------------------------------------
// Encoding

/// Appends a head: major type and argument, shortest form.
pub fn head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let m = major << 5;
    if arg < 24 {
        out.push(m | arg as u8);
    } else if arg <= 0xff {
        out.extend_from_slice(&[m | 24, arg as u8]);
    } else if arg <= 0xffff {
        out.push(m | 25);
        out.extend_from_slice(&(arg as u16).to_be_bytes());
    } else if arg <= 0xffff_ffff {
        out.push(m | 26);
        out.extend_from_slice(&(arg as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&arg.to_be_bytes());
    }
}

/// Appends a text string.
pub fn text(out: &mut Vec<u8>, s: &str) {
    head(out, 3, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Appends an unsigned integer, shortest form.
pub fn uint(out: &mut Vec<u8>, v: u64) {
    head(out, 0, v);
}

/// Appends a signed integer: major type 0 when non-negative, 1 (`-1 - n`) when negative.
pub fn int(out: &mut Vec<u8>, v: i64) {
    if v >= 0 {
        head(out, 0, v as u64);
    } else {
        head(out, 1, (-1 - v) as u64);
    }
}

/// The shortest float that keeps the value; NaN as `f9 7e00` (deterministic CBOR, and what
/// serde_cbor writes).
pub fn float(out: &mut Vec<u8>, f: f64) {
    if f.is_nan() {
        out.extend_from_slice(&[0xf9, 0x7e, 0x00]);
        return;
    }
    let h = half::f16::from_f64(f);
    if h.to_f64() == f {
        out.push(0xf9);
        out.extend_from_slice(&h.to_bits().to_be_bytes());
    } else if f64::from(f as f32) == f {
        out.push(0xfa);
        out.extend_from_slice(&(f as f32).to_be_bytes());
    } else {
        out.push(0xfb);
        out.extend_from_slice(&f.to_be_bytes());
    }
}

/// Appends a definite-length array of unsigned integers (a shape, for one).
pub fn u64_array(out: &mut Vec<u8>, v: &[u64]) {
    head(out, 4, v.len() as u64);
    for &x in v {
        uint(out, x);
    }
}

/// Map key order when encoding metadata maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// Byte-wise on the key text (Rust BTreeMap<String, _>), as v1.1 writes.
    Text,
    /// Byte-wise on the encoded key (shorter first), as deterministic CBOR requires.
    Encoded,
}

/// Keys of a text-keyed map in the given order.
pub fn ordered_keys<'k, I: Iterator<Item = &'k str>>(keys: I, order: KeyOrder) -> Vec<&'k str> {
    let mut v: Vec<&str> = keys.collect();
    match order {
        KeyOrder::Text => v.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes())),
        KeyOrder::Encoded => {
            v.sort_unstable_by(|a, b| (a.len(), a.as_bytes()).cmp(&(b.len(), b.as_bytes())))
        }
    }
    v
}

/// Appends a metadata value as CBOR, with the keys of any maps in it in `order`; floats take
/// their shortest exact width.
pub fn meta(out: &mut Vec<u8>, v: &MetaValue, order: KeyOrder) {
    match v {
        MetaValue::Str(s) => text(out, s),
        MetaValue::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        MetaValue::Int(i) => int(out, *i),
        MetaValue::UInt(u) => uint(out, *u),
        MetaValue::F32(f) => float(out, f64::from(*f)),
        MetaValue::F64(f) => float(out, *f),
        MetaValue::Array(a) => {
            head(out, 4, a.len() as u64);
            for x in a {
                meta(out, x, order);
            }
        }
        MetaValue::Null => out.push(0xf6),
        MetaValue::Bytes(b) => {
            head(out, 2, b.len() as u64);
            out.extend_from_slice(b);
        }
        MetaValue::Map(m) => meta_map(out, m, order),
    }
}

/// Appends a definite-length text-keyed map of metadata values, keys in `order`.
pub fn meta_map(out: &mut Vec<u8>, m: &BTreeMap<String, MetaValue>, order: KeyOrder) {
    head(out, 5, m.len() as u64);
    for k in ordered_keys(m.keys().map(String::as_str), order) {
        text(out, k);
        meta(out, &m[k], order);
    }
}

/// A map under construction whose entries are sorted by encoded key when finished
/// (deterministic CBOR), whatever order they were added in.
#[derive(Default)]
pub struct SortedMap {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl SortedMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry with a text key; `value` appends the encoded value.
    pub fn put(&mut self, key: &str, value: impl FnOnce(&mut Vec<u8>)) {
        let mut k = Vec::with_capacity(key.len() + 2);
        text(&mut k, key);
        let mut v = Vec::new();
        value(&mut v);
        self.entries.push((k, v));
    }

    /// Appends the map to `out`: a definite-length head, then the entries sorted by encoded key.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        self.entries.sort_by(|a, b| a.0.cmp(&b.0));
        head(out, 5, self.entries.len() as u64);
        for (k, v) in self.entries {
            out.extend_from_slice(&k);
            out.extend_from_slice(&v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(b: &[u8]) -> Result<Value<'_>> {
        decode(b, Mode::Deterministic)
    }

    #[test]
    fn decodes_maps_of_both_lengths_leniently() {
        let definite = [0xa1, 0x61, b'a', 0x01];
        let indefinite = [0xbf, 0x61, b'a', 0x01, 0xff];
        assert_eq!(
            decode(&definite, Mode::Lenient).unwrap(),
            decode(&indefinite, Mode::Lenient).unwrap()
        );
        assert!(det(&indefinite).is_err());
    }

    #[test]
    fn deterministic_mode_rejects_each_violation() {
        let kind = |b: &[u8]| match det(b).unwrap_err().kind() {
            ErrorKind::CborNotDeterministic { msg, .. } => *msg,
            other => panic!("{other:?}"),
        };
        assert_eq!(kind(&[0x18, 0x02]), "non-shortest head");
        assert_eq!(kind(&[0x9f, 0xff]), "indefinite length");
        assert_eq!(
            kind(&[0xa2, 0x61, b'b', 0x01, 0x61, b'a', 0x02]),
            "map keys not in canonical order"
        );
        assert_eq!(
            kind(&[0xa2, 0x62, b'a', b'a', 0x01, 0x61, b'b', 0x02]),
            "map keys not in canonical order"
        );
        assert_eq!(
            kind(&[0xa2, 0x61, b'a', 0x01, 0x61, b'a', 0x02]),
            "duplicate map key"
        );
        assert_eq!(
            kind(&[0xfa, 0x3f, 0x80, 0, 0]),
            "float wider than its value needs"
        );
        assert_eq!(kind(&[0xf9, 0x7e, 0x01]), "NaN other than f9 7e00");
        assert_eq!(kind(&[0xc1, 0x00]), "tags are not allowed");
        assert!(det(&[0x01, 0x02]).is_err(), "trailing bytes");
    }

    #[test]
    fn never_allocates_past_the_input() {
        // An array claiming 2^64-1 items in 9 bytes.
        let b = [0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(decode(&b, Mode::Lenient).is_err());
        let deep = vec![0x81u8; 10_000];
        assert!(decode(&deep, Mode::Lenient).is_err());
    }

    #[test]
    fn floats_encode_shortest_and_round_trip() {
        for (f, len) in [(3.140625, 3), (1e300, 9), (0.1f32 as f64, 5), (f64::NAN, 3)] {
            let mut out = Vec::new();
            float(&mut out, f);
            assert_eq!(out.len(), len, "{f}");
            match det(&out).unwrap() {
                Value::Float(g) => assert!(g == f || (g.is_nan() && f.is_nan())),
                v => panic!("{v:?}"),
            }
        }
    }

    #[test]
    fn sorted_map_orders_by_encoded_key() {
        let mut m = SortedMap::new();
        m.put("objects", |o| head(o, 5, 0));
        m.put("attributes", |o| head(o, 5, 0));
        m.put("shards", |o| head(o, 5, 0));
        let mut out = Vec::new();
        m.finish(&mut out);
        let v = det(&out).unwrap();
        let keys: Vec<_> = v
            .as_map()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_text().unwrap())
            .collect();
        assert_eq!(keys, ["shards", "objects", "attributes"]);
    }
}
