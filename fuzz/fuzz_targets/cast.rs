//! Fuzzing the float casts: no panic for any bytes and dtype pair, and round-to-nearest-even
//! agrees with the `half` crate's own f32 → f16/bf16 conversions (which are exact RNE), and
//! an f64 → f16/bf16 cast agrees with rounding the exact f64 value once (checked via the
//! f32 path where the f64 → f32 step is exact).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorsmith::cast::{cast, Rounding};
use tensorsmith::dtype::DType;

const FLOATS: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let from = FLOATS[(input[0] & 3) as usize];
    let to = FLOATS[((input[0] >> 2) & 3) as usize];
    let rounding = if input[0] & 16 == 0 {
        Rounding::Nearest
    } else {
        Rounding::Truncate
    };
    let data = &input[1..];
    let Ok(out) = cast(data, from, to, rounding) else {
        assert!(
            !data.len().is_multiple_of(from.byte_size().unwrap()),
            "rejected a whole-element input"
        );
        return;
    };
    let n = data.len() / from.byte_size().unwrap();
    assert_eq!(out.len(), n * to.byte_size().unwrap());

    if from == DType::F32 && rounding == Rounding::Nearest {
        for (i, c) in data.chunks_exact(4).enumerate() {
            let x = f32::from_le_bytes(c.try_into().unwrap());
            let want = match to {
                DType::F16 => half::f16::from_f32(x).to_bits(),
                DType::BF16 => half::bf16::from_f32(x).to_bits(),
                _ => continue,
            };
            let got = u16::from_le_bytes([out[2 * i], out[2 * i + 1]]);
            let both_nan = x.is_nan() && is_nan16(to, got) && is_nan16(to, want);
            assert!(
                got == want || both_nan,
                "{x:e}: got {got:#06x}, want {want:#06x}"
            );
        }
    }
    if from == DType::F64 && rounding == Rounding::Nearest && matches!(to, DType::F16 | DType::BF16)
    {
        for (i, c) in data.chunks_exact(8).enumerate() {
            let x = f64::from_le_bytes(c.try_into().unwrap());
            // Where f64 → f32 is exact, the single rounding must equal half's f32 rounding.
            if x.is_nan() || (x as f32) as f64 != x {
                continue;
            }
            let want = match to {
                DType::F16 => half::f16::from_f32(x as f32).to_bits(),
                _ => half::bf16::from_f32(x as f32).to_bits(),
            };
            let got = u16::from_le_bytes([out[2 * i], out[2 * i + 1]]);
            assert_eq!(got, want, "{x:e}");
        }
    }
});

fn is_nan16(dtype: DType, bits: u16) -> bool {
    match dtype {
        DType::F16 => half::f16::from_bits(bits).is_nan(),
        _ => half::bf16::from_bits(bits).is_nan(),
    }
}
