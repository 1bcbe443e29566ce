//! The K-quants, 256-value super-blocks: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (gguf-py `quants.py`
//! order of operations: sub-block scale `d * sc` first, then `scale * q - min`).

use super::{f16_at, pairs};

pub(super) fn q2_k(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<84, 256>(blocks, out) {
        let (scales, qs) = (&b[0..16], &b[16..80]);
        let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
        for (e, v) in o.iter_mut().enumerate() {
            let (g, s, l) = (e / 128, (e / 32) % 4, e % 32);
            let q = (qs[g * 32 + l] >> (2 * s)) & 3;
            let sc = scales[e / 16];
            let dl = d * (sc & 0x0F) as f32;
            let ml = dmin * (sc >> 4) as f32;
            *v = dl * q as f32 - ml;
        }
    }
}

pub(super) fn q3_k(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<110, 256>(blocks, out) {
        let (hmask, qs, scales) = (&b[0..32], &b[32..96], &b[96..108]);
        let d = f16_at(b, 108);
        let mut dl = [0f32; 16];
        for (k, x) in dl.iter_mut().enumerate() {
            let low = if k < 8 {
                scales[k] & 0x0F
            } else {
                scales[k - 8] >> 4
            };
            let high = (scales[8 + k % 4] >> (2 * (k / 4))) & 3;
            *x = d * ((low | high << 4) as i8 - 32) as f32;
        }
        for (e, v) in o.iter_mut().enumerate() {
            let (g, s, l) = (e / 128, (e / 32) % 4, e % 32);
            let ql = (qs[g * 32 + l] >> (2 * s)) & 3;
            let qh = ((hmask[l] >> (e / 32)) & 1) ^ 1;
            let q = ql as i8 - (qh << 2) as i8;
            *v = dl[e / 16] * q as f32;
        }
    }
}

/// The eight 6-bit scales and mins of Q4_K and Q5_K (12 packed bytes).
#[inline]
fn scale_min(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (mut sc, mut mn) = ([0u8; 8], [0u8; 8]);
    for i in 0..4 {
        sc[i] = s[i] & 0x3F;
        sc[i + 4] = (s[8 + i] & 0x0F) | ((s[i] >> 2) & 0x30);
        mn[i] = s[4 + i] & 0x3F;
        mn[i + 4] = (s[8 + i] >> 4) | ((s[4 + i] >> 2) & 0x30);
    }
    (sc, mn)
}

pub(super) fn q4_k(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<144, 256>(blocks, out) {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let (sc, mn) = scale_min(&b[4..16]);
        let qs = &b[16..144];
        for j in 0..8 {
            let (dd, dm) = (d * sc[j] as f32, dmin * mn[j] as f32);
            let (g, s) = (j / 2, j % 2);
            for l in 0..32 {
                let q = (qs[g * 32 + l] >> (4 * s)) & 0x0F;
                o[j * 32 + l] = dd * q as f32 - dm;
            }
        }
    }
}

pub(super) fn q5_k(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<176, 256>(blocks, out) {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let (sc, mn) = scale_min(&b[4..16]);
        let (qh, qs) = (&b[16..48], &b[48..176]);
        for j in 0..8 {
            let (dd, dm) = (d * sc[j] as f32, dmin * mn[j] as f32);
            let (g, s) = (j / 2, j % 2);
            for l in 0..32 {
                let low = (qs[g * 32 + l] >> (4 * s)) & 0x0F;
                let high = (qh[l] >> j) & 1;
                o[j * 32 + l] = dd * (low | high << 4) as f32 - dm;
            }
        }
    }
}

pub(super) fn q6_k(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in pairs::<210, 256>(blocks, out) {
        let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
        let d = f16_at(b, 208);
        let mut ds = [0f32; 16];
        for (x, &s) in ds.iter_mut().zip(scales) {
            *x = d * s as i8 as f32;
        }
        for (e, v) in o.iter_mut().enumerate() {
            let (g, rest) = (e / 128, e % 128);
            let low = (ql[g * 64 + rest % 64] >> (4 * (rest / 64))) & 0x0F;
            let high = (qh[g * 32 + rest % 32] >> (2 * (rest / 32))) & 3;
            *v = ds[e / 16] * ((low | high << 4) as i8 - 32) as f32;
        }
    }
}
