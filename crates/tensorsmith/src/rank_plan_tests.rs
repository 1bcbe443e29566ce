// One-range cuts (`&[2..6]`: rows 2 to 6) are what these tests spell, not ranges of values.
#![allow(clippy::single_range_in_vec_init)]

use super::*;
use crate::ggml_type::GgmlType;

/// A file of `n` bytes whose byte at `i` is a hash of `i` (no two neighbours alike).
fn file(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect()
}

/// The part's bytes gathered the plan's way: each read fetched whole from `src`, its runs
/// copied out.
fn gather(plan: &RankPlan, src: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; plan.len as usize];
    let mut pos = 0usize;
    for r in &plan.reads {
        let bytes = &src[r.range.start as usize..r.range.end as usize];
        if r.is_direct() {
            out[pos..pos + bytes.len()].copy_from_slice(bytes);
            pos += bytes.len();
        } else {
            for k in r.runs.clone() {
                let at = (plan.runs[k] - r.range.start) as usize;
                out[pos..pos + plan.run_len as usize]
                    .copy_from_slice(&bytes[at..at + plan.run_len as usize]);
                pos += plan.run_len as usize;
            }
        }
    }
    assert_eq!(pos, out.len());
    out
}

/// The reference: every kept element's bits taken one at a time from a bit stream (element
/// `e` at bits `e * bits ..`, lowest bits first) and packed again in row-major order.
fn reference(bits: u64, shape: &[u64], cut: &[Range<u64>], data: &[u8]) -> Vec<u8> {
    let ranges: Vec<Range<u64>> = shape
        .iter()
        .enumerate()
        .map(|(k, &d)| cut.get(k).cloned().unwrap_or(0..d))
        .collect();
    let count: u64 = ranges.iter().map(|r| r.end - r.start).product();
    let mut out = vec![0u8; (count * bits).div_ceil(8) as usize];
    let mut idx: Vec<u64> = ranges.iter().map(|r| r.start).collect();
    for n in 0..count {
        let mut e = 0u64;
        for (k, &i) in idx.iter().enumerate() {
            e = e * shape[k] + i;
        }
        for b in 0..bits {
            let src = e * bits + b;
            let bit = (data[(src / 8) as usize] >> (src % 8)) & 1;
            let dst = n * bits + b;
            out[(dst / 8) as usize] |= bit << (dst % 8);
        }
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < ranges[k].end {
                break;
            }
            idx[k] = ranges[k].start;
        }
    }
    out
}

const AT: u64 = 1000; // where the tensor's data starts in the file

fn check(dtype: DType, shape: &[u64], cut: &[Range<u64>], rule: Coalesce) -> RankPlan {
    let el = Elements::of_dtype(dtype);
    let total: u64 = shape.iter().product();
    let stored = (total * u64::from(dtype.bits())).div_ceil(8);
    let src = file((AT + stored + 500) as usize);
    let plan = RankPlan::new(el, shape, AT..AT + stored, cut, rule).unwrap();
    let data = &src[AT as usize..(AT + stored) as usize];
    assert_eq!(
        gather(&plan, &src),
        reference(u64::from(dtype.bits()), shape, cut, data),
        "{dtype:?} {shape:?} {cut:?}"
    );
    assert!(plan.bytes_read() <= plan.bound(), "{plan:?}");
    for r in &plan.reads {
        assert!(r.range.start >= AT && r.range.end <= AT + stored);
    }
    plan
}

#[test]
fn whole_tensors_of_every_dtype_are_one_read_of_their_bytes() {
    for &dtype in &DType::ALL {
        let plan = check(dtype, &[6, 8], &[], Coalesce::LOCAL);
        let bytes = 48 * u64::from(dtype.bits()) / 8;
        assert_eq!(plan.reads.len(), 1);
        assert_eq!(plan.reads[0].range, AT..AT + bytes);
        assert_eq!((plan.len, plan.bytes_read()), (bytes, bytes));
        assert_eq!(plan.span(), Some(AT..AT + bytes));
        // A cut that narrows nothing is the whole tensor too.
        let same = check(dtype, &[6, 8], &[0..6, 0..8], Coalesce::LOCAL);
        assert_eq!(same.reads, plan.reads);
    }
    // A scalar, and an odd count of F4 values (the last byte half used) read whole.
    let plan = check(DType::F64, &[], &[], Coalesce::LOCAL);
    assert_eq!(plan.bytes_read(), 8);
    let src = file(2000);
    let plan = RankPlan::new(
        Elements::of_dtype(DType::F4),
        &[3, 5],
        AT..AT + 8,
        &[],
        Coalesce::LOCAL,
    )
    .unwrap();
    assert_eq!(plan.bytes_read(), 8);
    assert_eq!(gather(&plan, &src), &src[AT as usize..AT as usize + 8]);
}

#[test]
fn first_dimension_cuts_are_one_span_of_exactly_the_kept_bytes() {
    for &dtype in &[DType::BF16, DType::F32, DType::U8, DType::F64, DType::F4] {
        let size = u64::from(dtype.bits());
        for ranks in [2u64, 4] {
            let rows = 64u64;
            let mut total = 0;
            for r in 0..ranks {
                let part = r * rows / ranks..(r + 1) * rows / ranks;
                let plan = RankPlan::along(
                    Elements::of_dtype(dtype),
                    &[rows, 96],
                    AT..AT + rows * 96 * size / 8,
                    0,
                    part.clone(),
                    Coalesce::REMOTE,
                )
                .unwrap();
                let row = 96 * size / 8;
                assert_eq!(plan.shape, vec![rows / ranks, 96]);
                assert_eq!(
                    plan.span(),
                    Some(AT + part.start * row..AT + part.end * row)
                );
                assert_eq!(plan.bytes_read(), plan.len);
                check(dtype, &[rows, 96], &[part], Coalesce::REMOTE);
                total += plan.len;
            }
            assert_eq!(total, rows * 96 * size / 8);
        }
    }
}

#[test]
fn other_dimension_cuts_are_strided_runs_merged_by_the_gap_rule() {
    // [64, 1024] F32 cut along dimension 1 for 4 ranks: runs of 1 KiB, 3 KiB apart.
    let shape = [64u64, 1024];
    let data = AT..AT + 64 * 1024 * 4;
    let el = Elements::of_dtype(DType::F32);
    for r in 0..4u64 {
        let part = r * 256..(r + 1) * 256;
        // Gaps of 3 KiB <= 4 KiB: merged (within 8 MiB), ratio 1 + 3/1 = 4 at most.
        let local =
            RankPlan::along(el, &shape, data.clone(), 1, part.clone(), Coalesce::LOCAL).unwrap();
        assert_eq!(local.runs.len(), 64);
        assert_eq!(local.run_len, 1024);
        assert_eq!(local.reads.len(), 1);
        assert_eq!(local.bytes_read(), 64 * 1024 + 63 * 3072);
        assert_eq!(local.bound(), local.bytes_read());
        // Never merged: 64 reads of exactly the kept bytes.
        let exact =
            RankPlan::along(el, &shape, data.clone(), 1, part.clone(), Coalesce::EXACT).unwrap();
        assert_eq!(exact.reads.len(), 64);
        assert!(exact.reads.iter().all(Read::is_direct));
        assert_eq!(exact.bytes_read(), exact.len);
        assert_eq!(exact.bound(), exact.len);
        assert_eq!(exact.span(), None);
        for rule in [Coalesce::LOCAL, Coalesce::EXACT, Coalesce::REMOTE] {
            check(DType::F32, &shape, &[0..64, part.clone()], rule);
        }
    }
    // Gaps larger than max_gap are not merged: [16, 8192] BF16 in halves has 8 KiB gaps.
    let plan = RankPlan::along(
        Elements::of_dtype(DType::BF16),
        &[16, 8192],
        AT..AT + 16 * 8192 * 2,
        1,
        0..4096,
        Coalesce::LOCAL,
    )
    .unwrap();
    assert_eq!(plan.reads.len(), 16);
    assert_eq!(plan.bytes_read(), plan.len);
    // The same under the remote rule (256 KiB): one read, the kept half plus 15 gaps.
    let plan = RankPlan::along(
        Elements::of_dtype(DType::BF16),
        &[16, 8192],
        AT..AT + 16 * 8192 * 2,
        1,
        0..4096,
        Coalesce::REMOTE,
    )
    .unwrap();
    assert_eq!(plan.reads.len(), 1);
    assert_eq!(plan.bytes_read(), 16 * 8192 + 15 * 8192);
    assert!(plan.bytes_read() <= plan.len * 2);
}

#[test]
fn merged_reads_stop_at_max_read_and_long_runs_are_read_in_pieces() {
    let rule = Coalesce {
        max_gap: 1 << 20,
        max_read: 10_000,
    };
    // Runs of 1,000 bytes 1,000 apart: a read holds at most 5 runs (9,000 bytes).
    let plan = check(DType::U8, &[40, 2000], &[0..40, 0..1000], rule);
    assert_eq!(plan.reads.len(), 8);
    assert!(plan
        .reads
        .iter()
        .all(|r| r.len() <= 10_000 && r.runs.len() == 5));
    // A first-dimension part of 30,000 bytes: 3 direct pieces of at most 10,000.
    let plan = check(DType::U8, &[40, 2000], &[5..20], rule);
    assert_eq!(plan.reads.len(), 3);
    assert!(plan.reads.iter().all(Read::is_direct));
    assert_eq!(plan.bytes_read(), 30_000);
    // Runs longer than max_read, strided: each run in pieces, never merged.
    let plan = check(DType::U8, &[4, 50_000], &[0..4, 0..25_000], rule);
    assert_eq!(plan.reads.len(), 12);
    assert_eq!(plan.bytes_read(), plan.len);
}

#[test]
fn boxes_of_several_dimensions_gather_row_major() {
    for rule in [Coalesce::LOCAL, Coalesce::EXACT] {
        check(DType::F32, &[5, 6, 7], &[1..4, 2..5], rule);
        check(DType::F16, &[5, 6, 7], &[1..4, 0..6, 3..4], rule);
        check(DType::I64, &[5, 6, 7], &[4..5, 5..6, 6..7], rule);
        check(DType::U8, &[3, 4, 5, 6], &[0..3, 1..3, 0..5, 2..4], rule);
        // A middle dimension narrowed with the last whole.
        check(DType::BF16, &[8, 6, 32], &[0..8, 2..4], rule);
    }
    let plan = check(DType::F32, &[5, 6, 7], &[1..4, 2..5], Coalesce::EXACT);
    assert_eq!(plan.shape, vec![3, 3, 7]);
    assert_eq!(plan.runs.len(), 3);
    assert_eq!(plan.run_len, 3 * 7 * 4);
}

#[test]
fn packed_dtypes_are_planned_on_whole_bytes_and_refused_otherwise() {
    // F4/I4/U4: two values a byte. Even cuts of even rows are whole bytes.
    for dtype in [DType::F4, DType::I4, DType::U4] {
        check(dtype, &[8, 16], &[2..6], Coalesce::EXACT);
        check(dtype, &[8, 16], &[0..8, 4..10], Coalesce::EXACT);
        let e = RankPlan::new(
            Elements::of_dtype(dtype),
            &[8, 16],
            AT..AT + 64,
            &[0..8, 3..10],
            Coalesce::EXACT,
        )
        .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::BadSlice(_)), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(dtype.safetensors_name()), "{msg}");
        assert!(msg.contains("2 elements fill 1 byte"), "{msg}");
        assert!(msg.contains("element 3"), "{msg}");
    }
    // Odd rows of F4: a row cut of rows 1..2 starts inside a byte.
    let e = RankPlan::new(
        Elements::of_dtype(DType::F4),
        &[4, 3],
        AT..AT + 6,
        &[1..2],
        Coalesce::EXACT,
    )
    .unwrap_err();
    assert!(e.to_string().contains("element 3"), "{e}");
    // Rows 0..2 of it end on a byte (6 values), but a column cut strides by 3 values.
    check(DType::F4, &[4, 3], &[0..2], Coalesce::EXACT);
    assert!(RankPlan::new(
        Elements::of_dtype(DType::F4),
        &[4, 3],
        AT..AT + 6,
        &[0..4, 0..2],
        Coalesce::EXACT
    )
    .is_err());
    // F6: four values in three bytes; I2/U2: four values a byte.
    for dtype in [DType::F6_E2M3, DType::F6_E3M2, DType::I2, DType::U2] {
        check(dtype, &[6, 8], &[1..5], Coalesce::EXACT);
        check(dtype, &[6, 8], &[0..6, 4..8], Coalesce::LOCAL);
        let e = RankPlan::new(
            Elements::of_dtype(dtype),
            &[6, 8],
            AT..AT + 48 * u64::from(dtype.bits()) / 8,
            &[0..6, 2..8],
            Coalesce::EXACT,
        )
        .unwrap_err();
        assert!(e.to_string().contains("4 elements fill"), "{e}");
    }
    assert_eq!(
        Elements::of_dtype(DType::F6_E2M3),
        Elements {
            group: 4,
            bytes: 3,
            name: "F6_E2M3"
        }
    );
}

#[test]
fn ggml_block_tensors_cut_on_whole_blocks_only() {
    // Q4_0: 32 values in 18 bytes. A [8, 128] tensor: rows of 4 blocks (72 bytes).
    let q = GgmlType::from_name("q4_0").unwrap();
    let el = Elements::of(DType::U8, &Layout::Ggml(q)).unwrap();
    assert_eq!((el.group, el.bytes), (32, 18));
    let data = AT..AT + 8 * 72;
    let rows = RankPlan::along(el, &[8, 128], data.clone(), 0, 2..6, Coalesce::EXACT).unwrap();
    assert_eq!(rows.span(), Some(AT + 2 * 72..AT + 6 * 72));
    let cols = RankPlan::along(el, &[8, 128], data.clone(), 1, 64..128, Coalesce::EXACT).unwrap();
    assert_eq!(cols.run_len, 36);
    assert_eq!(
        cols.runs,
        (0..8).map(|r| AT + r * 72 + 36).collect::<Vec<_>>()
    );
    let e = RankPlan::along(el, &[8, 128], data, 1, 16..48, Coalesce::EXACT).unwrap_err();
    assert!(e.to_string().contains("q4_0"), "{e}");
    assert!(e.to_string().contains("32 elements fill 18 bytes"), "{e}");
}

#[test]
fn refusals_name_what_is_wrong() {
    let el = Elements::of_dtype(DType::F32);
    let bad = |cut: &[Range<u64>]| {
        RankPlan::new(el, &[4, 4], AT..AT + 64, cut, Coalesce::LOCAL)
            .unwrap_err()
            .to_string()
    };
    assert!(bad(&[0..5]).contains("out of bounds for dimension 0 of size 4"));
    #[allow(clippy::reversed_empty_ranges)] // a reversed range is what is refused here
    let reversed = [0..4, 3..2];
    assert!(bad(&reversed).contains("out of bounds"));
    assert!(bad(&[0..1, 0..1, 0..1]).contains("3 ranges for a tensor of rank 2"));
    let e = RankPlan::along(el, &[4, 4], AT..AT + 64, 2, 0..1, Coalesce::LOCAL).unwrap_err();
    assert!(
        e.to_string().contains("dimension 2 of a tensor of rank 2"),
        "{e}"
    );
    let e = RankPlan::new(el, &[4, 4], AT..AT + 60, &[], Coalesce::LOCAL).unwrap_err();
    assert!(e.to_string().contains("60 stored bytes"), "{e}");
    let e = Elements::of(DType::F32, &Layout::SparseCsr).unwrap_err();
    assert!(e.to_string().contains("sparse_csr"), "{e}");
}

#[test]
fn empty_parts_read_nothing() {
    let el = Elements::of_dtype(DType::F32);
    let plan = RankPlan::new(el, &[4, 4], AT..AT + 64, &[2..2], Coalesce::LOCAL).unwrap();
    assert_eq!(
        (plan.len, plan.reads.len(), plan.shape.clone()),
        (0, 0, vec![0, 4])
    );
    let plan = RankPlan::new(el, &[0, 4], AT..AT, &[], Coalesce::LOCAL).unwrap();
    assert_eq!((plan.len, plan.bytes_read()), (0, 0));
}
