//! Fuzzing the ggml block dequantizers: for any type id and any bytes, no panic; whole
//! blocks of a decodable type give exactly their values, bit for bit equal to the
//! one-value-at-a-time reference (`ggml_quant::reference`); anything else is an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorsmith::ggml_quant::{can_dequantize, dequantize, reference};
use tensorsmith::ggml_type::GgmlType;

fuzz_target!(|input: &[u8]| {
    let Some((&sel, data)) = input.split_first() else {
        return;
    };
    let types: Vec<GgmlType> = GgmlType::all().collect();
    let ty = types[sel as usize % types.len()];
    let bb = ty.block_bytes() as usize;
    let result = dequantize(ty, data);
    if !can_dequantize(ty) || data.len() % bb != 0 {
        assert!(result.is_err(), "{ty}: {} bytes accepted", data.len());
        return;
    }
    let values = result.expect("whole blocks of a decodable type");
    let be = ty.block_elements() as usize;
    assert_eq!(values.len(), data.len() / bb * be);
    for (bi, block) in data.chunks_exact(bb).enumerate() {
        for i in 0..be {
            let want = reference::value(ty, block, i).expect("decodable");
            let got = values[bi * be + i];
            assert_eq!(got.to_bits(), want.to_bits(), "{ty} block {bi} value {i}");
        }
    }
});
