//! llama-quantize's type mixes (`Q4_K_M`, `Q3_K_L`, `IQ4_XS`, …): which ggml type each tensor of
//! a llama.cpp-named model gets for a file type, as `llama_model_quantize` chooses it in the
//! llama.cpp that `llama-cpp-python` 0.3.36 vendors (`src/llama-quant.cpp`:
//! `tensor_allows_quantization`, `llama_tensor_get_type_impl`, `tensor_type_fallback`). The
//! rules are the format's logic (no crate holds them), written from that source; only the
//! branches that the file types below can reach are kept. Checked against the reference's own output
//! (`tests/data/ggml_mix`, written by `scripts/ggml-mix-vectors` through `llama_model_quantize`).
//!
//! The counters that make a choice depend on the tensor's position (`attn_v` in the first
//! layers, `ffn_down` in every third) walk the tensors in llama.cpp's loader order: tensors
//! outside a block first, then block by block, by name within each (`weight_name_comparer`).

use crate::error::{Error, ErrorKind, Result};
use crate::ggml_type::GgmlType;

/// A llama.cpp file type (`llama_ftype`) that we can produce: its number (written as
/// `general.file_type`), its llama-quantize name and the type most tensors get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileType {
    /// The `llama_ftype` number, written as `general.file_type`.
    pub id: u32,
    /// The name llama-quantize takes (`Q4_K_M`, `IQ4_XS`, ...).
    pub name: &'static str,
    default: &'static str,
}

const fn ft(id: u32, name: &'static str, default: &'static str) -> FileType {
    FileType { id, name, default }
}

/// The file types with every type their mix can choose quantizable here, as llama-quantize
/// names them (its `Q3_K`, `Q4_K` and `Q5_K` are aliases of the `_M` mixes).
pub const FILE_TYPES: &[FileType] = &[
    ft(2, "Q4_0", "q4_0"),
    ft(3, "Q4_1", "q4_1"),
    ft(7, "Q8_0", "q8_0"),
    ft(8, "Q5_0", "q5_0"),
    ft(9, "Q5_1", "q5_1"),
    ft(10, "Q2_K", "q2_k"),
    // Only with an importance matrix (`needs_imatrix`).
    ft(21, "Q2_K_S", "q2_k"),
    ft(11, "Q3_K_S", "q3_k"),
    ft(12, "Q3_K_M", "q3_k"),
    ft(13, "Q3_K_L", "q3_k"),
    ft(14, "Q4_K_S", "q4_k"),
    ft(15, "Q4_K_M", "q4_k"),
    ft(16, "Q5_K_S", "q5_k"),
    ft(17, "Q5_K_M", "q5_k"),
    ft(18, "Q6_K", "q6_k"),
    // With an importance matrix (their IQ1, IQ2 and IQ3_XXS tensors need one).
    ft(19, "IQ2_XXS", "iq2_xxs"),
    ft(20, "IQ2_XS", "iq2_xs"),
    ft(28, "IQ2_S", "iq2_xs"),
    ft(29, "IQ2_M", "iq2_s"),
    ft(24, "IQ1_S", "iq1_s"),
    ft(31, "IQ1_M", "iq1_m"),
    ft(23, "IQ3_XXS", "iq3_xxs"),
    ft(22, "IQ3_XS", "iq3_s"),
    ft(26, "IQ3_S", "iq3_s"),
    ft(27, "IQ3_M", "iq3_s"),
    ft(25, "IQ4_NL", "iq4_nl"),
    ft(30, "IQ4_XS", "iq4_xs"),
    ft(36, "TQ1_0", "tq1_0"),
    ft(37, "TQ2_0", "tq2_0"),
    ft(38, "MXFP4_MOE", "mxfp4"),
];

impl FileType {
    /// The file type llama-quantize calls `name` (any case), with its aliases.
    pub fn from_name(name: &str) -> Option<FileType> {
        let up = name.to_ascii_uppercase();
        let up = match up.as_str() {
            "Q3_K" => "Q3_K_M",
            "Q4_K" => "Q4_K_M",
            "Q5_K" => "Q5_K_M",
            other => other,
        };
        FILE_TYPES.iter().copied().find(|f| f.name == up)
    }

    /// Whether `name` names a mix, not one block type: the `_S`/`_M`/`_L` names (IQ3_S too,
    /// as llama-quantize takes it), and mix names that are no ggml type (IQ3_XS).
    pub fn is_mix_only(name: &str) -> bool {
        let up = name.to_ascii_uppercase();
        up.ends_with("_S")
            || up.ends_with("_M")
            || up.ends_with("_L")
            || up == "MXFP4_MOE"
            || (GgmlType::from_name(&up.to_ascii_lowercase()).is_none()
                && FileType::from_name(&up).is_some())
    }

    /// The ggml type the mix gives a tensor it has no special rule for (`q4_k` for `Q4_K_M`).
    pub fn default_type(self) -> GgmlType {
        ty(self.default)
    }
}

/// What a `--quantize` / `quantize=` name asks for: one block type for every eligible tensor,
/// or a llama-quantize file type whose mix chooses each tensor's (the `_S`/`_M`/`_L` names, or
/// any of its names with `mix`). The error says what is accepted.
pub fn parse_quantize(
    name: &str,
    mix: bool,
) -> std::result::Result<(Option<GgmlType>, Option<FileType>), String> {
    let as_mix = mix || FileType::is_mix_only(name);
    if !as_mix {
        // One block type (IQ3_XXS names one, and a mix with `mix`).
        if let Some(t) = GgmlType::from_name(&name.to_ascii_lowercase())
            .filter(|&t| crate::ggml_quant::can_quantize(t))
        {
            return Ok((Some(t), None));
        }
    }
    // A mix name that is no quantizable block type (IQ2_XXS: ggml makes that type with an
    // importance matrix only) is the mix.
    if as_mix || FileType::from_name(name).is_some() {
        return match FileType::from_name(name) {
            Some(ft) => Ok((None, Some(ft))),
            None => {
                let names: Vec<&str> = FILE_TYPES.iter().map(|f| f.name).collect();
                Err(format!(
                    "'{name}': expected a llama-quantize file type: {}",
                    names.join(", ")
                ))
            }
        };
    }
    GgmlType::from_name(&name.to_ascii_lowercase())
        .filter(|&t| crate::ggml_quant::can_quantize(t))
        .map(|t| (Some(t), None))
        .ok_or_else(|| {
            format!(
                "'{name}': expected one of {}, or a llama-quantize mix (Q4_K_M, …)",
                crate::ggml_quant::QUANTIZE_TYPES
            )
        })
}

fn ty(name: &str) -> GgmlType {
    GgmlType::from_name(name).expect("a ggml type of the table")
}

/// What of a model's hyper-parameters the mixes look at (llama.cpp's `hparams`).
#[derive(Clone, Debug, Default)]
pub struct MixModel {
    /// `general.architecture`.
    pub arch: String,
    /// `{arch}.block_count`.
    pub n_layer: u32,
    /// `{arch}.attention.head_count` (of the first layer).
    pub n_head: u32,
    /// `{arch}.attention.head_count_kv` (of the first layer; `n_head` when absent).
    pub n_head_kv: u32,
    /// `{arch}.expert_count` (0 when absent).
    pub n_expert: u32,
}

impl MixModel {
    fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }

    /// llama.cpp's `LLM_TYPE_70B`, set by the loaders of these architectures.
    fn is_70b(&self) -> bool {
        match self.arch.as_str() {
            "llama" => self.n_layer == 80 && self.n_head != self.n_head_kv,
            "qwen2" | "deci" | "olmo" => self.n_layer == 80,
            "jais2" => self.n_layer == 68,
            _ => false,
        }
    }
}

/// One tensor as the mixes see it: its name, ggml dims (`ne`, fastest first) and whether it
/// holds floats (F32, F16, BF16) that can be quantized.
pub struct MixTensor<'a> {
    /// The tensor's llama.cpp (GGUF) name, such as `blk.0.attn_q.weight`.
    pub name: &'a str,
    /// Its dimensions in ggml order, the contiguous one first.
    pub ne: &'a [u64],
    /// Whether it holds F32, F16 or BF16 values, which can be quantized.
    pub float: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cat {
    Output,
    TokenEmbd,
    AttnQkv,
    AttnKvB,
    AttnV,
    AttnK,
    AttnQ,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Other,
}

fn category(name: &str) -> Cat {
    let has = |s: &str| name.contains(s);
    if name == "output.weight" {
        Cat::Output
    } else if crate::ggml_quant::imatrix::is_token_embd(name) {
        Cat::TokenEmbd
    } else if has("attn_qkv.weight") {
        Cat::AttnQkv
    } else if has("attn_kv_b.weight") {
        Cat::AttnKvB
    } else if has("attn_v.weight") {
        Cat::AttnV
    } else if has("attn_k.weight") {
        Cat::AttnK
    } else if has("attn_q.weight") {
        Cat::AttnQ
    } else if has("attn_output.weight") {
        Cat::AttnOutput
    } else if has("ffn_up") {
        Cat::FfnUp
    } else if has("ffn_gate") {
        Cat::FfnGate
    } else if has("ffn_down") {
        Cat::FfnDown
    } else {
        Cat::Other
    }
}

fn is_attn_v(c: Cat) -> bool {
    matches!(c, Cat::AttnV | Cat::AttnQkv | Cat::AttnKvB)
}

/// Names llama.cpp never quantizes (norms, routers, position and type embeddings, small
/// projections of particular architectures), beside the rule that only 2D and 3D tensors whose
/// name ends in `weight` are.
const NEVER: &[&str] = &[
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
];

const NEVER_GLM5_NEXT: &[&str] = &[
    "hc_",
    "indexer.attn_q_b",
    "indexer.attn_k",
    "indexer.proj",
    "indexer_compressor_gate",
    "indexer_compressor_ape",
    "ssm_f_a.weight",
    "ssm_f_b.weight",
    "ssm_g_a.weight",
    "ssm_g_b.weight",
    "ssm_beta.weight",
    "attn_kv_a_mqa.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
];

/// `tensor_allows_quantization` (with llama-quantize's defaults: the output tensor too).
fn allows(arch: &str, t: &MixTensor) -> bool {
    let n = t.name;
    let dims = t.ne.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    dims >= 2
        && n.ends_with("weight")
        && !NEVER.iter().any(|s| n.contains(s))
        && n != "position_embd.weight"
        && n != "token_types.weight"
        && !(arch == "glm5-next" && NEVER_GLM5_NEXT.iter().any(|s| n.contains(s)))
}

/// The block index of `blk.N.…` (what the loader's `sscanf("blk.%d.")` reads), -1 for others.
fn layer_of(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else {
        return -1;
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().unwrap_or(-1)
}

struct State<'m> {
    m: &'m MixModel,
    ft: &'static str,
    has_imatrix: bool,
    tied: bool,
    n_attention_wv: i64,
    i_attention_wv: i64,
    n_layer: i64,
    i_ffn_down: i64,
    i_ffn_gate: i64,
    i_ffn_up: i64,
}

fn use_more_bits(i: i64, n: i64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

impl State<'_> {
    /// The layer of an FFN tensor: the counter, or for a model with experts its name.
    fn layer(&self, counter: i64, name: &str) -> Result<i64> {
        if self.m.n_expert <= 1 {
            return Ok(counter);
        }
        let i = layer_of(name);
        if i < 0 || i >= self.n_layer {
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "tensor {name}: no layer in [0, {}) in its name (llama.cpp's mixes need blk.N. names in a model with experts)",
                self.n_layer
            ))));
        }
        Ok(i)
    }

    /// `llama_tensor_get_type_impl` for the file types of [`FILE_TYPES`].
    fn impl_type(&mut self, mut t: GgmlType, x: &MixTensor, cat: Cat) -> Result<GgmlType> {
        let ft = self.ft;
        let m = self.m;
        let is = |names: &[&str]| names.contains(&ft);
        let name = x.name;
        if m.arch == "glm5-next"
            && (name.contains("attn_q_a")
                || name.contains("attn_q_b")
                || name.contains("nextn.eh_proj"))
            && !matches!(t.name(), "f32" | "bf16" | "f16")
        {
            return Ok(ty("q8_0"));
        }
        if cat == Cat::Output || (self.tied && cat == Cat::TokenEmbd) {
            let nx = x.ne.first().copied().unwrap_or(1);
            if ft == "MXFP4_MOE" || m.arch == "falcon" || nx % u64::from(t.block_elements()) != 0 {
                t = ty("q8_0");
            } else if is(&[
                "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M",
            ]) {
                t = ty("q5_k");
            } else if t != ty("q8_0") {
                t = ty("q6_k");
            }
        } else if ft == "MXFP4_MOE" {
            let expert_role = matches!(cat, Cat::FfnUp | Cat::FfnGate | Cat::FfnDown);
            let experts = x.ne.get(2).copied().unwrap_or(1) > 1;
            t = if experts && (m.arch != "bailingmoe3" || expert_role) {
                ty("mxfp4")
            } else {
                ty("q8_0")
            };
        } else if cat == Cat::TokenEmbd {
            if is(&["IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"]) {
                t = ty("q2_k");
            } else if is(&["IQ2_S", "IQ2_M", "IQ3_XXS"]) {
                t = ty("iq3_s");
            } else if is(&["TQ1_0", "TQ2_0"]) {
                t = ty("q4_k");
            }
        } else if is(&["IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"]) {
            // The IQ2 and IQ1 mixes' own branch.
            let more = if is(&["IQ2_S", "IQ2_M"]) {
                "iq3_s"
            } else {
                "q2_k"
            };
            if is_attn_v(cat) {
                t = ty(if m.n_gqa() >= 4 || m.n_expert >= 4 {
                    "q4_k"
                } else {
                    more
                });
                self.i_attention_wv += 1;
            } else if m.n_expert == 8 && cat == Cat::AttnK {
                t = ty("q4_k");
            } else if cat == Cat::FfnDown {
                if self.i_ffn_down < self.n_layer / 8 {
                    t = ty(more);
                }
                self.i_ffn_down += 1;
            } else if cat == Cat::AttnOutput {
                if m.n_expert == 8 {
                    t = ty("q5_k");
                } else if is(&["IQ1_S", "IQ1_M"]) {
                    t = ty("iq2_xxs");
                } else if is(&["IQ2_S", "IQ2_M"]) {
                    t = ty("iq3_s");
                }
            }
        } else if is_attn_v(cat) {
            let gqa4 = m.n_gqa() >= 4;
            if ft == "Q2_K" {
                t = ty(if gqa4 { "q4_k" } else { "q3_k" });
            } else if ft == "IQ3_XXS" {
                t = ty(if gqa4 {
                    "q4_k"
                } else if !self.has_imatrix {
                    "iq3_s"
                } else {
                    "iq3_xxs"
                });
            } else if (is(&["Q2_K_S", "IQ3_XS", "IQ3_S"]) && gqa4) || ft == "IQ3_M" {
                t = ty("q4_k");
            } else if ft == "Q3_K_M" {
                t = ty(if self.i_attention_wv < 2 {
                    "q5_k"
                } else {
                    "q4_k"
                });
            } else if ft == "Q3_K_L" || (is(&["IQ4_NL", "IQ4_XS"]) && gqa4) {
                t = ty("q5_k");
            } else if is(&["Q4_K_M", "Q5_K_M"])
                && use_more_bits(self.i_attention_wv, self.n_attention_wv)
            {
                t = ty("q6_k");
            } else if ft == "Q4_K_S" && self.i_attention_wv < 4 {
                t = ty("q5_k");
            }
            if m.is_70b() && (t == ty("q3_k") || t == ty("q4_k")) {
                t = ty("q5_k");
            }
            if m.n_expert == 8 {
                t = ty("q8_0");
            }
            self.i_attention_wv += 1;
        } else if cat == Cat::AttnK {
            if m.n_expert == 8 {
                t = ty("q8_0");
            } else if ft == "IQ3_XS" {
                t = ty("iq3_xxs");
            } else if ft == "IQ3_XXS" {
                t = ty("iq2_s");
            }
        } else if cat == Cat::AttnQ {
            if ft == "IQ3_XS" {
                t = ty("iq3_xxs");
            } else if ft == "IQ3_XXS" {
                t = ty("iq2_s");
            }
        } else if cat == Cat::FfnDown {
            let (i, n) = (self.layer(self.i_ffn_down, name)?, self.n_layer);
            let falcon = m.arch == "falcon";
            if ft == "Q2_K" {
                t = ty("q3_k");
            } else if ft == "Q2_K_S" {
                if i < n / 8 {
                    t = ty("q4_k");
                }
            } else if ft == "IQ3_XXS" && !self.has_imatrix {
                t = ty(if i < n / 8 { "q4_k" } else { "q3_k" });
            } else if ft == "Q3_K_M" {
                t = ty(if i < n / 16 {
                    "q5_k"
                } else if !falcon || use_more_bits(i, n) {
                    "q4_k"
                } else {
                    "q3_k"
                });
            } else if ft == "IQ3_M" && (i < n / 8 || (m.n_expert == 8 && use_more_bits(i, n))) {
                t = ty("q4_k");
            } else if ft == "Q3_K_L" {
                t = ty(if falcon { "q4_k" } else { "q5_k" });
            } else if ft == "Q4_K_M" {
                if falcon {
                    t = ty(if i < n / 16 {
                        "q6_k"
                    } else if use_more_bits(i, n) {
                        "q5_k"
                    } else {
                        "q4_k"
                    });
                } else if use_more_bits(i, n) {
                    t = ty("q6_k");
                }
            } else if i < n / 8 && is(&["IQ4_NL", "IQ4_XS"]) && !self.has_imatrix {
                t = ty("q5_k");
            } else if ft == "Q5_K_M" && use_more_bits(i, n) {
                t = ty("q6_k");
            } else if ft == "Q4_K_S" && !falcon && i < n / 8 {
                t = ty("q5_k");
            } else if is(&["Q4_0", "Q5_0"]) && self.has_imatrix && i < n / 8 {
                t = ty(if ft == "Q4_0" { "q4_1" } else { "q5_1" });
            }
            self.i_ffn_down += 1;
        } else if cat == Cat::AttnOutput {
            if m.arch != "falcon" {
                if m.n_expert == 8 {
                    if is(&[
                        "Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S",
                        "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS",
                    ]) {
                        t = ty("q5_k");
                    }
                } else if ft == "Q2_K" {
                    t = ty("q3_k");
                } else if ft == "IQ3_XXS" {
                    t = ty("iq3_s");
                } else if ft == "Q3_K_M" {
                    t = ty("q4_k");
                } else if ft == "Q3_K_L" {
                    t = ty("q5_k");
                } else if ft == "IQ3_M" {
                    t = ty("q4_k");
                }
            } else if ft == "Q3_K_L" {
                t = ty("q4_k");
            }
        } else if cat == Cat::AttnQkv {
            // Unreachable: attn_qkv is an attn_v category above (as in llama.cpp).
        } else if cat == Cat::FfnGate || cat == Cat::FfnUp {
            let counter = if cat == Cat::FfnGate {
                &mut self.i_ffn_gate
            } else {
                &mut self.i_ffn_up
            };
            let at = *counter;
            *counter += 1;
            let (i, n) = (self.layer(at, name)?, self.n_layer);
            if ft == "IQ3_XS" && i >= n / 8 && i < 7 * n / 8 {
                t = ty("iq3_xxs");
            }
        }
        Ok(t)
    }
}

/// `tensor_type_fallback`: a type whose blocks fit rows of `ncols` values.
fn fallback(t: GgmlType, ncols: u64) -> Result<GgmlType> {
    let blk = u64::from(t.block_elements());
    if ncols % blk == 0 {
        return Ok(t);
    }
    let to = match t.name() {
        "iq1_s" | "iq1_m" | "iq2_xxs" | "iq2_xs" | "iq2_s" | "iq3_xxs" | "iq3_s" | "iq4_xs" => {
            ty("iq4_nl")
        }
        "q2_0" | "q2_k" | "q3_k" | "tq1_0" | "tq2_0" => ty("q4_0"),
        "q4_k" => ty("q5_0"),
        "q5_k" => ty("q5_1"),
        "q6_k" => ty("q8_0"),
        _ if blk <= 32 => t,
        other => {
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "no tensor type fallback is defined for type {other}"
            ))))
        }
    };
    Ok(if ncols % u64::from(to.block_elements()) != 0 {
        ty("f16")
    } else {
        to
    })
}

/// The indices of `names` in llama.cpp's loader order (`weight_name_comparer`: tensors
/// outside a block first, then by block number, by name within one), which llama-quantize
/// also writes its output in.
pub fn loader_order<'a>(names: impl Iterator<Item = &'a str>) -> Vec<usize> {
    let names: Vec<&str> = names.collect();
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| (layer_of(names[a]), names[a]).cmp(&(layer_of(names[b]), names[b])));
    order
}

/// The type llama-quantize gives each of `tensors` for file type `ft` (`None`: the tensor is
/// not quantized and keeps its type), in the order given.
pub fn choose_types(
    model: &MixModel,
    ft: FileType,
    tensors: &[MixTensor],
    has_imatrix: bool,
) -> Result<Vec<Option<GgmlType>>> {
    let order = loader_order(tensors.iter().map(|t| t.name));
    let cats: Vec<Cat> = tensors.iter().map(|t| category(t.name)).collect();
    let mut st = State {
        m: model,
        ft: ft.name,
        has_imatrix,
        tied: !cats.contains(&Cat::Output),
        n_attention_wv: cats.iter().filter(|c| is_attn_v(**c)).count() as i64,
        i_attention_wv: 0,
        n_layer: i64::from(model.n_layer),
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
    };
    let mut out = vec![None; tensors.len()];
    for i in order {
        let x = &tensors[i];
        if !allows(&model.arch, x) || !x.float {
            continue;
        }
        let t = st.impl_type(ft.default_type(), x, cats[i])?;
        out[i] = Some(fallback(t, x.ne.first().copied().unwrap_or(1))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(model: &MixModel, ft: &str, ts: &[(&str, Vec<u64>)]) -> Vec<String> {
        let ts: Vec<MixTensor> = ts
            .iter()
            .map(|(n, ne)| MixTensor {
                name: n,
                ne,
                float: true,
            })
            .collect();
        choose_types(model, FileType::from_name(ft).unwrap(), &ts, false)
            .unwrap()
            .into_iter()
            .map(|t| t.map_or("keep".into(), |t| t.name().to_string()))
            .collect()
    }

    #[test]
    fn output_gets_q6_k_norms_keep_and_odd_rows_fall_back() {
        let m = MixModel {
            arch: "llama".into(),
            n_layer: 1,
            n_head: 8,
            n_head_kv: 8,
            n_expert: 0,
        };
        let got = names(
            &m,
            "Q4_K_M",
            &[
                ("output.weight", vec![256, 100]),
                ("blk.0.attn_norm.weight", vec![256]),
                ("blk.0.attn_q.weight", vec![256, 256]),
                ("blk.0.ffn_down.weight", vec![288, 256]),
                ("blk.0.ffn_up.weight", vec![100, 256]),
            ],
        );
        // ffn_down of the only layer uses more bits (Q6_K), and 288 columns are not whole
        // 256-blocks: Q8_0; 100 columns fit no block: F16.
        assert_eq!(got, ["q6_k", "keep", "q4_k", "q8_0", "f16"]);
    }

    #[test]
    fn names_and_aliases() {
        assert_eq!(FileType::from_name("q4_k").unwrap().name, "Q4_K_M");
        assert_eq!(FileType::from_name("Q6_K").unwrap().id, 18);
        assert_eq!(FileType::from_name("iq1_m").unwrap().id, 31);
        assert!(FileType::is_mix_only("IQ1_S"));
        assert!(FileType::is_mix_only("Q4_K_M") && !FileType::is_mix_only("Q4_K"));
    }
}
