//! A [`RankPlan`]'s reads through any [`ReadAt`] into a destination buffer in the part's own
//! (contiguous, row-major) layout: a read of one run lands in the destination directly; a
//! read of several runs goes through one scratch buffer per worker (at most the plan's
//! `max_read` bytes), from which its runs are copied out. Reads run on up to `concurrency`
//! scoped threads, each taking the next read; their destination bytes are disjoint, handed
//! out in order, so no lock guards the buffer.

use crate::bytes::ReadAt;
use crate::error::{Error, ErrorKind, Result};
use crate::rank_plan::{RankPlan, Read};
use std::sync::Mutex;

/// Reads `plan` from `src` into `out` (exactly `plan.len` bytes) with up to `concurrency`
/// reads at once (1: on the calling thread). The first failure is returned; the other
/// workers stop taking reads.
pub fn read_plan(
    src: &dyn ReadAt,
    plan: &RankPlan,
    out: &mut [u8],
    concurrency: usize,
) -> Result<()> {
    read_plans(
        vec![PartRead {
            src,
            plan,
            out,
            at: &|e| e,
        }],
        concurrency,
    )
}

/// One part of [`read_plans`]: its plan, the source it is read from, its destination
/// (exactly `plan.len` bytes) and what names its errors (the file, say).
pub struct PartRead<'a> {
    /// Where the part's bytes are read from.
    pub src: &'a dyn ReadAt,
    /// The part's reads.
    pub plan: &'a RankPlan,
    /// The part's bytes, in its own layout.
    pub out: &'a mut [u8],
    /// Applied to an error of this part's reads.
    pub at: &'a (dyn Fn(Error) -> Error + Sync),
}

/// Reads every part's plan into its destination, the reads of all parts in one queue taken
/// by up to `concurrency` workers (1: on the calling thread), so that many small parts keep
/// as many reads in flight as one large part does. The first failure is returned; the
/// other workers stop taking reads.
pub fn read_plans(parts: Vec<PartRead<'_>>, concurrency: usize) -> Result<()> {
    // Each read with its part and destination bytes, in order.
    let mut jobs = Vec::new();
    for part in parts {
        let PartRead { src, plan, out, at } = part;
        if out.len() as u64 != plan.len {
            return Err(at(ErrorKind::Unsupported(format!(
                "a destination of {} bytes for a part of {} bytes",
                out.len(),
                plan.len
            ))
            .into()));
        }
        let mut rest = out;
        for r in &plan.reads {
            let n = if r.is_direct() {
                r.range.end - r.range.start
            } else {
                r.runs.len() as u64 * plan.run_len
            };
            let (here, tail) = std::mem::take(&mut rest).split_at_mut(n as usize);
            jobs.push(Job {
                src,
                plan,
                read: r,
                dst: here,
                at,
            });
            rest = tail;
        }
    }
    let workers = concurrency.clamp(1, jobs.len().max(1));
    if workers == 1 {
        let mut scratch = Vec::new();
        for job in jobs {
            job.run(&mut scratch)?;
        }
        return Ok(());
    }
    let queue = Mutex::new(jobs.into_iter());
    let failed = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let mut scratch = Vec::new();
                loop {
                    if failed.lock().map_or(true, |f| f.is_some()) {
                        return;
                    }
                    let next = queue.lock().ok().and_then(|mut q| q.next());
                    let Some(job) = next else { return };
                    if let Err(e) = job.run(&mut scratch) {
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert(e);
                        }
                        return;
                    }
                }
            });
        }
    });
    match failed.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(()),
    }
}

/// One read of one part, with its destination bytes.
struct Job<'a> {
    src: &'a dyn ReadAt,
    plan: &'a RankPlan,
    read: &'a Read,
    dst: &'a mut [u8],
    at: &'a (dyn Fn(Error) -> Error + Sync),
}

impl Job<'_> {
    fn run(self, scratch: &mut Vec<u8>) -> Result<()> {
        one(self.src, self.plan, self.read, self.dst, scratch).map_err(self.at)
    }
}

/// One read into its destination bytes.
fn one(
    src: &dyn ReadAt,
    plan: &RankPlan,
    r: &Read,
    dst: &mut [u8],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    if r.is_direct() {
        return src.read_exact_at(r.range.start, dst);
    }
    let n = (r.range.end - r.range.start) as usize;
    scratch.resize(n, 0);
    src.read_exact_at(r.range.start, &mut scratch[..n])?;
    let run = plan.run_len as usize;
    for (k, out) in r.runs.clone().zip(dst.chunks_exact_mut(run)) {
        let at = (plan.runs[k] - r.range.start) as usize;
        out.copy_from_slice(&scratch[at..at + run]);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // one-range cuts: rows, not ranges of values
mod tests {
    use super::*;
    use crate::bytes::{Counted, ReadCounter};
    use crate::dtype::DType;
    use crate::rank_plan::{Coalesce, Elements};

    fn file(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// `[rows, cols]` F32 values, cut `cut`, by plain indexing.
    fn expected(
        src: &[u8],
        at: usize,
        cols: usize,
        rows: std::ops::Range<usize>,
        c: std::ops::Range<usize>,
    ) -> Vec<u8> {
        let mut v = Vec::new();
        for r in rows {
            let o = at + (r * cols + c.start) * 4;
            v.extend_from_slice(&src[o..o + c.len() * 4]);
        }
        v
    }

    #[test]
    fn gathers_every_rule_and_concurrency_into_the_part_layout() {
        let (rows, cols, at) = (300usize, 700usize, 77usize);
        let src = file(at + rows * cols * 4 + 100);
        let data = at as u64..(at + rows * cols * 4) as u64;
        let el = Elements::of_dtype(DType::F32);
        let small = Coalesce {
            max_gap: 2048,
            max_read: 10_000,
        };
        for rule in [Coalesce::LOCAL, Coalesce::REMOTE, Coalesce::EXACT, small] {
            for (cut, r, c) in [
                (vec![0..300, 100..450], 0..300, 100..450),
                (vec![0..300, 0..1], 0..300, 0..1),
                (vec![17..260], 17..260, 0..700),
                (vec![5..6, 699..700], 5..6, 699..700),
            ] {
                let plan = RankPlan::new(el, &[300, 700], data.clone(), &cut, rule).unwrap();
                for conc in [1, 3, 8] {
                    let counter = ReadCounter::default();
                    let bytes: &[u8] = &src;
                    let counted = Counted::new(&bytes, &counter);
                    let mut out = vec![0u8; plan.len as usize];
                    read_plan(&counted, &plan, &mut out, conc).unwrap();
                    assert_eq!(
                        out,
                        expected(&src, at, cols, r.clone(), c.clone()),
                        "{cut:?} {rule:?}"
                    );
                    assert_eq!(counter.bytes(), plan.bytes_read());
                    assert_eq!(counter.reads(), plan.reads.len() as u64);
                    assert!(counter.bytes() <= plan.bound());
                }
            }
        }
    }

    #[test]
    fn parts_of_several_sources_share_one_queue_and_name_their_errors() {
        let (a, b) = (file(5000), file(9000));
        let el = Elements::of_dtype(DType::U8);
        let p1 = RankPlan::new(el, &[50, 100], 0..5000, &[0..50, 10..60], Coalesce::EXACT).unwrap();
        let p2 = RankPlan::new(el, &[9000], 0..9000, &[100..8100], Coalesce::EXACT).unwrap();
        let (ca, cb) = (ReadCounter::default(), ReadCounter::default());
        let (sa, sb): (&[u8], &[u8]) = (&a, &b);
        let (ra, rb) = (Counted::new(&sa, &ca), Counted::new(&sb, &cb));
        let named = |e: Error| Error::new(ErrorKind::Http(format!("in b: {e}")));
        for conc in [1, 4, 16] {
            let (mut o1, mut o2) = (vec![0u8; p1.len as usize], vec![0u8; p2.len as usize]);
            read_plans(
                vec![
                    PartRead {
                        src: &ra,
                        plan: &p1,
                        out: &mut o1,
                        at: &|e| e,
                    },
                    PartRead {
                        src: &rb,
                        plan: &p2,
                        out: &mut o2,
                        at: &named,
                    },
                ],
                conc,
            )
            .unwrap();
            let want: Vec<u8> = (0..50)
                .flat_map(|r| a[r * 100 + 10..r * 100 + 60].to_vec())
                .collect();
            assert_eq!(o1, want);
            assert_eq!(o2, b[100..8100]);
        }
        // A part past its file's end fails, named by its own `at`.
        let past = RankPlan::new(el, &[9000], 4000..13000, &[0..9000], Coalesce::EXACT).unwrap();
        let mut o = vec![0u8; 9000];
        let mut o1 = vec![0u8; p1.len as usize];
        let e = read_plans(
            vec![
                PartRead {
                    src: &ra,
                    plan: &p1,
                    out: &mut o1,
                    at: &|e| e,
                },
                PartRead {
                    src: &rb,
                    plan: &past,
                    out: &mut o,
                    at: &named,
                },
            ],
            3,
        )
        .unwrap_err();
        assert!(e.to_string().contains("in b:"), "{e}");
    }

    #[test]
    fn a_wrong_destination_or_a_short_file_is_an_error() {
        let src = file(1000);
        let el = Elements::of_dtype(DType::U8);
        let plan =
            RankPlan::new(el, &[10, 100], 0..1000, &[0..10, 0..50], Coalesce::EXACT).unwrap();
        let mut out = vec![0u8; 10];
        assert!(read_plan(&&src[..], &plan, &mut out, 2).is_err());
        // A plan past the end of the file: every worker stops, the error comes back.
        let plan =
            RankPlan::new(el, &[10, 100], 500..1500, &[0..10, 0..50], Coalesce::EXACT).unwrap();
        let mut out = vec![0u8; plan.len as usize];
        let e = read_plan(&&src[..], &plan, &mut out, 4).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Truncated { .. }), "{e}");
    }
}
