//! `inspect --tree` (groups by dotted prefix, numbers sorted as numbers, counts and sizes per
//! group, control characters escaped) and `--pretty-metadata` (JSON strings indented).

use std::collections::BTreeMap;
use std::process::Command;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn inspect(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .arg("inspect")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn tree_groups_by_prefix_with_numbers_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let mut w = Writer::new();
    for i in [0, 1, 2, 10, 11] {
        for part in ["attn.q", "mlp.up"] {
            w.add(
                &format!("model.layers.{i}.{part}.weight"),
                DType::F16,
                &[2, 4],
                vec![0u8; 16],
            )
            .unwrap();
        }
    }
    w.add("model.embed\u{1b}[31m", DType::F32, &[4], vec![0u8; 16])
        .unwrap();
    w.add("lm_head.weight", DType::F32, &[8], vec![0u8; 32])
        .unwrap();
    w.metadata(BTreeMap::from([
        (
            "config".to_string(),
            r#"{"hidden": 4, "layers": [1, 2]}"#.to_string(),
        ),
        ("plain".to_string(), "{not json".to_string()),
    ]));
    w.write_file(&path).unwrap();

    let out = inspect(&["--tree", path.to_str().unwrap()]);
    let tree = out.split("\n\n").last().unwrap();
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(lines[0], "  lm_head/  1 tensor, 32 B");
    assert_eq!(lines[1], "    weight  F32 [8]  32 B");
    assert_eq!(lines[2], "  model/  11 tensors, 176 B");
    assert_eq!(
        lines[3], "    embed\\u{1b}[31m  F32 [4]  16 B",
        "escaped: {tree}"
    );
    assert_eq!(lines[4], "    layers/  10 tensors, 160 B");
    let layer_order: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("      ") && !l.starts_with("        "))
        .map(|l| l.trim().split('/').next().unwrap())
        .collect();
    assert_eq!(layer_order, ["0", "1", "2", "10", "11"]);
    assert!(tree.contains("      10/  2 tensors, 32 B"), "{tree}");
    assert!(
        tree.contains("          q/  1 tensor, 16 B\n            weight  F16 [2, 4]  16 B"),
        "{tree}"
    );

    let out = inspect(&["--pretty-metadata", path.to_str().unwrap()]);
    assert!(
        out.contains("  config:\n    {\n      \"hidden\": 4,\n      \"layers\": [\n        1,\n        2\n      ]\n    }\n"),
        "{out}"
    );
    assert!(out.contains("  plain: {not json\n"), "{out}");
    let out = inspect(&[path.to_str().unwrap()]);
    assert!(
        out.contains(r#"  config: {"hidden": 4, "layers": [1, 2]}"#),
        "{out}"
    );
}
