//! Dictionary indices (RLE_DICTIONARY / PLAIN_DICTIONARY data pages): a bit width byte, then
//! the RLE / bit-packing hybrid, decoded a run at a time straight into the shard's bytes as
//! the dictionary's entries (already in the target dtype). An index past the dictionary is
//! an error; so are indices that end before the page's values do.

/// A position in a page's indices; runs are consumed across calls.
pub(super) struct DictIndices {
    pos: usize,
    bw: u32,
    /// Indices left in the current run, and its kind.
    left: u64,
    run: Run,
}

enum Run {
    Repeat(u32),
    /// Bit-packed, its next index at this bit of `buf`.
    Packed(usize),
}

impl DictIndices {
    /// `buf`: the page's value bytes (bit width first).
    pub fn new(buf: &[u8]) -> Result<Self, String> {
        let bw = u32::from(*buf.first().ok_or("no dictionary index bit width")?);
        if bw > 32 {
            return Err(format!("a dictionary index bit width of {bw}"));
        }
        Ok(DictIndices {
            pos: 1,
            bw,
            left: 0,
            run: Run::Repeat(0),
        })
    }

    fn next_run(&mut self, buf: &[u8]) -> Result<(), String> {
        let short = || "the dictionary indices end before the page's values".to_string();
        let mut header = 0u64;
        for shift in (0..35).step_by(7) {
            let b = *buf.get(self.pos).ok_or_else(short)?;
            self.pos += 1;
            header |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            if shift == 28 {
                return Err("an overlong run header in the dictionary indices".into());
            }
        }
        let bytes = self.bw.div_ceil(8) as usize;
        if header & 1 == 0 {
            let v = buf.get(self.pos..self.pos + bytes).ok_or_else(short)?;
            let mut le = [0u8; 4];
            le[..bytes].copy_from_slice(v);
            self.pos += bytes;
            self.left = header >> 1;
            self.run = Run::Repeat(u32::from_le_bytes(le));
        } else {
            let groups = (header >> 1) as usize;
            let len = groups * self.bw as usize;
            if buf.len() - self.pos < len {
                return Err(short());
            }
            self.run = Run::Packed(self.pos * 8);
            self.pos += len;
            self.left = groups as u64 * 8;
        }
        Ok(())
    }

    /// Appends the entries of the next `n` indices of `buf` (the bytes given to `new`;
    /// entries of `width` bytes in `dict`).
    pub fn gather(
        &mut self,
        buf: &[u8],
        mut n: u64,
        dict: &[u8],
        width: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let entries = (dict.len() / width) as u64;
        let oob = |i: u32| format!("dictionary index {i} out of range ({entries} entries)");
        while n > 0 {
            if self.left == 0 {
                self.next_run(buf)?;
                continue;
            }
            let k = n.min(self.left);
            match self.run {
                Run::Repeat(i) => {
                    if u64::from(i) >= entries {
                        return Err(oob(i));
                    }
                    let e = &dict[i as usize * width..(i as usize + 1) * width];
                    for _ in 0..k {
                        out.extend_from_slice(e);
                    }
                }
                Run::Packed(ref mut bit) => {
                    let mask = if self.bw == 32 {
                        u64::from(u32::MAX)
                    } else {
                        (1u64 << self.bw) - 1
                    };
                    for _ in 0..k {
                        let at = *bit / 8;
                        let mut w = [0u8; 8];
                        let avail = (buf.len() - at).min(8);
                        w[..avail].copy_from_slice(&buf[at..at + avail]);
                        let i = ((u64::from_le_bytes(w) >> (*bit % 8)) & mask) as u32;
                        if u64::from(i) >= entries {
                            return Err(oob(i));
                        }
                        out.extend_from_slice(&dict[i as usize * width..(i as usize + 1) * width]);
                        *bit += self.bw as usize;
                    }
                }
            }
            self.left -= k;
            n -= k;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rle_and_packed_runs_gather_entries_and_bad_indices_are_refused() {
        let dict = [10u8, 11, 12, 13];
        // bw 2: RLE 3 x 2; bit-packed group 0,1,2,3,0,1,2,3 (0xe4, 0xe4).
        let buf = [2u8, 6, 2, 3, 0xe4, 0xe4];
        let mut d = DictIndices::new(&buf).unwrap();
        let mut out = Vec::new();
        d.gather(&buf, 2, &dict, 1, &mut out).unwrap();
        d.gather(&buf, 5, &dict, 1, &mut out).unwrap();
        d.gather(&buf, 4, &dict, 1, &mut out).unwrap();
        assert_eq!(out, [12, 12, 12, 10, 11, 12, 13, 10, 11, 12, 13]);
        // Past the indices: an error.
        assert!(d.gather(&buf, 1, &dict, 1, &mut out).is_err());
        // Index 3 of a dictionary of 3 entries.
        let mut d = DictIndices::new(&buf).unwrap();
        let err = d.gather(&buf, 11, &dict[..3], 1, &mut out).unwrap_err();
        assert!(err.contains("index 3 out of range"), "{err}");
        assert!(DictIndices::new(&[33]).is_err());
    }
}
