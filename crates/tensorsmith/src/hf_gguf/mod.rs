//! Hugging Face model folders (config.json, the tokenizer and safetensors shards) to GGUF, as
//! llama.cpp's `convert_hf_to_gguf.py` (the llama.cpp that llama-cpp-python 0.3.36 vendors)
//! writes them, byte for byte: the same keys in the same order with the same types, the same
//! tensors in the same order with the same names, types and bytes. For the Llama family
//! (Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE) with a byte-level BPE tokenizer (tokenizer.json) or a
//! SentencePiece one (tokenizer.model).
//!
//! What the reference does and we do not (yet), each refused by name or noted:
//! - a SentencePiece-style tokenizer.json without its tokenizer.model (the reference's
//!   `LlamaHfVocab`): refused;
//! - mixtures of experts other than Mixtral's and Qwen's (one tensor per expert; fused
//!   `gate_up_proj` experts as transformers 5 saves them): refused (the tensor is named);
//!
//! The folder may be remote (`hf://ORG/REPO[@REV]`, a store URL): `folder.rs`.
//!
//! Files: `folder.rs` (where the small files are read), `hparams.rs` (the architecture's keys), `naming.rs` (general.*), `vocab.rs` and
//! `spm.rs` and `special.rs` (the tokenizer), `tensors.rs` (names, permutation, types, values), `rope.rs`
//! (Llama 3's rope_freqs), `virtual_file.rs` (the result read by range, never written: the
//! input of the quantizing step).

mod folder;
mod hparams;
mod model_card;
mod naming;
mod rope;
mod special;
mod spm;
mod tensors;
mod virtual_file;
mod vocab;

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::ggml_type::GgmlType;
use crate::gguf::{self, GgufValue};
use crate::model::Model;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub use folder::{folder_of, is_hf_folder, Folder};
pub use virtual_file::converted_model;

pub(crate) fn refuse(path: &str, why: &str) -> Error {
    Error::new(ErrorKind::Unsupported(why.to_string())).in_file(Path::new(path))
}

/// The converter's output type: `convert_hf_to_gguf.py --outtype`'s choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutType {
    /// Float tensors as F32 (`--outtype f32`).
    F32,
    /// Float tensors as F16 (`--outtype f16`).
    F16,
    /// Float tensors as BF16 (`--outtype bf16`).
    BF16,
    /// Q8_0, quantized as gguf-py does (F16 where a row is no whole number of blocks).
    Q8_0,
    /// Ternary TQ1_0 (1.69 bits per weight); the embedding and the output stay F16, as the
    /// reference leaves them.
    TQ1_0,
    /// Ternary TQ2_0 (2.06 bits per weight), with the same F16 exceptions as `TQ1_0`.
    TQ2_0,
    /// The reference's default: BF16 or F16 as the first tensor of 2+ dims that is either,
    /// else F16.
    Auto,
}

impl OutType {
    /// The names `--outtype` takes, as the reference spells them.
    pub const NAMES: &'static str = "f32, f16, bf16, q8_0, tq1_0, tq2_0, auto";

    /// An output type by its name (any case).
    pub fn parse(s: &str) -> Option<OutType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "f32" => OutType::F32,
            "f16" => OutType::F16,
            "bf16" => OutType::BF16,
            "q8_0" => OutType::Q8_0,
            "tq1_0" => OutType::TQ1_0,
            "tq2_0" => OutType::TQ2_0,
            "auto" => OutType::Auto,
            _ => return None,
        })
    }

    /// The output type of a float dtype (`--dtype`): F32, F16 or BF16.
    pub fn of_dtype(t: DType) -> Result<OutType> {
        match t {
            DType::F32 => Ok(OutType::F32),
            DType::F16 => Ok(OutType::F16),
            DType::BF16 => Ok(OutType::BF16),
            other => Err(Error::new(ErrorKind::Unsupported(format!(
                "{other} as the converter's output type (F32, F16 or BF16 with --dtype; \
                 --outtype takes {}; a llama-quantize type goes through --quantize)",
                OutType::NAMES
            )))),
        }
    }

    /// Whether the output holds block-quantized tensors (a final file: llama-quantize
    /// would not quantize it again).
    pub fn is_quantized(self) -> bool {
        matches!(self, OutType::Q8_0 | OutType::TQ1_0 | OutType::TQ2_0)
    }

    /// The tensor type and `general.file_type` of a resolved output type.
    fn ggml(self) -> (GgmlType, u32) {
        let (name, ft) = match self {
            OutType::F32 => ("f32", 0),
            OutType::F16 | OutType::Auto => ("f16", 1),
            OutType::BF16 => ("bf16", 32),
            OutType::Q8_0 => ("q8_0", 7),
            OutType::TQ1_0 => ("tq1_0", 36),
            OutType::TQ2_0 => ("tq2_0", 37),
        };
        (GgmlType::from_name(name).expect("a ggml type"), ft)
    }
}

/// How the folder is converted.
#[derive(Clone, Debug)]
pub struct HfOptions {
    /// The output type; `Auto` (the reference's default) unless set.
    pub out_type: OutType,
    /// The llama.cpp pre-tokenizer name, for a BPE tokenizer we do not recognise.
    pub pre_tokenizer: Option<String>,
}

impl Default for HfOptions {
    fn default() -> Self {
        HfOptions {
            out_type: OutType::Auto,
            pre_tokenizer: None,
        }
    }
}

/// The folder's file `name` as JSON, `None` when there is none; errors name it as the folder
/// is shown (`shown`: its path, or its URL when it was fetched).
fn read_json(dir: &Path, shown: &str, name: &str) -> Result<Option<Value>> {
    let p = dir.join(name);
    let named = format!("{shown}/{name}");
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| refuse(&named, &format!("not JSON: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::from(e).in_file(Path::new(&named))),
    }
}

/// A writer holding the folder's GGUF: every key and tensor, ready to write.
pub fn writer<'a>(dir: &Folder, model: &'a Model, opts: &HfOptions) -> Result<gguf::Writer<'a>> {
    let (meta, planned) = plan(dir, model, opts)?;
    let mut w = gguf::Writer::new();
    for (k, v) in meta {
        w.set(k, v);
    }
    for p in planned {
        let len = byte_len(&p)?;
        let src = tensors::Source {
            model,
            values: p.src,
            ty: p.ty,
            len,
        };
        w.add(p.name, p.ne, p.ty, src)?;
    }
    Ok(w)
}

fn byte_len(p: &tensors::Planned) -> Result<u64> {
    p.ty.byte_len(p.ne.iter().product())
        .ok_or_else(|| Error::new(ErrorKind::ShapeOverflow))
}

/// The folder's GGUF as metadata (in order) and tensors (in order, with their sources).
pub(crate) type Plan = (Vec<(String, GgufValue)>, Vec<tensors::Planned>);

pub(crate) fn plan(folder: &Folder, model: &Model, opts: &HfOptions) -> Result<Plan> {
    let dir = folder.path.as_path();
    let shown = folder.shown.clone();
    let config = read_json(dir, &shown, "config.json")?
        .ok_or_else(|| refuse(&shown, "no config.json: not a Hugging Face model folder"))?;
    let arch = hparams::arch_of(&format!("{shown}/config.json"), &config)?;
    if arch.name == "qwen3" && is_qwen3_reranker(folder, &config) {
        return Err(refuse(
            &shown,
            "a Qwen3 reranker (so named by its model card, folder or config): llama.cpp's \
             converter writes it as a ranking model (a cls.output tensor, rank pooling), which \
             is not converted here",
        ));
    }
    let h = hparams::flattened(&config);
    let cfg_path = format!("{shown}/config.json");
    let block_count = hparams::find(
        &h,
        &["n_layers", "num_hidden_layers", "n_layer", "num_layers"],
    )
    .and_then(Value::as_u64)
    .ok_or_else(|| refuse(&cfg_path, "config.json has no num_hidden_layers"))?;
    let n_head = hparams::find(&h, &["n_heads", "num_attention_heads"]).and_then(Value::as_u64);
    let n_kv = hparams::find(&h, &["n_kv_heads", "num_key_value_heads"]).and_then(Value::as_u64);

    // Tensors, in the reference's order: shard files by name, names sorted within each.
    let mut order: Vec<&crate::index::TensorInfo> = model.index.tensors.iter().collect();
    order.sort_by(|a, b| {
        let fa = &model.file_of(a).location;
        let fb = &model.file_of(b).location;
        fa.cmp(fb).then_with(|| a.name.cmp(&b.name))
    });
    // `auto`, as the reference guesses it: the first tensor of 2+ dims that is BF16 or F16.
    let out = match opts.out_type {
        OutType::Auto => order
            .iter()
            .filter(|t| t.shape.len() >= 2)
            .find_map(|t| match t.dtype {
                DType::BF16 => Some(OutType::BF16),
                DType::F16 => Some(OutType::F16),
                _ => None,
            })
            .unwrap_or(OutType::F16),
        t => t,
    };
    let (out_ty, ft) = out.ggml();
    let mut planned: Vec<tensors::Planned> = Vec::new();
    let rope = hparams::rope_parameters(&h);
    if let Some(f) = rope::llama3_factors(arch, &h, &rope) {
        planned.push(tensors::Planned {
            name: "rope_freqs.weight".into(),
            ne: crate::index::Shape::from_slice(&[f.len() as u64]),
            ty: GgmlType::from_dtype(DType::F32).expect("F32"),
            src: tensors::Values::F32(f),
        });
    }
    let n_experts =
        hparams::find(&h, &["num_local_experts", "num_experts"]).and_then(Value::as_u64);
    let kinds = tensors::expert_kinds(arch.name);
    let mut experts: std::collections::HashMap<u64, Vec<(u64, usize, &crate::index::TensorInfo)>> =
        Default::default();
    for t in order {
        if tensors::dropped(&t.name) {
            continue;
        }
        if let Some((bid, x, w)) = tensors::expert_of(arch.name, &t.name) {
            // Experts, one tensor each: stacked per layer and kind when the layer's last one
            // comes, in the reference's order of kinds.
            tensors::check_source(&model.file_of(t).location, t)?;
            let n = n_experts.ok_or_else(|| {
                refuse(
                    &cfg_path,
                    "expert tensors, and no num_local_experts (nor num_experts)",
                )
            })?;
            if x >= n {
                return Err(refuse(
                    &model.file_of(t).location,
                    &format!("tensor '{}': expert {x} of {n} (num_experts)", t.name),
                ));
            }
            let layer = experts.entry(bid).or_default();
            layer.push((x, w, t));
            if layer.len() as u64 == n * 3 {
                let mut layer = experts.remove(&bid).unwrap_or_default();
                layer.sort_by_key(|(x, w, _)| (*w, *x));
                for (w, kind) in kinds.iter().enumerate() {
                    let ts: Vec<&crate::index::TensorInfo> =
                        layer.iter().filter(|e| e.1 == w).map(|e| e.2).collect();
                    let first = ts[0];
                    if ts
                        .iter()
                        .any(|t| t.shape != first.shape || t.shape.len() != 2)
                    {
                        return Err(refuse(
                            &model.file_of(first).location,
                            &format!("layer {bid}'s {kind} experts differ in shape"),
                        ));
                    }
                    let mut ne: crate::index::Shape = first.shape.iter().rev().copied().collect();
                    ne.push(n);
                    let name = format!("blk.{bid}.ffn_{kind}_exps.weight");
                    let ty = tensors::type_of(&name, &ne, out_ty);
                    planned.push(tensors::Planned {
                        name,
                        ne,
                        ty,
                        src: tensors::Values::Stack(ts.into_iter().cloned().collect()),
                    });
                }
            }
            continue;
        }
        let name = tensors::llama_name(arch.name, &t.name).ok_or_else(|| {
            refuse(
                &model.file_of(t).location,
                &format!(
                    "tensor '{}' has no llama.cpp name for architecture {} (mixtures of \
                     experts and multimodal parts are not converted)",
                    t.name, arch.name
                ),
            )
        })?;
        tensors::check_source(&model.file_of(t).location, t)?;
        let heads = match (arch.undo_permute, n_head) {
            (true, Some(n))
                if t.name.ends_with("q_proj.weight") || t.name.ends_with("q_proj.bias") =>
            {
                Some(n)
            }
            (true, Some(n))
                if t.name.ends_with("k_proj.weight") || t.name.ends_with("k_proj.bias") =>
            {
                Some(n_kv.filter(|k| *k != n).unwrap_or(n))
            }
            _ => None,
        };
        if let Some(n) = heads {
            let rows = t.shape.first().copied().unwrap_or(0);
            if n == 0 || rows % (2 * n) != 0 {
                return Err(refuse(
                    &model.file_of(t).location,
                    &format!(
                        "tensor '{}' has {rows} rows, not whole pairs of rows for {n} heads",
                        t.name
                    ),
                ));
            }
        }
        let ne: crate::index::Shape = t.shape.iter().rev().copied().collect();
        let ty = tensors::type_of(&name, &ne, out_ty);
        planned.push(tensors::Planned {
            name,
            ne,
            ty,
            src: tensors::Values::Tensor {
                t: t.clone(),
                heads,
            },
        });
    }
    if let Some(bid) = experts.keys().min() {
        return Err(refuse(
            &shown,
            &format!(
                "layer {bid} lacks some of its experts' {} tensors",
                kinds.join("/")
            ),
        ));
    }
    let params = parameter_counts(&planned);

    let mut meta: Vec<(String, GgufValue)> = vec![
        (
            "general.architecture".into(),
            GgufValue::String(arch.name.into()),
        ),
        ("general.type".into(), GgufValue::String("model".into())),
    ];
    let dir_name = folder.name.clone();
    let generation = read_json(dir, &shown, "generation_config.json")?;
    let card = match model_card::load(dir, &shown)? {
        Some(m) => Some(model_card::card(
            &format!("{shown}/README.md"),
            &m,
            params.0 as i64,
        )?),
        None => None,
    };
    let mut card_keys = Vec::new();
    if let Some(c) = &card {
        c.keys_after_size(&mut card_keys);
    }
    meta.extend(naming::general_keys(
        &dir_name,
        &config,
        generation.as_ref(),
        &|f| card.as_ref().and_then(|c| c.get(f)),
        card_keys,
        params,
    ));
    meta.extend(hparams::keys(&cfg_path, arch, &h, block_count as u32, ft)?);
    meta.push(("general.quantization_version".into(), GgufValue::U32(2)));
    meta.extend(tokenizer_keys(dir, &shown, arch, &config, &h, opts)?);
    Ok((meta, planned))
}

/// The reference's `Qwen3Model._is_qwen3_reranker`: a model card with a `# Qwen3-Reranker`
/// (or `-VL-`) heading, or a name (the folder's, `_name_or_path`, `model_type`, the
/// architecture) that says so.
fn is_qwen3_reranker(folder: &Folder, config: &Value) -> bool {
    let card = std::fs::read_to_string(folder.path.join("README.md"))
        .unwrap_or_default()
        .to_lowercase();
    if card.contains("# qwen3-reranker") || card.contains("# qwen3-vl-reranker") {
        return true;
    }
    let text = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or_default();
    let arch = config
        .get("architectures")
        .and_then(|a| a.get(0))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let hints = [
        folder.name.as_str(),
        text("_name_or_path"),
        text("model_type"),
        arch,
    ];
    hints.iter().any(|h| {
        let h = h.to_lowercase();
        h.contains("qwen3-reranker") || h.contains("qwen3-vl-reranker")
    }) || arch.to_lowercase().contains("sequenceclassification")
}

/// (total, shared, expert, expert count) as gguf-py's `get_total_parameter_count` counts them
/// (an expert tensor's parameters per expert).
fn parameter_counts(planned: &[tensors::Planned]) -> (u64, u64, u64, u64) {
    let (mut total, mut shared, mut expert, mut sum, mut n) = (0, 0, 0, 0, 0);
    for p in planned {
        let size: u64 = p.ne.iter().product();
        if p.name.contains("_exps.") && p.ne.len() >= 3 {
            let count = p.ne[if p.name.contains(".bias") { 1 } else { 2 }].max(1);
            expert += size / count;
            sum += count;
            n += 1;
        } else {
            shared += size;
        }
        total += size;
    }
    (total, shared, expert, sum.checked_div(n).unwrap_or(0))
}

/// The tokenizer's keys: `add_space_prefix` (Llama), the vocabulary, then the special tokens.
fn tokenizer_keys(
    dir: &Path,
    shown: &str,
    arch: hparams::Arch,
    config: &Value,
    h: &serde_json::Map<String, Value>,
    opts: &HfOptions,
) -> Result<Vec<(String, GgufValue)>> {
    let tok_path = format!("{shown}/tokenizer.json");
    let tc = read_json(dir, shown, "tokenizer_config.json")?;
    let mut out = Vec::new();
    if arch.name == "llama" {
        if let Some(b) = tc
            .as_ref()
            .and_then(|t| t.get("add_prefix_space"))
            .and_then(Value::as_bool)
        {
            out.push((
                "tokenizer.ggml.add_space_prefix".to_string(),
                GgufValue::Bool(b),
            ));
        }
    }
    let vocab_size = h.get("vocab_size").and_then(Value::as_u64);
    // As the reference: a SentencePiece model first, else tokenizer.json.
    let mut n_vocab = None;
    let tok = read_json(dir, shown, "tokenizer.json")?;
    // As the reference: a SentencePiece model first, else tokenizer.json.
    let spm = dir.join("tokenizer.model").is_file();
    if spm {
        let keys = spm::spm_keys(dir, shown, vocab_size, tc.as_ref())?;
        if let Some((_, GgufValue::Array(crate::gguf::Array::String(t)))) = keys.get(2) {
            n_vocab = Some(t.len() as u64);
        }
        out.extend(keys);
    } else {
        let tok = tok
            .as_ref()
            .ok_or_else(|| refuse(&tok_path, "no tokenizer.json (nor tokenizer.model)"))?;
        let model = tok.get("model");
        if model
            .and_then(|m| m.get("byte_fallback"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            return Err(refuse(
                &tok_path,
                "a SentencePiece-style BPE tokenizer.json (byte_fallback) without its tokenizer.model: not converted yet",
            ));
        }
        out.extend(vocab::bpe_keys(
            &tok_path,
            tok,
            vocab_size,
            opts.pre_tokenizer.as_deref(),
        )?);
    }
    let template = std::fs::read_to_string(dir.join("chat_template.jinja")).ok();
    let template = template.or_else(|| {
        std::fs::read(dir.join("chat_template.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| {
                v.get("chat_template")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
    });
    let special = special::Special::load(
        tok.as_ref(),
        tc.as_ref().and_then(Value::as_object),
        config,
        template,
        n_vocab,
        !spm,
    );
    out.extend(special.keys());
    Ok(out)
}

/// Converts the folder `dir` (its tensors opened as `model`) to the GGUF file `out`.
pub fn convert(
    dir: &Folder,
    model: &Model,
    out: &Path,
    opts: &HfOptions,
) -> Result<Vec<(PathBuf, u64)>> {
    let w = writer(dir, model, opts)?;
    gguf::write_split(w, out, &gguf::SplitLimits::default())
}
