//! safetensors to safetensors without a cast copies tensor bytes file to file in the kernel
//! (`copy_file_range`): seen in /proc/self/io, where the copy counts as bytes read (`rchar`)
//! in a handful of system calls, while a mapped input read through this process's memory
//! would count none. One test in this binary, so no other thread moves the counters.

use tensorsmith::dtype::DType;
use tensorsmith::ops::convert::{convert, ConvertOptions};
use tensorsmith::safetensors::Writer;
use tensorsmith::OpenOptions;

fn io_counters() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("rchar:")?, field("syscr:")?))
}

#[test]
fn uncast_safetensors_convert_copies_in_the_kernel_and_keeps_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    let mut w = Writer::new();
    let n = 8usize << 20; // 8 MiB per tensor, 64 MiB in all
    for i in 0..8u8 {
        w.add(&format!("t{i}"), DType::U8, &[n as u64], vec![i; n])
            .unwrap();
    }
    let mut meta = std::collections::BTreeMap::new();
    meta.insert("k".to_string(), "v".to_string());
    w.metadata(meta);
    w.write_file(&input).unwrap();
    let model = tensorsmith::open(input.to_str().unwrap(), &OpenOptions::new()).unwrap();
    let out = dir.path().join("out.safetensors");
    let Some(before) = io_counters() else {
        eprintln!("SKIPPED: no /proc/self/io here");
        return;
    };
    convert(&model, &out, &ConvertOptions::new()).unwrap();
    let after = io_counters().unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&input).unwrap());
    let read = after.0 - before.0;
    let calls = after.1 - before.1;
    assert!(
        read >= 64 << 20,
        "only {read} bytes went through the kernel: the mapped input was copied in memory"
    );
    assert!(calls < 200, "{calls} read calls for 64 MiB");
}

/// Tensors whose data lie in another order than the writer's (it sorts by dtype, then name):
/// copied run by run (a and b join, c breaks the run), each tensor's bytes in its place.
#[test]
fn tensors_out_of_order_and_apart_are_copied_to_their_places() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    // Data: c (16 bytes), a (8), b (24); the writer's order is a, b, c.
    let header = br#"{"a":{"dtype":"U8","shape":[8],"data_offsets":[16,24]},"b":{"dtype":"U8","shape":[24],"data_offsets":[24,48]},"c":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}}"#;
    let mut h = header.to_vec();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&h);
    bytes.extend((0..48u8).map(|i| i.wrapping_mul(7)));
    std::fs::write(&input, &bytes).unwrap();
    let model = tensorsmith::open(input.to_str().unwrap(), &OpenOptions::new()).unwrap();
    let out = dir.path().join("out.safetensors");
    convert(&model, &out, &ConvertOptions::new()).unwrap();
    let back = tensorsmith::open(out.to_str().unwrap(), &OpenOptions::new()).unwrap();
    for t in &model.index.tensors {
        let u = back
            .index
            .tensors
            .iter()
            .find(|u| u.name == t.name)
            .unwrap();
        assert_eq!(
            back.tensor_bytes(u).unwrap(),
            model.tensor_bytes(t).unwrap(),
            "{}",
            t.name
        );
    }
}

/// A file whose bytes are not the writer's, though of the same length (its header lists the
/// tensors in another order), is not copied whole: the output is the writer's header, the
/// tensors the same. A file in the writer's own layout is copied whole (first test): both
/// paths give the bytes the writer would write.
#[test]
fn a_file_in_another_layout_is_rewritten_not_copied_whole() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    let mut w = Writer::new();
    w.add("a", DType::U8, &[16], (0..16u8).collect::<Vec<_>>())
        .unwrap();
    w.add("b", DType::U8, &[8], vec![9u8; 8]).unwrap();
    let canonical = w.to_bytes().unwrap();
    let a = r#""a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}"#;
    let b = r#""b":{"dtype":"U8","shape":[8],"data_offsets":[16,24]}"#;
    let n = u64::from_le_bytes(canonical[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&canonical[8..8 + n]).unwrap();
    assert!(header.starts_with(&format!("{{{a},{b}}}")), "{header}");
    let swapped = header.replacen(&format!("{a},{b}"), &format!("{b},{a}"), 1);
    let mut other = canonical[..8].to_vec();
    other.extend_from_slice(swapped.as_bytes());
    other.extend_from_slice(&canonical[8 + n..]);
    assert_eq!(other.len(), canonical.len());
    assert_ne!(other, canonical);
    std::fs::write(&input, &other).unwrap();
    let model = tensorsmith::open(input.to_str().unwrap(), &OpenOptions::new()).unwrap();
    let out = dir.path().join("out.safetensors");
    convert(&model, &out, &ConvertOptions::new()).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), canonical);
}
