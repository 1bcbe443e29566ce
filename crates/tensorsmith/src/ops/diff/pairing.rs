//! Which tensor of model A a diff compares with which tensor of model B.
//!
//! By name, after two translations of A's names: first the caller's `--rename` rules
//! ([`RenameRule`]: the first that matches renames), then, when active, the llama name map
//! between Hugging Face and GGUF names ([`crate::ops::diff::llama`]). The map is active with
//! [`NameMap::Llama`], or with [`NameMap::Auto`] (the default) when exactly one side is a GGUF
//! file whose `general.architecture` is `llama`. A name that no translation finds in B is
//! looked up as it is. Each B tensor pairs at most once.
//!
//! Under the map, Q and K tensors of the GGUF side are stored in the row order of
//! `convert_hf_to_gguf.py`'s permutation; their pair carries a [`RowOrder`] so the values are
//! compared row for row with the Hugging Face side (head counts from the GGUF side's metadata).

use crate::index::{Format, MetaValue, TensorIndex, TensorInfo};
use crate::ops::diff::llama::{self as llama, Permuted};
use crate::ops::diff::rename::rename;
pub use crate::ops::diff::rename::RenameRule;
use std::collections::HashMap;

/// When the llama name map applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameMap {
    /// When exactly one side is GGUF with `general.architecture` = `llama`.
    #[default]
    Auto,
    /// Always (the GGUF-named side: a GGUF file, else the side whose names the map knows).
    Llama,
    /// Never.
    None,
}

/// How names are paired.
#[derive(Debug, Clone, Default)]
pub struct PairOptions {
    /// Rename rules applied to A's names, in order; the first that matches renames.
    pub rules: Vec<RenameRule>,
    /// When the llama name map translates names between Hugging Face and GGUF.
    pub name_map: NameMap,
}

/// Rows of one side stored in the converter's permuted order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowOrder {
    /// The permuted side is B (else A).
    pub in_b: bool,
    /// Rows of the tensor (its outermost dimension).
    pub rows: u64,
    /// Groups of the permutation: the head count (`n_head`, or `n_head_kv` for K).
    pub groups: u64,
}

/// One tensor of A and its twin in B (indexes into each index's `tensors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// Position of the tensor in A's `tensors`.
    pub a: usize,
    /// Position of its twin in B's `tensors`.
    pub b: usize,
    /// `Ok(Some)`: compare B's (or A's) rows in the other's order; `Err`: why the rows
    /// cannot be put in order (head counts unknown or not dividing the rows).
    pub rows: Result<Option<RowOrder>, String>,
}

/// Every pair, and the tensors of each side that have none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pairing {
    /// The pairs, in A's tensor order.
    pub pairs: Vec<Pair>,
    /// Positions in A's `tensors` of the tensors with no twin in B (removed).
    pub only_a: Vec<usize>,
    /// Positions in B's `tensors` of the tensors with no twin in A (added).
    pub only_b: Vec<usize>,
    /// `Some("llama")` when the llama name map was applied.
    pub name_map: Option<&'static str>,
}

fn is_gguf(i: &TensorIndex) -> bool {
    matches!(i.format, Format::Gguf { .. })
}

fn is_llama_gguf(i: &TensorIndex) -> bool {
    is_gguf(i)
        && matches!(i.metadata.get("general.architecture"), Some(MetaValue::Str(s)) if s == "llama")
}

fn count(i: &TensorIndex, f: fn(&str) -> Option<String>) -> usize {
    i.tensors.iter().filter(|t| f(&t.name).is_some()).count()
}

/// Which side has GGUF names under the map: `Some(true)` for B, `Some(false)` for A.
fn gguf_side(a: &TensorIndex, b: &TensorIndex, map: NameMap) -> Result<Option<bool>, String> {
    match map {
        NameMap::None => Ok(None),
        NameMap::Auto => Ok(match (is_llama_gguf(a), is_llama_gguf(b)) {
            (false, true) if !is_gguf(a) => Some(true),
            (true, false) if !is_gguf(b) => Some(false),
            _ => None,
        }),
        NameMap::Llama => match (is_gguf(a), is_gguf(b)) {
            (false, true) => Ok(Some(true)),
            (true, false) => Ok(Some(false)),
            _ => {
                let (ga, gb) = (count(a, llama::gguf_to_hf), count(b, llama::gguf_to_hf));
                if ga == gb {
                    Err("--name-map llama: cannot tell which model has GGUF names".to_owned())
                } else {
                    Ok(Some(gb > ga))
                }
            }
        },
    }
}

fn meta_u64(i: &TensorIndex, key: &str) -> Option<u64> {
    match i.metadata.get(key)? {
        MetaValue::UInt(v) => Some(*v),
        MetaValue::Int(v) => u64::try_from(*v).ok(),
        _ => None,
    }
}

/// The row order of a permuted tensor, or why it is unknown.
fn row_order(
    gguf: &TensorIndex,
    hf: &TensorInfo,
    p: Permuted,
    in_b: bool,
) -> Result<Option<RowOrder>, String> {
    let Some(n_head) = meta_u64(gguf, llama::HEAD_COUNT_KEY).filter(|&n| n > 0) else {
        return Err(format!(
            "rows permuted by convert_hf_to_gguf.py, but {} is missing",
            llama::HEAD_COUNT_KEY
        ));
    };
    let kv = meta_u64(gguf, llama::HEAD_COUNT_KV_KEY).filter(|&n| n > 0);
    let groups = llama::groups(p, n_head, kv);
    let rows = hf.shape.first().copied().unwrap_or(1);
    if rows == 0 || rows % (2 * groups) != 0 {
        return Err(format!(
            "{rows} rows do not split into {groups} heads of pairs (convert_hf_to_gguf.py's permutation)"
        ));
    }
    Ok(Some(RowOrder { in_b, rows, groups }))
}

/// Pairs the tensors of `a` with those of `b` (pairs in A's name order).
pub fn pair_tensors(
    a: &TensorIndex,
    b: &TensorIndex,
    opts: &PairOptions,
) -> Result<Pairing, String> {
    let side = gguf_side(a, b, opts.name_map)?;
    let by_name: HashMap<&str, usize> = b
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let mut order: Vec<usize> = (0..a.tensors.len()).collect();
    order.sort_by(|&x, &y| a.tensors[x].name.cmp(&a.tensors[y].name));
    let mut taken = vec![false; b.tensors.len()];
    let mut out = Pairing {
        name_map: side.map(|_| "llama"),
        ..Pairing::default()
    };
    for ia in order {
        let t = &a.tensors[ia];
        let renamed = rename(&opts.rules, &t.name).unwrap_or_else(|| t.name.clone());
        let mapped = match side {
            Some(true) => llama::hf_to_gguf(&renamed),
            Some(false) => llama::gguf_to_hf(&renamed),
            None => None,
        };
        let found = mapped
            .as_deref()
            .and_then(|m| by_name.get(m))
            .or_else(|| by_name.get(renamed.as_str()))
            .copied()
            .filter(|&ib| !taken[ib]);
        let Some(ib) = found else {
            out.only_a.push(ia);
            continue;
        };
        taken[ib] = true;
        let u = &b.tensors[ib];
        let rows = match side {
            Some(true) => match llama::permuted(&u.name) {
                Some(p) => row_order(b, t, p, true),
                None => Ok(None),
            },
            Some(false) => match llama::permuted(&renamed) {
                Some(p) => row_order(a, u, p, false),
                None => Ok(None),
            },
            None => Ok(None),
        };
        out.pairs.push(Pair { a: ia, b: ib, rows });
    }
    let mut rest: Vec<usize> = (0..b.tensors.len()).filter(|&i| !taken[i]).collect();
    rest.sort_by(|&x, &y| b.tensors[x].name.cmp(&b.tensors[y].name));
    out.only_b = rest;
    Ok(out)
}
