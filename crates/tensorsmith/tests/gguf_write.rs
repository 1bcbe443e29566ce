//! GGUF writing offline: the files the reference `gguf` package wrote (tests/data/gguf)
//! converted to GGUF come back byte for byte; quantizing keeps 1-D tensors and rows that are
//! not whole blocks in their float type; `--set` keys come first for a safetensors input.
//! (`tests/python/test_gguf_write.py` checks against the live reference.)

use std::path::PathBuf;
use tensorsmith::dtype::DType;
use tensorsmith::ggml_type::GgmlType;
use tensorsmith::gguf::{GgufFile, GgufValue};
use tensorsmith::ops::convert::{convert, ConvertOptions};
use tensorsmith::{open, OpenOptions};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/gguf")
        .join(name)
}

#[test]
fn reference_files_round_trip_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "vocab_150k.gguf",
        "alignment64.gguf",
        "every_type.gguf",
        "no_tensors.gguf",
        "wi_tiny.gguf",
    ] {
        let m = open(data(name).to_str().unwrap(), &OpenOptions::new()).unwrap();
        let out = dir.path().join(name);
        convert(&m, &out, &ConvertOptions::new()).unwrap();
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(data(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn quantize_keeps_vectors_and_partial_rows_as_floats_and_set_keys_come_first() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("m.safetensors");
    let mut w = tensorsmith::safetensors::Writer::new();
    let f32s = |n: usize| -> Vec<u8> { (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect() };
    w.add("matrix", DType::F32, &[2, 64], f32s(128)).unwrap();
    w.add("vector", DType::F32, &[64], f32s(64)).unwrap();
    w.add("odd", DType::F32, &[2, 40], f32s(80)).unwrap();
    w.write_file(&st).unwrap();
    let m = open(st.to_str().unwrap(), &OpenOptions::new()).unwrap();
    let out = dir.path().join("m.gguf");
    let q8 = GgmlType::from_name("q8_0").unwrap();
    let o = ConvertOptions::new()
        .with_quantize(q8)
        .with_gguf_key("general.architecture", GgufValue::String("llama".into()))
        .with_gguf_key("general.alignment", GgufValue::U32(64));
    convert(&m, &out, &o).unwrap();
    let g = GgufFile::open(&out).unwrap();
    let h = g.header();
    assert_eq!(h.alignment, 64);
    assert_eq!(h.metadata[0].0, "general.architecture");
    let ty = |n: &str| h.tensors.iter().find(|t| t.name == n).unwrap().ggml_type;
    let f32 = GgmlType::from_dtype(DType::F32).unwrap();
    assert_eq!((ty("matrix"), ty("vector"), ty("odd")), (q8, f32, f32));
    let matrix = h.tensors.iter().find(|t| t.name == "matrix").unwrap();
    assert_eq!(matrix.ne.as_slice(), &[64, 2]);
    assert_eq!(h.data_start % 64, 0);
}

#[test]
fn gguf_only_options_are_refused_for_other_outputs_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(data("wi_tiny.gguf").to_str().unwrap(), &OpenOptions::new()).unwrap();
    let out = dir.path().join("x.safetensors");
    let o = ConvertOptions::new().with_quantize(GgmlType::from_name("q4_0").unwrap());
    let e = convert(&m, &out, &o).unwrap_err().to_string();
    assert!(e.contains(".gguf"), "{e}");
    assert!(!out.exists());
    let out = dir.path().join("x.gguf");
    let o = ConvertOptions::new().with_gguf_key("general.alignment", GgufValue::U32(3));
    let e = convert(&m, &out, &o).unwrap_err().to_string();
    assert!(e.contains("x.gguf") && e.contains("alignment"), "{e}");
    assert!(!out.exists());
}

#[test]
fn quantize_to_k_types_takes_rows_of_whole_super_blocks_and_gives_ggmls_blocks() {
    // Q4_K and IQ4_XS need rows of 256 values (IQ4_NL 32); other float tensors stay F32.
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("m.safetensors");
    let mut w = tensorsmith::safetensors::Writer::new();
    let vals = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919) % 613) as f32 / 97.0 - 3.1)
            .collect()
    };
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    w.add("matrix", DType::F32, &[3, 512], bytes(&vals(1536)))
        .unwrap();
    w.add("narrow", DType::F32, &[4, 64], bytes(&vals(256)))
        .unwrap();
    w.write_file(&st).unwrap();
    let m = open(st.to_str().unwrap(), &OpenOptions::new()).unwrap();
    let f32 = GgmlType::from_dtype(DType::F32).unwrap();
    for (name, narrow) in [
        ("q4_k", f32),
        ("iq4_xs", f32),
        ("iq4_nl", GgmlType::from_name("iq4_nl").unwrap()),
    ] {
        let q = GgmlType::from_name(name).unwrap();
        let out = dir.path().join(format!("{name}.gguf"));
        convert(&m, &out, &ConvertOptions::new().with_quantize(q)).unwrap();
        let g = GgufFile::open(&out).unwrap();
        let h = g.header();
        let t = |n: &str| h.tensors.iter().find(|t| t.name == n).unwrap();
        assert_eq!(
            (t("matrix").ggml_type, t("narrow").ggml_type),
            (q, narrow),
            "{name}"
        );
        let want = tensorsmith::ggml_quant::quantize_rows(q, &vals(1536), 512, None).unwrap();
        assert_eq!(
            &g.tensor_bytes(t("matrix")).unwrap()[..],
            &want[..],
            "{name}"
        );
    }
}
