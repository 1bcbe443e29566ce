//! A quantized GGUF write stops at its next chunk on SIGINT or SIGTERM: the exit status is
//! 128 + the signal within a few seconds (not the CLI's ten-second grace), and neither the
//! output nor a temporary file is left behind.

#[path = "support/cli.rs"]
mod cli;
use cli::{ok, p as s, text};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn interrupted_quantize_leaves_nothing(sig: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.safetensors");
    // 16 matrices of 1024 x 1024 F32: a debug build quantizes them for far longer than the
    // wait for the temporary file.
    let mut w = Writer::new();
    for i in 0..16u32 {
        let data: Vec<u8> = (0..1u32 << 20)
            .flat_map(|j| (((i * 7919 + j) % 1013) as f32 * 0.01 - 5.0).to_le_bytes())
            .collect();
        w.add(
            &format!("blk.{i}.ffn_up.weight"),
            DType::F32,
            &[1024, 1024],
            data,
        )
        .unwrap();
    }
    w.write_file(&input).unwrap();
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("model.gguf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["convert", s(&input), s(&out), "--quantize", "Q4_K"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let entries = || -> Vec<String> {
        std::fs::read_dir(&out_dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    while !entries().iter().any(|n| n.contains(".tensorsmith-tmp.")) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no temporary file appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the signal"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // Let the quantizer get going on its first chunks.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "finished before the signal"
    );
    let signalled = Instant::now();
    unsafe { libc::kill(child.id() as i32, sig) };
    let o = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    assert_eq!(o.status.code(), Some(128 + sig), "{}", text(&o));
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    assert_eq!(entries(), Vec::<String>::new());
    // The input is untouched and still converts.
    ok(&["validate", s(&input)]);
}

#[test]
fn sigint_stops_a_quantized_gguf_write_and_leaves_nothing() {
    interrupted_quantize_leaves_nothing(libc::SIGINT);
}

#[test]
fn sigterm_stops_a_quantized_gguf_write_and_leaves_nothing() {
    interrupted_quantize_leaves_nothing(libc::SIGTERM);
}
