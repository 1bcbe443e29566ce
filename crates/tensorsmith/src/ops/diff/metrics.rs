//! Error metrics of a value diff: max absolute error, RMSE, relative RMSE, cosine similarity
//! and SNR, accumulated in f64 over element pairs as they stream past (sums of blocks of
//! `BLOCK` pairs added to running totals, so long tensors lose little to rounding).
//!
//! Conventions (A is the reference, B the copy, d = a − b):
//! - the sums run over the pairs where both values are finite; a pair with NaN or ±Inf on
//!   either side counts in `nonfinite` (and makes the diff's max |a−b| infinite unless both
//!   sides agree);
//! - `rmse` = sqrt(Σd²/n); `rel_rmse` = rmse / sqrt(Σa²/n), `None` when A is all zero;
//! - `cosine` = Σab / sqrt(Σa²·Σb²), `None` when either side is all zero;
//! - `snr_db` = 10·log10(Σa² / Σd²): +∞ when the values are equal (Σd² = 0, Σa² > 0),
//!   −∞ when A is zero and B is not, `None` when both are zero (0/0);
//! - with no finite pair at all (an empty tensor), every metric is `None`.

/// Pairs summed in f64 before they join the running totals.
const BLOCK: usize = 1024;

/// The metrics of one tensor pair.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metrics {
    /// Pairs where both values were finite (those the sums cover).
    pub finite_pairs: u64,
    /// Pairs with NaN or ±Inf on either side.
    pub nonfinite: u64,
    /// Root mean square of `a − b`; `None` with no finite pair.
    pub rmse: Option<f64>,
    /// `rmse` relative to the root mean square of A; `None` when A is all zero.
    pub rel_rmse: Option<f64>,
    /// Cosine similarity of A and B; `None` when either side is all zero.
    pub cosine: Option<f64>,
    /// Signal-to-noise ratio in decibels, `10·log10(Σa² / Σd²)` (+∞ when equal); `None` when
    /// A and the difference are both zero.
    pub snr_db: Option<f64>,
}

/// Running sums of one tensor pair.
#[derive(Debug, Clone, Default)]
pub struct ErrorSums {
    n: u64,
    nonfinite: u64,
    aa: f64,
    bb: f64,
    ab: f64,
    dd: f64,
    block: [f64; 4],
    in_block: usize,
}

impl ErrorSums {
    /// Sums over no pairs yet.
    pub fn new() -> ErrorSums {
        ErrorSums::default()
    }

    /// Adds one pair of values.
    #[inline]
    pub fn add(&mut self, a: f64, b: f64) {
        if !(a.is_finite() && b.is_finite()) {
            self.nonfinite += 1;
            return;
        }
        let d = a - b;
        self.block[0] += a * a;
        self.block[1] += b * b;
        self.block[2] += a * b;
        self.block[3] += d * d;
        self.in_block += 1;
        if self.in_block == BLOCK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.aa += self.block[0];
        self.bb += self.block[1];
        self.ab += self.block[2];
        self.dd += self.block[3];
        self.n += self.in_block as u64;
        self.block = [0.0; 4];
        self.in_block = 0;
    }

    /// The metrics of the pairs added so far.
    pub fn finish(mut self) -> Metrics {
        self.flush();
        let mut m = Metrics {
            finite_pairs: self.n,
            nonfinite: self.nonfinite,
            ..Metrics::default()
        };
        if self.n == 0 {
            return m;
        }
        let n = self.n as f64;
        let rmse = (self.dd / n).sqrt();
        m.rmse = Some(rmse);
        if self.aa > 0.0 {
            m.rel_rmse = Some(rmse / (self.aa / n).sqrt());
        }
        if self.aa > 0.0 && self.bb > 0.0 {
            // Rounding can put |cos| a hair above 1; it is a cosine.
            m.cosine = Some((self.ab / (self.aa.sqrt() * self.bb.sqrt())).clamp(-1.0, 1.0));
        }
        m.snr_db = match (self.aa > 0.0, self.dd > 0.0) {
            (true, true) => Some(10.0 * (self.aa / self.dd).log10()),
            (true, false) => Some(f64::INFINITY),
            (false, true) => Some(f64::NEG_INFINITY),
            (false, false) => None,
        };
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(a: &[f64], b: &[f64]) -> Metrics {
        let mut s = ErrorSums::new();
        a.iter().zip(b).for_each(|(&x, &y)| s.add(x, y));
        s.finish()
    }

    #[test]
    fn hand_computed() {
        // a = [3, 4], b = [3, 3]: d = [0, 1]; Σa² = 25, Σb² = 18, Σab = 21, Σd² = 1.
        let m = metrics(&[3.0, 4.0], &[3.0, 3.0]);
        assert_eq!(m.rmse, Some((0.5f64).sqrt()));
        assert_eq!(m.rel_rmse, Some((0.5f64).sqrt() / (12.5f64).sqrt()));
        assert_eq!(m.cosine, Some(21.0 / (5.0 * 18f64.sqrt())));
        assert_eq!(m.snr_db, Some(10.0 * 25f64.log10()));
    }

    #[test]
    fn zero_and_empty_conventions() {
        let m = metrics(&[0.0, 0.0], &[0.0, 0.0]);
        assert_eq!(
            (m.rmse, m.rel_rmse, m.cosine, m.snr_db),
            (Some(0.0), None, None, None)
        );
        let m = metrics(&[0.0], &[1.0]);
        assert_eq!(
            (m.rel_rmse, m.cosine, m.snr_db),
            (None, None, Some(f64::NEG_INFINITY))
        );
        let m = metrics(&[2.0], &[2.0]);
        assert_eq!((m.cosine, m.snr_db), (Some(1.0), Some(f64::INFINITY)));
        assert_eq!(metrics(&[], &[]), Metrics::default());
        let m = metrics(&[f64::NAN, 1.0], &[1.0, 1.0]);
        assert_eq!((m.nonfinite, m.finite_pairs, m.rmse), (1, 1, Some(0.0)));
    }
}
