//! The ggml tensor types a GGUF file can name: id, name, and block geometry (elements per
//! block, bytes per block), as in the `gguf` package's `GGML_QUANT_SIZES` (0.19.0). The
//! plain types map to a [`DType`]; the block-quantized ones have no element dtype, and their
//! byte lengths come from the block table, never from an element size.
//!
//! This is the one place that spells ggml type names.

use crate::dtype::DType;
use std::fmt;

/// A ggml tensor type, by row of the type table (`TABLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgmlType(u8);

struct Row {
    id: u32,
    name: &'static str,
    block_elements: u32,
    block_bytes: u32,
    dtype: Option<DType>,
    block: Option<Block>,
}

/// The block encoding of a block-quantized type: what a dequantizer matches on (so no other
/// module spells a ggml name). One variant per block-quantized row of the type table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(non_camel_case_types)]
pub enum Block {
    /// ggml's 4-bit quant with one f16 scale: 32 values in 18-byte blocks.
    Q4_0,
    /// ggml's 4-bit quant with an f16 scale and minimum: 32 values in 20-byte blocks.
    Q4_1,
    /// ggml's 5-bit quant with one f16 scale: 32 values in 22-byte blocks.
    Q5_0,
    /// ggml's 5-bit quant with an f16 scale and minimum: 32 values in 24-byte blocks.
    Q5_1,
    /// ggml's 8-bit quant with one f16 scale: 32 values in 34-byte blocks.
    Q8_0,
    /// ggml's 8-bit quant with a scale and a block sum (a dot-product intermediate): 32 values in
    /// 40-byte blocks; not dequantized here.
    Q8_1,
    /// ggml's 2-bit K-quant: 256 values in 84-byte super-blocks.
    Q2_K,
    /// ggml's 3-bit K-quant: 256 values in 110-byte super-blocks.
    Q3_K,
    /// ggml's 4-bit K-quant: 256 values in 144-byte super-blocks.
    Q4_K,
    /// ggml's 5-bit K-quant: 256 values in 176-byte super-blocks.
    Q5_K,
    /// ggml's 6-bit K-quant: 256 values in 210-byte super-blocks.
    Q6_K,
    /// ggml's 8-bit K-quant (a dot-product intermediate): 256 values in 292-byte super-blocks;
    /// not dequantized here.
    Q8_K,
    /// ggml's 2.06-bit i-quant (lattice codebook): 256 values in 66-byte super-blocks.
    IQ2_XXS,
    /// ggml's 2.31-bit i-quant (lattice codebook): 256 values in 74-byte super-blocks.
    IQ2_XS,
    /// ggml's 3.06-bit i-quant (lattice codebook): 256 values in 98-byte super-blocks.
    IQ3_XXS,
    /// ggml's 1.56-bit i-quant: 256 values in 50-byte super-blocks.
    IQ1_S,
    /// ggml's 4-bit non-linear quant (a fixed 16-value codebook): 32 values in 18-byte blocks.
    IQ4_NL,
    /// ggml's 3.44-bit i-quant (lattice codebook): 256 values in 110-byte super-blocks.
    IQ3_S,
    /// ggml's 2.56-bit i-quant (lattice codebook): 256 values in 82-byte super-blocks.
    IQ2_S,
    /// ggml's 4.25-bit non-linear quant: 256 values in 136-byte super-blocks.
    IQ4_XS,
    /// ggml's 1.75-bit i-quant: 256 values in 56-byte super-blocks.
    IQ1_M,
    /// ggml's ternary quant, trits packed in base 3: 256 values in 54-byte blocks.
    TQ1_0,
    /// ggml's ternary quant, trits stored in 2 bits: 256 values in 66-byte blocks.
    TQ2_0,
    /// OCP microscaling FP4: 32 E2M1 values sharing one E8M0 scale, in 17-byte blocks.
    MXFP4,
    /// NVIDIA FP4: 64 E2M1 values with four UE4M3 scales (one per 16), in 36-byte blocks.
    NVFP4,
    /// ggml's 1-bit quant: 128 values in 18-byte blocks; not dequantized here.
    Q1_0,
}

const fn row(
    id: u32,
    name: &'static str,
    block_elements: u32,
    block_bytes: u32,
    block: Block,
) -> Row {
    Row {
        id,
        name,
        block_elements,
        block_bytes,
        dtype: None,
        block: Some(block),
    }
}

const fn plain(id: u32, name: &'static str, bytes: u32, dtype: DType) -> Row {
    Row {
        id,
        name,
        block_elements: 1,
        block_bytes: bytes,
        dtype: Some(dtype),
        block: None,
    }
}

/// Ids 4, 5 (old Q4_2/Q4_3) and 31-33, 36-38 (repacked variants) were removed from ggml and
/// are unknown here, as they are to the reference reader.
const TABLE: &[Row] = &[
    plain(0, "f32", 4, DType::F32),
    plain(1, "f16", 2, DType::F16),
    row(2, "q4_0", 32, 18, Block::Q4_0),
    row(3, "q4_1", 32, 20, Block::Q4_1),
    row(6, "q5_0", 32, 22, Block::Q5_0),
    row(7, "q5_1", 32, 24, Block::Q5_1),
    row(8, "q8_0", 32, 34, Block::Q8_0),
    row(9, "q8_1", 32, 40, Block::Q8_1),
    row(10, "q2_k", 256, 84, Block::Q2_K),
    row(11, "q3_k", 256, 110, Block::Q3_K),
    row(12, "q4_k", 256, 144, Block::Q4_K),
    row(13, "q5_k", 256, 176, Block::Q5_K),
    row(14, "q6_k", 256, 210, Block::Q6_K),
    row(15, "q8_k", 256, 292, Block::Q8_K),
    row(16, "iq2_xxs", 256, 66, Block::IQ2_XXS),
    row(17, "iq2_xs", 256, 74, Block::IQ2_XS),
    row(18, "iq3_xxs", 256, 98, Block::IQ3_XXS),
    row(19, "iq1_s", 256, 50, Block::IQ1_S),
    row(20, "iq4_nl", 32, 18, Block::IQ4_NL),
    row(21, "iq3_s", 256, 110, Block::IQ3_S),
    row(22, "iq2_s", 256, 82, Block::IQ2_S),
    row(23, "iq4_xs", 256, 136, Block::IQ4_XS),
    plain(24, "i8", 1, DType::I8),
    plain(25, "i16", 2, DType::I16),
    plain(26, "i32", 4, DType::I32),
    plain(27, "i64", 8, DType::I64),
    plain(28, "f64", 8, DType::F64),
    row(29, "iq1_m", 256, 56, Block::IQ1_M),
    plain(30, "bf16", 2, DType::BF16),
    row(34, "tq1_0", 256, 54, Block::TQ1_0),
    row(35, "tq2_0", 256, 66, Block::TQ2_0),
    row(39, "mxfp4", 32, 17, Block::MXFP4),
    row(40, "nvfp4", 64, 36, Block::NVFP4),
    row(41, "q1_0", 128, 18, Block::Q1_0),
];

impl GgmlType {
    fn row(self) -> &'static Row {
        &TABLE[self.0 as usize]
    }

    /// The type with this id, if ggml (as of gguf 0.19.0) has it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TABLE
            .iter()
            .position(|r| r.id == id)
            .map(|i| GgmlType(i as u8))
    }

    /// The type whose plain element dtype is `dtype` (f32, f16, bf16, f64, i8..i64).
    pub fn from_dtype(dtype: DType) -> Option<GgmlType> {
        TABLE
            .iter()
            .position(|r| r.dtype == Some(dtype))
            .map(|i| GgmlType(i as u8))
    }

    /// The type of this lower-case ggml name (`q4_0`, `f16`, …).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        TABLE
            .iter()
            .position(|r| r.name == name)
            .map(|i| GgmlType(i as u8))
    }

    /// The numeric id a GGUF tensor-info record stores for this type (`0` for f32, `2` for
    /// q4_0, ...).
    pub fn id(self) -> u32 {
        self.row().id
    }

    /// Lower-case ggml name: `f32`, `q4_0`, `q6_k`, `bf16`.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// Elements per block: 1 for plain types, 32 to 256 for block-quantized ones.
    pub fn block_elements(self) -> u32 {
        self.row().block_elements
    }

    /// Bytes per block (for a plain type, the element size).
    pub fn block_bytes(self) -> u32 {
        self.row().block_bytes
    }

    /// The element dtype of a plain (not block-quantized) type.
    pub fn dtype(self) -> Option<DType> {
        self.row().dtype
    }

    /// The block encoding of a block-quantized type (`None` for plain types).
    pub fn block(self) -> Option<Block> {
        self.row().block
    }

    /// Whether this is a block-quantized type, with no element dtype.
    pub fn is_quantized(self) -> bool {
        self.row().dtype.is_none()
    }

    /// Bytes taken by `elements` elements, or `None` when they are not a whole number of
    /// blocks or the size overflows.
    pub fn byte_len(self, elements: u64) -> Option<u64> {
        let r = self.row();
        if elements % r.block_elements as u64 != 0 {
            return None;
        }
        (elements / r.block_elements as u64).checked_mul(r.block_bytes as u64)
    }

    /// Bits per weight: block bytes × 8 / block elements.
    pub fn bits_per_weight(self) -> f64 {
        let r = self.row();
        r.block_bytes as f64 * 8.0 / r.block_elements as f64
    }

    /// Every known type, in table order (by ascending id).
    pub fn all() -> impl Iterator<Item = GgmlType> {
        (0..TABLE.len()).map(|i| GgmlType(i as u8))
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_unique_and_round_trip() {
        for t in GgmlType::all() {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
            assert!(t.block_bytes() > 0 && t.block_elements() > 0);
        }
        assert_eq!(GgmlType::from_id(4), None);
        assert_eq!(GgmlType::from_id(31), None);
    }

    #[test]
    fn byte_lengths_come_from_blocks() {
        let q4_0 = GgmlType::from_name("q4_0").unwrap();
        assert_eq!(q4_0.byte_len(64), Some(36));
        assert_eq!(q4_0.byte_len(33), None);
        let q6_k = GgmlType::from_name("q6_k").unwrap();
        assert_eq!(q6_k.byte_len(256 * 4096), Some(210 * 4096));
        assert_eq!(q6_k.bits_per_weight(), 6.5625);
        let f16 = GgmlType::from_dtype(DType::F16).unwrap();
        assert_eq!((f16.id(), f16.byte_len(3)), (1, Some(6)));
        assert_eq!(GgmlType::from_name("f32").unwrap().byte_len(u64::MAX), None);
    }
}
