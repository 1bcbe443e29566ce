//! ONNX models built byte by byte: values in raw_data, typed fields and external data read
//! back exactly, weight-inspect's hash pinned (mnist's golden value, an inline model and its
//! external-data twin alike), and one model per rejection rule, each giving its own error.

use std::path::{Path, PathBuf};
use tensorsmith::error::OnnxRule;
use tensorsmith::{ErrorKind, OpenOptions};

// --- a protobuf writer, just enough to build models

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

fn packed(vals: &[i64]) -> Vec<u8> {
    let mut o = Vec::new();
    for &v in vals {
        varint(v as u64, &mut o);
    }
    o
}

/// A TensorProto: name, dims, data_type, then `rest` (value fields).
fn tensor(name: &str, dims: &[i64], dtype: u64, rest: &[Vec<u8>]) -> Vec<u8> {
    let mut t = lfield(1, &packed(dims));
    t.extend(vfield(2, dtype));
    t.extend(lfield(8, name.as_bytes()));
    for r in rest {
        t.extend_from_slice(r);
    }
    t
}

fn external(entries: &[(&str, &str)]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = entries
        .iter()
        .map(|(k, val)| {
            let mut e = lfield(1, k.as_bytes());
            e.extend(lfield(2, val.as_bytes()));
            lfield(13, &e)
        })
        .collect();
    v.push(vfield(14, 1));
    v
}

/// A ModelProto: ir_version 9, producer "test", opset 21, a graph holding `inits`, one node
/// and one input and output.
fn model(inits: &[Vec<u8>]) -> Vec<u8> {
    let mut g = Vec::new();
    let mut node = lfield(1, b"x");
    node.extend(lfield(2, b"y"));
    node.extend(lfield(4, b"Identity"));
    g.extend(lfield(1, &node));
    g.extend(lfield(2, b"g"));
    for t in inits {
        g.extend(lfield(5, t));
    }
    g.extend(lfield(11, &lfield(1, b"x")));
    g.extend(lfield(12, &lfield(1, b"y")));
    let mut m = vfield(1, 9);
    m.extend(lfield(2, b"test"));
    m.extend(lfield(7, &g));
    m.extend(lfield(8, &vfield(2, 21)));
    m
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

fn open(path: &str) -> tensorsmith::Result<tensorsmith::Model> {
    tensorsmith::open(path, &OpenOptions::new())
}

fn rule(bytes: &[u8]) -> OnnxRule {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "m.onnx", bytes);
    rule_of(open(&p).unwrap_err())
}

fn rule_of(e: tensorsmith::Error) -> OnnxRule {
    match e.kind() {
        ErrorKind::Onnx(r) => r.clone(),
        other => panic!("not an ONNX rule: {other:?} ({e})"),
    }
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

// --- reading

#[test]
fn raw_data_is_served_zero_copy_from_the_map() {
    let vals = f32s(&[1.0, -2.5, 3.25, 0.0, 7.0, 8.0]);
    let m = model(&[tensor("w", &[2, 3], 1, &[lfield(9, &vals)])]);
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "m.onnx", &m);
    let model = open(&p).unwrap();
    let t = model.index.get("w").unwrap();
    assert_eq!(t.dtype, tensorsmith::dtype::DType::F32);
    assert_eq!(t.shape.as_slice(), &[2, 3]);
    let b = model.tensor_bytes(t).unwrap();
    assert!(matches!(b, std::borrow::Cow::Borrowed(_)));
    assert_eq!(&*b, &vals[..]);
    assert_eq!(model.index.format.name(), "onnx");
}

#[test]
fn typed_fields_decode_to_little_endian_bytes() {
    let h = |x: f32| half::f16::from_f32(x).to_bits() as i64;
    let m = model(&[
        // float16 in int32_data
        tensor(
            "h",
            &[3],
            10,
            &[lfield(5, &packed(&[h(1.0), h(-2.0), h(0.5)]))],
        ),
        // int8 in int32_data, negative values as 10-byte varints
        tensor("i8", &[2], 3, &[lfield(5, &packed(&[-1, 7]))]),
        // uint4, three values packed into two bytes (two int32 entries)
        tensor("u4", &[3], 21, &[lfield(5, &packed(&[0x21, 0x03]))]),
        // int64 unpacked entries
        tensor("i64", &[2], 7, &[vfield(7, 5), vfield(7, (-3i64) as u64)]),
        // uint32 in uint64_data
        tensor("u32", &[1], 12, &[lfield(11, &packed(&[0xdead_beef]))]),
        // double_data
        tensor("f64", &[1], 11, &[lfield(10, &2.5f64.to_le_bytes())]),
        // complex64 in float_data: two entries per value
        tensor("c64", &[1], 14, &[lfield(4, &f32s(&[1.0, 2.0]))]),
        // bool in int32_data
        tensor("b", &[2], 9, &[lfield(5, &packed(&[1, 0]))]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "m.onnx", &m);
    let model = open(&p).unwrap();
    let get = |n: &str| {
        model
            .tensor_bytes(model.index.get(n).unwrap())
            .unwrap()
            .into_owned()
    };
    let hb: Vec<u8> = [1.0f32, -2.0, 0.5]
        .iter()
        .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
        .collect();
    assert_eq!(get("h"), hb);
    assert_eq!(get("i8"), [0xff, 7]);
    assert_eq!(get("u4"), [0x21, 0x03]);
    assert_eq!(
        model.index.get("u4").unwrap().dtype.safetensors_name(),
        "U4"
    );
    let mut i64s = 5i64.to_le_bytes().to_vec();
    i64s.extend((-3i64).to_le_bytes());
    assert_eq!(get("i64"), i64s);
    assert_eq!(get("u32"), 0xdead_beefu32.to_le_bytes());
    assert_eq!(get("f64"), 2.5f64.to_le_bytes());
    assert_eq!(get("c64"), f32s(&[1.0, 2.0]));
    assert_eq!(get("b"), [1, 0]);
}

#[test]
fn external_data_is_read_from_its_file_and_checksum_verified() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = vec![0u8; 4096];
    data.extend(f32s(&[1.0, 2.0]));
    write(dir.path(), "w.bin", &data);
    let sha1 = {
        use sha1::Digest;
        let d = sha1::Sha1::digest(&data);
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let ext = external(&[
        ("location", "w.bin"),
        ("offset", "4096"),
        ("length", "8"),
        ("checksum", &sha1),
    ]);
    let p = write(dir.path(), "m.onnx", &model(&[tensor("w", &[2], 1, &ext)]));
    let m = open(&p).unwrap();
    let t = m.index.get("w").unwrap();
    assert_eq!(&*m.tensor_bytes(t).unwrap(), &f32s(&[1.0, 2.0])[..]);
    assert!(
        m.is_plain(t),
        "external raw tensors are plain ranges of their file"
    );
    let r = tensorsmith::ops::verify::verify(&m);
    assert!(r.is_ok(), "{:?}", r.failures);
    assert_eq!(r.checked, 1);
    // The same model recording another checksum fails verify, naming the tensor.
    let bad = external(&[
        ("location", "w.bin"),
        ("offset", "4096"),
        ("length", "8"),
        ("checksum", "0000000000000000000000000000000000000000"),
    ]);
    let p = write(dir.path(), "m.onnx", &model(&[tensor("w", &[2], 1, &bad)]));
    let r = tensorsmith::ops::verify::verify(&open(&p).unwrap());
    assert_eq!(r.failures.len(), 1);
    let msg = r.failures[0].to_string();
    assert!(msg.contains("w.bin") && msg.contains("'w'"), "{msg}");
}

/// A model of IR version 9 holding the graph `g`, written to `dir` and opened.
fn open_graph(dir: &Path, g: &[u8]) -> tensorsmith::Model {
    let mut m = vfield(1, 9);
    m.extend(lfield(7, g));
    open(&write(dir, "m.onnx", &m)).unwrap()
}

/// An If node named `name` (none when empty) whose branch `branch` is a graph of
/// `fields` (`GraphProto` fields: initializers 5, sparse initializers 15).
fn if_node(name: &[u8], branch: &[u8], fields: &[Vec<u8>]) -> Vec<u8> {
    let mut body = lfield(2, b"body");
    for f in fields {
        body.extend_from_slice(f);
    }
    let mut attr = lfield(1, branch);
    attr.extend(lfield(6, &body));
    let mut node = if name.is_empty() {
        Vec::new()
    } else {
        lfield(3, name)
    };
    node.extend(lfield(4, b"If"));
    node.extend(lfield(5, &attr));
    node
}

#[test]
fn subgraph_initializers_are_listed_under_their_path() {
    let k = lfield(5, &tensor("k", &[1], 1, &[lfield(9, &f32s(&[4.0]))]));
    let mut g = lfield(1, &if_node(b"if1", b"then_branch", &[k]));
    g.extend(lfield(
        5,
        &tensor("w", &[1], 1, &[lfield(9, &f32s(&[1.0]))]),
    ));
    let dir = tempfile::tempdir().unwrap();
    let model = open_graph(dir.path(), &g);
    let names: Vec<&str> = model
        .index
        .tensors
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["if1/then_branch/k", "w"]);
}

/// Node names are optional and need not be unique (onnx.checker accepts both): two unnamed If
/// nodes, then two named alike, each with a branch initializer `c`, give four names, not a
/// refusal of the whole model.
#[test]
fn subgraph_initializers_of_unnamed_or_same_named_nodes_do_not_clash() {
    let mut g = Vec::new();
    for (name, v) in [(&b""[..], 1.0), (b"", 2.0), (b"same", 3.0), (b"same", 4.0)] {
        let c = lfield(5, &tensor("c", &[1], 1, &[lfield(9, &f32s(&[v]))]));
        g.extend(lfield(1, &if_node(name, b"else_branch", &[c])));
    }
    let dir = tempfile::tempdir().unwrap();
    let model = open_graph(dir.path(), &g);
    let mut got: Vec<(String, Vec<u8>)> = model
        .index
        .tensors
        .iter()
        .map(|t| (t.name.clone(), model.tensor_bytes(t).unwrap().into_owned()))
        .collect();
    got.sort();
    let want = [
        ("#0/else_branch/c", 1.0f32),
        ("#1/else_branch/c", 2.0),
        ("same#3/else_branch/c", 4.0),
        ("same/else_branch/c", 3.0),
    ];
    let want: Vec<(String, Vec<u8>)> = want
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_le_bytes().to_vec()))
        .collect();
    assert_eq!(got, want);
}

// --- weight-inspect's hash

fn wi(path: &str) -> String {
    tensorsmith::ops::hash::wi_hash::weight_inspect(&open(path).unwrap().index)
        .unwrap()
        .hash
}

#[test]
fn mnist_hashes_to_weight_inspects_golden_value() {
    let mnist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/onnx/mnist.onnx");
    let Ok(mnist) = mnist.canonicalize() else {
        eprintln!("skipped: ../shared/data/onnx/mnist.onnx is not here");
        return;
    };
    assert_eq!(
        wi(mnist.to_str().unwrap()),
        "c83276f54ed2dc74b6c52f8d19da167f5f85f59660a0295e9898f4f0848f9bf8"
    );
}

#[test]
fn an_inline_model_and_its_external_twin_hash_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let vals = f32s(&[1.0, 2.0]);
    write(dir.path(), "w.bin", &vals);
    let a = write(
        dir.path(),
        "a.onnx",
        &model(&[tensor("w", &[2], 1, &[lfield(9, &vals)])]),
    );
    let ext = external(&[("location", "w.bin"), ("length", "8")]);
    let b = write(dir.path(), "b.onnx", &model(&[tensor("w", &[2], 1, &ext)]));
    assert_eq!(wi(&a), wi(&b));
}

#[test]
fn missing_and_empty_domain_hash_differently() {
    let dir = tempfile::tempdir().unwrap();
    let mut with = model(&[]);
    let a = write(dir.path(), "a.onnx", &with);
    with.extend(lfield(4, b""));
    let b = write(dir.path(), "b.onnx", &with);
    assert_ne!(wi(&a), wi(&b));
}

// --- one model per rejection rule

#[test]
fn rejects_a_random_file_named_onnx_as_onnx() {
    let junk: Vec<u8> = (0..200u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "m.onnx", &junk);
    let e = open(&p).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Onnx(_)), "{e}");
    assert!(e.to_string().contains("m.onnx"), "{e}");
}

#[test]
fn rejects_a_truncated_model() {
    let m = model(&[tensor("w", &[1], 1, &[lfield(9, &f32s(&[1.0]))])]);
    assert!(matches!(rule(&m[..m.len() - 3]), OnnxRule::PastEnd { .. }));
}

#[test]
fn rejects_an_empty_file_as_having_no_graph() {
    assert_eq!(rule(b""), OnnxRule::NoGraph);
}

#[test]
fn rejects_a_varint_longer_than_ten_bytes() {
    let mut m = vec![0x08];
    m.extend([0xff; 10]);
    m.push(0x01);
    assert_eq!(rule(&m), OnnxRule::VarintTooLong { offset: 1 });
}

#[test]
fn rejects_a_length_past_the_end() {
    let mut m = vfield(1, 9);
    m.extend([0x3a, 0x7f, 0x01]);
    assert!(matches!(rule(&m), OnnxRule::PastEnd { needed: 127, .. }));
}

#[test]
fn rejects_graphs_nested_too_deep() {
    let mut g = Vec::new();
    for i in 0..(tensorsmith::onnx::MAX_GRAPH_DEPTH + 2) {
        let mut attr = lfield(1, b"body");
        attr.extend(lfield(6, &g));
        let mut node = lfield(3, format!("n{i}").as_bytes());
        node.extend(lfield(5, &attr));
        g = lfield(1, &node);
    }
    let mut m = vfield(1, 9);
    m.extend(lfield(7, &g));
    assert!(matches!(rule(&m), OnnxRule::TooDeep { .. }));
}

#[test]
fn rejects_raw_data_of_the_wrong_length() {
    let m = model(&[tensor("w", &[2], 1, &[lfield(9, &f32s(&[1.0]))])]);
    assert_eq!(
        rule(&m),
        OnnxRule::DataLength {
            field: "raw_data",
            expected: 8,
            actual: 4
        }
    );
}

#[test]
fn rejects_typed_fields_with_the_wrong_count() {
    let m = model(&[tensor("w", &[3], 6, &[lfield(5, &packed(&[1, 2]))])]);
    assert!(matches!(
        rule(&m),
        OnnxRule::ValueCount {
            expected: 3,
            actual: 2,
            ..
        }
    ));
}

#[test]
fn rejects_a_typed_field_that_cannot_hold_the_dtype() {
    let m = model(&[tensor("w", &[1], 3, &[lfield(4, &f32s(&[1.0]))])]);
    assert!(matches!(
        rule(&m),
        OnnxRule::FieldForType {
            field: "float_data",
            ..
        }
    ));
}

#[test]
fn rejects_negative_dims() {
    let m = model(&[tensor("w", &[-1], 1, &[])]);
    assert_eq!(rule(&m), OnnxRule::NegativeDim(-1));
}

#[test]
fn rejects_dims_whose_product_overflows() {
    let m = model(&[tensor("w", &[1 << 40, 1 << 40], 1, &[])]);
    assert_eq!(rule(&m), OnnxRule::DimsOverflow);
}

#[test]
fn rejects_a_segmented_tensor_by_name() {
    let m = model(&[tensor(
        "seg",
        &[1],
        1,
        &[lfield(3, &vfield(1, 0)), lfield(9, &f32s(&[1.0]))],
    )]);
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "m.onnx", &m);
    let e = open(&p).unwrap_err();
    assert_eq!(rule_of(open(&p).unwrap_err()), OnnxRule::Segment);
    assert_eq!(e.tensor(), Some("seg"));
}

#[test]
fn rejects_an_unknown_data_type() {
    assert_eq!(
        rule(&model(&[tensor("w", &[0], 99, &[])])),
        OnnxRule::UnknownDataType(99)
    );
}

#[test]
fn rejects_a_name_given_twice() {
    let t = tensor("w", &[1], 1, &[lfield(9, &f32s(&[1.0]))]);
    assert_eq!(rule(&model(&[t.clone(), t])), OnnxRule::DuplicateName);
}

#[test]
fn rejects_a_graph_over_the_header_limit() {
    let vals = vec![0u8; 4000];
    let m = model(&[tensor("w", &[1000], 1, &[lfield(9, &vals)])]);
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "m.onnx", &m);
    // The weights do not count: a limit under the file size but over the graph passes.
    let graph = m.len() as u64 - 4000;
    assert!(tensorsmith::open(&p, &OpenOptions::new().with_max_header_len(graph)).is_ok());
    let e = tensorsmith::open(&p, &OpenOptions::new().with_max_header_len(graph - 1)).unwrap_err();
    assert!(matches!(rule_of(e), OnnxRule::GraphTooLarge { .. }));
}

fn ext_rule(entries: &[(&str, &str)], data: &[u8]) -> OnnxRule {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "w.bin", data);
    let p = write(
        dir.path(),
        "m.onnx",
        &model(&[tensor("w", &[2], 1, &external(entries))]),
    );
    rule_of(open(&p).unwrap_err())
}

#[test]
fn rejects_an_absolute_location() {
    let r = ext_rule(&[("location", "/etc/passwd")], &[0; 8]);
    assert!(matches!(r, OnnxRule::External(m) if m.contains("absolute")));
}

#[test]
fn rejects_a_location_with_dot_dot() {
    let r = ext_rule(&[("location", "a/../w.bin")], &[0; 8]);
    assert!(matches!(r, OnnxRule::External(m) if m.contains("..")));
}

#[test]
fn rejects_a_location_whose_symlink_leaves_the_folder() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), [0u8; 8]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("w.bin")).unwrap();
    let ext = external(&[("location", "w.bin"), ("length", "8")]);
    let p = write(dir.path(), "m.onnx", &model(&[tensor("w", &[2], 1, &ext)]));
    let r = rule_of(open(&p).unwrap_err());
    assert!(matches!(r, OnnxRule::ExternalFile { rule, .. } if rule.contains("outside")));
}

#[test]
fn rejects_an_offset_past_the_end_of_the_data_file() {
    let r = ext_rule(
        &[("location", "w.bin"), ("offset", "4"), ("length", "8")],
        &[0; 8],
    );
    assert!(matches!(r, OnnxRule::ExternalFile { rule, .. } if rule.contains("past the end")));
}

#[test]
fn rejects_an_offset_that_is_not_a_number() {
    let r = ext_rule(&[("location", "w.bin"), ("offset", "12abc")], &[0; 8]);
    assert!(matches!(r, OnnxRule::External(m) if m.contains("not a decimal number")));
}

#[test]
fn rejects_a_length_that_disagrees_with_dims() {
    let r = ext_rule(&[("location", "w.bin"), ("length", "4")], &[0; 8]);
    assert!(matches!(
        r,
        OnnxRule::DataLength {
            expected: 8,
            actual: 4,
            ..
        }
    ));
}

#[test]
fn rejects_data_without_length_that_is_not_the_rest_of_the_file() {
    let r = ext_rule(&[("location", "w.bin")], &[0; 12]);
    assert!(matches!(r, OnnxRule::ExternalFile { rule, .. } if rule.contains("no 'length'")));
}

#[test]
fn refuses_a_folder_of_several_models_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.onnx", &model(&[]));
    write(dir.path(), "b.onnx", &model(&[]));
    let r = rule_of(open(dir.path().to_str().unwrap()).unwrap_err());
    assert_eq!(r, OnnxRule::SeveralModels("a.onnx, b.onnx".into()));
    let one = tempfile::tempdir().unwrap();
    write(one.path(), "a.onnx", &model(&[]));
    assert!(open(one.path().to_str().unwrap()).is_ok());
}

#[test]
fn a_model_without_the_extension_is_told_by_its_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "model.bin",
        &model(&[tensor("w", &[0], 1, &[])]),
    );
    assert_eq!(open(&p).unwrap().index.format.name(), "onnx");
    let _: PathBuf = dir.path().to_path_buf();
}

/// A sparse initializer whose index falls outside its shape (onnx.checker refuses it) fails
/// `verify`, naming the tensor and the index; in range, it passes. Linear and coordinate
/// indices both.
#[test]
fn verify_checks_sparse_indices_against_the_shape() {
    let sparse = |idx: &[i64], idx_dims: &[i64]| {
        let raw: Vec<u8> = idx.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut s = lfield(1, &tensor("sp", &[2], 1, &[lfield(9, &f32s(&[1.5, -2.0]))]));
        s.extend(lfield(2, &tensor("sp_i", idx_dims, 7, &[lfield(9, &raw)])));
        s.extend(vfield(3, 3));
        s.extend(vfield(3, 4));
        let mut g = lfield(15, &s);
        g.extend(lfield(
            5,
            &tensor("w", &[1], 1, &[lfield(9, &f32s(&[1.0]))]),
        ));
        let mut m = vfield(1, 9);
        m.extend(lfield(7, &g));
        m
    };
    let dir = tempfile::tempdir().unwrap();
    for (idx, dims, bad) in [
        (&[1i64, 11][..], &[2i64][..], None),
        (
            &[1, 99],
            &[2],
            Some("sparse index 99 is outside 12 elements"),
        ),
        (&[0, 1, 2, 3], &[2, 2], None),
        (
            &[0, 1, 3, 0],
            &[2, 2],
            Some("index 3 is outside dimension 0 of 3"),
        ),
    ] {
        let p = write(dir.path(), "sp.onnx", &sparse(idx, dims));
        let r = tensorsmith::ops::verify::verify(&open(&p).unwrap());
        match bad {
            None => assert!(r.failures.is_empty(), "{idx:?}: {:?}", r.failures),
            Some(want) => {
                assert_eq!(r.failures.len(), 1, "{idx:?}");
                let msg = r.failures[0].to_string();
                assert!(msg.contains(want) && msg.contains("'sp'"), "{msg}");
            }
        }
    }
}

/// A subgraph's sparse initializer is listed under the subgraph's path, as its dense ones are
/// (it was dropped without a word), and densifies to its values.
#[test]
fn subgraph_sparse_initializers_are_listed_under_their_path() {
    let raw: Vec<u8> = [1i64, 4].iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut s = lfield(1, &tensor("sp", &[2], 1, &[lfield(9, &f32s(&[1.5, -2.0]))]));
    s.extend(lfield(2, &tensor("sp_i", &[2], 7, &[lfield(9, &raw)])));
    s.extend(vfield(3, 6));
    let mut g = lfield(1, &if_node(b"if1", b"then_branch", &[lfield(15, &s)]));
    g.extend(lfield(
        5,
        &tensor("w", &[1], 1, &[lfield(9, &f32s(&[1.0]))]),
    ));
    let dir = tempfile::tempdir().unwrap();
    let model = open_graph(dir.path(), &g);
    let t = model
        .index
        .tensors
        .iter()
        .find(|t| t.name == "if1/then_branch/sp")
        .expect("listed");
    let (dtype, dense) = tensorsmith::ops::convert::densify::densify(&model, t).unwrap();
    assert_eq!(dtype, tensorsmith::dtype::DType::F32);
    assert_eq!(dense, f32s(&[0.0, 1.5, 0.0, 0.0, -2.0, 0.0]));
    assert!(tensorsmith::ops::verify::verify(&model).failures.is_empty());
}
