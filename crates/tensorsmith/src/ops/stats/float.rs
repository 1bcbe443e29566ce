//! The float accumulator of `stats`: counts, extremes and moments of float values, in blocks
//! that stay in L1 cache. F32 values (and everything narrower, widened exactly) go through a
//! kernel written to auto-vectorise: lanes of independent sums and extremes, classification
//! by integer compares on the bits of |x|, exponents read from the exponent field. F64 values
//! take a plain loop. Partials from chunks combine with Chan's parallel formula.

use crate::ops::stats::fp_fit::{f32_thresholds, f64_thresholds, BitThresholds};

/// Values per block: 16 KiB of F32, in L1 with room to spare.
pub const BLOCK: usize = 4096;
/// The smallest binary exponent of a finite nonzero F64 (its smallest subnormal, 2^-1074).
pub const EXP_MIN: i32 = -1074;
/// The largest binary exponent of a finite F64.
pub const EXP_MAX: i32 = 1023;

/// What a float tensor's values add up to. Moments and extremes are over the finite values.
#[derive(Debug, Clone, PartialEq)]
pub struct FloatAcc {
    /// Every value seen, NaN and infinities included.
    pub elements: u64,
    /// Finite values.
    pub finite: u64,
    /// Mean of the finite values (0 when there are none).
    pub mean: f64,
    /// Sum of squared deviations from the mean (population variance × `finite`).
    pub m2: f64,
    /// Smallest finite value (+∞ when there are none).
    pub min: f64,
    /// Largest finite value (−∞ when there are none).
    pub max: f64,
    pub nan: u64,
    pub pos_inf: u64,
    pub neg_inf: u64,
    /// Zeros, both signs.
    pub zeros: u64,
    /// Subnormal values in the tensor's own dtype (set by the decoder).
    pub subnormals: u64,
    /// Finite values that overflow each [`crate::ops::stats::fp_fit::TARGETS`] type.
    pub overflow: [u64; 4],
    /// Nonzero values that flush to zero in each [`crate::ops::stats::fp_fit::TARGETS`] type.
    pub flush: [u64; 4],
    /// Counts of floor(log2 |x|) of finite nonzero values, from exponent `exp_first` on,
    /// only over the range seen (a tensor's state stays small).
    exponents: Vec<u64>,
    exp_first: i32,
}

impl Default for FloatAcc {
    fn default() -> Self {
        FloatAcc {
            elements: 0,
            finite: 0,
            mean: 0.0,
            m2: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
            zeros: 0,
            subnormals: 0,
            overflow: [0; 4],
            flush: [0; 4],
            exponents: Vec::new(),
            exp_first: 0,
        }
    }
}

impl FloatAcc {
    /// Population variance of the finite values; `None` when there are none.
    pub fn variance(&self) -> Option<f64> {
        (self.finite > 0).then(|| self.m2 / self.finite as f64)
    }

    /// `(exponent, count)` for every exponent seen, lowest first.
    pub fn exponents(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        let first = self.exp_first;
        self.exponents
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(move |(i, &n)| (i as i32 + first, n))
    }

    /// Adds `n` to the count of exponent `e` (clamped to the F64 range).
    pub fn add_exponent(&mut self, e: i32, n: u64) {
        if n == 0 {
            return;
        }
        let e = e.clamp(EXP_MIN, EXP_MAX);
        if self.exponents.is_empty() {
            self.exp_first = e;
            self.exponents.push(n);
            return;
        }
        if e < self.exp_first {
            let grow = (self.exp_first - e) as usize;
            self.exponents.splice(0..0, std::iter::repeat_n(0, grow));
            self.exp_first = e;
        }
        let i = (e - self.exp_first) as usize;
        if i >= self.exponents.len() {
            self.exponents.resize(i + 1, 0);
        }
        self.exponents[i] += n;
    }

    /// Folds in `n` finite values of mean `mean` and squared-deviation sum `m2` (Chan et al.).
    pub fn add_moments(&mut self, n: u64, mean: f64, m2: f64) {
        if n == 0 {
            return;
        }
        if self.finite == 0 {
            (self.finite, self.mean, self.m2) = (n, mean, m2);
            return;
        }
        let (na, nb) = (self.finite as f64, n as f64);
        let total = na + nb;
        let delta = mean - self.mean;
        self.mean = if delta.is_finite() {
            self.mean + delta * (nb / total)
        } else {
            // Means near the f64 limits of opposite signs: their difference overflows, their
            // weighted sum does not.
            self.mean * (na / total) + mean * (nb / total)
        };
        self.m2 += m2 + delta * delta * (na * nb / total);
        self.finite += n;
    }

    /// Everything `other` counted, added to this one.
    pub fn merge(mut self, other: FloatAcc) -> FloatAcc {
        self.add_moments(other.finite, other.mean, other.m2);
        self.elements += other.elements;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.nan += other.nan;
        self.pos_inf += other.pos_inf;
        self.neg_inf += other.neg_inf;
        self.zeros += other.zeros;
        self.subnormals += other.subnormals;
        for k in 0..4 {
            self.overflow[k] += other.overflow[k];
            self.flush[k] += other.flush[k];
        }
        for (e, n) in other.exponents() {
            self.add_exponent(e, n);
        }
        self
    }
}

const LANES: usize = 8;
const ABS: u32 = 0x7fff_ffff;
const INF32: u32 = 0x7f80_0000;

/// Measures F32 values block by block; [`F32Run::finish`] gives the accumulator.
pub struct F32Run {
    acc: FloatAcc,
    th: [BitThresholds<u32>; 4],
    /// Counts by exponent field, four interleaved copies (no store-to-load stall when
    /// neighbours share a bin).
    fields: Box<[[u64; 256]; 4]>,
    /// F32 subnormals by the position of their highest set bit.
    sub_bits: [u64; 23],
}

impl Default for F32Run {
    fn default() -> Self {
        F32Run {
            acc: FloatAcc::default(),
            th: f32_thresholds(),
            fields: Box::new([[0; 256]; 4]),
            sub_bits: [0; 23],
        }
    }
}

impl F32Run {
    /// Adds `subnormals` values subnormal in the source dtype (the decoder knows which).
    pub fn add_subnormals(&mut self, n: u64) {
        self.acc.subnormals += n;
    }

    /// Measures `v` (any length), [`BLOCK`] values at a time.
    pub fn add(&mut self, v: &[f32]) {
        for b in v.chunks(BLOCK) {
            self.block(b);
        }
    }

    fn block(&mut self, v: &[f32]) {
        self.acc.elements += v.len() as u64;
        // Pass 1: finite sum (f64) and extremes, in independent lanes.
        let mut sum = [0f64; LANES];
        let mut lo = [f32::INFINITY; LANES];
        let mut hi = [f32::NEG_INFINITY; LANES];
        let lanes = v.chunks_exact(LANES);
        let rest = lanes.remainder();
        for c in lanes {
            for j in 0..LANES {
                let x = c[j];
                let fin = x.abs() < f32::INFINITY;
                sum[j] += f64::from(if fin { x } else { 0.0 });
                let l = if fin { x } else { f32::INFINITY };
                let h = if fin { x } else { f32::NEG_INFINITY };
                lo[j] = if l < lo[j] { l } else { lo[j] };
                hi[j] = if h > hi[j] { h } else { hi[j] };
            }
        }
        for (j, &x) in rest.iter().enumerate() {
            if x.is_finite() {
                sum[j] += f64::from(x);
                lo[j] = lo[j].min(x);
                hi[j] = hi[j].max(x);
            }
        }
        // Pass 2: classification by the bits of |x| (signed compares: no sign bit left).
        let th = self.th;
        let (mut fin, mut nan, mut inf, mut neg_inf, mut zero, mut tiny) = (0u32, 0, 0, 0, 0, 0);
        let mut over = [0u32; 4];
        let mut flush = [0u32; 4];
        for &x in v {
            let b = x.to_bits();
            let a = (b & ABS) as i32;
            fin += u32::from(a < INF32 as i32);
            nan += u32::from(a > INF32 as i32);
            inf += u32::from(a == INF32 as i32);
            neg_inf += u32::from(b == (INF32 | 0x8000_0000));
            zero += u32::from(a == 0);
            tiny += u32::from(a < 0x0080_0000);
            for k in 0..4 {
                over[k] += u32::from(a >= th[k].over as i32);
                flush[k] += u32::from(a <= th[k].flush as i32);
            }
        }
        let n = fin as usize;
        let mean_b = if n > 0 {
            sum.iter().sum::<f64>() / n as f64
        } else {
            0.0
        };
        // Pass 3: squared deviations from the block's mean.
        let mut sq = [0f64; LANES];
        let lanes = v.chunks_exact(LANES);
        let rest = lanes.remainder();
        for c in lanes {
            for j in 0..LANES {
                let x = c[j];
                let d = if x.abs() < f32::INFINITY {
                    f64::from(x) - mean_b
                } else {
                    0.0
                };
                sq[j] += d * d;
            }
        }
        for (j, &x) in rest.iter().enumerate() {
            if x.is_finite() {
                let d = f64::from(x) - mean_b;
                sq[j] += d * d;
            }
        }
        // Pass 4: exponent fields.
        let fields = &mut *self.fields;
        let quads = v.chunks_exact(4);
        let rest = quads.remainder();
        for q in quads {
            for (k, x) in q.iter().enumerate() {
                fields[k][((x.to_bits() & ABS) >> 23) as usize] += 1;
            }
        }
        for x in rest {
            fields[0][((x.to_bits() & ABS) >> 23) as usize] += 1;
        }
        if tiny > zero {
            for x in v {
                let a = x.to_bits() & ABS;
                if a != 0 && a < 0x0080_0000 {
                    self.sub_bits[(31 - a.leading_zeros()) as usize] += 1;
                }
            }
        }
        let acc = &mut self.acc;
        acc.add_moments(n as u64, mean_b, sq.iter().sum());
        let lo = lo.iter().fold(f32::INFINITY, |m, &x| m.min(x));
        let hi = hi.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        acc.min = acc.min.min(f64::from(lo));
        acc.max = acc.max.max(f64::from(hi));
        acc.nan += u64::from(nan);
        acc.neg_inf += u64::from(neg_inf);
        acc.pos_inf += u64::from(inf - neg_inf);
        acc.zeros += u64::from(zero);
        let nonfinite = v.len() as u32 - fin;
        for k in 0..4 {
            acc.overflow[k] += u64::from(over[k] - nonfinite);
            acc.flush[k] += u64::from(flush[k] - zero);
        }
    }

    /// The accumulator, exponents gathered from the field counts.
    pub fn finish(mut self) -> FloatAcc {
        for f in 1..255usize {
            let n: u64 = self.fields.iter().map(|h| h[f]).sum();
            self.acc.add_exponent(f as i32 - 127, n);
        }
        for (p, &n) in self.sub_bits.iter().enumerate() {
            self.acc.add_exponent(p as i32 - 149, n);
        }
        self.acc
    }
}

/// Measures F64 values (a plain loop: F64 tensors are rare and small).
pub fn add_f64(acc: &mut FloatAcc, v: &[f64]) {
    let th = f64_thresholds();
    const ABS64: u64 = 0x7fff_ffff_ffff_ffff;
    const INF64: u64 = 0x7ff0_0000_0000_0000;
    const MIN_NORMAL: u64 = 0x0010_0000_0000_0000;
    for b in v.chunks(BLOCK) {
        acc.elements += b.len() as u64;
        let (mut n, mut sum) = (0u64, 0f64);
        for &x in b {
            let bits = x.to_bits();
            let a = bits & ABS64;
            if a < INF64 {
                n += 1;
                sum += x;
                acc.min = acc.min.min(x);
                acc.max = acc.max.max(x);
                if a == 0 {
                    acc.zeros += 1;
                    continue;
                }
                if a < MIN_NORMAL {
                    acc.subnormals += 1;
                    acc.add_exponent(63 - a.leading_zeros() as i32 - 1074, 1);
                } else {
                    acc.add_exponent((a >> 52) as i32 - 1023, 1);
                }
                for (k, t) in th.iter().enumerate() {
                    acc.overflow[k] += u64::from(a >= t.over);
                    acc.flush[k] += u64::from(a <= t.flush);
                }
            } else if a == INF64 {
                if x > 0.0 {
                    acc.pos_inf += 1;
                } else {
                    acc.neg_inf += 1;
                }
            } else {
                acc.nan += 1;
            }
        }
        let mut mean = if n > 0 { sum / n as f64 } else { 0.0 };
        if !mean.is_finite() {
            // The sum of finite values overflowed (values near f64's limit): their mean does
            // not, summed as values over n.
            let n = n as f64;
            mean = b.iter().filter(|x| x.is_finite()).map(|&x| x / n).sum();
        }
        let m2: f64 = b
            .iter()
            .filter(|x| x.is_finite())
            .map(|&x| (x - mean) * (x - mean))
            .sum();
        acc.add_moments(n, mean, m2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &[f32]) -> FloatAcc {
        let mut r = F32Run::default();
        r.add(v);
        r.finish()
    }

    #[test]
    fn counts_classes_and_exponents() {
        let sub = f32::from_bits(5); // 5 × 2^-149: floor(log2) = 2 - 149
        let v = [
            0.0,
            -0.0,
            1.0,
            -3.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            sub,
            1e5,
            1e-30,
        ];
        let a = run(&v);
        assert_eq!(a.elements, 10);
        assert_eq!(a.finite, 7);
        assert_eq!((a.nan, a.pos_inf, a.neg_inf, a.zeros), (1, 1, 1, 2));
        assert_eq!((a.min, a.max), (-3.0, 1e5));
        // f16 overflow: 1e5; f16 flush: sub and 1e-30; bf16: none over, sub flushes;
        // e4m3fn: 1e5 over, sub and 1e-30 flush; e5m2: 1e5 over.
        assert_eq!(a.overflow, [1, 0, 1, 1]);
        assert_eq!(a.flush, [2, 1, 2, 2]);
        let e: Vec<_> = a.exponents().collect();
        assert_eq!(e, vec![(-147, 1), (-100, 1), (0, 1), (1, 1), (16, 1)]);
    }

    #[test]
    fn moments_match_two_pass_f64_across_blocks_and_merges() {
        let v: Vec<f32> = (0..3 * BLOCK + 37)
            .map(|i| ((i as f32) * 0.37).sin() * 1000.0 + 5e3)
            .collect();
        let n = v.len() as f64;
        let mean: f64 = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var: f64 = v
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n;
        let whole = run(&v);
        let (a, b) = v.split_at(1234);
        let merged = run(a).merge(run(b));
        for acc in [whole, merged] {
            assert!((acc.mean - mean).abs() <= 1e-9 * mean.abs(), "{}", acc.mean);
            assert!((acc.variance().unwrap() - var).abs() <= 1e-9 * var);
        }
        assert_eq!(run(&[]).variance(), None);
        assert_eq!(run(&[f32::NAN]).variance(), None);
    }

    #[test]
    fn f64_path_agrees_with_f32_path_on_f32_values() {
        let v: Vec<f32> = (0..5000)
            .map(|i| match i % 7 {
                0 => f32::from_bits(i as u32),
                1 => 70000.0 + i as f32,
                2 => -1e-9,
                3 => f32::NAN,
                _ => i as f32 * 0.5 - 100.0,
            })
            .collect();
        let a = run(&v);
        let mut b = FloatAcc::default();
        add_f64(&mut b, &v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>());
        // The F64 path counts subnormals of F64; these are all normal there.
        assert_eq!(b.subnormals, 0);
        assert_eq!(
            (a.finite, a.nan, a.zeros, a.overflow, a.flush, a.min, a.max),
            (b.finite, b.nan, b.zeros, b.overflow, b.flush, b.min, b.max)
        );
        assert_eq!(
            a.exponents().collect::<Vec<_>>(),
            b.exponents().collect::<Vec<_>>()
        );
        assert!((a.mean - b.mean).abs() < 1e-9 * a.mean.abs().max(1.0));
    }

    /// Values near f64's limit: their sum overflows, their mean does not (it was infinite).
    #[test]
    fn the_mean_of_values_whose_sum_overflows_is_finite() {
        let mut acc = FloatAcc::default();
        add_f64(&mut acc, &[1e308, 1e308, 1e308, f64::NAN]);
        assert_eq!(acc.finite, 3);
        assert!((acc.mean - 1e308).abs() <= 1e293, "{}", acc.mean);
        // Across blocks and merges, means of opposite signs near the limit.
        let mut v = vec![f64::MAX; BLOCK];
        v.extend(vec![-f64::MAX; BLOCK / 2]);
        let mut acc = FloatAcc::default();
        add_f64(&mut acc, &v);
        let want = f64::MAX / 3.0;
        assert!((acc.mean - want).abs() <= want * 1e-12, "{}", acc.mean);
    }
}
