//! A BPE tokenizer (tokenizer.json, the GPT-2 byte-level kind that Llama 3, Qwen2 and most
//! recent models use) as llama.cpp's converter writes it: `tokenizer.ggml.model` "gpt2", the
//! pre-tokenizer's name, every token by id (ids the vocabulary skips as `[PAD<id>]`, unused),
//! the token types (added tokens: control when special or shaped like one, user-defined
//! otherwise) and, through `special.rs`, merges, special ids and the chat template.
//!
//! The pre-tokenizer. The reference names it from a hash of the token ids its tokenizer gives
//! for a fixed text, which depends on the whole vocabulary, and refuses a hash it does not
//! know. We read the pre-tokenizer's definition instead: GPT-2's byte-level split is "gpt-2",
//! Llama 3's split pattern "llama-bpe", Qwen2's "qwen2" (the patterns as llama.cpp's
//! llama-vocab.cpp quotes them from tokenizer.json). Any other is refused by name, and
//! `--pre-tokenizer NAME` gives the name (as for a model whose hash the reference knows under
//! another name with the same pattern).

use super::refuse;
use crate::error::Result;
use crate::gguf::{Array, GgufValue};
use serde_json::Value;
use std::collections::HashMap;

const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

/// The name llama.cpp gives the pre-tokenizer of tokenizer.json, where we know it.
pub(crate) fn pre_tokenizer_name(t: &Value) -> Option<&'static str> {
    let p = t.get("pre_tokenizer")?;
    let byte_level = |p: &Value, regex: bool| {
        p.get("type").and_then(Value::as_str) == Some("ByteLevel")
            && p.get("add_prefix_space").and_then(Value::as_bool) == Some(false)
            && p.get("use_regex").and_then(Value::as_bool).unwrap_or(true) == regex
    };
    if byte_level(p, true) {
        return Some("gpt-2");
    }
    let list = p.get("pretokenizers").and_then(Value::as_array)?;
    let [split, bl] = list.as_slice() else {
        return None;
    };
    if !byte_level(bl, false)
        || split.get("type").and_then(Value::as_str) != Some("Split")
        || split.get("behavior").and_then(Value::as_str) != Some("Isolated")
        || split.get("invert").and_then(Value::as_bool) != Some(false)
    {
        return None;
    }
    match split
        .get("pattern")
        .and_then(|p| p.get("Regex"))
        .and_then(Value::as_str)
    {
        Some(LLAMA3) => Some("llama-bpe"),
        Some(QWEN2) => Some("qwen2"),
        _ => None,
    }
}

/// The reference's `does_token_look_special`.
pub(crate) fn looks_special(t: &str) -> bool {
    matches!(t, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (t.starts_with("<|") && t.ends_with("|>"))
        || (t.starts_with("<\u{ff5c}") && t.ends_with("\u{ff5c}>"))
        || (t.starts_with("<unused") && t.ends_with('>'))
}

/// `tokenizer.ggml.model`, `.pre`, `.tokens` and `.token_type` of a BPE tokenizer.json, for
/// a vocabulary of `vocab_size` ids (config.json's, else the tokenizer's own).
pub(crate) fn bpe_keys(
    path: &str,
    t: &Value,
    vocab_size: Option<u64>,
    pre: Option<&str>,
) -> Result<Vec<(String, GgufValue)>> {
    let model = t
        .get("model")
        .ok_or_else(|| refuse(path, "tokenizer.json has no model"))?;
    if model.get("type").and_then(Value::as_str) != Some("BPE") {
        return Err(refuse(
            path,
            &format!(
                "a {} tokenizer (tokenizer.json's model); BPE tokenizers are converted",
                model
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("untyped")
            ),
        ));
    }
    let pre = match pre.or_else(|| pre_tokenizer_name(t)) {
        Some(p) => p.to_string(),
        None => {
            return Err(refuse(
                path,
                "BPE pre-tokenizer was not recognized (tokenizer.json's pre_tokenizer is \
                 neither GPT-2's, Llama 3's nor Qwen2's); name the llama.cpp pre-tokenizer \
                 with --pre-tokenizer NAME (llama-bpe, qwen2, gpt-2, deepseek-llm, ...)",
            ))
        }
    };
    let mut by_id: HashMap<u64, String> = HashMap::new();
    if let Some(v) = model.get("vocab").and_then(Value::as_object) {
        for (tok, id) in v {
            if let Some(id) = id.as_u64() {
                by_id.insert(id, tok.clone());
            }
        }
    }
    // Added tokens: (content -> special), and their ids over the model's.
    let mut added: HashMap<String, bool> = HashMap::new();
    for a in t
        .get("added_tokens")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(c), Some(id)) = (
            a.get("content").and_then(Value::as_str),
            a.get("id").and_then(Value::as_u64),
        ) else {
            continue;
        };
        by_id.insert(id, c.to_string());
        added.insert(
            c.to_string(),
            a.get("special").and_then(Value::as_bool).unwrap_or(false),
        );
    }
    let n = vocab_size.unwrap_or(by_id.len() as u64);
    if let Some(max) = by_id.keys().max().filter(|m| **m >= n) {
        return Err(refuse(
            path,
            &format!(
                "token id {max} is not below the vocabulary size {n} (config.json's vocab_size)"
            ),
        ));
    }
    let mut tokens = Vec::with_capacity(n as usize);
    let mut types = Vec::with_capacity(n as usize);
    for i in 0..n {
        match by_id.get(&i) {
            None => {
                tokens.push(format!("[PAD{i}]"));
                types.push(UNUSED);
            }
            Some(tok) => match added.get(tok) {
                Some(special) if *special || looks_special(tok) => {
                    tokens.push(tok.clone());
                    types.push(CONTROL);
                }
                Some(_) => {
                    tokens.push(tok.replace('\u{2581}', " "));
                    types.push(USER_DEFINED);
                }
                None => {
                    tokens.push(tok.clone());
                    types.push(NORMAL);
                }
            },
        }
    }
    Ok(vec![
        (
            "tokenizer.ggml.model".into(),
            GgufValue::String("gpt2".into()),
        ),
        ("tokenizer.ggml.pre".into(), GgufValue::String(pre)),
        (
            "tokenizer.ggml.tokens".into(),
            GgufValue::Array(Array::String(tokens)),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            GgufValue::Array(Array::I32(types)),
        ),
    ])
}
