//! Reliability of the `tensorsmith` binary: killed writers, full disks and hostile headers.
//!
//! - `convert` killed (SIGKILL) at random points leaves the destination holding either the
//!   previous complete file or the new complete file, never anything else; leftovers are
//!   temporary files, and the next write to that destination removes them.
//!   (safetensors, zTensor every version, GGUF plain and quantized)
//! - `convert --append` killed at random points leaves the zTensor v2 file old or new.
//! - `convert` onto a filesystem that fills up (in the middle of a streamed part, raw or
//!   zstd, or of an append, or of a GGUF tensor) fails with exit 2 and "No space left", and leaves neither a
//!   partial file nor a temporary file behind.
//! - headers that claim terabytes, huge shapes or deep nesting are refused within a small
//!   address-space limit: memory follows the real file size, not what the file claims (the
//!   two-million-tensor header is measured in `crates/tensorsmith/tests/memory_bound.rs`).
//!
//! Quick by default; `TS_RELIABILITY_KILLS=N` sets the number of kills (default 12).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;
use tensorsmith::sink::TEMP_MARKER;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensorsmith"))
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A small deterministic generator (xorshift64*), seeded from the clock and printed, so a
/// failing run can be repeated with `TS_RELIABILITY_SEED`.
struct Rng(u64);

impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("TS_RELIABILITY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("TS_RELIABILITY_SEED={seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Writes a safetensors file of `tensors` F32 tensors of `floats` elements each, filled
/// from `fill`.
fn write_f32_file(path: &Path, tensors: usize, floats: usize, fill: u32) {
    write_f32_file_named(path, "layer", tensors, floats, fill)
}

/// [`write_f32_file`] with tensors named `{prefix}.{i}.weight`.
fn write_f32_file_named(path: &Path, prefix: &str, tensors: usize, floats: usize, fill: u32) {
    write_f32_file_shaped(path, prefix, tensors, &[floats as u64], fill)
}

/// [`write_f32_file_named`] with tensors of `shape` (matrices: quantizable rows for GGUF).
fn write_f32_file_shaped(path: &Path, prefix: &str, tensors: usize, shape: &[u64], fill: u32) {
    let floats = shape.iter().product::<u64>() as usize;
    let mut w = Writer::new();
    for i in 0..tensors {
        let data: Vec<u8> = (0..floats)
            .flat_map(|j| {
                (((i * floats + j) as u32).wrapping_mul(2_654_435_761) ^ fill).to_le_bytes()
            })
            .collect();
        w.add(&format!("{prefix}.{i}.weight"), DType::F32, shape, data)
            .unwrap();
    }
    w.write_file(path).unwrap();
}

fn temps_of(dir: &Path, file_name: &str) -> Vec<PathBuf> {
    let prefix = format!(".{file_name}{TEMP_MARKER}");
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

fn kill_count() -> usize {
    std::env::var("TS_RELIABILITY_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

// ---------------------------------------------------------------------------------------------
// Kills

/// Kills `convert IN OUT ARGS…` at random points `kills` times; after each kill OUT is the
/// previous file or the new one, leftovers are prefixes of the new file under temp names, and
/// the next complete write removes them.
fn kill_rounds(out_name: &str, args: &[&str], kills: usize) {
    kill_rounds_shaped(out_name, args, kills, &[1 << 19])
}

/// [`kill_rounds`] over 16 F32 tensors of `shape` (32 MiB for 2^19 elements each).
fn kill_rounds_shaped(out_name: &str, args: &[&str], kills: usize, shape: &[u64]) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    write_f32_file_shaped(&input, "layer", 16, shape, 0x5eed);
    let dest = dir.path().join(out_name);
    let old = dir.path().join("old.safetensors");
    write_f32_file(&old, 3, 1000, 0x01d);
    let old_bytes = std::fs::read(&old).unwrap();
    let convert = |to: &Path| {
        let mut c = bin();
        c.args(["convert".as_ref(), input.as_os_str(), to.as_os_str()])
            .args(args);
        c
    };

    // The new file, and how long a whole conversion takes here.
    let reference = dir.path().join(format!("new.{out_name}"));
    let t = Instant::now();
    let o = convert(&reference).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let full = t.elapsed();
    let new_bytes = std::fs::read(&reference).unwrap();

    let mut rng = Rng::from_env();
    let (mut saw_old, mut saw_new, mut saw_temp) = (0, 0, 0);
    for round in 0..kills {
        // Each round starts from the old file (or whatever the last round left).
        if round % 2 == 0 {
            std::fs::copy(&old, &dest).unwrap();
        }
        let before = std::fs::read(&dest).unwrap();
        let delay = Duration::from_micros(rng.below(full.as_micros() as u64 * 6 / 5));
        let mut child = convert(&dest)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL; the process may already have finished
        child.wait().unwrap();

        let after = std::fs::read(&dest).expect("the destination still exists");
        if after == new_bytes {
            saw_new += 1;
        } else {
            assert_eq!(
                after, before,
                "{out_name} {args:?}, round {round}, killed after {delay:?}: destination is neither old nor new"
            );
            saw_old += 1;
        }
        let temps = temps_of(dir.path(), out_name);
        saw_temp += temps.len();
        for t in &temps {
            let b = std::fs::read(t).unwrap();
            assert!(
                b.len() <= new_bytes.len(),
                "temp {} is longer than the file",
                t.display()
            );
        }
    }
    eprintln!(
        "{out_name} {args:?}: {kills} kills over {full:?}: destination old {saw_old}, new {saw_new}; {saw_temp} temp files left"
    );

    // The next write to the destination removes the dead writers' temps.
    let o = convert(&dest).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&dest).unwrap(), new_bytes);
    assert_eq!(temps_of(dir.path(), out_name), Vec::<PathBuf>::new());
    assert_eq!(old_bytes, std::fs::read(&old).unwrap());
}

#[test]
fn convert_to_safetensors_killed_at_random_points_leaves_old_or_new_file() {
    kill_rounds("out.safetensors", &["--dtype", "BF16"], kill_count());
}

#[test]
fn convert_to_ztensor_killed_at_random_points_leaves_old_or_new_file() {
    let kills = kill_count().div_ceil(2);
    kill_rounds(
        "out.zt",
        &["--zt-version", "0.1", "--digest", "crc32c"],
        kills,
    );
    kill_rounds(
        "out.zt",
        &["--zt-version", "1.1", "--compress", "zstd"],
        kills,
    );
    kill_rounds(
        "out.zt",
        &[
            "--zt-version",
            "2",
            "--compress",
            "zstd",
            "--digest",
            "xxh3",
        ],
        kills,
    );
}

#[test]
fn convert_to_gguf_killed_at_random_points_leaves_old_or_new_file() {
    let kills = kill_count().div_ceil(2);
    let matrix = [1 << 10, 1 << 9];
    kill_rounds_shaped("out.gguf", &["--dtype", "F16"], kills, &matrix);
    kill_rounds_shaped("out.gguf", &["--quantize", "Q8_0"], kills, &matrix);
}

#[test]
fn append_killed_at_random_points_leaves_old_or_new_file() {
    // The old file: a v2 file of 8 MiB; each round appends 32 MiB (zstd, xxh3) to a fresh
    // copy of it, killed at a random point.
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.safetensors");
    write_f32_file(&small, 4, 1 << 19, 0x01d);
    let old = dir.path().join("old.zt");
    let o = run(&["convert".as_ref(), small.as_os_str(), old.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let old_bytes = std::fs::read(&old).unwrap();
    let input = dir.path().join("in.safetensors");
    write_f32_file_named(&input, "added", 16, 1 << 19, 0x5eed);
    let dest = dir.path().join("out.zt");
    let append = || {
        let mut c = bin();
        c.args([
            "convert".as_ref(),
            "--append".as_ref(),
            input.as_os_str(),
            dest.as_os_str(),
            "--compress".as_ref(),
            "zstd".as_ref(),
            "--digest".as_ref(),
            "xxh3".as_ref(),
        ]);
        c
    };
    std::fs::copy(&old, &dest).unwrap();
    let t = Instant::now();
    let o = append().output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let full = t.elapsed();
    let new_bytes = std::fs::read(&dest).unwrap();
    assert_ne!(new_bytes, old_bytes);
    let mut rng = Rng::from_env();
    let (mut saw_old, mut saw_new) = (0, 0);
    for round in 0..kill_count() {
        std::fs::copy(&old, &dest).unwrap();
        let delay = Duration::from_micros(rng.below(full.as_micros() as u64 * 6 / 5));
        let mut child = append()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        let after = std::fs::read(&dest).expect("the file still exists");
        if after == new_bytes {
            saw_new += 1;
        } else {
            assert!(
                after == old_bytes,
                "round {round}, killed after {delay:?}: the file is neither old nor new"
            );
            saw_old += 1;
        }
        for t in temps_of(dir.path(), "out.zt") {
            assert!(std::fs::metadata(&t).unwrap().len() <= new_bytes.len() as u64);
        }
    }
    eprintln!(
        "append: {} kills over {full:?}: old {saw_old}, new {saw_new}",
        kill_count()
    );
    // The next append removes the dead writers' temps.
    std::fs::copy(&old, &dest).unwrap();
    let o = append().output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&dest).unwrap(), new_bytes);
    assert_eq!(temps_of(dir.path(), "out.zt"), Vec::<PathBuf>::new());
}

#[test]
fn sharded_convert_killed_at_random_points_leaves_a_readable_model() {
    // Shards are written one by one, each atomically, then the index: after a kill the index
    // (if any) names only complete shards, so the folder always opens as a model.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    write_f32_file(&input, 16, 1 << 18, 7); // 16 MiB
    let out = dir.path().join("m");
    std::fs::create_dir(&out).unwrap();
    let dest = out.join("model.safetensors");
    let mut rng = Rng::from_env();
    for _ in 0..kill_count().div_ceil(2) {
        let mut child = bin()
            .args([
                "convert".as_ref(),
                input.as_os_str(),
                dest.as_os_str(),
                "--shard-size".as_ref(),
                "3MB".as_ref(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(600)));
        let _ = child.kill();
        child.wait().unwrap();
        let index = out.join("model.safetensors.index.json");
        if index.exists() {
            let o = run(&["hash".as_ref(), index.as_os_str()]);
            assert!(
                o.status.success(),
                "a killed sharded write left an unreadable model: {}",
                stderr(&o)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Full disk

/// A tmpfs of `kib` KiB mounted on a fresh folder, unmounted on drop. `None` where this
/// process may not mount (not root, or no mount permission in this container).
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(kib: u64) -> Option<SmallFs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        ok.then_some(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn convert_onto_a_full_disk_fails_cleanly_and_keeps_the_old_file() {
    let Some(fs) = SmallFs::mount(1024) else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root); full-disk test not run");
        return;
    };
    let src = tempfile::tempdir().unwrap();
    let input = src.path().join("in.safetensors");
    write_f32_file(&input, 4, 1 << 18, 7); // 4 MiB: more than the 1 MiB filesystem holds

    // No previous file: nothing may appear.
    let dest = fs.path().join("out.safetensors");
    let o = run(&["convert".as_ref(), input.as_os_str(), dest.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let msg = stderr(&o);
    assert!(msg.contains("No space left"), "unclear error: {msg}");
    assert!(
        msg.contains("out.safetensors"),
        "error does not name the file: {msg}"
    );
    assert!(
        !dest.exists(),
        "a partial file appeared under the final name"
    );
    assert_eq!(
        temps_of(fs.path(), "out.safetensors"),
        Vec::<PathBuf>::new()
    );

    // A previous file stays whole.
    let small = src.path().join("small.safetensors");
    write_f32_file(&small, 2, 1000, 9);
    std::fs::copy(&small, &dest).unwrap();
    let o = run(&["convert".as_ref(), input.as_os_str(), dest.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        std::fs::read(&small).unwrap()
    );
    assert_eq!(
        temps_of(fs.path(), "out.safetensors"),
        Vec::<PathBuf>::new()
    );

    // zTensor writers too, every version, raw and zstd (a stream per part for v0.1/v1.1,
    // seekable frames for v2: the disk fills in the middle of a streamed part).
    for (v, more) in [
        ("0.1", &[][..]),
        ("1.1", &[][..]),
        ("2", &[][..]),
        ("0.1", &["--compress", "zstd:1", "--digest", "sha256"][..]),
        ("1.1", &["--compress", "zstd:1", "--digest", "crc32c"][..]),
        ("2", &["--compress", "zstd:1", "--digest", "xxh3"][..]),
    ] {
        let zt = fs.path().join("out.zt");
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "convert".as_ref(),
            input.as_os_str(),
            zt.as_os_str(),
            "--zt-version".as_ref(),
            v.as_ref(),
        ];
        args.extend(more.iter().map(std::ffi::OsStr::new));
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "v{v}: {}", stderr(&o));
        assert!(stderr(&o).contains("No space left"), "v{v}: {}", stderr(&o));
        assert!(
            !zt.exists(),
            "v{v}: a partial file appeared under the final name"
        );
        assert_eq!(temps_of(fs.path(), "out.zt"), Vec::<PathBuf>::new(), "v{v}");
    }

    // GGUF, plain and quantized (rows of 256: the disk fills in the middle of a tensor).
    let matrix = src.path().join("matrix.safetensors");
    write_f32_file_shaped(&matrix, "m", 4, &[1 << 10, 256], 7);
    for more in [&[][..], &["--quantize", "Q8_0"][..]] {
        let out = fs.path().join("out.gguf");
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["convert".as_ref(), matrix.as_os_str(), out.as_os_str()];
        args.extend(more.iter().map(std::ffi::OsStr::new));
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "gguf {more:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("No space left"), "{}", stderr(&o));
        assert!(stderr(&o).contains("out.gguf"), "{}", stderr(&o));
        assert!(!out.exists(), "gguf {more:?}: a partial file appeared");
        assert_eq!(temps_of(fs.path(), "out.gguf"), Vec::<PathBuf>::new());
    }

    // Appending to a v2 file that fits, more than fits: the old file stays as it was.
    let zt = fs.path().join("base.zt");
    let o = run(&["convert".as_ref(), small.as_os_str(), zt.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let base = std::fs::read(&zt).unwrap();
    let more = src.path().join("more.safetensors");
    write_f32_file_named(&more, "extra", 4, 1 << 18, 3);
    let o = run(&[
        "convert".as_ref(),
        "--append".as_ref(),
        more.as_os_str(),
        zt.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "append: {}", stderr(&o));
    assert!(
        stderr(&o).contains("No space left"),
        "append: {}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&zt).unwrap(), base);
    assert_eq!(temps_of(fs.path(), "base.zt"), Vec::<PathBuf>::new());
    std::fs::remove_file(&zt).unwrap();

    // And the filesystem has its space back: a file that fits converts.
    let o = run(&["convert".as_ref(), small.as_os_str(), dest.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

// ---------------------------------------------------------------------------------------------
// Resource bounds

/// Runs the binary with its address space limited to `mib` MiB (`ulimit -v`). An allocation
/// sized by what a file claims would fail and abort instead of exiting with 2.
fn run_limited(mib: u64, args: &[&str]) -> Output {
    let exe = env!("CARGO_BIN_EXE_tensorsmith");
    let mut script = format!("ulimit -v {} && exec '{exe}'", mib * 1024);
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    Command::new("sh").arg("-c").arg(script).output().unwrap()
}

fn file_with_header(dir: &Path, name: &str, n_field: u64, json: &[u8], data: usize) -> String {
    let mut b = n_field.to_le_bytes().to_vec();
    b.extend_from_slice(json);
    b.resize(b.len() + data, 0);
    let p = dir.join(name);
    std::fs::write(&p, b).unwrap();
    p.to_str().unwrap().to_owned()
}

/// Address space the binary may use in these tests: a fraction of what any claim would need.
const LIMIT_MIB: u64 = 256;

/// Asserts that `cmd` refused the file `name`: `validate` reports it invalid (exit 1, a line
/// on stdout), other commands fail (exit 2, a message on stderr); either way the file is named.
fn assert_refused(cmd: &str, o: &Output, name: &str) -> String {
    let (code, msg) = if cmd == "validate" {
        (1, String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        (2, stderr(o))
    };
    assert_eq!(
        o.status.code(),
        Some(code),
        "{cmd} {name}: {msg}{}",
        stderr(o)
    );
    assert!(
        msg.contains(name),
        "{cmd} {name}: message does not name the file: {msg}"
    );
    msg
}

#[test]
fn a_header_length_of_a_terabyte_is_refused_without_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let f = file_with_header(dir.path(), "tb.safetensors", 1 << 40, b"{}", 0);
    let o = run_limited(LIMIT_MIB, &["inspect", &f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("tb.safetensors"));
    // Raising the limit past the claim: the claim is then checked against the file size.
    let o = run_limited(
        LIMIT_MIB,
        &["inspect", "--max-header-size", "2000000000000", &f],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn tensors_claiming_a_terabyte_or_overflowing_shapes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str); 3] = [
        (
            "claims_tb.safetensors",
            r#"{"t":{"dtype":"F32","shape":[262144,1048576],"data_offsets":[0,1099511627776]}}"#,
        ),
        (
            "overflow_shape.safetensors",
            r#"{"t":{"dtype":"F64","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}"#,
        ),
        (
            "offset_past_u64.safetensors",
            r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}}"#,
        ),
    ];
    for (name, json) in cases {
        let f = file_with_header(dir.path(), name, json.len() as u64, json.as_bytes(), 8);
        for cmd in ["inspect", "validate"] {
            let o = run_limited(LIMIT_MIB, &[cmd, &f]);
            assert_refused(cmd, &o, name);
        }
    }
}

#[test]
fn deeply_nested_json_is_refused_without_exhausting_the_stack() {
    let dir = tempfile::tempdir().unwrap();
    let depth = 1_000_000;
    // Unknown keys of a tensor entry are skipped, whatever their value: the one place where
    // the parser walks arbitrary JSON.
    let mut json = br#"{"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":"#.to_vec();
    json.extend(std::iter::repeat_n(b'[', depth));
    json.extend(std::iter::repeat_n(b']', depth));
    json.extend_from_slice(b"}}");
    let f = file_with_header(dir.path(), "deep.safetensors", json.len() as u64, &json, 0);
    let o = run_limited(LIMIT_MIB, &["validate", &f]);
    let msg = assert_refused("validate", &o, "deep.safetensors");
    assert!(msg.contains("nest"), "{msg}");
}
