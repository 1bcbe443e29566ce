//! Writing GGUF v3 files byte-identical to gguf-py's `GGUFWriter` for the same keys, values
//! and tensors: header, metadata in the order given, tensor infos (dims innermost first,
//! offsets of tensors padded to the alignment), zero padding to the alignment before the
//! data and after every tensor (the last included). The alignment is `general.alignment`
//! when set (a power-of-two u32), else 32. Streaming: the header needs only names, shapes and
//! types, so each tensor's bytes are pulled from its source when the writer reaches it.

use super::parse::DEFAULT_ALIGNMENT;
use super::value::GgufValue;
use super::write_meta::{put_entry, put_string};
use crate::error::{Error, ErrorKind, GgufRule, Result};
use crate::ggml_type::GgmlType;
use crate::index::Shape;
use crate::safetensors::TensorData;
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

pub(super) struct Entry<'a> {
    name: String,
    ne: Shape,
    ggml_type: GgmlType,
    pub(super) byte_len: u64,
    data: Box<dyn TensorData + 'a>,
}

/// A GGUF file to write: metadata, then tensors added in file order.
#[derive(Default)]
pub struct Writer<'a> {
    pub(super) metadata: Vec<(String, GgufValue)>,
    pub(super) tensors: Vec<Entry<'a>>,
    names: HashSet<String>,
    /// The alignment of a split model's later parts: the first part's, though only the first
    /// part holds `general.alignment` (as gguf-py writes them).
    pub(super) forced_alignment: Option<u64>,
}

impl<'a> Writer<'a> {
    /// An empty writer: no metadata, no tensors.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key`: replaced where it stands if present (as gguf-py's dict does), else added
    /// at the end.
    pub fn set(&mut self, key: impl Into<String>, value: GgufValue) -> &mut Self {
        let key = key.into();
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.metadata.push((key, value)),
        }
        self
    }

    /// Sets `key` as the last key (moved there when it is set already), as ggml's
    /// `gguf_set_val_*` do: llama-quantize's `general.file_type` lands there.
    pub fn set_last(&mut self, key: impl Into<String>, value: GgufValue) -> &mut Self {
        let key = key.into();
        self.metadata.retain(|(k, _)| *k != key);
        self.metadata.push((key, value));
        self
    }

    /// The metadata set so far, in the order it will be written.
    pub fn metadata(&self) -> &[(String, GgufValue)] {
        &self.metadata
    }

    /// Adds a tensor of `ne` (ggml order: innermost first) and type `ggml_type`, whose bytes
    /// `data` gives when written (exactly the type's byte length for `ne`).
    pub fn add(
        &mut self,
        name: impl Into<String>,
        ne: Shape,
        ggml_type: GgmlType,
        data: impl TensorData + 'a,
    ) -> Result<&mut Self> {
        let name = name.into();
        let fail = |r: GgufRule| Err(Error::new(ErrorKind::Gguf(r)).at_tensor(&name));
        if ne.len() > super::MAX_DIMS as usize {
            return fail(GgufRule::TooManyDims {
                dims: ne.len() as u32,
                max: super::MAX_DIMS,
            });
        }
        let elements = ne.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let Some(elements) = elements else {
            return fail(GgufRule::ShapeOverflow);
        };
        let ne0 = ne.first().copied().unwrap_or(1);
        let block = ggml_type.block_elements();
        let Some(byte_len) = ggml_type
            .byte_len(elements)
            .filter(|_| ne0 % u64::from(block) == 0)
        else {
            return fail(GgufRule::PartialBlock {
                elements,
                ne0,
                block,
                ggml_type: ggml_type.name(),
            });
        };
        if data.len() != byte_len {
            return Err(Error::new(ErrorKind::WrongDataLength {
                expected: byte_len,
                actual: data.len(),
            })
            .at_tensor(&name));
        }
        if !self.names.insert(name.clone()) {
            return fail(GgufRule::DuplicateTensor);
        }
        self.tensors.push(Entry {
            name,
            ne,
            ggml_type,
            byte_len,
            data: Box::new(data),
        });
        Ok(self)
    }

    /// The data alignment: `general.alignment`, else 32.
    pub fn alignment(&self) -> Result<u64> {
        if let Some(a) = self.forced_alignment {
            return Ok(a);
        }
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => Ok(DEFAULT_ALIGNMENT),
            Some((_, GgufValue::U32(a))) if a.is_power_of_two() => Ok(u64::from(*a)),
            Some((_, v)) => Err(Error::new(ErrorKind::Gguf(GgufRule::BadAlignment(
                v.describe(),
            )))),
        }
    }

    /// Everything before the tensor data, padding included.
    pub fn header_bytes(&self) -> Result<Vec<u8>> {
        let align = self.alignment()?;
        let mut h = Vec::new();
        h.extend_from_slice(b"GGUF");
        h.extend_from_slice(&3u32.to_le_bytes());
        h.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        h.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_entry(&mut h, k, v);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_string(&mut h, &t.name);
            h.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
            for d in &t.ne {
                h.extend_from_slice(&d.to_le_bytes());
            }
            h.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            h.extend_from_slice(&offset.to_le_bytes());
            offset += padded(t.byte_len, align);
        }
        h.resize(padded(h.len() as u64, align) as usize, 0);
        Ok(h)
    }

    /// The size of the file [`Writer::write_to`] writes.
    pub fn file_len(&self) -> Result<u64> {
        let align = self.alignment()?;
        let data: u64 = self.tensors.iter().map(|t| padded(t.byte_len, align)).sum();
        Ok(self.header_bytes()?.len() as u64 + data)
    }

    /// Writes the file to `out`, pulling each tensor's bytes in turn; returns its length.
    pub fn write_to(mut self, out: &mut dyn Write) -> Result<u64> {
        let align = self.alignment()?;
        let header = self.header_bytes()?;
        crate::progress::expect(self.tensors.iter().map(|t| t.byte_len).sum());
        out.write_all(&header)?;
        let mut written = header.len() as u64;
        for t in &mut self.tensors {
            let mut counted = Counting { out, n: 0 };
            t.data
                .write_to(&mut counted)
                .map_err(|e| e.at_tensor(&t.name))?;
            if counted.n != t.byte_len {
                return Err(Error::new(ErrorKind::WrongDataLength {
                    expected: t.byte_len,
                    actual: counted.n,
                })
                .at_tensor(&t.name));
            }
            let pad = padded(t.byte_len, align) - t.byte_len;
            out.write_all(&vec![0u8; pad as usize])?;
            written += t.byte_len + pad;
        }
        Ok(written)
    }

    /// The whole file in memory.
    pub fn to_bytes(self) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.write_to(&mut v)?;
        Ok(v)
    }

    /// Writes `path` atomically (temp file, fsync, rename); returns its length.
    pub fn write_file(self, path: impl AsRef<Path>) -> Result<u64> {
        crate::sink::write_atomically(path.as_ref(), |f| self.write_buffered(f))
    }

    /// As [`Writer::write_file`], to a local path or an `s3://` URL (streamed up as a
    /// multipart upload, visible only once complete) with the store settings `storage`.
    pub fn write_file_with(
        self,
        path: impl AsRef<Path>,
        storage: &crate::bytes::StorageOptions,
    ) -> Result<u64> {
        crate::sink::write_atomically_with(path.as_ref(), storage, |f| self.write_buffered(f))
    }

    fn write_buffered(self, f: &mut crate::sink::AtomicFile) -> Result<u64> {
        let mut buf = std::io::BufWriter::with_capacity(1 << 20, f);
        let n = self.write_to(&mut buf)?;
        buf.flush()?;
        Ok(n)
    }
}

fn padded(n: u64, align: u64) -> u64 {
    n.div_ceil(align) * align
}

struct Counting<'o> {
    out: &'o mut dyn Write,
    n: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let k = self.out.write(buf)?;
        self.n += k as u64;
        crate::progress::advance(k as u64);
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::format::OpenOptions;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// `GGUFWriter(path, "x")`, `add_custom_alignment(16)`, tensors `t` = f32 [1, 2, 3] and
    /// `u` = i8 [5], as gguf 0.19.0 writes them.
    const PINNED: &str = "474755460300000002000000000000000200000000000000140000000000000067656e6572616c2e61726368697465637475726508000000010000000000000078110000000000000067656e6572616c2e616c69676e6d656e7404000000100000000100000000000000740100000003000000000000000000000000000000000000000100000000000000750100000001000000000000001800000010000000000000000000000000000000000000000000803f00000040000040400000000005000000000000000000000000000000";

    #[test]
    fn matches_gguf_writer_bytes_with_alignment_padding() {
        let mut w = Writer::new();
        w.set("general.architecture", GgufValue::String("x".into()));
        w.set("general.alignment", GgufValue::U32(16));
        let f32 = GgmlType::from_dtype(DType::F32).unwrap();
        let i8 = GgmlType::from_dtype(DType::I8).unwrap();
        w.add("t", [3].into_iter().collect(), f32, f32s(&[1.0, 2.0, 3.0]))
            .unwrap();
        w.add("u", [1].into_iter().collect(), i8, vec![5u8])
            .unwrap();
        let len = w.file_len().unwrap();
        let bytes = w.to_bytes().unwrap();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, PINNED);
        assert_eq!(len, bytes.len() as u64);
        let h = super::super::parse_bytes(&bytes, &OpenOptions::new()).unwrap();
        assert_eq!((h.alignment, h.tensors.len()), (16, 2));
    }

    #[test]
    fn set_replaces_a_key_where_it_stands() {
        let mut w = Writer::new();
        w.set("a", GgufValue::U8(1)).set("b", GgufValue::U8(2));
        w.set("a", GgufValue::Bool(true));
        let keys: Vec<_> = w.metadata().iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(
            keys,
            [("a", &GgufValue::Bool(true)), ("b", &GgufValue::U8(2))]
        );
    }

    #[test]
    fn rejects_partial_blocks_duplicates_wrong_lengths_and_bad_alignment() {
        let q8 = GgmlType::from_name("q8_0").unwrap();
        let f32 = GgmlType::from_dtype(DType::F32).unwrap();
        let mut w = Writer::new();
        let e = w.add("q", [33].into_iter().collect(), q8, vec![0u8; 34]);
        assert!(e.err().unwrap().to_string().contains("q8_0"));
        let e = w.add("f", [2].into_iter().collect(), f32, vec![0u8; 7]);
        assert!(e.err().unwrap().to_string().contains('7'));
        w.add("f", [2].into_iter().collect(), f32, vec![0u8; 8])
            .unwrap();
        let e = w.add("f", [2].into_iter().collect(), f32, vec![0u8; 8]);
        assert!(e.is_err());
        let e = w.add(
            "d",
            [1, 1, 1, 1, 1].into_iter().collect(),
            f32,
            vec![0u8; 4],
        );
        assert!(e.is_err());
        w.set("general.alignment", GgufValue::U32(24));
        assert!(w.header_bytes().is_err());
        w.set("general.alignment", GgufValue::U64(32));
        assert!(w.header_bytes().is_err());
    }

    #[test]
    fn a_source_that_writes_too_little_is_an_error_naming_the_tensor() {
        struct Short;
        impl TensorData for Short {
            fn len(&self) -> u64 {
                8
            }
            fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
                Ok(out.write_all(&[0u8; 4])?)
            }
        }
        let f32 = GgmlType::from_dtype(DType::F32).unwrap();
        let mut w = Writer::new();
        w.add("short", [2].into_iter().collect(), f32, Short)
            .unwrap();
        let e = w.to_bytes().unwrap_err().to_string();
        assert!(e.contains("short"), "{e}");
    }
}
