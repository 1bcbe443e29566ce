//! Pinned values computed by `gguf.quants.dequantize` (gguf 0.19.0, NumPy 2.4) for one block
//! per type built from a fixed byte pattern (`pattern` below): five element bit patterns and a
//! fold of every output bit pattern. The interop suite (`tests/python/test_gguf_dequant.py`)
//! checks random blocks against the live reference; these keep the kernels honest offline.

use crate::ggml_quant::*;

/// Byte `i` of the block of the type at `t` in the list: `(i * 37 + 11 * t + 5) & 255`.
fn pattern(t: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 37 + 11 * t + 5) & 255) as u8)
        .collect()
}

fn fold(values: &[f32]) -> u64 {
    values.iter().fold(0u64, |h, v| {
        h.wrapping_mul(31).wrapping_add(v.to_bits() as u64)
    })
}

type Pin = (&'static str, usize, [(usize, u32); 5], u64);

#[rustfmt::skip]
const PINS: &[Pin] = &[
    ("q4_0", 0, [(0, 0x3ea88c00), (1, 0xbe40a000), (10, 0xbea88c00), (16, 0xbe40a000), (31, 0xbd40a000)], 0x04f9d27e938e6000),  // [0.329193115234375, -0.1881103515625, -0.329193115234375, -0.1881103515625, -0.047027587890625]
    ("q4_1", 1, [(0, 0x7feb4000), (1, 0x7feb4000), (10, 0x7feb4000), (16, 0x7feb4000), (31, 0x7feb4000)], 0x0d5f9d28a6800000),  // [nan, nan, nan, nan, nan]
    ("q5_0", 2, [(0, 0x4193cc00), (1, 0xc0836000), (10, 0xc1243800), (16, 0x41f65400), (31, 0x40836000)], 0x75b99b70aeac5800),  // [18.474609375, -4.10546875, -10.263671875, 30.791015625, 4.10546875]
    ("q5_1", 3, [(0, 0x434827a9), (1, 0x4387d1d4), (10, 0x4364bfa9), (16, 0x4264bea4), (31, 0x42c82752)], 0x0dc28b77a1781605),  // [200.15492248535156, 271.6392822265625, 228.74867248535156, 57.18617248535156, 100.07679748535156]
    ("q8_0", 4, [(0, 0x463e62c0), (1, 0xc6149800), (10, 0xc4eb4600), (16, 0xc5a41280), (31, 0xc477a800)], 0xac9b2671d5526740),  // [12184.6875, -9510.0, -1882.1875, -5250.3125, -990.625]
    ("q2_k", 5, [(0, 0xc02a1000), (1, 0xc80b20aa), (85, 0xc767ed49), (128, 0xc0aa1000), (255, 0xc8225154)], 0x01e7aeb075e66c5a),  // [-2.6572265625, -142466.65625, -59373.28515625, -5.314453125, -166213.3125]
    ("q3_k", 6, [(0, 0x3c289780), (1, 0xbc60ca00), (85, 0x3b1c6000), (128, 0x3b929a00), (255, 0x00000000)], 0x2433609139628080),  // [0.010290026664733887, -0.013720035552978516, 0.0023860931396484375, 0.00447392463684082, 0.0]
    ("q4_k", 7, [(0, 0x4a0b188b), (1, 0x4af367c5), (85, 0x4b71920b), (128, 0x4a62eeb4), (255, 0x4b4705fa)], 0xc3b23350e926dfe0),  // [2278946.75, 7975906.5, 15831563.0, 3718061.0, 13043194.0]
    ("q5_k", 8, [(0, 0x42b9fdc4), (1, 0x42ba1631), (85, 0x438b8c02), (128, 0x4419854a), (255, 0x448243b9)], 0x523c2d3c3b2d2273),  // [92.99563598632812, 93.04334259033203, 279.09381103515625, 614.0826416015625, 1042.1163330078125]
    ("q6_k", 9, [(0, 0x40a41000), (1, 0x3f241000), (85, 0x4073b380), (128, 0x41241000), (255, 0x410dd880)], 0x52dcdbe5aefe23a0),  // [5.126953125, 0.640869140625, 3.807830810546875, 10.25390625, 8.8653564453125]
    ("iq1_s", 10, [(0, 0x398e6000), (1, 0xbaf92800), (85, 0xbbf04200), (128, 0xbc1bb900), (255, 0x398e6000)], 0x383d75e777a01680),  // [0.0002715587615966797, -0.0019009113311767578, -0.0073320865631103516, -0.009504556655883789, 0.0002715587615966797]
    ("iq1_m", 11, [(0, 0xc8484b40), (1, 0xc6b20a00), (85, 0x48671bc0), (128, 0x4608f400), (255, 0x44db2000)], 0xfd9cc9c08a499600),  // [-205101.0, -22789.0, 236655.0, 8765.0, 1753.0]
    ("iq2_xxs", 12, [(0, 0x416d1a88), (1, 0x40307300), (85, 0xbf02b400), (128, 0x40992af0), (255, 0x403d8500)], 0x90b4fd06e3e0071c),  // [14.818977355957031, 2.75701904296875, -0.51055908203125, 4.786491394042969, 2.96124267578125]
    ("iq2_xs", 13, [(0, 0x41a1c400), (1, 0xc1a1c400), (85, 0x4242e2c0), (128, 0x4195e980), (255, 0x4195e980)], 0x822b4cf5bcdae280),  // [20.220703125, -20.220703125, 48.721435546875, 18.739013671875, 18.739013671875]
    ("iq2_s", 14, [(0, 0x415dd000), (1, 0xc22d4a80), (85, 0x42af9a00), (128, 0x43889c70), (255, 0xc24b5400)], 0xd21c2cce17913aa0),  // [13.86328125, -43.32275390625, 87.80078125, 273.22216796875, -50.83203125]
    ("iq3_xxs", 15, [(0, 0xc5dd4cc0), (1, 0xc5b51040), (85, 0xc43f9a00), (128, 0xc46d9600), (255, 0x4420f200)], 0x9d9e4f27ddcd5130),  // [-7081.59375, -5794.03125, -766.40625, -950.34375, 643.78125]
    ("iq3_s", 16, [(0, 0x45493600), (1, 0x45493600), (85, 0xc67b8380), (128, 0x45493600), (255, 0x45493600)], 0x21dee44e0bc66240),  // [3219.375, 3219.375, -16096.875, 3219.375, 3219.375]
    ("iq4_nl", 17, [(0, 0xc70fc000), (1, 0xc8227000), (10, 0xc7986000), (16, 0x48369000), (31, 0x47bae000)], 0x3af51659c5f4c000),  // [-36800.0, -166336.0, -78016.0, 186944.0, 95680.0]
    ("iq4_xs", 18, [(0, 0xc91bc580), (1, 0x46196000), (85, 0xcab02440), (128, 0x4aaf3e30), (255, 0xcb12c8e0)], 0x49da1b691bf3505c),  // [-638040.0, 9816.0, -5771808.0, 5742360.0, -9619680.0]
    ("tq1_0", 19, [(0, 0x7feb4000), (1, 0x7feb4000), (85, 0x7feb4000), (128, 0x7feb4000), (255, 0x7feb4000)], 0xa7f8e2ed34000000),  // [nan, nan, nan, nan, nan]
    ("tq2_0", 20, [(0, 0x00000000), (1, 0x40c42000), (85, 0x40c42000), (128, 0x00000000), (255, 0x41442000)], 0x0b6232ed0ae1e000),  // [0.0, 6.12890625, 6.12890625, 0.0, 12.2578125]
    ("mxfp4", 21, [(0, 0x75800000), (1, 0x77000000), (10, 0x76400000), (16, 0x75800000), (31, 0x76400000)], 0xd83a25e434800000),  // [3.2451855365842673e+32, 2.596148429267414e+33, 9.735556609752802e+32, 3.2451855365842673e+32, 9.735556609752802e+32]
    ("nvfp4", 22, [(0, 0xc3b40000), (1, 0x00000000), (21, 0xbe400000), (32, 0xc0580000), (63, 0x00000000)], 0x0f0132922c700000),  // [-360.0, 0.0, -0.1875, -3.375, 0.0]

];

#[test]
fn every_type_matches_values_pinned_from_gguf_py() {
    assert_eq!(PINS.len(), 23);
    for &(name, t, points, want_fold) in PINS {
        let ty = GgmlType::from_name(name).unwrap();
        let block = pattern(t, ty.block_bytes() as usize);
        let v = dequantize(ty, &block).unwrap();
        assert_eq!(v.len(), ty.block_elements() as usize, "{name}");
        for (i, bits) in points {
            assert_eq!(v[i].to_bits(), bits, "{name}[{i}] = {}", v[i]);
        }
        assert_eq!(fold(&v), want_fold, "{name}: fold of all bits");
    }
}

fn f16_bytes(x: f32) -> [u8; 2] {
    half::f16::from_f32(x).to_bits().to_le_bytes()
}

#[test]
fn hand_checked_legacy_blocks() {
    // Q4_0, d = 0.5: low nibbles 8 (value 0) then high nibbles 11 (value 3 → 1.5).
    let mut b = f16_bytes(0.5).to_vec();
    b.extend([0xB8u8; 16]);
    let v = dequantize(GgmlType::from_name("q4_0").unwrap(), &b).unwrap();
    assert_eq!(&v[..16], &[0.0; 16]);
    assert_eq!(&v[16..], &[1.5; 16]);
    // Q8_0, d = 2: values are 2 * int8.
    let mut b = f16_bytes(2.0).to_vec();
    b.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let v = dequantize(GgmlType::from_name("q8_0").unwrap(), &b).unwrap();
    assert_eq!(
        v,
        (0..32).map(|i| 2.0 * (i - 16) as f32).collect::<Vec<_>>()
    );
    // Q4_1, d = 1, m = -8: nibble q gives q - 8.
    let mut b = f16_bytes(1.0).to_vec();
    b.extend(f16_bytes(-8.0));
    b.extend([0x5Au8; 16]);
    let v = dequantize(GgmlType::from_name("q4_1").unwrap(), &b).unwrap();
    assert_eq!((v[0], v[31]), (2.0, -3.0));
}

#[test]
fn hand_checked_k_and_ternary_blocks() {
    // Q6_K, d = 1, every scale 1, ql = 0, qh = 0: every value is 0 - 32.
    let mut b = vec![0u8; 192];
    b.extend([1u8; 16]);
    b.extend(f16_bytes(1.0));
    let v = dequantize(GgmlType::from_name("q6_k").unwrap(), &b).unwrap();
    assert!(v.iter().all(|&x| x == -32.0));
    // TQ2_0, d = 3: 2-bit trits 0b01 (value 0) then 0b10 (value 1) alternating per shift.
    let mut b = vec![0b1001_1001u8; 64];
    b.extend(f16_bytes(3.0));
    let v = dequantize(GgmlType::from_name("tq2_0").unwrap(), &b).unwrap();
    assert_eq!((v[0], v[32], v[64], v[96]), (0.0, 3.0, 0.0, 3.0));
    // MXFP4, e = 127: 2^0 halved (the values are doubled): nibble 7 is 12 → 6.
    let mut b = vec![127u8];
    b.extend([0x77u8; 16]);
    let v = dequantize(GgmlType::from_name("mxfp4").unwrap(), &b).unwrap();
    assert!(v.iter().all(|&x| x == 6.0), "{v:?}");
}

#[test]
fn types_the_reference_cannot_dequantize_are_refused_by_name() {
    for name in ["q8_1", "q8_k", "q1_0", "f16"] {
        let ty = GgmlType::from_name(name).unwrap();
        let e = dequantize(ty, &vec![0u8; ty.block_bytes() as usize]).unwrap_err();
        assert!(
            e.to_string().contains(&format!("cannot dequantize {name}")),
            "{e}"
        );
        assert!(!can_dequantize(ty));
    }
}

#[test]
fn partial_blocks_and_wrong_output_lengths_are_errors() {
    let q4_0 = GgmlType::from_name("q4_0").unwrap();
    let e = dequantize(q4_0, &[0u8; 19]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BlockBytes { .. }), "{e}");
    let mut out = vec![0f32; 31];
    assert!(dequantize_into(q4_0, &[0u8; 18], &mut out).is_err());
    assert!(dequantize(q4_0, &[]).unwrap().is_empty());
}

#[test]
fn the_parallel_path_gives_the_serial_values() {
    for ty in GgmlType::all().filter(|&t| can_dequantize(t)) {
        let n = TASK_BLOCKS * 2 + 3;
        let bytes = pattern(7, n * ty.block_bytes() as usize);
        let par = dequantize(ty, &bytes).unwrap();
        let mut serial = vec![0f32; par.len()];
        kernel(ty).unwrap()(&bytes, &mut serial);
        let same = par
            .iter()
            .zip(&serial)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{ty}");
    }
}

#[test]
fn kernels_agree_with_the_one_value_reference_on_pseudo_random_blocks() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for ty in GgmlType::all().filter(|&t| can_dequantize(t)) {
        let bb = ty.block_bytes() as usize;
        let bytes: Vec<u8> = (0..bb * 64)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let v = dequantize(ty, &bytes).unwrap();
        let be = ty.block_elements() as usize;
        for (bi, block) in bytes.chunks_exact(bb).enumerate() {
            for i in 0..be {
                let want = reference::value(ty, block, i).unwrap();
                let got = v[bi * be + i];
                assert_eq!(got.to_bits(), want.to_bits(), "{ty} block {bi} value {i}");
            }
        }
    }
}

#[test]
fn a_nan_scale_keeps_its_sign_through_negative_signs() {
    // IQ2_XS, d = +qNaN, every grid index 511 with sign index 127 (all eight signs negative):
    // NumPy multiplies by -1.0 and keeps the NaN as it is (0x7FC00000), no sign flip.
    let mut b = vec![0x00u8, 0x7E];
    b.extend([0xFFu8; 64]);
    b.extend([0x00u8; 8]);
    let v = dequantize(GgmlType::from_name("iq2_xs").unwrap(), &b).unwrap();
    assert!(
        v.iter().all(|x| x.to_bits() == 0x7FC0_0000),
        "{:#x}",
        v[0].to_bits()
    );
    // Q4_1, d and m both NaN: the first operand's NaN (d's), quieted, as gguf-py gives for
    // arrays of several blocks (for a single block its broadcast loop keeps m's).
    let mut b = vec![0x01u8, 0x7E, 0x02, 0xFE];
    b.extend([0x11u8; 16]);
    let v = dequantize(GgmlType::from_name("q4_1").unwrap(), &b).unwrap();
    assert!(
        v.iter().all(|x| x.to_bits() == 0x7FC0_2000),
        "{:#x}",
        v[0].to_bits()
    );
}
