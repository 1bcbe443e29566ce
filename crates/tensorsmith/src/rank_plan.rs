//! Per-rank read plans: which byte spans of a file hold the part of a tensor one rank of a
//! tensor-parallel job keeps, and how those spans are grouped into reads.
//!
//! A part is a box of the tensor: a range along each leading dimension (later dimensions
//! whole). Column- and row-parallel layers and expert parallelism cut one dimension
//! ([`RankPlan::along`]); `get_slice(name)[a:b, c:d]` cuts several ([`RankPlan::new`]). The
//! part's bytes, in its own row-major (contiguous) layout, are a list of equal *runs*: the
//! innermost cut dimension's range times everything after it. A cut of the first dimension is
//! one run; a cut of another dimension is one run per index of the dimensions before it,
//! `stride` bytes apart.
//!
//! # Coalescing rule
//! Runs are grouped into reads in file order. Two neighbouring runs share one read when the
//! gap between them (bytes of other ranks) is at most [`Coalesce::max_gap`] and the read
//! stays within [`Coalesce::max_read`]; a run longer than `max_read` is read alone, in pieces
//! of `max_read`. A read of one run (or a piece of one) lands directly in the destination; a
//! read of several goes through a scratch buffer of at most `max_read` bytes, from which the
//! runs are copied out: never a host copy of the whole tensor.
//!
//! Bound: every byte read beyond the part's own is a merged gap, each at most `max_gap` and
//! following a run, so `bytes_read ≤ kept + (runs − 1) · min(gap, max_gap)` and, for a cut of
//! one dimension (gaps all equal to `g`), `bytes_read / kept ≤ 1 + g / run` when
//! `g ≤ max_gap`, and exactly 1 when `g > max_gap` ([`RankPlan::bound`]). A first-dimension
//! cut reads exactly the bytes it keeps.
//! Defaults: local files [`Coalesce::LOCAL`] (4 KiB gaps: the page the kernel reads anyway),
//! object stores and HTTP [`Coalesce::REMOTE`] (256 KiB: a ranged request costs about a round
//! trip, which moves that much at the rates these stores give one connection).
//!
//! # Packed and block types
//! Elements are counted in *groups* that fill whole bytes ([`Elements`]): one element of a
//! byte-sized dtype, two F4/I4/U4, four F6 (3 bytes) or I2/U2, one ggml block (32 values in
//! 18 bytes for Q4_0). A part is planned only when every run starts and ends on a group
//! boundary; otherwise it is refused ([`ErrorKind::BadSlice`], naming the dtype and the
//! element where the cut falls) — never read whole behind the caller's back. Layouts other
//! than dense and ggml blocks (sparse, group-quantized, MX, compressed parts) are refused by
//! the caller ([`Elements::of`]).

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Layout, LayoutNames};
use std::ops::Range;

/// How a tensor's elements fill bytes: `group` elements take `bytes` bytes, and a cut must
/// fall on a group boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elements {
    /// Elements in the smallest whole-byte group (1 for byte-sized dtypes, 2 for 4-bit ones,
    /// the block size for ggml types).
    pub group: u64,
    /// Bytes one group takes.
    pub bytes: u64,
    /// Names the element type in errors (`F32`, `F4`, `q4_0`).
    pub name: &'static str,
}

impl Elements {
    /// The elements of a dtype: byte-sized ones one at a time, packed ones in the fewest
    /// that fill whole bytes (F4: 2 in 1 byte; F6: 4 in 3 bytes; I2/U2: 4 in 1 byte).
    pub fn of_dtype(dtype: DType) -> Elements {
        let bits = u64::from(dtype.bits());
        let group = 8 / gcd(bits, 8);
        Elements {
            group,
            bytes: bits * group / 8,
            name: dtype.safetensors_name(),
        }
    }

    /// The elements of a tensor of `dtype` and `layout`: dense tensors by their dtype, ggml
    /// block tensors by their blocks (the tensor's shape counts values); other layouts have
    /// no plan and are refused by name.
    pub fn of(dtype: DType, layout: &Layout) -> Result<Elements> {
        match layout {
            Layout::Dense => Ok(Elements::of_dtype(dtype)),
            Layout::Ggml(t) => Ok(Elements {
                group: u64::from(t.block_elements()),
                bytes: u64::from(t.block_bytes()),
                name: t.name(),
            }),
            other => Err(ErrorKind::Unsupported(format!(
                "a per-rank read of a {} tensor: only dense and ggml block tensors are read by \
                 byte spans",
                other.name(LayoutNames::Message)
            ))
            .into()),
        }
    }

    /// Bytes of `elements` elements starting on a group boundary; `None` unless whole groups.
    fn bytes_of(&self, elements: u64) -> Option<u64> {
        (elements % self.group == 0).then(|| elements / self.group * self.bytes)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The coalescing rule (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coalesce {
    /// Neighbouring runs at most this many bytes apart share a read.
    pub max_gap: u64,
    /// No read of several runs grows past this (the scratch buffer's size), and a longer
    /// run is read in pieces of this size.
    pub max_read: u64,
}

impl Coalesce {
    /// Local files (pread or mapped): gaps up to one 4 KiB page.
    pub const LOCAL: Coalesce = Coalesce {
        max_gap: 4 << 10,
        max_read: 8 << 20,
    };
    /// Object stores and HTTP: gaps up to 256 KiB (one ranged GET costs about that).
    pub const REMOTE: Coalesce = Coalesce {
        max_gap: 256 << 10,
        max_read: 8 << 20,
    };
    /// Never merge: exactly the kept bytes, one read per run (or piece).
    pub const EXACT: Coalesce = Coalesce {
        max_gap: 0,
        max_read: 8 << 20,
    };
}

/// One read: a byte range of the file and the runs it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// Absolute offsets in the file.
    pub range: Range<u64>,
    /// Indexes into [`RankPlan::runs`]; one run when the read lands directly in the
    /// destination (the whole run, or a piece of it).
    pub runs: Range<usize>,
}

impl Read {
    fn len(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// Whether the read goes straight into the destination (it serves one run).
    pub fn is_direct(&self) -> bool {
        self.runs.len() == 1
    }
}

/// The byte spans one part of one tensor is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankPlan {
    /// The part's shape.
    pub shape: Vec<u64>,
    /// Bytes kept: the destination buffer's length.
    pub len: u64,
    /// Bytes per run.
    pub run_len: u64,
    /// Each run's absolute file offset, in destination order: run `k` lands at
    /// `k * run_len` in the destination.
    pub runs: Vec<u64>,
    /// The reads, in file and destination order; their destination bytes are consecutive.
    pub reads: Vec<Read>,
    /// The rule the reads were grouped by.
    pub rule: Coalesce,
}

impl RankPlan {
    /// The plan for the part of a tensor of `shape` (stored at `data`, absolute offsets of
    /// its file) that `cut` selects: `cut[k]` along dimension `k`, later dimensions whole
    /// (an empty `cut` is the whole tensor). Errors: a cut out of the shape, `data` of
    /// another length than the shape needs, runs that do not fall on whole groups.
    pub fn new(
        elements: Elements,
        shape: &[u64],
        data: Range<u64>,
        cut: &[Range<u64>],
        rule: Coalesce,
    ) -> Result<RankPlan> {
        let bad = |msg: String| Error::new(ErrorKind::BadSlice(msg));
        crate::index::check_ranges(shape, cut).map_err(bad)?;
        let overflow = || bad("the tensor's element count overflows".into());
        // Elements per step of each dimension.
        let mut stride = vec![0u64; shape.len()];
        let mut total = 1u64;
        for k in (0..shape.len()).rev() {
            stride[k] = total;
            total = total.checked_mul(shape[k]).ok_or_else(overflow)?;
        }
        let stored = data.end.checked_sub(data.start).ok_or_else(overflow)?;
        let want = total
            .div_ceil(elements.group)
            .checked_mul(elements.bytes)
            .ok_or_else(overflow)?;
        if stored != want {
            return Err(bad(format!(
                "{stored} stored bytes for {total} {} elements, which take {want}",
                elements.name
            )));
        }
        let part: Vec<u64> = shape
            .iter()
            .enumerate()
            .map(|(k, &d)| cut.get(k).map_or(d, |r| r.end - r.start))
            .collect();
        // The last dimension the cut narrows: runs are its range times everything after it.
        let last = (0..cut.len())
            .rev()
            .find(|&k| cut[k].start != 0 || cut[k].end != shape[k]);
        let kept: u64 = part.iter().product();
        if kept == 0 {
            return Ok(RankPlan {
                shape: part,
                len: 0,
                run_len: 0,
                runs: Vec::new(),
                reads: Vec::new(),
                rule,
            });
        }
        let (run_elems, base, outer) = match last {
            None => (total, 0, &[][..]),
            Some(l) => {
                let base: u64 = (0..=l).map(|k| cut[k].start * stride[k]).sum();
                ((cut[l].end - cut[l].start) * stride[l], base, &cut[..l])
            }
        };
        let misaligned = |at: u64| {
            bad(format!(
                "a cut at element {at} of a {} tensor: {} elements fill {} byte{}, so a part \
                 must start and end on a multiple of {} elements (read it whole instead)",
                elements.name,
                elements.group,
                elements.bytes,
                if elements.bytes == 1 { "" } else { "s" },
                elements.group
            ))
        };
        let base_bytes = elements.bytes_of(base).ok_or_else(|| misaligned(base))?;
        // The whole tensor is its stored bytes, whole groups or not (an odd F4 count).
        let run_len = match last {
            None => stored,
            Some(_) => elements
                .bytes_of(run_elems)
                .ok_or_else(|| misaligned(base + run_elems))?,
        };
        let mut outer_stride = Vec::with_capacity(outer.len());
        for (k, r) in outer.iter().enumerate() {
            if r.end - r.start > 1 {
                outer_stride.push(
                    elements
                        .bytes_of(stride[k])
                        .ok_or_else(|| misaligned(base + stride[k]))?,
                );
            } else {
                outer_stride.push(0);
            }
        }
        // Each run's offset, in destination (row-major) order of the outer indexes.
        let count: u64 = outer.iter().map(|r| r.end - r.start).product();
        let mut runs = Vec::with_capacity(count as usize);
        let mut idx = vec![0u64; outer.len()];
        for _ in 0..count {
            let off: u64 = idx.iter().zip(&outer_stride).map(|(i, s)| i * s).sum();
            runs.push(data.start + base_bytes + off);
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                if idx[k] < outer[k].end - outer[k].start {
                    break;
                }
                idx[k] = 0;
            }
        }
        let reads = group(&runs, run_len, rule);
        Ok(RankPlan {
            shape: part,
            len: run_len * runs.len() as u64,
            run_len,
            runs,
            reads,
            rule,
        })
    }

    /// The plan for `start..stop` along dimension `dim` (every other dimension whole), as
    /// column/row-parallel layers and expert parallelism cut tensors.
    pub fn along(
        elements: Elements,
        shape: &[u64],
        data: Range<u64>,
        dim: usize,
        part: Range<u64>,
        rule: Coalesce,
    ) -> Result<RankPlan> {
        if dim >= shape.len() {
            return Err(ErrorKind::BadSlice(format!(
                "dimension {dim} of a tensor of rank {}",
                shape.len()
            ))
            .into());
        }
        let mut cut: Vec<Range<u64>> = shape[..dim].iter().map(|&d| 0..d).collect();
        cut.push(part);
        RankPlan::new(elements, shape, data, &cut, rule)
    }

    /// Bytes the reads fetch (kept bytes plus merged gaps).
    pub fn bytes_read(&self) -> u64 {
        self.reads.iter().map(Read::len).sum()
    }

    /// The most bytes the coalescing rule lets this plan read: the kept bytes plus, for each
    /// gap between neighbouring runs that is at most `max_gap`, that gap.
    pub fn bound(&self) -> u64 {
        let gaps: u64 = self
            .runs
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0] + self.run_len))
            .filter(|&g| g <= self.rule.max_gap)
            .sum();
        self.len + gaps
    }

    /// Whether the part is one contiguous span of the file (a first-dimension cut, the whole
    /// tensor): `Some(range)` then.
    pub fn span(&self) -> Option<Range<u64>> {
        match self.runs[..] {
            [one] => Some(one..one + self.run_len),
            [] => Some(0..0),
            _ => None,
        }
    }
}

/// Runs grouped into reads by `rule`.
fn group(runs: &[u64], run_len: u64, rule: Coalesce) -> Vec<Read> {
    let max_read = rule.max_read.max(1);
    let mut reads: Vec<Read> = Vec::new();
    for (k, &off) in runs.iter().enumerate() {
        if run_len > max_read {
            // A long run alone, in pieces.
            let mut pos = off;
            while pos < off + run_len {
                let end = (pos + max_read).min(off + run_len);
                reads.push(Read {
                    range: pos..end,
                    runs: k..k + 1,
                });
                pos = end;
            }
            continue;
        }
        if let Some(last) = reads.last_mut() {
            let merges = last.runs.end == k
                && runs[k - 1] + run_len == last.range.end
                && off >= last.range.end
                && off - last.range.end <= rule.max_gap
                && off + run_len - last.range.start <= max_read;
            if merges {
                last.range.end = off + run_len;
                last.runs.end = k + 1;
                continue;
            }
        }
        reads.push(Read {
            range: off..off + run_len,
            runs: k..k + 1,
        });
    }
    reads
}

#[cfg(test)]
#[path = "rank_plan_tests.rs"]
mod tests;
