//! The K-quants, 256-value super-blocks: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (gguf-py `quants.py`
//! order of operations: sub-block scale `d * sc` first, then `scale * q - min`).

use crate::ggml_quant::{f16_at, pairs};

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
        // Sub-blocks 2g (low nibbles) and 2g + 1 (high nibbles) share 32 bytes.
        for (g, (qs, o)) in b[16..144]
            .chunks_exact(32)
            .zip(o.chunks_exact_mut(64))
            .enumerate()
        {
            let (d0, m0) = (d * sc[2 * g] as f32, dmin * mn[2 * g] as f32);
            let (d1, m1) = (d * sc[2 * g + 1] as f32, dmin * mn[2 * g + 1] as f32);
            let (lo, hi) = o.split_at_mut(32);
            for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(qs) {
                *l = d0 * (x & 0x0F) as f32 - m0;
                *h = d1 * (x >> 4) as f32 - m1;
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
        // Each 128 values: 64 ql bytes (low nibbles, then high) and 32 qh bytes (2 bits each).
        for g in 0..2 {
            let (ql, qh) = (&ql[64 * g..64 * g + 64], &qh[32 * g..32 * g + 32]);
            let o = &mut o[128 * g..128 * g + 128];
            let ds = &ds[8 * g..8 * g + 8];
            for l in 0..32 {
                let h = qh[l];
                let q = [
                    (ql[l] & 0x0F) | (h & 3) << 4,
                    (ql[32 + l] & 0x0F) | ((h >> 2) & 3) << 4,
                    (ql[l] >> 4) | ((h >> 4) & 3) << 4,
                    (ql[32 + l] >> 4) | (h >> 6) << 4,
                ];
                for (s, &q) in q.iter().enumerate() {
                    o[32 * s + l] = ds[2 * s + l / 16] * (q as i8 - 32) as f32;
                }
            }
        }
    }
}
