//! Writing ONNX through a template (`convert IN model.onnx --onnx-template T.onnx`): the exact
//! bytes of a small model (the template's other fields kept, initializers written anew, inline
//! and external at 4096-aligned offsets), and one refusal per rule, each writing nothing.

use std::path::Path;
use tensorsmith::dtype::DType;
use tensorsmith::ops::convert::{convert, ConvertOptions};
use tensorsmith::OpenOptions;

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn vfield(n: u32, v: u64) -> Vec<u8> {
    let mut o = Vec::new();
    varint(u64::from(n) << 3, &mut o);
    varint(v, &mut o);
    o
}

fn lfield(n: u32, payload: &[u8]) -> Vec<u8> {
    let mut o = Vec::new();
    varint((u64::from(n) << 3) | 2, &mut o);
    varint(payload.len() as u64, &mut o);
    o.extend_from_slice(payload);
    o
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// dims (packed), data_type, name, then `rest`: the order the writer uses.
fn tensor(name: &str, dims: &[u64], dtype: u64, rest: &[Vec<u8>]) -> Vec<u8> {
    let mut d = Vec::new();
    for &x in dims {
        varint(x, &mut d);
    }
    let mut t = lfield(1, &d);
    t.extend(vfield(2, dtype));
    t.extend(lfield(8, name.as_bytes()));
    for r in rest {
        t.extend_from_slice(r);
    }
    t
}

fn model(inits: &[Vec<u8>]) -> Vec<u8> {
    let mut g = lfield(2, b"g");
    for t in inits {
        g.extend(lfield(5, t));
    }
    let mut m = vfield(1, 9);
    m.extend(lfield(2, b"p"));
    m.extend(lfield(7, &g));
    m.extend(lfield(8, &vfield(2, 21)));
    m
}

/// A template with `small` [2] F32 (a doc_string kept) and `big` [300] F32.
fn template(dir: &Path) -> String {
    let doc = lfield(12, b"doc");
    let m = model(&[
        tensor("small", &[2], 1, &[doc, lfield(9, &f32s(&[0.0; 2]))]),
        tensor("big", &[300], 1, &[lfield(9, &f32s(&[0.0; 300]))]),
    ]);
    let p = dir.join("t.onnx");
    std::fs::write(&p, m).unwrap();
    p.to_string_lossy().into_owned()
}

fn input(dir: &Path, tensors: &[(&str, DType, Vec<u64>, Vec<u8>)]) -> String {
    let mut w = tensorsmith::safetensors::Writer::new();
    for (n, d, s, b) in tensors {
        w.add(n, *d, s, b.clone()).unwrap();
    }
    let p = dir.join("in.safetensors");
    w.write_file(&p).unwrap();
    p.to_string_lossy().into_owned()
}

fn run(
    dir: &Path,
    src: &str,
    opts: ConvertOptions,
) -> tensorsmith::Result<Vec<std::path::PathBuf>> {
    let m = tensorsmith::open(src, &OpenOptions::new())?;
    let t = template(dir);
    convert(
        &m,
        &dir.join("o.onnx"),
        &opts.with_onnx_template(Some(t.into())),
    )
}

#[test]
fn writes_the_templates_graph_with_new_initializers_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let small = f32s(&[1.0, 2.0]);
    let big: Vec<u8> = f32s(&(0..300).map(|i| i as f32).collect::<Vec<_>>());
    let src = input(
        dir.path(),
        &[
            ("small", DType::F32, vec![2], small.clone()),
            ("big", DType::F32, vec![300], big.clone()),
        ],
    );
    run(dir.path(), &src, ConvertOptions::new()).unwrap();
    let ext = |k: &str, v: &str| {
        let mut e = lfield(1, k.as_bytes());
        e.extend(lfield(2, v.as_bytes()));
        lfield(13, &e)
    };
    let want = model(&[
        tensor("small", &[2], 1, &[lfield(12, b"doc"), lfield(9, &small)]),
        tensor(
            "big",
            &[300],
            1,
            &[
                ext("location", "o.onnx.data"),
                ext("offset", "0"),
                ext("length", "1200"),
                vfield(14, 1),
            ],
        ),
    ]);
    assert_eq!(std::fs::read(dir.path().join("o.onnx")).unwrap(), want);
    assert_eq!(std::fs::read(dir.path().join("o.onnx.data")).unwrap(), big);
}

#[test]
fn external_data_puts_every_tensor_at_aligned_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let src = input(
        dir.path(),
        &[
            ("small", DType::F32, vec![2], f32s(&[1.0, 2.0])),
            ("big", DType::F32, vec![300], vec![7; 1200]),
        ],
    );
    run(
        dir.path(),
        &src,
        ConvertOptions::new().with_external_data(true),
    )
    .unwrap();
    let data = std::fs::read(dir.path().join("o.onnx.data")).unwrap();
    assert_eq!(data.len(), 8 + (4096 - 8) + 1200);
    let m = tensorsmith::open(
        dir.path().join("o.onnx").to_str().unwrap(),
        &OpenOptions::new(),
    )
    .unwrap();
    let big = m.index.get("big").unwrap();
    assert_eq!(
        big.attributes["onnx.offset"],
        tensorsmith::index::MetaValue::UInt(4096)
    );
    assert_eq!(&*m.tensor_bytes(big).unwrap(), &[7u8; 1200][..]);
}

fn refused(tensors: &[(&str, DType, Vec<u64>, Vec<u8>)], opts: ConvertOptions) -> String {
    let dir = tempfile::tempdir().unwrap();
    let src = input(dir.path(), tensors);
    let e = run(dir.path(), &src, opts).unwrap_err();
    assert!(!dir.path().join("o.onnx").exists() && !dir.path().join("o.onnx.data").exists());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "only the input and template remain: {names:?}"
    );
    e.to_string()
}

#[test]
fn refuses_an_initializer_missing_from_the_input() {
    let e = refused(
        &[("small", DType::F32, vec![2], vec![0; 8])],
        ConvertOptions::new(),
    );
    assert!(e.contains("'big'") && e.contains("missing"), "{e}");
}

#[test]
fn refuses_a_tensor_of_another_shape() {
    let e = refused(
        &[
            ("small", DType::F32, vec![1, 2], vec![0; 8]),
            ("big", DType::F32, vec![300], vec![0; 1200]),
        ],
        ConvertOptions::new(),
    );
    assert!(e.contains("'small'") && e.contains("shape"), "{e}");
}

#[test]
fn refuses_another_dtype_without_dtype_and_casts_with_it() {
    let t = [
        ("small", DType::F16, vec![2], vec![0; 4]),
        ("big", DType::F32, vec![300], vec![0; 1200]),
    ];
    let e = refused(&t, ConvertOptions::new());
    assert!(e.contains("'small'") && e.contains("--dtype F32"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let src = input(dir.path(), &t);
    run(
        dir.path(),
        &src,
        ConvertOptions::new().with_dtype(DType::F32),
    )
    .unwrap();
}

#[test]
fn refuses_a_tensor_the_template_lacks_unless_allowed() {
    let t = [
        ("small", DType::F32, vec![2], vec![0; 8]),
        ("big", DType::F32, vec![300], vec![0; 1200]),
        ("extra", DType::F32, vec![1], vec![0; 4]),
    ];
    let e = refused(&t, ConvertOptions::new());
    assert!(e.contains("extra") && e.contains("--allow-extra"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let src = input(dir.path(), &t);
    run(
        dir.path(),
        &src,
        ConvertOptions::new().with_allow_extra(true),
    )
    .unwrap();
}
