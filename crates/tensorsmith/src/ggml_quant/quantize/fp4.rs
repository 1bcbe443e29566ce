//! Quantization to MXFP4 as gguf-py does it: an E8M0 scale from `floor(log2(max|x|)) - 2`
//! (float32 `log2`, as NumPy's), then per value the E2M1 code whose doubled value times the
//! half scale is nearest (`argmin` of the float32 errors: first of ties, first NaN).

use crate::ggml_quant::numpy_ops::{argmin, cast_u8, max_abs};

/// E2M1 values, doubled (the `kvalues` of gguf-py and ggml).
const KVALUES: [f32; 16] = [
    0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0,
];

/// ggml's `e8m0_to_fp32_half`: half of 2^(e - 127), subnormal for e < 2.
fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        u32::from(e - 1) << 23
    };
    f32::from_bits(bits)
}

pub(super) fn mxfp4(x: &[f32], out: &mut [u8]) {
    for (x, b) in x.chunks_exact(32).zip(out.chunks_exact_mut(17)) {
        let m = max_abs(x);
        // NumPy's where(d > 0, floor(log2(d)) - 2 + 127, 0) as uint8; glibc's log2f agrees
        // with NumPy's float32 log2 on which side of each integer a result falls.
        let e = if m > 0.0 {
            cast_u8(m.log2().floor() - 2.0 + 127.0)
        } else {
            0
        };
        let d = e8m0_half(e);
        let mut q = [0u8; 32];
        for (q, &v) in q.iter_mut().zip(x) {
            let errs = KVALUES.map(|k| (d * k - v).abs());
            *q = argmin(&errs) as u8;
        }
        b[0] = e;
        for j in 0..16 {
            b[1 + j] = q[j] | (q[j + 16] << 4);
        }
    }
}
