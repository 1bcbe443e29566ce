//! The ternary types TQ1_0 (base-3 packed trits) and TQ2_0 (2-bit trits): `d * (t - 1)`.

use crate::ggml_quant::{f16_at, pairs};

/// Trit extraction as gguf-py does it: a wrapping u8 multiply by a power of 3, then
/// `(x * 3) >> 8`.
#[inline]
fn trit(byte: u8, pow3: u8) -> i8 {
    let x = byte.wrapping_mul(pow3);
    ((x as u16 * 3) >> 8) as i8 - 1
}

pub(super) fn tq1_0(blocks: &[u8], out: &mut [f32]) {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    for (b, o) in pairs::<54, 256>(blocks, out) {
        let (qs, qh) = (&b[0..48], &b[48..52]);
        let d = f16_at(b, 52);
        for (e, v) in o.iter_mut().enumerate() {
            let t = if e < 160 {
                trit(qs[e % 32], POW3[e / 32])
            } else if e < 240 {
                let e = e - 160;
                trit(qs[32 + e % 16], POW3[e / 16])
            } else {
                let e = e - 240;
                trit(qh[e % 4], POW3[e / 4])
            };
            *v = d * t as f32;
        }
    }
}

pub(super) fn tq2_0(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<66, 256>(blocks, out) {
        let qs = &b[0..64];
        let d = f16_at(b, 64);
        for (e, v) in o.iter_mut().enumerate() {
            let (g, s, l) = (e / 128, (e / 32) % 4, e % 32);
            let t = ((qs[g * 32 + l] >> (2 * s)) & 3) as i8 - 1;
            *v = d * t as f32;
        }
    }
}
