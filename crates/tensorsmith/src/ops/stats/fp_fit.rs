//! Whether a value survives a cast to a narrower float type: the thresholds at which a value
//! overflows (rounds beyond the largest finite value) or flushes to zero under
//! round-to-nearest-even, for F16, BF16, FP8 E4M3FN and FP8 E5M2. `stats` counts values
//! against them with integer compares on the bits of |x|.
//!
//! Worked out once from each format's largest finite value, smallest subnormal and mantissa
//! width (and pinned by the tests below against `half`'s casts and the exact numbers):
//! - overflow: |x| ≥ max + ulp(max)/2, where the tie itself overflows when the mantissa of
//!   max is odd (it rounds to the even neighbour beyond it) and stays when it is even
//!   (E4M3FN's 448 = 1.110b × 2^8: 464 rounds to 448, anything above to NaN);
//! - flush: 0 < |x| ≤ min_subnormal / 2 (the tie goes to 0, whose mantissa is even).
//!
//! | target | largest | overflows at | flushes at or below |
//! |---|---|---|---|
//! | F16 | 65504 | ≥ 65520 | 2^-25 |
//! | BF16 | (2 − 2^-7)·2^127 | ≥ (2 − 2^-8)·2^127 | 2^-134 |
//! | F8 E4M3FN | 448 (no infinities) | > 464 | 2^-10 |
//! | F8 E5M2 | 57344 | ≥ 61440 | 2^-17 |

/// A narrower float type values are checked against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Narrow {
    /// The name in `stats` output: `f16`, `bf16`, `f8_e4m3fn`, `f8_e5m2`.
    pub name: &'static str,
    /// Explicit mantissa bits.
    pub mantissa_bits: i32,
    /// The largest finite value.
    pub max: f64,
    /// The smallest positive subnormal.
    pub min_subnormal: f64,
}

/// The four targets, in the order `stats` reports them.
pub const TARGETS: [Narrow; 4] = [
    Narrow {
        name: "f16",
        mantissa_bits: 10,
        max: 65504.0,
        min_subnormal: 5.960_464_477_539_063e-8, // 2^-24
    },
    Narrow {
        name: "bf16",
        mantissa_bits: 7,
        max: 3.389_531_389_251_535_5e38, // (2 - 2^-7) * 2^127
        min_subnormal: 9.183_549_615_799_121e-41, // 2^-133
    },
    Narrow {
        name: "f8_e4m3fn",
        mantissa_bits: 3,
        max: 448.0,
        min_subnormal: 0.001_953_125, // 2^-9
    },
    Narrow {
        name: "f8_e5m2",
        mantissa_bits: 2,
        max: 57344.0,
        min_subnormal: 1.525_878_906_25e-5, // 2^-16
    },
];

impl Narrow {
    /// The midpoint between the largest finite value and the next value the exponent range
    /// would have, and whether that midpoint itself overflows (ties to even).
    pub fn overflow_midpoint(&self) -> (f64, bool) {
        let exp = self.max.log2().floor() as i32;
        let ulp = 2f64.powi(exp - self.mantissa_bits);
        // The mantissa of max, as an integer: odd means the tie rounds away from max.
        let mantissa = (self.max / ulp) as u64;
        (self.max + ulp / 2.0, mantissa % 2 == 1)
    }

    /// The largest |x| that rounds to zero.
    pub fn flush_max(&self) -> f64 {
        self.min_subnormal / 2.0
    }

    /// Whether a finite `x` overflows in this type.
    pub fn overflows(&self, x: f64) -> bool {
        let (mid, tie_overflows) = self.overflow_midpoint();
        let a = x.abs();
        a > mid || (a == mid && tie_overflows)
    }

    /// Whether a nonzero `x` flushes to zero in this type.
    pub fn flushes(&self, x: f64) -> bool {
        x != 0.0 && x.abs() <= self.flush_max()
    }
}

/// Thresholds on the bits of |x| (`x.to_bits() & !sign`) for one source width: a finite
/// value overflows when its abs bits are at least `over`, a nonzero one flushes when they
/// are at most `flush`. Both compare as signed integers too (abs bits have no sign bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitThresholds<B> {
    /// Abs bits from which a finite value overflows the target type.
    pub over: B,
    /// Abs bits up to which a nonzero value flushes to zero in the target type.
    pub flush: B,
}

/// [`BitThresholds`] for F32 values, one per target in [`TARGETS`] order. Every threshold is
/// exactly an F32 value, so comparing bits is comparing values.
pub fn f32_thresholds() -> [BitThresholds<u32>; 4] {
    TARGETS.map(|t| {
        let (mid, tie) = t.overflow_midpoint();
        let mid = mid as f32;
        BitThresholds {
            over: if tie {
                mid.to_bits()
            } else {
                mid.to_bits() + 1
            },
            flush: (t.flush_max() as f32).to_bits(),
        }
    })
}

/// [`BitThresholds`] for F64 values, one per target in [`TARGETS`] order.
pub fn f64_thresholds() -> [BitThresholds<u64>; 4] {
    TARGETS.map(|t| {
        let (mid, tie) = t.overflow_midpoint();
        BitThresholds {
            over: if tie {
                mid.to_bits()
            } else {
                mid.to_bits() + 1
            },
            flush: t.flush_max().to_bits(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn thresholds_are_the_worked_out_numbers() {
        let p = |e: i32| 2f64.powi(e);
        let expect = [
            (65520.0, true, p(-25)),
            ((2.0 - p(-8)) * p(127), true, p(-134)),
            (464.0, false, p(-10)),
            (61440.0, true, p(-17)),
        ];
        for (t, (mid, tie, flush)) in TARGETS.iter().zip(expect) {
            assert_eq!(t.overflow_midpoint(), (mid, tie), "{}", t.name);
            assert_eq!(t.flush_max(), flush, "{}", t.name);
        }
        assert_eq!(TARGETS[1].max, (2.0 - p(-7)) * p(127));
        assert_eq!(TARGETS[1].min_subnormal, p(-133));
        assert_eq!(TARGETS[0].min_subnormal, p(-24));
        assert_eq!(TARGETS[2].min_subnormal, p(-9));
        assert_eq!(TARGETS[3].min_subnormal, p(-16));
        assert!(TARGETS[2].overflows(464.000_000_000_1) && !TARGETS[2].overflows(464.0));
        assert!(TARGETS[0].overflows(-65520.0) && !TARGETS[0].overflows(65519.99));
        assert!(TARGETS[3].flushes(p(-17)) && !TARGETS[3].flushes(p(-17) * 1.000_001));
    }

    /// Every F32 within 4096 ulps of each threshold: `half`'s round-to-nearest-even casts
    /// agree with the bit thresholds and with the f64 rule.
    #[test]
    fn f16_and_bf16_agree_with_half_around_each_threshold() {
        let th = f32_thresholds();
        let casts: [fn(f32) -> f32; 2] = [
            |x| f16::from_f32(x).to_f32(),
            |x| bf16::from_f32(x).to_f32(),
        ];
        for (k, cast) in casts.iter().enumerate() {
            for centre in [th[k].over, th[k].flush] {
                for b in centre - 4096..=centre + 4096 {
                    for x in [f32::from_bits(b), -f32::from_bits(b)] {
                        let y = cast(x);
                        let a = x.to_bits() & 0x7fff_ffff;
                        assert_eq!(
                            y.is_infinite(),
                            a >= th[k].over,
                            "{x:e} {}",
                            TARGETS[k].name
                        );
                        assert_eq!(y == 0.0, a <= th[k].flush, "{x:e} {}", TARGETS[k].name);
                        assert_eq!(y.is_infinite(), TARGETS[k].overflows(f64::from(x)));
                        assert_eq!(y == 0.0, TARGETS[k].flushes(f64::from(x)));
                    }
                }
            }
        }
    }

    /// F16 and BF16 from F64 straight (no double rounding through F32), through this
    /// crate's own round-to-nearest-even cast: it agrees with the f64 bit thresholds, and
    /// those with the rule, for every F64 within 4096 ulps of each threshold.
    #[test]
    fn f64_thresholds_match_the_rule_and_the_f64_cast() {
        use crate::cast::{cast, Rounding};
        use crate::dtype::DType;
        let th = f64_thresholds();
        for (k, t) in TARGETS.iter().enumerate() {
            for centre in [th[k].over, th[k].flush] {
                let xs: Vec<f64> = (centre - 4096..=centre + 4096)
                    .map(f64::from_bits)
                    .collect();
                for &x in &xs {
                    let b = x.to_bits();
                    assert_eq!(b >= th[k].over, t.overflows(x), "{x:e} {}", t.name);
                    assert_eq!(b <= th[k].flush, t.flushes(x), "{x:e} {}", t.name);
                }
                let to = match k {
                    0 => DType::F16,
                    1 => DType::BF16,
                    _ => continue,
                };
                let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
                let out = cast(&bytes, DType::F64, to, Rounding::Nearest).unwrap();
                for (x, c) in xs.iter().zip(out.chunks_exact(2)) {
                    let h = u16::from_le_bytes([c[0], c[1]]);
                    let y = match to {
                        DType::F16 => f16::from_bits(h).to_f32(),
                        _ => bf16::from_bits(h).to_f32(),
                    };
                    assert_eq!(y.is_infinite(), t.overflows(*x), "{x:e} {}", t.name);
                    assert_eq!(y == 0.0, t.flushes(*x), "{x:e} {}", t.name);
                }
            }
        }
    }
}
