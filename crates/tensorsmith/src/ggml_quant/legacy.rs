//! The legacy 32-value blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (gguf-py `quants.py` order of
//! operations: `d * q`, `d * q + m`, `x * d`).

use crate::ggml_quant::{add_nan_first, f16_at, pairs, u32_at};

/// Nibble `j` of 32: low nibbles of the 16 bytes first, then the high ones.
#[inline]
fn nibble(qs: &[u8], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

pub(super) fn q4_0(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<18, 32>(blocks, out) {
        let d = f16_at(b, 0);
        let (lo, hi) = o.split_at_mut(16);
        for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(&b[2..18]) {
            *l = d * ((x & 0x0F) as i8 - 8) as f32;
            *h = d * ((x >> 4) as i8 - 8) as f32;
        }
    }
}

pub(super) fn q4_1(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<20, 32>(blocks, out) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        for (j, v) in o.iter_mut().enumerate() {
            *v = add_nan_first(d * nibble(&b[4..], j) as f32, m);
        }
    }
}

pub(super) fn q5_0(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<22, 32>(blocks, out) {
        let d = f16_at(b, 0);
        let qh = u32_at(b, 2);
        for (j, v) in o.iter_mut().enumerate() {
            let q = nibble(&b[6..], j) | (((qh >> j) & 1) as u8) << 4;
            *v = d * (q as i8 - 16) as f32;
        }
    }
}

pub(super) fn q5_1(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<24, 32>(blocks, out) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        let qh = u32_at(b, 4);
        for (j, v) in o.iter_mut().enumerate() {
            let q = nibble(&b[8..], j) | (((qh >> j) & 1) as u8) << 4;
            *v = add_nan_first(d * q as f32, m);
        }
    }
}

pub(super) fn q8_0(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<34, 32>(blocks, out) {
        let d = f16_at(b, 0);
        for (v, &x) in o.iter_mut().zip(&b[2..]) {
            *v = x as i8 as f32 * d;
        }
    }
}
