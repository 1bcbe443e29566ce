//! Write options with safetensors-spark's names, defaults and validation, plus
//! `f16_rounding`. Names are case-insensitive; an unknown name is an error (a typo must not
//! silently fall back to a default).

use crate::error::{DatasetError, Result};
use std::collections::BTreeMap;
use tensorsmith::cast::Rounding;
use tensorsmith::digest::DigestKind;
use tensorsmith::dtype::DType;

/// How rows become tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Naming {
    /// Every `n` rows become one shard with one tensor per column, shape `[n, *sample]`.
    Batch(u64),
    /// One tensor per row and column, named `{name_col value}{sep}{column}`.
    Kv {
        /// The column whose values name each row's tensors (option `name_col`); it is never
        /// written as a tensor itself.
        name_col: String,
    },
}

/// Batch mode: what becomes of the last rows when they are fewer than a whole batch (option
/// `tail_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailStrategy {
    /// Leave them out of the dataset.
    Drop,
    /// Fill the batch up to its size with zero bytes and write it as a whole batch.
    Pad,
    /// Write them as a smaller last batch (the default).
    Write,
}

/// KV mode: what happens when two rows give the same tensor key (option
/// `duplicatesStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplicates {
    /// Fail the write with [`DatasetError::DuplicateKey`] (or
    /// [`DatasetError::DuplicateKeyInTasks`]), naming the key and both rows (the default).
    Fail,
    /// Keep the tensors of the last row with the key; earlier ones are dropped.
    LastWin,
}

/// The dtypes a dataset tensor may have (the manifest schema's list).
pub const DATASET_DTYPES: [DType; 12] = [
    DType::F16,
    DType::F32,
    DType::F64,
    DType::BF16,
    DType::U8,
    DType::I8,
    DType::U16,
    DType::I16,
    DType::U32,
    DType::I32,
    DType::U64,
    DType::I64,
];

pub const MIN_SHARD_MB: u64 = 50;
pub const MAX_SHARD_MB: u64 = 1000;
pub const DEFAULT_SHARD_MB: u64 = 300;

/// The safetensors-spark options of a write. Built by [`WriteOptions::batch`],
/// [`WriteOptions::kv`] or from the connector's option names, then adjusted field by field.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Batch or KV mode (option `batch_size` or `name_col`; exactly one is required).
    pub naming: Naming,
    /// Target dtype of every tensor; required for numeric and binary input.
    pub dtype: Option<DType>,
    /// Columns to write, in this order (default: all but `name_col`).
    pub columns: Option<Vec<String>>,
    /// Per-sample shapes (no batch dimension) by column.
    pub shapes: BTreeMap<String, Vec<u64>>,
    /// Batch mode: what to do with a last batch of fewer rows than the batch size.
    pub tail_strategy: TailStrategy,
    /// KV mode: what to do when two rows give the same tensor key (`duplicatesStrategy`).
    pub duplicates: Duplicates,
    /// KV mode: the size each shard is filled to before the next one starts, in MiB
    /// (50 to 1000, default 300). Batch mode writes one shard per batch.
    pub target_shard_size_mb: u64,
    /// Whether to write the tensor index, `_tensor_index.parquet` (tensor key to shard,
    /// dtype and shape), with the dataset (default false).
    pub generate_index: bool,
    /// KV mode: what joins a row's name and a column in a tensor key,
    /// `<name><kv_separator><column>` (default `__`; must not be empty).
    pub kv_separator: String,
    /// Float to F16/BF16: round to nearest even (default) or safetensors-spark's truncation.
    pub f16_rounding: Rounding,
    /// Record each shard's per-tensor digests (`tensorsmith.digest` in its `__metadata__`);
    /// option `digest`: true (XXH3-64), xxh3, sha256, crc32c or false (default).
    pub digest: Option<DigestKind>,
}

impl WriteOptions {
    /// Batch mode with every other option at its default.
    pub fn batch(batch_size: u64) -> Self {
        WriteOptions {
            naming: Naming::Batch(batch_size),
            dtype: None,
            columns: None,
            shapes: BTreeMap::new(),
            tail_strategy: TailStrategy::Write,
            duplicates: Duplicates::Fail,
            target_shard_size_mb: DEFAULT_SHARD_MB,
            generate_index: false,
            kv_separator: "__".into(),
            f16_rounding: Rounding::Nearest,
            digest: None,
        }
    }

    /// KV mode with every other option at its default.
    pub fn kv(name_col: &str) -> Self {
        WriteOptions {
            naming: Naming::Kv {
                name_col: name_col.to_string(),
            },
            ..Self::batch(1)
        }
    }

    /// Parses `(name, value)` pairs as safetensors-spark does (names case-insensitive).
    /// `path` is accepted and ignored (Spark passes it along with the options).
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut seen: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (k, v) in pairs {
            let lower = k.to_ascii_lowercase();
            if let Some((first, _)) = seen.get(&lower) {
                return Err(DatasetError::option(
                    k,
                    format!("given twice (also as {first})"),
                ));
            }
            seen.insert(lower, (k.to_string(), v.to_string()));
        }
        let get = |n: &str| seen.get(n).map(|(_, v)| v.as_str());
        const KNOWN: [&str; 13] = [
            "batch_size",
            "name_col",
            "dtype",
            "columns",
            "shapes",
            "tail_strategy",
            "duplicatesstrategy",
            "target_shard_size_mb",
            "generate_index",
            "kv_separator",
            "f16_rounding",
            "digest",
            "path",
        ];
        if let Some((orig, _)) = seen
            .iter()
            .find(|(k, _)| !KNOWN.contains(&k.as_str()))
            .map(|(_, v)| v)
        {
            return Err(DatasetError::option(
                orig,
                "unknown option (known: batch_size, name_col, dtype, columns, shapes, tail_strategy, duplicatesStrategy, target_shard_size_mb, generate_index, kv_separator, f16_rounding, digest)",
            ));
        }
        let batch = get("batch_size")
            .map(|s| match s.trim().parse::<i64>() {
                Ok(n) if n > 0 => Ok(n as u64),
                Ok(n) => Err(DatasetError::option(
                    "batch_size",
                    format!("must be positive, got {n}"),
                )),
                Err(_) => Err(DatasetError::option(
                    "batch_size",
                    format!("not an integer: '{s}'"),
                )),
            })
            .transpose()?;
        let name_col = get("name_col").filter(|s| !s.is_empty());
        let naming = match (batch, name_col) {
            (Some(n), None) => Naming::Batch(n),
            (None, Some(c)) => Naming::Kv {
                name_col: c.to_string(),
            },
            (Some(_), Some(_)) => {
                return Err(DatasetError::option(
                    "batch_size",
                    "batch_size and name_col are mutually exclusive: give exactly one",
                ))
            }
            (None, None) => {
                return Err(DatasetError::option(
                    "batch_size",
                    "one of batch_size (batch mode) or name_col (KV mode) is required",
                ))
            }
        };
        let mut o = match naming {
            Naming::Batch(n) => Self::batch(n),
            Naming::Kv { name_col } => Self::kv(&name_col),
        };
        if let Some(s) = get("dtype") {
            o.dtype = Some(parse_dtype(s)?);
        }
        if let Some(s) = get("columns") {
            let cols: Vec<String> = s
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
            if cols.is_empty() {
                return Err(DatasetError::option("columns", "names no column"));
            }
            o.columns = Some(cols);
        }
        if let Some(s) = get("shapes") {
            o.shapes = parse_shapes(s)?;
        }
        if let Some(s) = get("tail_strategy") {
            o.tail_strategy = match s.to_ascii_lowercase().as_str() {
                "drop" => TailStrategy::Drop,
                "pad" => TailStrategy::Pad,
                "write" => TailStrategy::Write,
                _ => {
                    return Err(DatasetError::option(
                        "tail_strategy",
                        format!("'{s}': use drop, pad or write"),
                    ))
                }
            };
        }
        if let Some(s) = get("duplicatesstrategy") {
            o.duplicates = match s.to_ascii_lowercase().as_str() {
                "fail" => Duplicates::Fail,
                "lastwin" => Duplicates::LastWin,
                _ => {
                    return Err(DatasetError::option(
                        "duplicatesStrategy",
                        format!("'{s}': use fail or lastWin"),
                    ))
                }
            };
        }
        if let Some(s) = get("target_shard_size_mb") {
            let n: u64 = s.trim().parse().map_err(|_| {
                DatasetError::option("target_shard_size_mb", format!("not an integer: '{s}'"))
            })?;
            if !(MIN_SHARD_MB..=MAX_SHARD_MB).contains(&n) {
                return Err(DatasetError::option(
                    "target_shard_size_mb",
                    format!("must be between {MIN_SHARD_MB} and {MAX_SHARD_MB}, got {n}"),
                ));
            }
            o.target_shard_size_mb = n;
        }
        if let Some(s) = get("generate_index") {
            o.generate_index = match s.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(DatasetError::option(
                        "generate_index",
                        format!("'{s}': use true or false"),
                    ))
                }
            };
        }
        if let Some(s) = get("digest") {
            o.digest = match s.to_ascii_lowercase().as_str() {
                "false" => None,
                "true" | "xxh3" => Some(DigestKind::Xxh3),
                "sha256" => Some(DigestKind::Sha256),
                "crc32c" => Some(DigestKind::Crc32c),
                _ => {
                    return Err(DatasetError::option(
                        "digest",
                        format!("'{s}': use true, false, xxh3, sha256 or crc32c"),
                    ))
                }
            };
        }
        if let Some(s) = get("kv_separator") {
            o.kv_separator = s.to_string();
        }
        if let Some(s) = get("f16_rounding") {
            o.f16_rounding = match s.to_ascii_lowercase().as_str() {
                "nearest" => Rounding::Nearest,
                "truncate" => Rounding::Truncate,
                _ => {
                    return Err(DatasetError::option(
                        "f16_rounding",
                        format!("'{s}': use nearest or truncate"),
                    ))
                }
            };
        }
        o.check()?;
        Ok(o)
    }

    /// Rules between options, also for options built in code.
    pub fn check(&self) -> Result<()> {
        match &self.naming {
            Naming::Batch(0) => return Err(DatasetError::option("batch_size", "must be positive")),
            Naming::Kv { name_col } => {
                if name_col.is_empty() {
                    return Err(DatasetError::option("name_col", "must not be empty"));
                }
                if self.columns.as_ref().is_some_and(|c| c.contains(name_col)) {
                    return Err(DatasetError::option(
                        "columns",
                        format!(
                            "holds the key column '{name_col}' (name_col), which is never a tensor"
                        ),
                    ));
                }
            }
            _ => {}
        }
        if self.kv_separator.is_empty() {
            return Err(DatasetError::option(
                "kv_separator",
                "must not be empty: tensor keys are <name><kv_separator><column>, and readers split them at the last separator (default \"__\")",
            ));
        }
        if let Some(d) = self.dtype {
            if !DATASET_DTYPES.contains(&d) {
                return Err(DatasetError::option(
                    "dtype",
                    format!("{d} is not a dataset dtype"),
                ));
            }
        }
        if !(MIN_SHARD_MB..=MAX_SHARD_MB).contains(&self.target_shard_size_mb) {
            return Err(DatasetError::option(
                "target_shard_size_mb",
                format!("must be between {MIN_SHARD_MB} and {MAX_SHARD_MB}"),
            ));
        }
        if let Some(cols) = &self.columns {
            let mut seen = std::collections::HashSet::new();
            if let Some(c) = cols.iter().find(|c| !seen.insert(c.as_str())) {
                return Err(DatasetError::option(
                    "columns",
                    format!("names '{c}' twice"),
                ));
            }
        }
        Ok(())
    }

    /// `target_shard_size_mb` in bytes.
    pub fn target_shard_bytes(&self) -> u64 {
        self.target_shard_size_mb * 1024 * 1024
    }
}

/// A dataset dtype by its safetensors name (the one table in `tensorsmith::dtype`).
pub fn dataset_dtype(name: &str) -> Option<DType> {
    DType::from_safetensors_name(name, false).filter(|d| DATASET_DTYPES.contains(d))
}

fn parse_dtype(s: &str) -> Result<DType> {
    dataset_dtype(&s.trim().to_ascii_uppercase()).ok_or_else(|| {
        DatasetError::option(
            "dtype",
            format!("'{s}': use one of F16 F32 F64 BF16 U8 I8 U16 I16 U32 I32 U64 I64"),
        )
    })
}

fn parse_shapes(s: &str) -> Result<BTreeMap<String, Vec<u64>>> {
    let bad = |m: String| DatasetError::option("shapes", m);
    let v: serde_json::Value =
        serde_json::from_str(s).map_err(|e| bad(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad("must be a JSON object {\"column\": [dims]}".into()))?;
    let mut out = BTreeMap::new();
    for (col, dims) in obj {
        let arr = dims
            .as_array()
            .ok_or_else(|| bad(format!("'{col}': must be a list of dimensions")))?;
        let mut shape = Vec::with_capacity(arr.len());
        for d in arr {
            match d.as_u64() {
                Some(n) => shape.push(n),
                None => {
                    return Err(bad(format!(
                        "'{col}': {d} is not a dimension (a non-negative integer)"
                    )))
                }
            }
        }
        out.insert(col.clone(), shape);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &[(&str, &str)]) -> Result<WriteOptions> {
        WriteOptions::parse(p.iter().copied())
    }

    fn err(p: &[(&str, &str)]) -> String {
        parse(p).unwrap_err().to_string()
    }

    #[test]
    fn defaults_follow_safetensors_spark() {
        let o = parse(&[("batch_size", "4")]).unwrap();
        assert_eq!(o, WriteOptions::batch(4));
        assert_eq!(o.tail_strategy, TailStrategy::Write);
        assert_eq!(o.duplicates, Duplicates::Fail);
        assert_eq!(o.target_shard_size_mb, 300);
        assert!(!o.generate_index);
        assert_eq!(o.kv_separator, "__");
        assert_eq!(o.f16_rounding, Rounding::Nearest);
    }

    #[test]
    fn every_option_parses_case_insensitively() {
        let o = parse(&[
            ("NAME_COL", "id"),
            ("dtype", "bf16"),
            ("columns", " a, b ,"),
            ("shapes", r#"{"a": [2, 3], "b": []}"#),
            ("tail_strategy", "PAD"),
            ("duplicatesStrategy", "lastWin"),
            ("target_shard_size_mb", "50"),
            ("generate_index", "TRUE"),
            ("kv_separator", "/"),
            ("f16_rounding", "truncate"),
            ("path", "/x"),
        ])
        .unwrap();
        assert_eq!(
            o.naming,
            Naming::Kv {
                name_col: "id".into()
            }
        );
        assert_eq!(o.dtype, Some(DType::BF16));
        assert_eq!(o.columns, Some(vec!["a".into(), "b".into()]));
        assert_eq!(o.shapes["a"], vec![2, 3]);
        assert_eq!(o.shapes["b"], Vec::<u64>::new());
        assert_eq!(o.tail_strategy, TailStrategy::Pad);
        assert_eq!(o.duplicates, Duplicates::LastWin);
        assert_eq!(o.target_shard_size_mb, 50);
        assert!(o.generate_index);
        assert_eq!(o.kv_separator, "/");
        assert_eq!(o.f16_rounding, Rounding::Truncate);
    }

    #[test]
    fn each_rule_has_its_error() {
        assert!(err(&[]).contains("one of batch_size"));
        assert!(err(&[("batch_size", "2"), ("name_col", "k")]).contains("mutually exclusive"));
        assert!(err(&[("batch_size", "0")]).contains("must be positive"));
        assert!(err(&[("batch_size", "-3")]).contains("must be positive"));
        assert!(err(&[("batch_size", "x")]).contains("not an integer"));
        assert!(err(&[("batch_size", "1"), ("dtype", "F8")]).contains("option dtype"));
        assert!(err(&[("batch_size", "1"), ("dtype", "C64")]).contains("option dtype"));
        assert!(
            err(&[("batch_size", "1"), ("tail_strategy", "keep")]).contains("drop, pad or write")
        );
        assert!(err(&[("batch_size", "1"), ("duplicatesStrategy", "first")])
            .contains("fail or lastWin"));
        assert!(err(&[("batch_size", "1"), ("target_shard_size_mb", "49")])
            .contains("between 50 and 1000"));
        assert!(
            err(&[("batch_size", "1"), ("target_shard_size_mb", "1001")])
                .contains("between 50 and 1000")
        );
        assert!(err(&[("batch_size", "1"), ("generate_index", "yes")]).contains("true or false"));
        assert!(err(&[("batch_size", "1"), ("f16_rounding", "up")]).contains("nearest or truncate"));
        assert!(err(&[("batch_size", "1"), ("shapes", "[1]")]).contains("JSON object"));
        assert!(
            err(&[("batch_size", "1"), ("shapes", r#"{"a": [-1]}"#)]).contains("not a dimension")
        );
        assert!(err(&[("batch_size", "1"), ("shapes", "{")]).contains("not JSON"));
        assert!(err(&[("batch_size", "1"), ("columns", " , ")]).contains("names no column"));
        assert!(err(&[("batch_size", "1"), ("columns", "a,a")]).contains("twice"));
        assert!(err(&[("name_col", "k"), ("columns", "a,k")]).contains("key column"));
        assert!(err(&[("batch_size", "1"), ("batchsize", "1")]).contains("unknown option"));
        assert!(err(&[("batch_size", "1"), ("BATCH_SIZE", "2")]).contains("given twice"));
        assert!(err(&[("name_col", "k"), ("kv_separator", "")])
            .contains("option kv_separator: must not be empty"));
        let mut o = WriteOptions::kv("k");
        o.kv_separator = String::new();
        assert!(o.check().unwrap_err().to_string().contains("kv_separator"));
    }
}
