//! A second, deliberately plain implementation: one value at a time, each computed from the
//! flat index the way gguf-py's NumPy reshapes address it (block, row, shift), with no
//! per-block precomputation. Slow; it exists so the fuzz target and the unit tests can check
//! the block kernels against an independent reading of the same reference.

use crate::ggml_quant::iq_grids::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS,
};
use crate::ggml_quant::{add_nan_first, mul_sign};
use crate::ggml_type::{Block, GgmlType};

fn f16(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}
fn u16le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
/// Element `i` of a `[lo nibbles; hi nibbles]` unpacking of `n` bytes at `at`.
fn nib(b: &[u8], at: usize, n: usize, i: usize) -> u8 {
    (b[at + i % n] >> (4 * (i / n))) & 0xF
}
/// Element `i` of a `[2-bit field 0; 1; 2; 3]` unpacking of groups of 32 bytes at `at`.
fn crumb(b: &[u8], at: usize, i: usize) -> u8 {
    (b[at + (i / 128) * 32 + i % 32] >> (2 * ((i / 32) % 4))) & 3
}
fn pm1(negative: bool) -> f32 {
    if negative {
        -1.0
    } else {
        1.0
    }
}
fn grid_byte(row: u64, k: usize) -> u8 {
    (row >> (8 * k)) as u8
}
const K_IQ4: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];
const K_FP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Q4_K / Q5_K 6-bit scale (`min = false`) or min (`min = true`) of sub-block `j`.
fn k_scale(s: &[u8], j: usize, min: bool) -> u8 {
    let o = if min { 4 } else { 0 };
    if j < 4 {
        s[o + j] & 0x3F
    } else if min {
        (s[8 + j - 4] >> 4) | ((s[4 + j - 4] >> 2) & 0x30)
    } else {
        (s[8 + j - 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30)
    }
}

/// Value `i` of one block of `ty` (`block.len() == ty.block_bytes()`), or `None` for a type
/// without a dequantizer.
pub fn value(ty: GgmlType, b: &[u8], i: usize) -> Option<f32> {
    Some(match ty.block()? {
        Block::Q4_0 => f16(b, 0) * (nib(b, 2, 16, i) as i8 - 8) as f32,
        Block::Q4_1 => add_nan_first(f16(b, 0) * nib(b, 4, 16, i) as f32, f16(b, 2)),
        Block::Q5_0 => {
            let q = nib(b, 6, 16, i) | (((u32le(b, 2) >> i) & 1) as u8) << 4;
            f16(b, 0) * (q as i8 - 16) as f32
        }
        Block::Q5_1 => {
            let q = nib(b, 8, 16, i) | (((u32le(b, 4) >> i) & 1) as u8) << 4;
            add_nan_first(f16(b, 0) * q as f32, f16(b, 2))
        }
        Block::Q8_0 => b[2 + i] as i8 as f32 * f16(b, 0),
        Block::Q2_K => {
            let sc = b[i / 16];
            let dl = f16(b, 80) * (sc & 0xF) as f32;
            let ml = f16(b, 82) * (sc >> 4) as f32;
            dl * crumb(b, 16, i) as f32 - ml
        }
        Block::Q3_K => {
            let k = i / 16;
            let low = (b[96 + k % 8] >> (4 * (k / 8))) & 0xF;
            let high = (b[104 + k % 4] >> (2 * (k / 4))) & 3;
            let dl = f16(b, 108) * ((low | high << 4) as i8 - 32) as f32;
            let hbit = ((b[i % 32] >> (i / 32)) & 1) ^ 1;
            dl * (crumb(b, 32, i) as i8 - (hbit << 2) as i8) as f32
        }
        Block::Q4_K | Block::Q5_K => {
            let j = i / 32;
            let (s, qs_at) = (&b[4..16], if ty.block_bytes() == 144 { 16 } else { 48 });
            let d = f16(b, 0) * k_scale(s, j, false) as f32;
            let m = f16(b, 2) * k_scale(s, j, true) as f32;
            let mut q = (b[qs_at + (j / 2) * 32 + i % 32] >> (4 * (j % 2))) & 0xF;
            if qs_at == 48 {
                q |= ((b[16 + i % 32] >> j) & 1) << 4;
            }
            d * q as f32 - m
        }
        Block::Q6_K => {
            let r = i % 128;
            let low = (b[(i / 128) * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
            let high = (b[128 + (i / 128) * 32 + r % 32] >> (2 * (r / 32))) & 3;
            let ds = f16(b, 208) * b[192 + i / 16] as i8 as f32;
            ds * ((low | high << 4) as i8 - 32) as f32
        }
        Block::TQ1_0 => {
            const P: [u8; 5] = [1, 3, 9, 27, 81];
            let x = match i {
                0..160 => b[i % 32].wrapping_mul(P[i / 32]),
                160..240 => b[32 + (i - 160) % 16].wrapping_mul(P[(i - 160) / 16]),
                _ => b[48 + (i - 240) % 4].wrapping_mul(P[(i - 240) / 4]),
            };
            f16(b, 52) * (((x as u16 * 3) >> 8) as i8 - 1) as f32
        }
        Block::TQ2_0 => f16(b, 64) * (crumb(b, 0, i) as i8 - 1) as f32,
        Block::MXFP4 => {
            let e = b[0];
            let bits = if e < 2 {
                0x0020_0000u32 << e
            } else {
                (e as u32 - 1) << 23
            };
            f32::from_bits(bits) * K_FP4[nib(b, 1, 16, i) as usize] as f32
        }
        Block::NVFP4 => {
            let (sub, e) = (i / 16, i % 16);
            let x = b[sub];
            let exp = (x >> 3) & 0xF;
            let man = (x & 7) as f32;
            let d = if x == 0 || x == 0x7F {
                0.0
            } else if exp == 0 {
                man * 2f32.powi(-9) * 0.5
            } else {
                (1.0 + man / 8.0) * 2f32.powi(exp as i32 - 7) * 0.5
            };
            d * K_FP4[nib(b, 4 + 8 * sub, 8, e) as usize] as f32
        }
        Block::IQ4_NL => f16(b, 0) * K_IQ4[nib(b, 2, 16, i) as usize] as f32,
        Block::IQ4_XS => {
            let ib = i / 32;
            let low = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF;
            let high = (u16le(b, 2) >> (2 * ib)) as u8 & 3;
            let dl = f16(b, 0) * ((low | high << 4) as i8 - 32) as f32;
            dl * K_IQ4[nib(b, 8 + ib * 16, 16, i % 32) as usize] as f32
        }
        Block::IQ2_XXS => {
            let (ib, k, j) = (i / 32, (i / 8) % 4, i % 8);
            let aux1 = u32le(b, 6 + 8 * ib);
            let db = f16(b, 0) * (0.5 + (aux1 >> 28) as f32) * 0.25;
            let row = IQ2XXS_GRID[b[2 + 8 * ib + k] as usize];
            let s = KSIGNS[((aux1 >> (7 * k)) & 0x7F) as usize];
            mul_sign(db * grid_byte(row, j) as f32, pm1((s >> j) & 1 == 1))
        }
        Block::IQ2_XS => {
            let (g, j) = (i / 8, i % 8);
            let sc = (b[66 + g / 4] >> (4 * ((g / 2) % 2))) & 0xF;
            let db = f16(b, 0) * (0.5 + sc as f32) * 0.25;
            let q = u16le(b, 2 + 2 * g);
            let s = KSIGNS[(q >> 9) as usize];
            mul_sign(
                db * grid_byte(IQ2XS_GRID[(q & 511) as usize], j) as f32,
                pm1((s >> j) & 1 == 1),
            )
        }
        Block::IQ2_S => {
            let (g, j) = (i / 8, i % 8);
            let sc = (b[74 + g / 4] >> (4 * ((g / 2) % 2))) & 0xF;
            let db = f16(b, 0) * (0.5 + sc as f32) * 0.25;
            let idx = b[2 + g] as usize | (((b[66 + g / 4] >> (2 * (g % 4))) & 3) as usize) << 8;
            let neg = (b[34 + g] >> j) & 1 == 1;
            mul_sign(db * grid_byte(IQ2S_GRID[idx], j) as f32, pm1(neg))
        }
        Block::IQ3_XXS => {
            let (ib, k, j) = (i / 32, (i / 8) % 4, i % 8);
            let aux = u32le(b, 66 + 4 * ib);
            let db = f16(b, 0) * (0.5 + (aux >> 28) as f32) * 0.5;
            let row = IQ3XXS_GRID[b[2 + i / 4] as usize] as u64;
            let s = KSIGNS[((aux >> (7 * k)) & 0x7F) as usize];
            mul_sign(db * grid_byte(row, i % 4) as f32, pm1((s >> j) & 1 == 1))
        }
        Block::IQ3_S => {
            let ib = i / 32;
            let sc = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0xF;
            let db = f16(b, 0) * (1 + 2 * sc) as f32;
            let g = i / 4;
            let idx = b[2 + g] as usize | (((b[66 + g / 8] >> (g % 8)) & 1) as usize) << 8;
            let neg = (b[74 + i / 8] >> (i % 8)) & 1 == 1;
            mul_sign(
                db * grid_byte(IQ3S_GRID[idx] as u64, i % 4) as f32,
                pm1(neg),
            )
        }
        Block::IQ1_S => {
            let (ib, k) = (i / 32, (i / 8) % 4);
            let qh = u16le(b, 34 + 2 * ib);
            let dl = f16(b, 0) * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = if qh & 0x8000 == 0 { 0.125 } else { -0.125 };
            let idx = b[2 + 4 * ib + k] as usize | (((qh >> (3 * k)) & 7) as usize) << 8;
            dl * (grid_byte(IQ1S_GRID[idx], i % 8) as i8 as f32 + delta)
        }
        Block::IQ1_M => {
            let sc: Vec<u16> = (0..4).map(|k| u16le(b, 48 + 2 * k)).collect();
            let dbits = (0..4).fold(0u16, |acc, k| acc | ((sc[k] & 0xF000) >> (12 - 4 * k)));
            let d = half::f16::from_bits(dbits).to_f32();
            let m = i / 8;
            let s = (sc[(m / 2) / 4] >> (3 * ((m / 2) % 4))) & 7;
            let dl = d * (2 * s + 1) as f32;
            let n = (b[32 + m / 2] >> (4 * (m % 2))) & 0xF;
            let delta = if n & 8 == 0 { 0.125 } else { -0.125 };
            let idx = b[m] as usize | ((n & 7) as usize) << 8;
            dl * (grid_byte(IQ1S_GRID[idx], i % 8) as i8 as f32 + delta)
        }
        _ => return None,
    })
}
