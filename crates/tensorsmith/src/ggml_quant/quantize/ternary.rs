//! Quantization to the ternary 256-value blocks TQ1_0 and TQ2_0 as gguf-py does it:
//! `d = max|x|`, trits `np_roundf(x / d) + 1` (int8, wrapping), packed base 3 (TQ1_0, with
//! its `(sum * 256 + 242) // 243` rescale in u16) or two bits each (TQ2_0).

use crate::ggml_quant::numpy_ops::{cast_u8, f16_bits, inverse, max_abs, roundf};

fn trits(x: &[f32]) -> (f32, [u8; 256]) {
    let d = max_abs(x);
    let id = inverse(d);
    let mut q = [0u8; 256];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (cast_u8(roundf(v * id)) as i8).wrapping_add(1) as u8;
    }
    (d, q)
}

/// One packed byte: `sum(q[k] * w[k])` (u8 products, summed wide), rescaled in u16.
fn base3(q: impl Iterator<Item = u8>, w: &[u8]) -> u8 {
    let s: u64 = q.zip(w).map(|(q, &w)| q.wrapping_mul(w) as u64).sum();
    ((s as u16).wrapping_mul(256).wrapping_add(242) / 243) as u8
}

pub(super) fn tq1_0(x: &[f32], out: &mut [u8]) {
    const W: [u8; 5] = [81, 27, 9, 3, 1];
    for (x, b) in x.chunks_exact(256).zip(out.chunks_exact_mut(54)) {
        let (d, q) = trits(x);
        for j in 0..32 {
            b[j] = base3((0..5).map(|k| q[k * 32 + j]), &W);
        }
        for j in 0..16 {
            b[32 + j] = base3((0..5).map(|k| q[160 + k * 16 + j]), &W);
        }
        for j in 0..4 {
            b[48 + j] = base3((0..4).map(|k| q[240 + k * 4 + j]), &W[..4]);
        }
        b[52..54].copy_from_slice(&f16_bits(d).to_le_bytes());
    }
}

pub(super) fn tq2_0(x: &[f32], out: &mut [u8]) {
    for (x, b) in x.chunks_exact(256).zip(out.chunks_exact_mut(66)) {
        let (d, q) = trits(x);
        for g in 0..2 {
            for l in 0..32 {
                let at = |s: usize| q[g * 128 + s * 32 + l] << (2 * s);
                b[g * 32 + l] = at(0) | at(1) | at(2) | at(3);
            }
        }
        b[64..66].copy_from_slice(&f16_bits(d).to_le_bytes());
    }
}
