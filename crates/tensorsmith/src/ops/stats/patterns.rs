//! The fast path of `stats` for floats of 16 bits or fewer (BF16, F16, the FP8 types): the
//! hot loop only counts how often each bit pattern occurs (one increment per value, no
//! decoding, no branches), and every statistic is then computed once per distinct pattern,
//! weighted by its count: at most 65,536 patterns per chunk of millions of values. The moments
//! come out of a true two-pass computation over the patterns (mean, then squared deviations).

use crate::ops::stats::float::FloatAcc;
use crate::ops::stats::fp_fit::f32_thresholds;

/// How often each bit pattern of a ≤ 16-bit dtype occurs in a run of values.
pub struct PatternCounts {
    counts: Box<[u32; 1 << 16]>,
    /// Bit patterns in use: 8 or 16.
    bits: u32,
}

impl PatternCounts {
    /// Empty counts for a dtype of `bits` bits (8 or 16). At most 2^32 − 1 values may be
    /// added (a chunk is far smaller).
    pub fn new(bits: u32) -> Self {
        PatternCounts {
            counts: vec![0u32; 1 << 16]
                .into_boxed_slice()
                .try_into()
                .expect("65,536 counts"),
            bits,
        }
    }

    /// Forgets every count and counts patterns of `bits` bits from now on (the table is
    /// reused chunk after chunk).
    pub fn reset(&mut self, bits: u32) {
        self.counts[..1usize << self.bits].fill(0);
        self.bits = bits;
    }

    /// Counts little-endian 16-bit patterns (`bytes` of even length).
    pub fn add_u16(&mut self, bytes: &[u8]) {
        let c = &mut *self.counts;
        // Two tables would halve store-to-load stalls on repeats; weights rarely repeat a
        // pattern back to back, so one table, in cache, is the faster choice here.
        for p in bytes.chunks_exact(2) {
            c[u16::from_le_bytes([p[0], p[1]]) as usize] += 1;
        }
    }

    /// Counts 8-bit patterns.
    pub fn add_u8(&mut self, bytes: &[u8]) {
        let c = &mut *self.counts;
        for &b in bytes {
            c[b as usize] += 1;
        }
    }

    /// The accumulator of the counted values: `value(p)` is pattern `p`'s value (exact in
    /// F32), `subnormal(p)` whether it is subnormal in its own dtype.
    pub fn finish(&self, value: impl Fn(u32) -> f32, subnormal: impl Fn(u32) -> bool) -> FloatAcc {
        let th = f32_thresholds();
        let mut acc = FloatAcc::default();
        let used = &self.counts[..1usize << self.bits];
        let (mut n, mut sum) = (0u64, 0f64);
        for (p, &c) in used.iter().enumerate().filter(|(_, &c)| c > 0) {
            let c = u64::from(c);
            let x = value(p as u32);
            acc.elements += c;
            if subnormal(p as u32) {
                acc.subnormals += c;
            }
            let b = x.to_bits();
            let a = b & 0x7fff_ffff;
            if a > 0x7f80_0000 {
                acc.nan += c;
                continue;
            }
            if a == 0x7f80_0000 {
                if b == a {
                    acc.pos_inf += c;
                } else {
                    acc.neg_inf += c;
                }
                continue;
            }
            n += c;
            sum += c as f64 * f64::from(x);
            acc.min = acc.min.min(f64::from(x));
            acc.max = acc.max.max(f64::from(x));
            if a == 0 {
                acc.zeros += c;
                continue;
            }
            let e = if a < 0x0080_0000 {
                31 - a.leading_zeros() as i32 - 149
            } else {
                (a >> 23) as i32 - 127
            };
            acc.add_exponent(e, c);
            for (k, t) in th.iter().enumerate() {
                acc.overflow[k] += if a >= t.over { c } else { 0 };
                acc.flush[k] += if a <= t.flush { c } else { 0 };
            }
        }
        if n > 0 {
            let mean = sum / n as f64;
            let m2: f64 = used
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(p, &c)| (f64::from(value(p as u32)), c))
                .filter(|(x, _)| x.is_finite())
                .map(|(x, c)| f64::from(c) * (x - mean) * (x - mean))
                .sum();
            acc.add_moments(n, mean, m2);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::stats::decode::{decode_f32, f8_table, FloatSrc};
    use crate::ops::stats::float::F32Run;

    fn via_f32(src: FloatSrc, bytes: &[u8]) -> FloatAcc {
        let mut out = vec![0f32; bytes.len() / src.width()];
        let sub = decode_f32(src, bytes, &mut out);
        let mut r = F32Run::default();
        r.add_subnormals(sub);
        r.add(&out);
        r.finish()
    }

    fn same(a: &FloatAcc, b: &FloatAcc) {
        let ex = |x: &FloatAcc| {
            (
                x.elements,
                x.finite,
                x.min,
                x.max,
                x.nan,
                x.pos_inf,
                x.neg_inf,
                x.zeros,
                x.subnormals,
                x.overflow,
                x.flush,
                x.exponents().collect::<Vec<_>>(),
            )
        };
        assert_eq!(ex(a), ex(b));
        let tol = 1e-9 * a.mean.abs().max(a.variance().unwrap_or(0.0).sqrt()) + 1e-300;
        assert!((a.mean - b.mean).abs() <= tol, "{} {}", a.mean, b.mean);
        let (va, vb) = (a.variance().unwrap_or(0.0), b.variance().unwrap_or(0.0));
        assert!((va - vb).abs() <= 1e-9 * va.max(1e-300), "{va} {vb}");
    }

    /// Every pattern of each dtype, several times over: the pattern counts give what the
    /// value-by-value F32 kernel gives.
    #[test]
    fn agrees_with_the_f32_kernel_on_every_pattern() {
        let all16: Vec<u8> = (0..3u32 * 65536)
            .flat_map(|i| ((i.wrapping_mul(40503) % 65536) as u16).to_le_bytes())
            .collect();
        let mut bf = PatternCounts::new(16);
        bf.add_u16(&all16);
        let got = bf.finish(
            |p| f32::from_bits(p << 16),
            |p| (p & 0x7fff).wrapping_sub(1) < 0x7f,
        );
        same(&got, &via_f32(FloatSrc::BF16, &all16));
        let mut h = PatternCounts::new(16);
        h.add_u16(&all16);
        let got = h.finish(
            |p| half::f16::from_bits(p as u16).to_f32(),
            |p| (p & 0x7fff).wrapping_sub(1) < 0x3ff,
        );
        same(&got, &via_f32(FloatSrc::F16, &all16));
        let all8: Vec<u8> = (0..5 * 256).map(|i| (i * 7 % 256) as u8).collect();
        for d in [
            DType::F8_E4M3,
            DType::F8_E5M2,
            DType::F8_E4M3FNUZ,
            DType::F8_E8M0,
        ] {
            let t = f8_table(d);
            let mut c = PatternCounts::new(8);
            c.add_u8(&all8);
            let got = c.finish(|p| t.values[p as usize], |p| t.subnormal[p as usize]);
            same(&got, &via_f32(FloatSrc::F8(d), &all8));
        }
    }
}
