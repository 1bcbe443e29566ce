//! The llama family's tensor names in Hugging Face checkpoints and in GGUF files, and the row
//! order llama.cpp's `convert_hf_to_gguf.py` gives Q and K.
//!
//! The converter stores `q_proj` as `LlamaModel.permute(w, n_head, n_head)` and `k_proj` as
//! `permute(w, n_head, n_head_kv)`: with `g` groups (`n_head`, or `n_head_kv` for K when it
//! differs) and `h = rows / g / 2`, `w.reshape(g, 2, h, ...).swapaxes(1, 2).reshape(shape)`.
//! Row `r = g_i·2h + j·h + i` of the Hugging Face tensor (`j` in 0..2, `i` in 0..h) is row
//! `g_i·2h + 2i + j` of the GGUF one; [`gguf_row`] gives that index, so a diff reads the GGUF
//! side's rows in Hugging Face order. Biases (`.bias`, one value per row) move the same way.

/// Names inside a layer: Hugging Face (after `model.layers.N.`) and GGUF (after `blk.N.`).
const LAYER: [(&str, &str); 9] = [
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
    ("input_layernorm", "attn_norm"),
    ("post_attention_layernorm", "ffn_norm"),
];

/// Whole names outside the layers (without `.weight`).
const GLOBAL: [(&str, &str); 3] = [
    ("model.embed_tokens", "token_embd"),
    ("model.norm", "output_norm"),
    ("lm_head", "output"),
];

/// GGUF metadata key of the attention head count (the groups of Q's permutation).
pub const HEAD_COUNT_KEY: &str = "llama.attention.head_count";
/// GGUF metadata key of the key/value head count (the groups of K's permutation, when set).
pub const HEAD_COUNT_KV_KEY: &str = "llama.attention.head_count_kv";

/// Which of the converter's permutations a tensor's rows went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permuted {
    /// `q_proj` / `attn_q`: permuted in `n_head` groups.
    Q,
    /// `k_proj` / `attn_k`: permuted in `n_head_kv` groups (`n_head` when that is unset).
    K,
}

fn split_kind(name: &str) -> Option<(&str, &str)> {
    name.strip_suffix(".weight")
        .map(|s| (s, "weight"))
        .or_else(|| name.strip_suffix(".bias").map(|s| (s, "bias")))
}

fn layer_number(s: &str) -> Option<(&str, &str)> {
    let (n, rest) = s.split_once('.')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some((n, rest))
}

/// The GGUF name of a Hugging Face llama tensor name.
pub fn hf_to_gguf(name: &str) -> Option<String> {
    let (stem, kind) = split_kind(name)?;
    if let Some(rest) = stem.strip_prefix("model.layers.") {
        let (n, part) = layer_number(rest)?;
        let (_, g) = LAYER.iter().find(|(h, _)| *h == part)?;
        return Some(format!("blk.{n}.{g}.{kind}"));
    }
    let (_, g) = GLOBAL.iter().find(|(h, _)| *h == stem)?;
    Some(format!("{g}.{kind}"))
}

/// The Hugging Face name of a GGUF llama tensor name.
pub fn gguf_to_hf(name: &str) -> Option<String> {
    let (stem, kind) = split_kind(name)?;
    if let Some(rest) = stem.strip_prefix("blk.") {
        let (n, part) = layer_number(rest)?;
        let (h, _) = LAYER.iter().find(|(_, g)| *g == part)?;
        return Some(format!("model.layers.{n}.{h}.{kind}"));
    }
    let (h, _) = GLOBAL.iter().find(|(_, g)| *g == stem)?;
    Some(format!("{h}.{kind}"))
}

/// Whether a tensor (by its GGUF name) is stored permuted, and how.
pub fn permuted(gguf_name: &str) -> Option<Permuted> {
    let (stem, _) = split_kind(gguf_name)?;
    let (_, part) = layer_number(stem.strip_prefix("blk.")?)?;
    match part {
        "attn_q" => Some(Permuted::Q),
        "attn_k" => Some(Permuted::K),
        _ => None,
    }
}

/// The converter's group count for a tensor: `n_head` for Q; `n_head_kv` for K (when known
/// and different, as `permute` does).
pub fn groups(p: Permuted, n_head: u64, n_head_kv: Option<u64>) -> u64 {
    match (p, n_head_kv) {
        (Permuted::K, Some(kv)) => kv,
        _ => n_head,
    }
}

/// The GGUF row holding Hugging Face row `r` of a tensor of `rows` rows permuted in `groups`
/// groups (`rows` a multiple of `2·groups`, checked by the caller).
pub fn gguf_row(r: u64, rows: u64, groups: u64) -> u64 {
    let per = rows / groups;
    let h = per / 2;
    let (g, within) = (r / per, r % per);
    let (j, i) = (within / h, within % h);
    g * per + 2 * i + j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        for (hf, g) in [
            (
                "model.layers.3.self_attn.q_proj.weight",
                "blk.3.attn_q.weight",
            ),
            (
                "model.layers.10.self_attn.o_proj.weight",
                "blk.10.attn_output.weight",
            ),
            ("model.layers.0.self_attn.k_proj.bias", "blk.0.attn_k.bias"),
            (
                "model.layers.1.mlp.down_proj.weight",
                "blk.1.ffn_down.weight",
            ),
            (
                "model.layers.1.post_attention_layernorm.weight",
                "blk.1.ffn_norm.weight",
            ),
            ("model.embed_tokens.weight", "token_embd.weight"),
            ("model.norm.weight", "output_norm.weight"),
            ("lm_head.weight", "output.weight"),
        ] {
            assert_eq!(hf_to_gguf(hf).as_deref(), Some(g));
            assert_eq!(gguf_to_hf(g).as_deref(), Some(hf));
        }
        assert_eq!(hf_to_gguf("model.layers.x.mlp.up_proj.weight"), None);
        assert_eq!(gguf_to_hf("rope_freqs.weight"), None);
        assert_eq!(permuted("blk.2.attn_k.weight"), Some(Permuted::K));
        assert_eq!(permuted("blk.2.attn_v.weight"), None);
    }

    /// The converter's permutation written as index arithmetic, element by element:
    /// new[g, i, j] = old[g, j, i] over (g, 2, h) → (g, h, 2).
    #[test]
    fn inverse_of_the_converters_permutation() {
        for (rows, groups) in [(8u64, 2u64), (12, 3), (16, 1), (16, 8)] {
            let h = rows / groups / 2;
            let mut permuted = vec![0u64; rows as usize];
            for g in 0..groups {
                for j in 0..2 {
                    for i in 0..h {
                        let old = g * 2 * h + j * h + i;
                        let new = g * 2 * h + i * 2 + j;
                        permuted[new as usize] = old;
                    }
                }
            }
            for r in 0..rows {
                assert_eq!(permuted[gguf_row(r, rows, groups) as usize], r);
            }
        }
    }
}
