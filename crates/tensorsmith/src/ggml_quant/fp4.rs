//! The FP4 (E2M1) types: MXFP4 (32 values, one E8M0 scale) and NVFP4 (64 values, four UE4M3
//! scales), values doubled as in ggml's `kvalues_mxfp4` and the scales halved to match.

use crate::ggml_quant::pairs;

/// E2M1 values, doubled.
const KVALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// `ggml_e8m0_to_fp32_half`: 2^(e - 128) as f32 bits (subnormal for e < 2).
#[inline]
fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (e as u32 - 1) << 23
    };
    f32::from_bits(bits)
}

pub(super) fn mxfp4(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<17, 32>(blocks, out) {
        let d = e8m0_half(b[0]);
        for (j, v) in o.iter_mut().enumerate() {
            let q = (b[1 + j % 16] >> (4 * (j / 16))) & 0x0F;
            *v = d * KVALUES[q as usize] as f32;
        }
    }
}

/// Unsigned E4M3 (bias 7) times 0.5, as gguf-py's `ue4m3_to_fp32`: bits 3-6 are the
/// exponent (bit 7 is ignored), 0 and 0x7F give 0. Every value is a power-of-two multiple
/// of a small integer, so the float32 steps of the reference are exact and so is this.
#[inline]
fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0x0F) as i32;
    let man = (x & 7) as f32;
    let raw = if exp == 0 {
        man * f32::from_bits(0x3B00_0000) // 2^-9
    } else {
        (1.0 + man / 8.0) * f32::from_bits(((exp - 7 + 127) as u32) << 23)
    };
    raw * 0.5
}

pub(super) fn nvfp4(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<36, 64>(blocks, out) {
        for i in 0..4 {
            let d = ue4m3_half(b[i]);
            let qs = &b[4 + 8 * i..12 + 8 * i];
            for e in 0..16 {
                let q = (qs[e % 8] >> (4 * (e / 8))) & 0x0F;
                o[i * 16 + e] = d * KVALUES[q as usize] as f32;
            }
        }
    }
}
