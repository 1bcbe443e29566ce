//! Quantization to the legacy 32-value blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, step for step as
//! gguf-py's `quantize_blocks` (float32 throughout, truncation or `np_roundf`, NumPy casts).

use crate::ggml_quant::numpy_ops::{
    argmax_abs, cast_u8, f16_bits, inverse, max_abs, max_min, roundf,
};

/// `(values, block)` pairs: 32 floats to `B` bytes.
fn blocks<'a, const B: usize>(
    x: &'a [f32],
    out: &'a mut [u8],
) -> impl Iterator<Item = (&'a [f32; 32], &'a mut [u8; B])> {
    x.chunks_exact(32)
        .zip(out.chunks_exact_mut(B))
        .map(|(x, o)| {
            (
                x.try_into().expect("32 values"),
                o.try_into().expect("B bytes"),
            )
        })
}

/// Low nibbles from the first 16 codes, high nibbles from the last 16 (u8 shift: the 5th bit
/// of a Q5 code falls off, as in NumPy).
fn pack_nibbles(q: &[u8; 32], qs: &mut [u8]) {
    for j in 0..16 {
        qs[j] = (q[j] & 0x0F) | (q[j + 16] << 4);
    }
}

/// `np.packbits(q >> 4, bitorder="little")`: bit `i` of byte `k` is `q[8k + i] >> 4 != 0`.
fn pack_high_bits(q: &[u8; 32], qh: &mut [u8]) {
    for (k, byte) in qh.iter_mut().enumerate() {
        *byte = (0..8).fold(0u8, |b, i| b | (((q[8 * k + i] >> 4) != 0) as u8) << i);
    }
}

/// Q4_0 / Q5_0: `d = max / -half`, `q = trunc(x * id + (half + 0.5))`, clipped.
fn symmetric(x: &[f32; 32], half: f32, top: u8) -> (f32, [u8; 32]) {
    let max = x[argmax_abs(x)];
    let d = max / -half;
    let id = inverse(d);
    let mut q = [0u8; 32];
    for (q, &v) in q.iter_mut().zip(x) {
        // np.trunc then astype(uint8): the cast truncates already, so trunc changes nothing.
        *q = cast_u8(v * id + (half + 0.5)).min(top);
    }
    (d, q)
}

/// Q4_1 / Q5_1: `d = (max - min) / top`, `q = trunc((x - min) * id + 0.5)`, clipped.
fn affine(x: &[f32; 32], top: u8) -> (f32, f32, [u8; 32]) {
    let (max, min) = max_min(x);
    let d = (max - min) / top as f32;
    let id = inverse(d);
    let mut q = [0u8; 32];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = cast_u8((v - min) * id + 0.5).min(top);
    }
    (d, min, q)
}

pub(super) fn q4_0(x: &[f32], out: &mut [u8]) {
    for (x, b) in blocks::<18>(x, out) {
        let (d, q) = symmetric(x, 8.0, 15);
        b[0..2].copy_from_slice(&f16_bits(d).to_le_bytes());
        pack_nibbles(&q, &mut b[2..18]);
    }
}

pub(super) fn q4_1(x: &[f32], out: &mut [u8]) {
    for (x, b) in blocks::<20>(x, out) {
        let (d, m, q) = affine(x, 15);
        b[0..2].copy_from_slice(&f16_bits(d).to_le_bytes());
        b[2..4].copy_from_slice(&f16_bits(m).to_le_bytes());
        pack_nibbles(&q, &mut b[4..20]);
    }
}

pub(super) fn q5_0(x: &[f32], out: &mut [u8]) {
    for (x, b) in blocks::<22>(x, out) {
        let (d, q) = symmetric(x, 16.0, 31);
        b[0..2].copy_from_slice(&f16_bits(d).to_le_bytes());
        pack_high_bits(&q, &mut b[2..6]);
        pack_nibbles(&q, &mut b[6..22]);
    }
}

pub(super) fn q5_1(x: &[f32], out: &mut [u8]) {
    for (x, b) in blocks::<24>(x, out) {
        let (d, m, q) = affine(x, 31);
        b[0..2].copy_from_slice(&f16_bits(d).to_le_bytes());
        b[2..4].copy_from_slice(&f16_bits(m).to_le_bytes());
        pack_high_bits(&q, &mut b[4..8]);
        pack_nibbles(&q, &mut b[8..24]);
    }
}

/// Q8_0: `d = max|x| / 127`, `q = np_roundf(x * id)` as int8.
pub(super) fn q8_0(x: &[f32], out: &mut [u8]) {
    for (x, b) in blocks::<34>(x, out) {
        let d = max_abs(x) / 127.0;
        let id = inverse(d);
        b[0..2].copy_from_slice(&f16_bits(d).to_le_bytes());
        for (q, &v) in b[2..].iter_mut().zip(x) {
            *q = cast_u8(roundf(v * id));
        }
    }
}
