//! A strict, single-pass parser for the safetensors JSON header. It accepts exactly the JSON
//! the reference accepts (RFC 8259 syntax, unknown tensor fields ignored) and is stricter where
//! the reference is weak (duplicate keys). Written by hand because the header is the hot path
//! of opening a file: names borrow from the input unless they contain escapes, and no
//! intermediate JSON tree is built.

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Layout, Part, Shape, TensorInfo};
use std::borrow::Cow;

/// Deepest nesting accepted inside ignored values (serde_json's default recursion limit).
const MAX_DEPTH: usize = 128;

/// What the header says, before the layout rules are checked. Each tensor's one part holds
/// its `data_offsets` as they are written: relative to the start of the data.
pub(crate) struct RawHeader<'a> {
    pub metadata: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    pub tensors: Vec<TensorInfo>,
}

/// Parses the header bytes. UTF-8 is checked where it can occur (inside strings; anywhere
/// else a non-ASCII byte is not JSON), which spares a separate pass over the whole header.
pub(crate) fn parse(text: &[u8], packed_ints: bool) -> Result<RawHeader<'_>> {
    let mut p = Parser {
        s: text,
        pos: 0,
        packed_ints,
    };
    p.header()
}

/// Bytes that need no attention inside a string: everything but `"`, `\\`, control
/// characters and non-ASCII bytes.
static PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0x20;
    while i < 0x80 {
        t[i] = i != b'"' as usize && i != b'\\' as usize;
        i += 1;
    }
    t
};

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    packed_ints: bool,
}

fn field_err(field: &'static str, expected: &'static str) -> Error {
    ErrorKind::BadField { field, expected }.into()
}

impl<'a> Parser<'a> {
    fn json_err(&self, msg: &str) -> Error {
        ErrorKind::HeaderJson {
            msg: msg.to_string(),
            offset: self.pos,
        }
        .into()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<()> {
        self.ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn unexpected(&self, what: &str) -> Error {
        match self.peek() {
            None => self.json_err(&format!("unexpected end, expected {what}")),
            Some(0) => ErrorKind::HeaderNulPadding { offset: self.pos }.into(),
            Some(0x80..) => match std::str::from_utf8(self.s) {
                Err(e) => ErrorKind::HeaderNotUtf8 {
                    offset: e.valid_up_to(),
                }
                .into(),
                Ok(_) => self.json_err(&format!("expected {what}")),
            },
            Some(_) => self.json_err(&format!("expected {what}")),
        }
    }

    fn header(&mut self) -> Result<RawHeader<'a>> {
        self.ws();
        match self.peek() {
            Some(b'{') => self.pos += 1,
            Some(b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                return Err(ErrorKind::HeaderNotObject.into())
            }
            _ => return Err(self.unexpected("'{'")),
        }
        // Each entry takes at least 48 bytes (`"":{"dtype":"U8","shape":[],"data_offsets":[0,0]},`),
        // so len/48 bounds the count by what the header's size allows. Real entries are two to
        // four times longer: reserve for 128-byte entries and let the vector grow (a large
        // vector grows by remapping, without copying), so untouched capacity is not reserved.
        let mut out = RawHeader {
            metadata: Vec::new(),
            tensors: Vec::with_capacity(self.s.len() / 128),
        };
        let mut seen_metadata = false;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                let key = self.string()?;
                self.expect(b':', "':'")?;
                self.ws();
                if key == "__metadata__" {
                    if seen_metadata {
                        return Err(Error::new(ErrorKind::DuplicateKey).at_tensor("__metadata__"));
                    }
                    seen_metadata = true;
                    out.metadata = self.metadata()?;
                } else {
                    let t = self.tensor(key)?;
                    out.tensors.push(t);
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.unexpected("',' or '}'")),
                }
            }
        }
        self.ws();
        if self.pos != self.s.len() {
            return Err(self.unexpected("end of header"));
        }
        Ok(out)
    }

    fn metadata(&mut self) -> Result<Vec<(Cow<'a, str>, Cow<'a, str>)>> {
        let bad = |msg: &str| -> Error {
            Error::new(ErrorKind::BadMetadata {
                msg: msg.to_string(),
            })
        };
        match self.peek() {
            Some(b'n') => {
                self.literal(b"null")?;
                return Ok(Vec::new());
            }
            Some(b'{') => self.pos += 1,
            _ => return Err(bad("not an object")),
        }
        let mut out = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(out);
        }
        loop {
            self.ws();
            let k = self.string()?;
            self.expect(b':', "':'")?;
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(bad(&format!(
                    "value of '{}' is not a string",
                    k.escape_debug()
                )));
            }
            let v = self.string()?;
            out.push((k, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.unexpected("',' or '}'")),
            }
        }
        let mut keys: Vec<&str> = out.iter().map(|(k, _)| k.as_ref()).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(&format!("key '{}' appears twice", w[0].escape_debug())));
        }
        Ok(out)
    }

    fn tensor(&mut self, name: Cow<'a, str>) -> Result<TensorInfo> {
        match self.tensor_body() {
            Ok((dtype, shape, (begin, end))) => Ok(TensorInfo {
                name: name.into_owned(),
                dtype,
                shape,
                layout: Layout::Dense,
                parts: smallvec::smallvec![Part::raw("data", dtype, begin..end)],
                attributes: Default::default(),
            }),
            Err(e) => Err(e.at_tensor(&name)),
        }
    }

    #[allow(clippy::type_complexity)]
    fn tensor_body(&mut self) -> Result<(DType, Shape, (u64, u64))> {
        if self.peek() != Some(b'{') {
            // Still check it is JSON, so syntax errors are reported as such.
            self.skip_value(0)?;
            return Err(ErrorKind::TensorNotObject.into());
        }
        self.pos += 1;
        let mut dtype = None;
        let mut shape = None;
        let mut offsets = None;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                let key = self.string()?;
                self.expect(b':', "':'")?;
                self.ws();
                match key.as_ref() {
                    "dtype" => {
                        if dtype.is_some() {
                            return Err(ErrorKind::DuplicateField { field: "dtype" }.into());
                        }
                        if self.peek() != Some(b'"') {
                            return Err(field_err("dtype", "a string"));
                        }
                        let s = self.string()?;
                        let d = DType::from_safetensors_name(&s, self.packed_ints)
                            .ok_or_else(|| ErrorKind::UnknownDtype(s.to_string()))?;
                        dtype = Some(d);
                    }
                    "shape" => {
                        if shape.is_some() {
                            return Err(ErrorKind::DuplicateField { field: "shape" }.into());
                        }
                        let mut v = Shape::new();
                        self.u64_array("shape", &mut v)?;
                        shape = Some(v);
                    }
                    "data_offsets" => {
                        if offsets.is_some() {
                            return Err(ErrorKind::DuplicateField {
                                field: "data_offsets",
                            }
                            .into());
                        }
                        let mut v = smallvec::SmallVec::<[u64; 2]>::new();
                        self.u64_array("data_offsets", &mut v)?;
                        if v.len() != 2 {
                            return Err(field_err(
                                "data_offsets",
                                "exactly two non-negative integers",
                            ));
                        }
                        offsets = Some((v[0], v[1]));
                    }
                    _ => self.skip_value(0)?,
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.unexpected("',' or '}'")),
                }
            }
        }
        // let-else rather than `ok_or`: building an ErrorKind eagerly costs its drop glue on
        // the success path, which is measurable over 100k tensors.
        let Some(dtype) = dtype else {
            return Err(ErrorKind::MissingField { field: "dtype" }.into());
        };
        let Some(shape) = shape else {
            return Err(ErrorKind::MissingField { field: "shape" }.into());
        };
        let Some(offsets) = offsets else {
            return Err(ErrorKind::MissingField {
                field: "data_offsets",
            }
            .into());
        };
        Ok((dtype, shape, offsets))
    }

    fn u64_array<A: smallvec::Array<Item = u64>>(
        &mut self,
        field: &'static str,
        v: &mut smallvec::SmallVec<A>,
    ) -> Result<()> {
        const EXPECTED: &str = "an array of non-negative integers";
        if self.peek() != Some(b'[') {
            return Err(field_err(field, EXPECTED));
        }
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.ws();
            v.push(self.u64_number(field)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.unexpected("',' or ']'")),
            }
        }
    }

    fn u64_number(&mut self, field: &'static str) -> Result<u64> {
        const EXPECTED: &str = "an array of non-negative integers";
        let start = self.pos;
        let s = self.s;
        let mut end = start;
        while end < s.len() && s[end].is_ascii_digit() {
            end += 1;
        }
        self.pos = end;
        let digits = end - start;
        // Up to 19 digits cannot overflow a u64; only longer runs need checked arithmetic.
        let mut n: u64 = 0;
        let mut overflow = false;
        if digits <= 19 {
            for &c in &s[start..end] {
                n = n * 10 + u64::from(c - b'0');
            }
        } else {
            for &c in &s[start..end] {
                match n
                    .checked_mul(10)
                    .and_then(|x| x.checked_add(u64::from(c - b'0')))
                {
                    Some(x) => n = x,
                    None => overflow = true,
                }
            }
        }
        if digits == 0 {
            // Not an unsigned integer: is it another JSON value (a type error) or garbage?
            self.skip_value(0)?;
            return Err(field_err(field, EXPECTED));
        }
        if digits > 1 && self.s[start] == b'0' {
            self.pos = start + 1;
            return Err(self.json_err("leading zero in a number"));
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return Err(field_err(field, EXPECTED));
        }
        if overflow {
            return Err(field_err(field, "integers that fit in 64 bits"));
        }
        Ok(n)
    }

    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.json_err("invalid literal"))
        }
    }

    /// Parses and discards one JSON value, checking its syntax.
    fn skip_value(&mut self, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(self.json_err("nesting too deep"));
        }
        self.ws();
        match self.peek() {
            Some(b'"') => self.string().map(drop),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.skip_number(),
            Some(b'[') => {
                self.pos += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(self.unexpected("',' or ']'")),
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.string()?;
                    self.expect(b':', "':'")?;
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(self.unexpected("',' or '}'")),
                    }
                }
            }
            _ => Err(self.unexpected("a JSON value")),
        }
    }

    fn skip_number(&mut self) -> Result<()> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = |p: &mut Self| {
            let s = p.pos;
            while let Some(b'0'..=b'9') = p.peek() {
                p.pos += 1;
            }
            p.pos - s
        };
        let int_start = self.pos;
        let n = digits(self);
        if n == 0 {
            return Err(self.json_err("invalid number"));
        }
        if n > 1 && self.s[int_start] == b'0' {
            return Err(self.json_err("leading zero in a number"));
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.json_err("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.json_err("invalid number"));
            }
        }
        Ok(())
    }

    /// Parses a JSON string at the cursor. Borrows when there is no escape in it.
    fn string(&mut self) -> Result<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("a string"));
        }
        self.pos += 1;
        let start = self.pos;
        let s = self.s;
        // Fast path: scan to the closing quote, noting whether any byte is non-ASCII.
        let mut i = start;
        let mut ascii = true;
        while i < s.len() {
            let c = s[i];
            if !PLAIN[c as usize] {
                match c {
                    b'"' => {
                        self.pos = i + 1;
                        return self.utf8(start, &s[start..i], ascii).map(Cow::Borrowed);
                    }
                    b'\\' => break,
                    0x80.. => ascii = false,
                    _ => {
                        self.pos = i;
                        return Err(self.control_char_err());
                    }
                }
            }
            i += 1;
        }
        if i >= s.len() {
            self.pos = i;
            return Err(self.json_err("unterminated string"));
        }
        // Slow path: unescape into an owned buffer.
        let mut buf: Vec<u8> = s[start..i].to_vec();
        self.pos = i;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.json_err("unterminated string"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return match String::from_utf8(buf) {
                        Ok(text) => Ok(Cow::Owned(text)),
                        Err(e) => Err(ErrorKind::HeaderNotUtf8 {
                            offset: start + e.utf8_error().valid_up_to(),
                        }
                        .into()),
                    };
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.json_err("unterminated string"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => buf.push(b'"'),
                        b'\\' => buf.push(b'\\'),
                        b'/' => buf.push(b'/'),
                        b'b' => buf.push(0x08),
                        b'f' => buf.push(0x0c),
                        b'n' => buf.push(b'\n'),
                        b'r' => buf.push(b'\r'),
                        b't' => buf.push(b'\t'),
                        b'u' => {
                            let ch = self.unicode_escape()?;
                            let mut tmp = [0u8; 4];
                            buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.json_err("invalid escape"));
                        }
                    }
                }
                c if c < 0x20 => return Err(self.control_char_err()),
                _ => {
                    buf.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn utf8(&self, start: usize, bytes: &'a [u8], ascii: bool) -> Result<&'a str> {
        if ascii {
            // SAFETY: every byte is below 0x80, and ASCII is UTF-8.
            return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        std::str::from_utf8(bytes).map_err(|e| {
            ErrorKind::HeaderNotUtf8 {
                offset: start + e.valid_up_to(),
            }
            .into()
        })
    }

    fn control_char_err(&self) -> Error {
        if self.peek() == Some(0) {
            ErrorKind::HeaderNulPadding { offset: self.pos }.into()
        } else {
            self.json_err("control character in a string")
        }
    }

    fn hex4(&mut self) -> Result<u16> {
        let Some(h) = self.s.get(self.pos..self.pos + 4) else {
            return Err(self.json_err("truncated \\u escape"));
        };
        let mut v: u16 = 0;
        for &c in h {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return Err(self.json_err("invalid \\u escape")),
            };
            v = v * 16 + u16::from(d);
        }
        self.pos += 4;
        Ok(v)
    }

    fn unicode_escape(&mut self) -> Result<char> {
        let hi = self.hex4()?;
        let code = match hi {
            0xD800..=0xDBFF => {
                if !self.s[self.pos..].starts_with(b"\\u") {
                    return Err(self.json_err("lone leading surrogate in \\u escape"));
                }
                self.pos += 2;
                let lo = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return Err(self.json_err("invalid trailing surrogate in \\u escape"));
                }
                0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.json_err("lone trailing surrogate in \\u escape")),
            _ => u32::from(hi),
        };
        char::from_u32(code).ok_or_else(|| self.json_err("invalid \\u escape"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> ErrorKind {
        match parse(text.as_bytes(), false) {
            Ok(_) => panic!("accepted {text:?}"),
            Err(e) => {
                let Error { .. } = e;
                // Move the kind out through Debug-free matching in callers.
                match e.kind() {
                    ErrorKind::HeaderJson { msg, offset } => ErrorKind::HeaderJson {
                        msg: msg.clone(),
                        offset: *offset,
                    },
                    other => ErrorKind::BadSlice(format!("{other:?}")),
                }
            }
        }
    }

    #[test]
    fn parses_escaped_and_plain_names() {
        let h = parse(
            br#" {"a\"b\u00e9\ud83d\ude00":{"dtype":"F32","shape":[],"data_offsets":[0,4],"x":[1,{"y":null}]},
                "__metadata__":{"k":"v"}} "#,
            false,
        )
        .unwrap();
        assert_eq!(h.tensors[0].name, "a\"b\u{e9}\u{1F600}");
        assert_eq!(h.metadata[0].1, "v");
    }

    #[test]
    fn rejects_json_syntax_errors() {
        for bad in [
            "{",
            "{\"a\":}",
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}",
            "{\"a\" {}}",
            "{\"\\x\":1}",
            "{\"\\ud800\":1}",
            "{} x",
        ] {
            assert!(matches!(kind(bad), ErrorKind::HeaderJson { .. }), "{bad}");
        }
    }

    #[test]
    fn rejects_floats_and_negatives_in_shape() {
        for bad in [
            "[1.0]",
            "[-1]",
            "[1e2]",
            "[\"1\"]",
            "[18446744073709551616]",
        ] {
            let text =
                format!("{{\"a\":{{\"dtype\":\"F32\",\"shape\":{bad},\"data_offsets\":[0,4]}}}}");
            let e = parse(text.as_bytes(), false).err().expect(bad);
            assert!(
                matches!(e.kind(), ErrorKind::BadField { field: "shape", .. }),
                "{bad}: {e}"
            );
            assert_eq!(e.tensor(), Some("a"));
        }
    }
}
