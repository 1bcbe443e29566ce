//! The IQ types: grid codebooks (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and
//! non-linear 4-bit values (IQ4_NL, IQ4_XS). Signs are applied as gguf-py does, by
//! multiplying with ±1.0 (`db * grid * sign`) with a NaN passed through unchanged
//! ([`mul_sign`]), never by flipping the sign bit, so NaN bits come out as NumPy's.

use crate::ggml_quant::iq_grids::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS,
};
use crate::ggml_quant::{f16_at, mul_sign, pairs, u16_at, u32_at};

/// `1.0` or `-1.0` from bit `k` of `byte` (set = negative).
#[inline]
fn sign(byte: u8, k: usize) -> f32 {
    f32::from_bits(0x3F80_0000 | (((byte >> k) & 1) as u32) << 31)
}

/// Value `k` of an 8-wide grid row.
#[inline]
fn g8(row: u64, k: usize) -> f32 {
    (row >> (8 * k)) as u8 as f32
}

/// Value `k` of a 4-wide grid row.
#[inline]
fn g4(row: u32, k: usize) -> f32 {
    (row >> (8 * k)) as u8 as f32
}

/// IQ1 grids hold -1, 0, 1 as i8 bytes.
#[inline]
fn g1(row: u64, k: usize) -> f32 {
    (row >> (8 * k)) as u8 as i8 as f32
}

pub(super) fn iq2_xxs(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<66, 256>(blocks, out) {
        let d = f16_at(b, 0);
        for ib in 0..8 {
            let aux0 = u32_at(b, 2 + 8 * ib);
            let aux1 = u32_at(b, 6 + 8 * ib);
            let db = d * (0.5 + (aux1 >> 28) as f32) * 0.25;
            for k in 0..4 {
                let row = IQ2XXS_GRID[(aux0 >> (8 * k)) as u8 as usize];
                let signs = KSIGNS[((aux1 >> (7 * k)) & 0x7F) as usize];
                for j in 0..8 {
                    o[ib * 32 + k * 8 + j] = mul_sign(db * g8(row, j), sign(signs, j));
                }
            }
        }
    }
}

pub(super) fn iq2_xs(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<74, 256>(blocks, out) {
        let d = f16_at(b, 0);
        let scales = &b[66..74];
        for (i, &sc) in scales.iter().enumerate() {
            for h in 0..2 {
                let s = (sc >> (4 * h)) & 0x0F;
                let db = d * (0.5 + s as f32) * 0.25;
                for r in 0..2 {
                    let idx = 4 * i + 2 * h + r;
                    let q = u16_at(b, 2 + 2 * idx);
                    let row = IQ2XS_GRID[(q & 511) as usize];
                    let signs = KSIGNS[(q >> 9) as usize];
                    for j in 0..8 {
                        o[idx * 8 + j] = mul_sign(db * g8(row, j), sign(signs, j));
                    }
                }
            }
        }
    }
}

pub(super) fn iq2_s(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<82, 256>(blocks, out) {
        let d = f16_at(b, 0);
        let (qs, signs, qh, scales) = (&b[2..34], &b[34..66], &b[66..74], &b[74..82]);
        for (i, &sc) in scales.iter().enumerate() {
            for h in 0..2 {
                let s = (sc >> (4 * h)) & 0x0F;
                let db = d * (0.5 + s as f32) * 0.25;
                for r in 0..2 {
                    let idx = 4 * i + 2 * h + r;
                    let high = (qh[idx / 4] >> (2 * (idx % 4))) & 3;
                    let row = IQ2S_GRID[qs[idx] as usize | (high as usize) << 8];
                    for j in 0..8 {
                        o[idx * 8 + j] = mul_sign(db * g8(row, j), sign(signs[idx], j));
                    }
                }
            }
        }
    }
}

pub(super) fn iq3_xxs(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<98, 256>(blocks, out) {
        let d = f16_at(b, 0);
        let qs = &b[2..66];
        for ib in 0..8 {
            let aux = u32_at(b, 66 + 4 * ib);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for k in 0..4 {
                let signs = KSIGNS[((aux >> (7 * k)) & 0x7F) as usize];
                for j in 0..8 {
                    let e = ib * 32 + k * 8 + j;
                    let row = IQ3XXS_GRID[qs[e / 4] as usize];
                    o[e] = mul_sign(db * g4(row, e % 4), sign(signs, j));
                }
            }
        }
    }
}

pub(super) fn iq3_s(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<110, 256>(blocks, out) {
        let d = f16_at(b, 0);
        let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
        for (e, v) in o.iter_mut().enumerate() {
            let ib = e / 32;
            let s = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0F;
            let db = d * (1 + 2 * s) as f32;
            let i = e / 4;
            let high = (qh[i / 8] >> (i % 8)) & 1;
            let row = IQ3S_GRID[qs[i] as usize | (high as usize) << 8];
            *v = mul_sign(db * g4(row, e % 4), sign(signs[e / 8], e % 8));
        }
    }
}

/// `0.125` or `-0.125` (IQ1 delta).
#[inline]
fn delta(negative: bool) -> f32 {
    if negative {
        -0.125
    } else {
        0.125
    }
}

pub(super) fn iq1_s(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<50, 256>(blocks, out) {
        let d = f16_at(b, 0);
        let qs = &b[2..34];
        for ib in 0..8 {
            let qh = u16_at(b, 34 + 2 * ib);
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let dt = delta(qh & 0x8000 != 0);
            for k in 0..4 {
                let idx = qs[ib * 4 + k] as usize | (((qh >> (3 * k)) & 7) as usize) << 8;
                let row = IQ1S_GRID[idx];
                for j in 0..8 {
                    o[ib * 32 + k * 8 + j] = dl * (g1(row, j) + dt);
                }
            }
        }
    }
}

pub(super) fn iq1_m(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<56, 256>(blocks, out) {
        let (qs, qh) = (&b[0..32], &b[32..48]);
        let sc = [u16_at(b, 48), u16_at(b, 50), u16_at(b, 52), u16_at(b, 54)];
        let dbits = ((sc[0] & 0xF000) >> 12)
            | ((sc[1] & 0xF000) >> 8)
            | ((sc[2] & 0xF000) >> 4)
            | (sc[3] & 0xF000);
        let d = half::f16::from_bits(dbits).to_f32();
        for m in 0..32 {
            let nib = (qh[m / 2] >> (4 * (m % 2))) & 0x0F;
            let row = IQ1S_GRID[qs[m] as usize | ((nib & 7) as usize) << 8];
            let dt = delta(nib & 8 != 0);
            let k = m / 2;
            let s = (sc[k / 4] >> (3 * (k % 4))) & 7;
            let dl = d * (2 * s + 1) as f32;
            for j in 0..8 {
                o[m * 8 + j] = dl * (g1(row, j) + dt);
            }
        }
    }
}

/// IQ4 non-linear values.
pub(super) const KVALUES_IQ4: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

pub(super) fn iq4_nl(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<18, 32>(blocks, out) {
        let d = f16_at(b, 0);
        for (j, v) in o.iter_mut().enumerate() {
            let q = (b[2 + j % 16] >> (4 * (j / 16))) & 0x0F;
            *v = d * KVALUES_IQ4[q as usize] as f32;
        }
    }
}

pub(super) fn iq4_xs(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<136, 256>(blocks, out) {
        let d = f16_at(b, 0);
        let sh = u16_at(b, 2);
        let (sl, qs) = (&b[4..8], &b[8..136]);
        for ib in 0..8 {
            let low = (sl[ib / 2] >> (4 * (ib % 2))) & 0x0F;
            let high = ((sh >> (2 * ib)) as u8) & 3;
            let dl = d * ((low | high << 4) as i8 - 32) as f32;
            for e in 0..32 {
                let q = (qs[ib * 16 + e % 16] >> (4 * (e / 16))) & 0x0F;
                o[ib * 32 + e] = dl * KVALUES_IQ4[q as usize] as f32;
            }
        }
    }
}
