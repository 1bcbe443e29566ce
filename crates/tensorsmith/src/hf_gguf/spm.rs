//! A SentencePiece tokenizer (tokenizer.model) as llama.cpp's converter writes it
//! (`_set_vocab_sentencepiece`): `tokenizer.ggml.model` "llama", `.pre` "default", every piece
//! with its score and type (the model's normal and user-defined pieces normal, unknown,
//! control, unused and byte pieces as they are), ids up to config.json's `vocab_size` as
//! `[PAD<id>]` (score -10000, unused), then added_tokens.json's and tokenizer_config.json's
//! added tokens over them (score -1000; control when special or shaped like one,
//! user-defined otherwise).
//!
//! The model file is protobuf (`ModelProto`, field 1: the pieces, each `piece` 1, `score` 2,
//! `type` 3), read with the wire reader the ONNX reader uses: three fields do not need a
//! protobuf crate's generated types.

use super::{refuse, vocab::looks_special};
use crate::error::Result;
use crate::gguf::{Array, GgufValue};
use crate::onnx::wire::{Fields, Value as Wire};
use serde_json::Value;

const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;
const BYTE: i32 = 6;

/// (piece, score, SentencePiece type) of every piece of the model.
fn pieces(path: &str, buf: &[u8]) -> Result<Vec<(String, f32, i32)>> {
    let bad = |e: crate::Error| refuse(path, &format!("not a SentencePiece model: {e}"));
    let mut out = Vec::new();
    for f in Fields::new(buf, 0..buf.len(), 0) {
        let f = f.map_err(bad)?;
        let (1, Wire::Len(r)) = (f.number, &f.value) else {
            continue;
        };
        let (mut piece, mut score, mut ty) = (String::new(), 0.0f32, 1i32);
        for g in Fields::new(buf, r.clone(), 0) {
            match g.map_err(bad)? {
                crate::onnx::wire::Field {
                    number: 1,
                    value: Wire::Len(p),
                    ..
                } => {
                    piece = String::from_utf8(buf[p].to_vec())
                        .map_err(|_| refuse(path, "a piece of tokenizer.model is not UTF-8"))?;
                }
                crate::onnx::wire::Field {
                    number: 2,
                    value: Wire::Fixed32(s),
                    ..
                } => score = f32::from_bits(s),
                crate::onnx::wire::Field {
                    number: 3,
                    value: Wire::Varint(t),
                    ..
                } => ty = t as i32,
                _ => {}
            }
        }
        out.push((piece, score, ty));
    }
    if out.is_empty() {
        return Err(refuse(path, "tokenizer.model holds no pieces"));
    }
    Ok(out)
}

/// The vocabulary keys of a SentencePiece tokenizer.
pub(crate) fn spm_keys(
    dir: &std::path::Path,
    shown: &str,
    vocab_size: Option<u64>,
    tokenizer_config: Option<&Value>,
) -> Result<Vec<(String, GgufValue)>> {
    let path = format!("{shown}/tokenizer.model");
    let buf = std::fs::read(dir.join("tokenizer.model"))
        .map_err(|e| crate::Error::from(e).in_file(std::path::Path::new(&path)))?;
    let model = pieces(&path, &buf)?;
    let n = vocab_size.unwrap_or(model.len() as u64) as usize;
    let mut tokens: Vec<String> = (0..n).map(|i| format!("[PAD{i}]")).collect();
    let mut scores = vec![-10000.0f32; n];
    let mut types = vec![UNUSED; n];
    for (i, (piece, score, ty)) in model.into_iter().enumerate().take(n) {
        tokens[i] = piece;
        scores[i] = score;
        types[i] = match ty {
            2 => UNKNOWN,
            3 => CONTROL,
            5 => UNUSED,
            6 => BYTE,
            _ => NORMAL,
        };
    }
    if let Ok(b) = std::fs::read(dir.join("added_tokens.json")) {
        let added: serde_json::Map<String, Value> = serde_json::from_slice(&b).map_err(|e| {
            refuse(
                &format!("{shown}/added_tokens.json"),
                &format!("not a JSON object: {e}"),
            )
        })?;
        for (k, id) in added {
            if let Some(id) = id.as_u64().map(|i| i as usize).filter(|i| *i < n) {
                tokens[id] = k;
                scores[id] = -1000.0;
                types[id] = USER_DEFINED;
            }
        }
    }
    if let Some(Value::Object(dec)) = tokenizer_config.and_then(|t| t.get("added_tokens_decoder")) {
        for (id, data) in dec {
            let (Ok(id), Some(content)) = (
                id.parse::<usize>(),
                data.get("content").and_then(Value::as_str),
            ) else {
                continue;
            };
            if id >= n {
                continue;
            }
            let special = data
                .get("special")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if special || looks_special(content) {
                types[id] = CONTROL;
                tokens[id] = content.to_string();
            } else {
                types[id] = USER_DEFINED;
                tokens[id] = content.replace('\u{2581}', " ");
            }
            scores[id] = -1000.0;
        }
    }
    Ok(vec![
        (
            "tokenizer.ggml.model".into(),
            GgufValue::String("llama".into()),
        ),
        (
            "tokenizer.ggml.pre".into(),
            GgufValue::String("default".into()),
        ),
        (
            "tokenizer.ggml.tokens".into(),
            GgufValue::Array(Array::String(tokens)),
        ),
        (
            "tokenizer.ggml.scores".into(),
            GgufValue::Array(Array::F32(scores)),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            GgufValue::Array(Array::I32(types)),
        ),
    ])
}
