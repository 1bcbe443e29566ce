//! A Hugging Face checkpoint's tensors as llama.cpp's converter writes them: in its order
//! (shard files by name, tensors by name within each), named as llama.cpp names them, the Q
//! and K projections of Llama-family models with their rows permuted back from Hugging Face's
//! rotary layout, and typed as it types them (norms, biases and every 1-D tensor F32, the
//! others the output type: a float type, or Q8_0/TQ1_0/TQ2_0 quantized as gguf-py does, F16
//! where a row is no whole number of blocks). Values go through F32 as the reference's do
//! (BF16 and F64 sources are widened first), a chunk of rows at a time.

use super::refuse;
use crate::cast::{cast, Rounding};
use crate::dtype::DType;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::index::TensorInfo;
use crate::model::Model;
use crate::safetensors::TensorData;
use std::io::Write;

/// A tensor of the output: its llama.cpp name, ggml dims, type and where its values come from.
pub(crate) struct Planned {
    pub name: String,
    pub ne: crate::index::Shape,
    pub ty: GgmlType,
    pub src: Values,
}

/// Where an output tensor's values come from (in the checkpoint the caller holds).
#[derive(Debug)]
pub(crate) enum Values {
    /// A source tensor, its rows permuted by `heads` (Q/K) when set.
    Tensor { t: TensorInfo, heads: Option<u64> },
    /// Values computed here (rope_freqs).
    F32(Vec<f32>),
    /// Source tensors stacked along a new first axis (a layer's experts).
    Stack(Vec<TensorInfo>),
}

impl Values {
    /// Bytes `a..b` of the output tensor's data, as `ty` (a float type, or a block type whose
    /// rows hold whole blocks: Q8_0, TQ1_0, TQ2_0 quantized as gguf-py does), of `len` bytes in
    /// all: what both the writer (`Source`) and the file read by range (`virtual_file.rs`)
    /// take.
    pub(crate) fn bytes(
        &self,
        model: &Model,
        ty: GgmlType,
        len: u64,
        a: u64,
        b: u64,
    ) -> Result<Vec<u8>> {
        let one = |t: &TensorInfo, heads: Option<u64>, a: u64, b: u64| -> Result<Vec<u8>> {
            let r = row_len(t, ty).max(1);
            let (r0, r1) = (a / r, b.div_ceil(r));
            let rows = match ty.dtype() {
                Some(to) => rows_as(model, t, heads, to, r0..r1)?,
                None => {
                    // Through F32, as gguf-py's quantize_rows takes them; a row of the source's
                    // first axis holds whole blocks (the caller chose the type so).
                    let wide = rows_as(model, t, heads, DType::F32, r0..r1)?;
                    let f: Vec<f32> = wide
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    crate::ggml_quant::quantize(ty, &f)?
                }
            };
            let off = (a - r0 * r) as usize;
            Ok(rows[off..off + (b - a) as usize].to_vec())
        };
        let to = ty.dtype().unwrap_or(DType::F32);
        match self {
            Values::F32(v) => {
                let b32: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Ok(cast(&b32, DType::F32, to, Rounding::Nearest)?[a as usize..b as usize].to_vec())
            }
            Values::Tensor { t, heads } => one(t, *heads, a, b),
            Values::Stack(ts) => {
                let each = len / ts.len().max(1) as u64;
                let mut out = Vec::with_capacity((b - a) as usize);
                let mut pos = a;
                while pos < b {
                    let i = (pos / each) as usize;
                    let base = i as u64 * each;
                    let end = b.min(base + each);
                    out.extend(one(&ts[i], None, pos - base, end - base)?);
                    pos = end;
                }
                Ok(out)
            }
        }
    }
}

/// Bytes per output row of `t` (its first axis) in `ty` (a 1-D tensor's row is one element).
fn row_len(t: &TensorInfo, ty: GgmlType) -> u64 {
    let rows = t.shape.first().copied().unwrap_or(1).max(1);
    ty.byte_len(t.elements() / rows).unwrap_or(0)
}

/// The llama.cpp name of a Hugging Face tensor name of the Llama family (Llama, Mistral,
/// Qwen2, Qwen3 and their MoE routers and shared experts) in architecture `arch` (llama.cpp's
/// name), `None` when it has none: as gguf-py's tensor map, which names only the tensors the
/// architecture has.
pub(crate) fn llama_name(arch: &str, name: &str) -> Option<String> {
    let name = name.strip_prefix("language_model.").unwrap_or(name);
    let (stem, suffix) = name
        .strip_suffix(".weight")
        .map(|s| (s, "weight"))
        .or_else(|| name.strip_suffix(".bias").map(|s| (s, "bias")))?;
    let top = match stem {
        "model.embed_tokens" => Some("token_embd"),
        "model.norm" => Some("output_norm"),
        "lm_head" => Some("output"),
        _ => None,
    };
    if let Some(t) = top {
        return Some(format!("{t}.{suffix}"));
    }
    let rest = stem.strip_prefix("model.layers.")?;
    let (bid, part) = rest.split_once('.')?;
    let bid: u64 = bid.parse().ok()?;
    let to = match part {
        "input_layernorm" => "attn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "post_attention_layernorm" => "ffn_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        "block_sparse_moe.gate" if arch == "llama" => "ffn_gate_inp",
        "mlp.gate" if arch.ends_with("moe") => "ffn_gate_inp",
        "self_attn.q_norm" if arch.starts_with("qwen3") => "attn_q_norm",
        "self_attn.k_norm" if arch.starts_with("qwen3") => "attn_k_norm",
        "mlp.shared_expert_gate" if arch == "qwen2moe" => "ffn_gate_inp_shexp",
        "mlp.shared_expert.gate_proj" if arch == "qwen2moe" => "ffn_gate_shexp",
        "mlp.shared_expert.up_proj" if arch == "qwen2moe" => "ffn_up_shexp",
        "mlp.shared_expert.down_proj" if arch == "qwen2moe" => "ffn_down_shexp",
        _ => return None,
    };
    if arch.ends_with("moe") && matches!(to, "ffn_gate" | "ffn_up" | "ffn_down") {
        return None; // Qwen's MoE layers have no dense FFN in llama.cpp.
    }
    Some(format!("blk.{bid}.{to}.{suffix}"))
}

/// The kinds of an architecture's expert tensors, in the order the reference writes a layer's
/// stacks: Mixtral's w1, w2, w3 (gate, down, up); Qwen's down, gate, up projections.
pub(crate) fn expert_kinds(arch: &str) -> [&'static str; 3] {
    if arch == "llama" {
        ["gate", "down", "up"]
    } else {
        ["down", "gate", "up"]
    }
}

/// (layer, expert, kind: an index of [`expert_kinds`]) of an expert tensor, one per expert:
/// Mixtral's `model.layers.B.block_sparse_moe.experts.X.wK.weight`, Qwen MoE's
/// `model.layers.B.mlp.experts.X.{down,gate,up}_proj.weight`.
pub(crate) fn expert_of(arch: &str, name: &str) -> Option<(u64, u64, usize)> {
    let rest = name.strip_prefix("model.layers.")?;
    let (bid, rest) = rest.split_once('.')?;
    let (rest, kinds): (&str, [&str; 3]) = if arch == "llama" {
        (
            rest.strip_prefix("block_sparse_moe.experts.")?,
            ["w1", "w2", "w3"],
        )
    } else if arch.ends_with("moe") {
        (
            rest.strip_prefix("mlp.experts.")?,
            ["down_proj", "gate_proj", "up_proj"],
        )
    } else {
        return None;
    };
    let (x, rest) = rest.split_once('.')?;
    let w = kinds.iter().position(|k| rest == format!("{k}.weight"))?;
    Some((bid.parse().ok()?, x.parse().ok()?, w))
}

/// Names the reference drops before mapping.
pub(crate) fn dropped(name: &str) -> bool {
    name.ends_with(".attention.masked_bias")
        || name.ends_with(".attention.bias")
        || name.ends_with(".rotary_emb.inv_freq")
}

/// The output type of a tensor named `name` of ggml dims `ne`, for output type `out` (F32,
/// F16, BF16, Q8_0, TQ1_0 or TQ2_0).
pub(crate) fn type_of(name: &str, ne: &[u64], out: GgmlType) -> GgmlType {
    let f32 = GgmlType::from_dtype(DType::F32).expect("F32");
    let f16 = GgmlType::from_dtype(DType::F16).expect("F16");
    // The router (ffn_gate_inp) is among the tensors the reference keeps F32.
    if ne.len() <= 1
        || name.ends_with("_norm.weight")
        || !name.ends_with(".weight")
        || name.ends_with(".ffn_gate_inp.weight")
        || name.ends_with(".ffn_gate_inp_shexp.weight")
    {
        return f32;
    }
    if out.dtype().is_some() {
        return out;
    }
    // The ternary types leave the embedding and the output F16 (the reference's "TODO: use
    // Q4_K and Q6_K"); a row of no whole number of blocks is gguf-py's QuantError, which the
    // reference answers with F16.
    let ternary = matches!(out.name(), "tq1_0" | "tq2_0");
    if (ternary && (name == "token_embd.weight" || name == "output.weight"))
        || ne[0] % u64::from(out.block_elements()) != 0
    {
        return f16;
    }
    out
}

/// Source row of output row `r` of a Q or K projection of `heads` heads and `rows` rows: the
/// reference's `permute` (reshape to heads × 2 × half, swap the middle axes).
fn source_row(r: u64, heads: u64, rows: u64) -> u64 {
    let per = rows / heads;
    let half = per / 2;
    let (h, rem) = (r / per, r % per);
    let (b, a) = (rem / 2, rem % 2);
    h * per + a * half + b
}

/// Bytes per write: about 4 MiB of output.
const CHUNK_BYTES: u64 = 4 << 20;

/// An output tensor's data for the writer, `CHUNK_BYTES` at a time.
pub(crate) struct Source<'a> {
    pub model: &'a Model,
    pub values: Values,
    pub ty: GgmlType,
    pub len: u64,
}

impl TensorData for Source<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn write_to(&mut self, out: &mut dyn Write) -> Result<()> {
        let mut pos = 0;
        while pos < self.len {
            let end = (pos + CHUNK_BYTES).min(self.len);
            out.write_all(&self.values.bytes(self.model, self.ty, self.len, pos, end)?)?;
            pos = end;
        }
        Ok(())
    }
}

/// Output rows `rows` of tensor `t` (its first axis; a 1-D tensor's elements) as `to`,
/// permuted by `heads` when set: values through F32 as the reference's are (F16 stays F16 on
/// the way, exact either way).
fn rows_as(
    model: &Model,
    t: &TensorInfo,
    heads: Option<u64>,
    to: DType,
    rows: std::ops::Range<u64>,
) -> Result<Vec<u8>> {
    let from = t.dtype;
    let elem = from.byte_size().unwrap_or(4) as u64;
    let n = t.shape.first().copied().unwrap_or(1).max(1);
    let row_bytes = (t.elements() / n) * elem;
    let src = |o: u64| match heads {
        Some(h) => source_row(o, h, n),
        None => o,
    };
    // Only the source rows these output rows come from: a permutation stays within a head.
    let (lo, hi) = match heads {
        Some(h) => {
            let per = n / h;
            (
                (rows.start / per) * per,
                (rows.end.div_ceil(per) * per).min(n),
            )
        }
        None => (rows.start, rows.end),
    };
    let bytes = if model.is_plain(t) {
        let at = t.data_range().start;
        model.read(t, at + lo * row_bytes..at + hi * row_bytes)?
    } else {
        let all = model.tensor_bytes(t)?;
        std::borrow::Cow::Owned(all[(lo * row_bytes) as usize..(hi * row_bytes) as usize].to_vec())
    };
    let mut chunk = Vec::with_capacity(((rows.end - rows.start) * row_bytes) as usize);
    for o in rows {
        let at = ((src(o) - lo) * row_bytes) as usize;
        chunk.extend_from_slice(&bytes[at..at + row_bytes as usize]);
    }
    let from_now = if from == DType::F16 {
        DType::F16
    } else {
        DType::F32
    };
    let wide = if from == from_now {
        chunk
    } else {
        cast(&chunk, from, DType::F32, Rounding::Nearest)?
    };
    if from_now == to {
        Ok(wide)
    } else {
        cast(&wide, from_now, to, Rounding::Nearest)
    }
}

/// The element types a source tensor may have.
pub(crate) fn check_source(path: &str, t: &TensorInfo) -> Result<()> {
    if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
        return Err(refuse(
            path,
            &format!(
                "tensor '{}' is {}: the converter takes float tensors (F32, F16, BF16, F64)",
                t.name, t.dtype
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_permuted_as_the_reference_permutes_them() {
        // Two heads of 4 rows: [h0: 0 1 2 3, h1: 4 5 6 7] -> pairs interleaved per head.
        let got: Vec<u64> = (0..8).map(|r| source_row(r, 2, 8)).collect();
        assert_eq!(got, [0, 2, 1, 3, 4, 6, 5, 7]);
    }

    #[test]
    fn names_map_as_llama_cpp_names_them() {
        assert_eq!(
            llama_name("llama", "model.layers.3.self_attn.q_proj.bias").as_deref(),
            Some("blk.3.attn_q.bias")
        );
        assert_eq!(
            llama_name("llama", "lm_head.weight").as_deref(),
            Some("output.weight")
        );
        assert_eq!(
            llama_name("llama", "model.layers.0.mlp.experts.0.w1.weight"),
            None
        );
        assert_eq!(
            llama_name("qwen3", "model.layers.1.self_attn.k_norm.weight").as_deref(),
            Some("blk.1.attn_k_norm.weight")
        );
        assert_eq!(
            llama_name("qwen2", "model.layers.1.self_attn.k_norm.weight"),
            None
        );
        assert_eq!(
            llama_name("qwen2moe", "model.layers.2.mlp.shared_expert_gate.weight").as_deref(),
            Some("blk.2.ffn_gate_inp_shexp.weight")
        );
        assert_eq!(
            llama_name("qwen3moe", "model.layers.0.mlp.up_proj.weight"),
            None
        );
        assert_eq!(
            expert_of("qwen3moe", "model.layers.1.mlp.experts.10.gate_proj.weight"),
            Some((1, 10, 1))
        );
        assert_eq!(
            expert_of(
                "llama",
                "model.layers.1.block_sparse_moe.experts.3.w3.weight"
            ),
            Some((1, 3, 2))
        );
        assert_eq!(
            expert_of("qwen2", "model.layers.1.mlp.experts.1.up_proj.weight"),
            None
        );
    }
}
