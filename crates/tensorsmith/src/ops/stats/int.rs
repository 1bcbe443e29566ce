//! The integer accumulator of `stats`: count, extremes, moments (f64) and zeros in a first
//! pass, then a histogram of 64 equal-width bins from min to max, as
//! `numpy.histogram(x, bins=64, range=(min, max))` bins integers (bin `i` holds
//! `min + i·w ≤ x < min + (i+1)·w`, `w = (max − min)/64`, the last bin closed; when
//! min = max every value is in bin 32, NumPy's `(min − 0.5, max + 0.5)` range).

/// Bins of the integer histogram.
pub const BINS: usize = 64;

/// First-pass figures of an integer tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntAcc {
    pub count: u64,
    pub min: i128,
    pub max: i128,
    pub mean: f64,
    pub m2: f64,
    pub zeros: u64,
}

impl Default for IntAcc {
    fn default() -> Self {
        IntAcc {
            count: 0,
            min: i128::MAX,
            max: i128::MIN,
            mean: 0.0,
            m2: 0.0,
            zeros: 0,
        }
    }
}

impl IntAcc {
    /// Adds a run of values (moments by block mean and deviations, then Chan's formula).
    pub fn add(&mut self, v: &[i128]) {
        if v.is_empty() {
            return;
        }
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let m2 = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>();
        for &x in v {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
            self.zeros += u64::from(x == 0);
        }
        self.merge_moments(v.len() as u64, mean, m2);
    }

    fn merge_moments(&mut self, n: u64, mean: f64, m2: f64) {
        if n == 0 {
            return;
        }
        if self.count == 0 {
            (self.count, self.mean, self.m2) = (n, mean, m2);
            return;
        }
        let (na, nb) = (self.count as f64, n as f64);
        let total = na + nb;
        let delta = mean - self.mean;
        self.mean += delta * (nb / total);
        self.m2 += m2 + delta * delta * (na * nb / total);
        self.count += n;
    }

    /// Both partials together.
    pub fn merge(mut self, o: IntAcc) -> IntAcc {
        self.merge_moments(o.count, o.mean, o.m2);
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.zeros += o.zeros;
        self
    }

    /// The population variance; `None` for no values.
    pub fn variance(&self) -> Option<f64> {
        (self.count > 0).then(|| self.m2 / self.count as f64)
    }
}

/// The bin of `x` in the histogram from `min` to `max` (both from the first pass).
pub fn bin(x: i128, min: i128, max: i128) -> usize {
    if max == min {
        return BINS / 2;
    }
    // (x − min)·64 fits: every value is within 2^64 of min.
    let b = (x - min) * BINS as i128 / (max - min);
    (b as usize).min(BINS - 1)
}

/// Adds `v` to the histogram `h` from `min` to `max`.
pub fn add_to_histogram(h: &mut [u64; BINS], v: &[i128], min: i128, max: i128) {
    for &x in v {
        h[bin(x, min, max)] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_follow_numpy_edges() {
        // numpy.histogram(range(0, 101), 64) puts 0..=1 in bin 0 (edges 0, 1.5625, ...),
        // 100 in bin 63, 50 in bin 32.
        assert_eq!(bin(0, 0, 100), 0);
        assert_eq!(bin(1, 0, 100), 0);
        assert_eq!(bin(2, 0, 100), 1);
        assert_eq!(bin(50, 0, 100), 32);
        assert_eq!(bin(100, 0, 100), 63);
        assert_eq!(bin(7, 7, 7), 32);
        assert_eq!(bin(i128::from(u64::MAX), 0, i128::from(u64::MAX)), 63);
        assert_eq!(bin(i128::from(i64::MIN), i128::from(i64::MIN), 1), 0);
    }

    #[test]
    fn moments_and_merge() {
        let v: Vec<i128> = (-50..150).collect();
        let mut a = IntAcc::default();
        a.add(&v[..77]);
        let mut b = IntAcc::default();
        b.add(&v[77..]);
        let m = a.merge(b);
        assert_eq!((m.count, m.min, m.max, m.zeros), (200, -50, 149, 1));
        assert!((m.mean - 49.5).abs() < 1e-12);
        assert!((m.variance().unwrap() - (200.0f64 * 200.0 - 1.0) / 12.0).abs() < 1e-9);
    }
}
