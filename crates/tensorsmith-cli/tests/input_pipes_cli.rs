//! Pipes as inputs: a FIFO, /dev/stdin on a pipe and `-` are read whole into a temporary file
//! and opened from it (not "file is 0 bytes"); `convert IN -` is refused by name, and no file
//! named `-` is written.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

fn bytes() -> Vec<u8> {
    let mut w = Writer::new();
    w.add("w", DType::F32, &[3], 2.5f32.to_le_bytes().repeat(3))
        .unwrap();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("m.safetensors");
    w.write_file(&p).unwrap();
    std::fs::read(p).unwrap()
}

/// Runs the binary with `input` on a pipe to its stdin.
fn piped(args: &[&str], input: &[u8], cwd: &Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let o = c.wait_with_output().unwrap();
    feeder.join().unwrap();
    o
}

#[test]
fn stdin_as_dash_or_dev_stdin_is_read() {
    let d = tempfile::tempdir().unwrap();
    let m = bytes();
    for name in ["-", "/dev/stdin"] {
        for cmd in [vec!["inspect", name], vec!["hash", "--content", name]] {
            let o = piped(&cmd, &m, d.path());
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{cmd:?}: {err}");
            assert!(!err.contains("0 bytes"), "{err}");
        }
        let out = d.path().join("out.safetensors");
        let o = piped(&["convert", name, out.to_str().unwrap()], &m, d.path());
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let copy = tensorsmith::open(out.to_str().unwrap(), &Default::default()).unwrap();
        assert_eq!(copy.index.tensors[0].shape.as_slice(), &[3]);
    }
    // Not a model: the error names stdin and what is wrong, never "0 bytes".
    let o = piped(&["inspect", "-"], b"hello, not a tensor file", d.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdin>"), "{err}");
}

#[test]
fn a_fifo_is_read() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let m = bytes();
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, m).is_ok())
    };
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["inspect", fifo.to_str().unwrap()])
        .output()
        .unwrap();
    // A writer still waiting for a reader (the program never opened the FIFO) is let go.
    let _unblock = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
    writer.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("F32"));
}

#[test]
fn convert_to_dash_is_refused_and_writes_no_file_named_dash() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("m.safetensors");
    std::fs::write(&input, bytes()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
        .args(["convert", input.to_str().unwrap(), "-"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("output '-'") && err.contains("stdout"),
        "{err}"
    );
    assert!(!d.path().join("-").exists());
    assert!(o.stdout.is_empty());
}
