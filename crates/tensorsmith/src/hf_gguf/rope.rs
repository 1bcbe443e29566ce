//! Llama 3's `rope_freqs.weight`: the per-frequency factors of its "llama3" rope scaling,
//! computed as the reference computes them (in float32, as torch does: the frequencies from
//! `base ** (arange(0, dim, 2) / dim)`, every later step a float32 operation with the Python
//! numbers rounded to float32 first).

use super::hparams::{find, Arch};
use serde_json::{Map, Value};

/// The factors when config.json asks for llama3 rope scaling (Llama family only).
pub(crate) fn llama3_factors(
    arch: Arch,
    h: &Map<String, Value>,
    rope: &Map<String, Value>,
) -> Option<Vec<f32>> {
    if arch.name != "llama" {
        return None;
    }
    let rp = match rope.get("full_attention") {
        Some(Value::Object(o)) => o,
        _ => rope,
    };
    if rp.is_empty()
        || !rp
            .get("rope_type")?
            .as_str()?
            .eq_ignore_ascii_case("llama3")
    {
        return None;
    }
    let num = |k: &str, d: f64| rp.get(k).and_then(Value::as_f64).unwrap_or(d);
    let base = num("rope_theta", 10000.0) as f32;
    let dim = match find(h, &["head_dim"]).and_then(Value::as_u64) {
        Some(d) => d,
        None => h.get("hidden_size")?.as_u64()? / h.get("num_attention_heads")?.as_u64()?.max(1),
    };
    let factor = num("factor", 8.0);
    let low = num("low_freq_factor", 1.0);
    let high = num("high_freq_factor", 4.0);
    let old = num("original_max_position_embeddings", 8192.0);
    let (low_wavelen, high_wavelen) = ((old / low) as f32, (old / high) as f32);
    let two_pi = (2.0 * std::f64::consts::PI) as f32;
    let out = (0..dim)
        .step_by(2)
        .map(|i| {
            let freq = 1.0f32 / base.powf(i as f32 / dim as f32);
            let wavelen = two_pi / freq;
            if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor as f32
            } else {
                let smooth = (old as f32 / wavelen - low as f32) / (high - low) as f32;
                1.0f32 / ((1.0f32 - smooth) / factor as f32 + smooth)
            }
        })
        .collect();
    Some(out)
}
