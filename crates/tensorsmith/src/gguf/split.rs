//! Split GGUF models, as llama.cpp's `gguf-split` and gguf-py's `GGUFWriter(split_max_tensors,
//! split_max_size, small_first_shard)` write them: parts named
//! `{stem}-{no:05d}-of-{count:05d}.gguf`, each a complete GGUF file holding some of the tensors
//! and three keys (`split.no`, 0-based UINT16; `split.count`, UINT16; `split.tensors.count`,
//! INT32, the tensors over all parts); the model's own metadata is in the first part.
//!
//! This module holds the naming rule, the keys and gguf-py's part boundaries; opening the parts
//! as one model is `model::gguf_split`, writing them `write_split`.

use crate::error::{Error, ErrorKind, Result};
use crate::index::MetaValue;
use crate::ops::inspect::meta_item_text;
use std::collections::BTreeMap;
use std::ops::Range;

/// The 0-based number of this part.
pub const KEY_NO: &str = "split.no";
/// The number of parts.
pub const KEY_COUNT: &str = "split.count";
/// The number of tensors over all parts.
pub const KEY_TENSORS: &str = "split.tensors.count";

/// Whether `key` is one of the three keys that describe the split, not the model.
pub fn is_split_key(key: &str) -> bool {
    matches!(key, KEY_NO | KEY_COUNT | KEY_TENSORS)
}

/// A part's file name taken apart: `m-00002-of-00003.gguf` is stem `m`, part 2 (1-based) of 3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartName<'a> {
    /// The name before `-NNNNN-of-NNNNN.gguf`: the model's name, shared by every part.
    pub stem: &'a str,
    /// The part's number, 1-based, as the name spells it.
    pub no: u64,
    /// How many parts the model has, as the name spells it.
    pub count: u64,
}

/// Reads a part's file name (no folder): `{stem}-{no:05d}-of-{count:05d}.gguf`, numbers of
/// five digits or more, case-insensitive extension; `None` for any other name.
pub fn parse_part_name(name: &str) -> Option<PartName<'_>> {
    let base = name
        .len()
        .checked_sub(5)
        .filter(|&i| name.is_char_boundary(i) && name[i..].eq_ignore_ascii_case(".gguf"))
        .map(|i| &name[..i])?;
    let (left, count) = base.rsplit_once("-of-")?;
    let (stem, no) = left.rsplit_once('-')?;
    let number = |s: &str| {
        (s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let (no, count) = (number(no)?, number(count)?);
    (!stem.is_empty() && no >= 1 && no <= count).then_some(PartName { stem, no, count })
}

/// The file name of part `no` (1-based) of `count`, as gguf-py's `SHARD_NAME_FORMAT` spells it.
pub fn part_name(stem: &str, no: u64, count: u64) -> String {
    format!("{stem}-{no:05}-of-{count:05}.gguf")
}

/// The split keys of one part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitKeys {
    /// The part's number (`split.no`), 0-based, as stored.
    pub no: u64,
    /// How many parts the model has (`split.count`).
    pub count: u64,
    /// Tensors over all parts (`split.tensors.count`).
    pub tensors: u64,
}

/// The split keys of a GGUF file's metadata: `None` when it has no `split.count` (not a part);
/// an error when a key is missing, negative or not an integer, or `split.no` is out of range.
pub fn split_keys(metadata: &BTreeMap<String, MetaValue>) -> Result<Option<SplitKeys>> {
    if !metadata.contains_key(KEY_COUNT) {
        return Ok(None);
    }
    let get = |key: &str| -> Result<u64> {
        match metadata.get(key) {
            Some(MetaValue::UInt(v)) => Ok(*v),
            Some(MetaValue::Int(v)) if *v >= 0 => Ok(*v as u64),
            Some(v) => Err(bad(format!(
                "{key} is {}, not a count (a non-negative integer)",
                meta_item_text(v)
            ))),
            None => Err(bad(format!("{KEY_COUNT} is set but {key} is missing"))),
        }
    };
    let keys = SplitKeys {
        no: get(KEY_NO)?,
        count: get(KEY_COUNT)?,
        tensors: get(KEY_TENSORS)?,
    };
    if keys.count == 0 || keys.no >= keys.count {
        return Err(bad(format!(
            "{KEY_NO} {} is not a part of {KEY_COUNT} {}",
            keys.no, keys.count
        )));
    }
    Ok(Some(keys))
}

/// An error of the split rules (the caller names the file).
pub fn bad(msg: String) -> Error {
    Error::new(ErrorKind::BadSplit(msg))
}

/// When to start a new part, as gguf-py's `GGUFWriter` takes them: `max_tensors` tensors per
/// part, `max_size` tensor bytes per part (headers and padding not counted), 0 for no limit;
/// `small_first`: a first part with the metadata and no tensor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitLimits {
    /// Most tensors in one part (gguf-py's `split_max_tensors`); 0 for no limit.
    pub max_tensors: u64,
    /// Most tensor bytes in one part (gguf-py's `split_max_size`); 0 for no limit.
    pub max_size: u64,
    /// Whether the first part holds the metadata and no tensor (gguf-py's `small_first_shard`).
    pub small_first: bool,
}

impl SplitLimits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.max_tensors != 0 || self.max_size != 0 || self.small_first
    }

    /// The parts of tensors of `sizes` bytes (in file order), as ranges of tensor positions,
    /// with gguf-py's rule: a part holds at least one tensor, and a new one starts when it
    /// has `max_tensors` tensors, or when the next tensor would take its bytes past
    /// `max_size`. With `small_first`, the first part is empty.
    pub fn plan(&self, sizes: &[u64]) -> Vec<Range<usize>> {
        let mut parts: Vec<Range<usize>> = Vec::new();
        parts.push(0..0);
        if self.small_first {
            parts.push(0..0);
        }
        let mut bytes = 0u64;
        for (i, &n) in sizes.iter().enumerate() {
            let last = parts.last_mut().expect("at least one part");
            let held = (last.end - last.start) as u64;
            let full = held > 0
                && ((self.max_tensors != 0 && held >= self.max_tensors)
                    || (self.max_size != 0 && bytes.saturating_add(n) > self.max_size));
            if full {
                parts.push(i..i);
                bytes = 0;
            }
            let last = parts.last_mut().expect("at least one part");
            last.end = i + 1;
            bytes = bytes.saturating_add(n);
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_format() {
        let p = parse_part_name("Llama-3-70B-Q4_K_M-00002-of-00003.gguf").unwrap();
        assert_eq!((p.stem, p.no, p.count), ("Llama-3-70B-Q4_K_M", 2, 3));
        assert_eq!(part_name("m", 2, 3), "m-00002-of-00003.gguf");
        assert_eq!(
            parse_part_name("m-123456-of-123456.GGUF").unwrap().no,
            123456
        );
        for not in [
            "m.gguf",
            "m-0002-of-00003.gguf",
            "m-00004-of-00003.gguf",
            "m-00000-of-00003.gguf",
            "-00001-of-00003.gguf",
            "m-00001-of-00003.safetensors",
            "m-0000a-of-00003.gguf",
        ] {
            assert_eq!(parse_part_name(not), None, "{not}");
        }
    }

    #[test]
    fn plan_follows_gguf_py() {
        let by_count = SplitLimits {
            max_tensors: 2,
            ..Default::default()
        };
        assert_eq!(by_count.plan(&[1, 1, 1, 1, 1]), vec![0..2, 2..4, 4..5]);
        let by_size = SplitLimits {
            max_size: 10,
            ..Default::default()
        };
        // A tensor bigger than the limit still gets a part of its own.
        assert_eq!(
            by_size.plan(&[4, 6, 1, 20, 3]),
            vec![0..2, 2..3, 3..4, 4..5]
        );
        let small = SplitLimits {
            small_first: true,
            ..Default::default()
        };
        assert_eq!(small.plan(&[1, 2]), vec![0..0, 0..2]);
        assert_eq!(SplitLimits::default().plan(&[1, 2]), vec![0..2]);
        assert_eq!(SplitLimits::default().plan(&[]), vec![0..0]);
    }

    #[test]
    fn keys_are_checked() {
        let mut m = BTreeMap::new();
        assert_eq!(split_keys(&m).unwrap(), None);
        m.insert(KEY_COUNT.into(), MetaValue::UInt(3));
        assert!(split_keys(&m).is_err());
        m.insert(KEY_NO.into(), MetaValue::UInt(3));
        m.insert(KEY_TENSORS.into(), MetaValue::Int(5));
        assert!(split_keys(&m).is_err(), "no 3 of 3");
        m.insert(KEY_NO.into(), MetaValue::UInt(2));
        assert_eq!(
            split_keys(&m).unwrap(),
            Some(SplitKeys {
                no: 2,
                count: 3,
                tensors: 5
            })
        );
        m.insert(KEY_TENSORS.into(), MetaValue::Int(-1));
        let e = split_keys(&m).unwrap_err().to_string();
        assert!(e.contains("split.tensors.count is -1, not a count"), "{e}");
        m.insert(KEY_TENSORS.into(), MetaValue::Str("five".into()));
        let e = split_keys(&m).unwrap_err().to_string();
        assert!(
            e.contains("split.tensors.count is \"five\", not a count"),
            "{e}"
        );
        assert!(!e.contains("Str("), "{e}");
    }
}
