//! Repetition and definition levels in Parquet's RLE / bit-packing hybrid, walked a run at a
//! time: a dense list column's levels are a handful of runs per row, so checking them costs
//! next to nothing, where a reader that expands them writes two i16 per value.

/// Calls `f(level, count)` for the first `count` levels of `buf` (bit width `bw`, 1 to 8),
/// equal neighbours of a bit-packed group joined into one call. `None` when the bytes end
/// before `count` levels or `f` returns false.
pub(super) fn runs(
    buf: &[u8],
    bw: u32,
    count: u64,
    f: &mut dyn FnMut(u32, u64) -> bool,
) -> Option<()> {
    debug_assert!((1..=8).contains(&bw));
    let mask = (1u32 << bw) - 1;
    let mut pos = 0usize;
    let mut left = count;
    while left > 0 {
        let header = varint32(buf, &mut pos)?;
        if header & 1 == 0 {
            // An RLE run: the level in one byte (bit widths up to 8), refused when wider than
            // the bit width (as the Parquet reader refuses it).
            let n = u64::from(header >> 1).min(left);
            let v = u32::from(*buf.get(pos)?);
            if v > mask {
                return None;
            }
            pos += 1;
            if n > 0 && !f(v, n) {
                return None;
            }
            left -= n;
        } else {
            // Bit-packed groups of 8 levels, `bw` bytes each, least significant bit first.
            let groups = (header >> 1) as usize;
            let bytes = buf.get(pos..pos.checked_add(groups.checked_mul(bw as usize)?)?)?;
            pos += bytes.len();
            let n = ((groups as u64) * 8).min(left);
            let mut run: Option<(u32, u64)> = None;
            for i in 0..n as usize {
                let bit = i * bw as usize;
                let word = u32::from(bytes[bit / 8])
                    | u32::from(bytes.get(bit / 8 + 1).copied().unwrap_or(0)) << 8;
                let v = (word >> (bit % 8)) & mask;
                run = match run {
                    Some((r, k)) if r == v => Some((r, k + 1)),
                    Some((r, k)) => {
                        if !f(r, k) {
                            return None;
                        }
                        Some((v, 1))
                    }
                    None => Some((v, 1)),
                };
            }
            if let Some((r, k)) = run {
                if !f(r, k) {
                    return None;
                }
            }
            left -= n;
        }
    }
    Some(())
}

fn varint32(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The bits a level up to `max` needs.
pub(super) fn bit_width(max: i16) -> u32 {
    16 - (max as u16).leading_zeros()
}

/// Follows the repetition levels of a single-level list column (0 starts a row, 1 continues
/// it) and holds that every row has one length, the first row's.
#[derive(Debug, Default)]
pub(super) struct Rows {
    /// Levels seen.
    pos: u64,
    /// Rows started.
    rows: u64,
    /// Values per row, once a second row has started.
    len: Option<u64>,
}

impl Rows {
    /// `count` levels of value `level`; false when a row would differ in length.
    pub fn feed(&mut self, level: u32, count: u64) -> bool {
        let ok = match level {
            0 => self.starts(count),
            // A continuation must not cover the place where the next row should start.
            1 => self.rows > 0 && self.len.is_none_or(|l| self.pos + count <= self.rows * l),
            _ => false,
        };
        self.pos += count;
        ok
    }

    /// `count` rows starting at `pos`, `pos + 1`, ...
    fn starts(&mut self, count: u64) -> bool {
        let (mut at, mut n) = (self.pos, count);
        if self.rows == 0 {
            if at != 0 {
                return false;
            }
            self.rows = 1;
            at += 1;
            n -= 1;
        }
        if n == 0 {
            return true;
        }
        // The second row's start gives the length (the first started at 0).
        let l = *self.len.get_or_insert(at);
        if at != self.rows * l || (n > 1 && l != 1) {
            return false;
        }
        self.rows += n;
        true
    }

    /// At the end of the column chunk: (rows, values per row), when the last row is whole.
    pub fn finish(&self) -> Option<(u64, u64)> {
        if self.rows == 0 {
            return None;
        }
        let l = self.len.unwrap_or(self.pos);
        (l > 0 && self.pos == self.rows * l).then_some((self.rows, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(buf: &[u8], bw: u32, count: u64) -> Option<Vec<(u32, u64)>> {
        let mut v = Vec::new();
        runs(buf, bw, count, &mut |l, n| {
            v.push((l, n));
            true
        })?;
        Some(v)
    }

    #[test]
    fn rle_and_bit_packed_runs() {
        // RLE: 5 x 3 (bw 2); bit-packed: one group 0,1,1,1,1,1,1,1 (bw 1) = 0b1111_1110.
        assert_eq!(collect(&[10, 3], 2, 5), Some(vec![(3, 5)]));
        assert_eq!(collect(&[3, 0xfe], 1, 8), Some(vec![(0, 1), (1, 7)]));
        // Padding past the count is ignored; an RLE run longer than the count is cut.
        assert_eq!(collect(&[3, 0xfe], 1, 3), Some(vec![(0, 1), (1, 2)]));
        assert_eq!(collect(&[20, 1], 1, 4), Some(vec![(1, 4)]));
        // bw 2, one group: 3,3,3,3,0,1,2,3 -> 0xff, 0b11_10_01_00 = 0xe4.
        assert_eq!(
            collect(&[3, 0xff, 0xe4], 2, 8),
            Some(vec![(3, 4), (0, 1), (1, 1), (2, 1), (3, 1)])
        );
        // An RLE level wider than the bit width: refused.
        assert_eq!(collect(&[10, 2], 1, 5), None);
        // Bytes ending early: refused.
        assert_eq!(collect(&[10], 2, 5), None);
        assert_eq!(collect(&[5, 0xff], 1, 16), None);
        assert_eq!(collect(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], 1, 1), None);
    }

    #[test]
    fn rows_of_one_length_pass_others_do_not() {
        // Three rows of 4: 0,1,1,1 x 3.
        let mut r = Rows::default();
        for _ in 0..3 {
            assert!(r.feed(0, 1) && r.feed(1, 3));
        }
        assert_eq!(r.finish(), Some((3, 4)));
        // Rows of one value: a run of starts.
        let mut r = Rows::default();
        assert!(r.feed(0, 5));
        assert_eq!(r.finish(), Some((5, 1)));
        // A second row longer than the first.
        let mut r = Rows::default();
        assert!(r.feed(0, 1) && r.feed(1, 1) && r.feed(0, 1));
        assert!(!r.feed(1, 2));
        // A second row shorter: the third starts early.
        let mut r = Rows::default();
        assert!(r.feed(0, 1) && r.feed(1, 2) && r.feed(0, 1) && r.feed(1, 1));
        assert!(!r.feed(0, 1));
        // A last row cut short.
        let mut r = Rows::default();
        assert!(r.feed(0, 1) && r.feed(1, 2) && r.feed(0, 1) && r.feed(1, 1));
        assert_eq!(r.finish(), None);
        // A chunk that does not start a row; a level that is not 0 or 1.
        assert!(!Rows::default().feed(1, 1));
        assert!(!Rows::default().feed(2, 1));
        assert_eq!(Rows::default().finish(), None);
    }

    #[test]
    fn bit_widths() {
        assert_eq!(bit_width(1), 1);
        assert_eq!(bit_width(2), 2);
        assert_eq!(bit_width(3), 2);
        assert_eq!(bit_width(4), 3);
    }
}
