//! Recorded digests are checked wherever a whole tensor is read: a `.safetensors` or `.zt`
//! with a recorded digest and one flipped bit fails `convert` (to every output format, sharded
//! or not, with or without `--digest`: nothing written) and `hash --content`, naming the
//! tensor; `--no-digest-check` skips the check; an intact file converts as before.

#[path = "support/cli.rs"]
mod cli;
#[path = "../../tensorsmith/tests/support/http_server.rs"]
mod http_server;
use cli::{p as s, run, text};
use std::path::Path;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

const MARK: f32 = 1234.5;

/// Three F32 tensors; `b` is full of MARK so its bytes can be found in any raw layout.
fn model(path: &Path) {
    model_of(path, 64);
}

/// As [`model`], each tensor `side` x `side`.
fn model_of(path: &Path, side: u64) {
    let mut w = Writer::new();
    for (name, v) in [("a", 1.0f32), ("b", MARK), ("c", 3.0)] {
        let data: Vec<u8> = (0..side * side).flat_map(|_| v.to_le_bytes()).collect();
        w.add(name, DType::F32, &[side, side], data).unwrap();
    }
    w.write_file(path).unwrap();
}

/// Flips one bit inside tensor `b`'s bytes.
fn flip(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let pat: Vec<u8> = (0..16).flat_map(|_| MARK.to_le_bytes()).collect();
    let at = bytes
        .windows(pat.len())
        .position(|w| w == pat)
        .expect("tensor b's bytes");
    bytes[at + 100] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_bit_under_a_recorded_digest_is_never_copied_or_hashed() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain.safetensors");
    model(&plain);
    for src_name in ["d.safetensors", "d.zt"] {
        let src = tmp.path().join(src_name);
        let o = run(&["convert", s(&plain), s(&src), "--digest", "xxh3"]);
        assert!(o.status.success(), "{}", text(&o));
        // Intact: converts and hashes.
        let ok = tmp.path().join("ok.safetensors");
        assert!(run(&["convert", s(&src), s(&ok)]).status.success());
        assert!(run(&["hash", "--content", s(&src)]).status.success());
        flip(&src);
        assert_eq!(run(&["verify", s(&src)]).status.code(), Some(1));
        let outs = tmp.path().join("outs");
        std::fs::create_dir_all(&outs).unwrap();
        for (out, extra) in [
            ("o.safetensors", vec![]),
            ("o.safetensors", vec!["--digest", "xxh3"]),
            ("o.safetensors", vec!["--shard-size", "20KB"]),
            ("o.safetensors", vec!["--dtype", "F16"]),
            ("o.zt", vec![]),
            ("o.gguf", vec![]),
        ] {
            let o_path = outs.join(out);
            let mut args = vec!["convert", s(&src), s(&o_path)];
            args.extend(&extra);
            let o = run(&args);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{src_name} {args:?}: {}",
                text(&o)
            );
            let t = text(&o);
            assert!(
                t.contains("'b'") && t.contains("digest"),
                "{src_name} {args:?}: {t}"
            );
            let left: Vec<_> = std::fs::read_dir(&outs).unwrap().flatten().collect();
            assert!(left.is_empty(), "{src_name} {args:?} wrote {left:?}");
        }
        let o = run(&["hash", "--content", s(&src)]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("'b'"), "{}", text(&o));
        // The documented switch copies and hashes what is there.
        assert!(run(&["hash", "--content", "--no-digest-check", s(&src)])
            .status
            .success());
        let o = run(&[
            "convert",
            s(&src),
            s(&outs.join("o.safetensors")),
            "--no-digest-check",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        std::fs::remove_dir_all(&outs).unwrap();
    }
}

#[test]
fn a_remote_input_is_checked_on_its_one_read() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain.safetensors");
    // 4 MiB a tensor: well past the first read of a remote file (256 KiB).
    model_of(&plain, 1024);
    let good = tmp.path().join("good.safetensors");
    assert!(run(&["convert", s(&plain), s(&good), "--digest", "xxh3"])
        .status
        .success());
    let bad = tmp.path().join("bad.safetensors");
    std::fs::copy(&good, &bad).unwrap();
    flip(&bad);
    let len = std::fs::metadata(&good).unwrap().len() as usize;
    let server = http_server::Server::start(
        [
            (
                "/good.safetensors".to_string(),
                std::fs::read(&good).unwrap(),
            ),
            ("/bad.safetensors".to_string(), std::fs::read(&bad).unwrap()),
        ]
        .into_iter()
        .collect(),
    );
    let out = tmp.path().join("o.safetensors");
    for extra in [vec![], vec!["--dtype", "F16"]] {
        server.sent.store(0, std::sync::atomic::Ordering::SeqCst);
        let url = server.url("/good.safetensors");
        let mut args = vec!["convert", url.as_str(), s(&out)];
        args.extend(&extra);
        let o = run(&args);
        assert!(o.status.success(), "{extra:?}: {}", text(&o));
        let sent = server.sent.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            sent <= len + (256 << 10),
            "{extra:?}: {sent} bytes sent for {len}"
        );
        std::fs::remove_file(&out).unwrap();
        let url = server.url("/bad.safetensors");
        let mut args = vec!["convert", url.as_str(), s(&out)];
        args.extend(&extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        assert!(text(&o).contains("'b'"), "{}", text(&o));
        assert!(!out.exists());
    }
}
