//! `convert` to `s3://` outputs against a real S3-compatible server (moto in server mode, from
//! the repository's `.venv`; required, not skipped): safetensors, GGUF and zTensor objects
//! byte-identical to a local convert, multipart above the part size; a convert that fails
//! mid-way or is killed leaves no object (a killed one leaves its open upload); outputs of
//! several files refused by name; errors that name the URL; peak anonymous memory bounded
//! by the upload's parts, not the model.

#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/proxy.rs"]
mod proxy;

use moto::{err, ok, run, signed_cli as cli, Moto, KEY, SECRET};
use proxy::Proxy;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A safetensors file of `tensors` F32 tensors of `mib_each` MiB, values from `seed`.
fn model(path: &Path, tensors: usize, mib_each: usize, seed: u64) {
    let n = (mib_each << 20) / 4;
    let mut header = String::from("{");
    for i in 0..tensors {
        let off = (i * n * 4) as u64;
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"layers.{i}.weight\":{{\"dtype\":\"F32\",\"shape\":[{n}],\"data_offsets\":[{off},{}]}}",
            off + (n * 4) as u64
        ));
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut buf = Vec::with_capacity(n * 4);
    for _ in 0..tensors {
        buf.clear();
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf.extend_from_slice(&((x >> 40) as f32 / 1e6 - 8.0).to_le_bytes());
        }
        f.write_all(&buf).unwrap();
    }
    f.flush().unwrap();
}

/// `s3://bucket/key`'s bytes, downloaded by boto3 into `to`.
fn download(m: &Moto, bucket: &str, key: &str, to: &Path) -> Vec<u8> {
    m.py(&format!(
        "s3.download_file('{bucket}', {key:?}, {:?})",
        to.to_str().unwrap()
    ));
    std::fs::read(to).unwrap()
}

/// Keys in the bucket, and open multipart uploads, as `keys|uploads` lines.
fn listing(m: &Moto, bucket: &str) -> (Vec<String>, Vec<String>) {
    let out = m.py(&format!(
        "print(','.join(o['Key'] for o in s3.list_objects_v2(Bucket='{bucket}').get('Contents', [])))\n\
         print(','.join(u['Key'] for u in s3.list_multipart_uploads(Bucket='{bucket}').get('Uploads', [])))"
    ));
    let mut lines = out.lines().map(|l| {
        l.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    (lines.next().unwrap(), lines.next().unwrap())
}

#[test]
fn convert_to_s3_gives_the_bytes_of_a_local_convert() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("models");
    // 13 MiB: three 5 MiB parts for safetensors and GGUF; zTensor is spooled, then put in
    // parts too.
    let input = d.path().join("in.safetensors");
    model(&input, 13, 1, 7);
    let inp = input.to_str().unwrap();
    for ext in ["safetensors", "gguf", "zt"] {
        let local = d.path().join(format!("local.{ext}"));
        ok(&run(
            cli(home.path(), &m.endpoint),
            &["convert", inp, local.to_str().unwrap()],
        ));
        for scheme in ["s3", "s3a"] {
            let url = format!("{scheme}://models/out/m.{ext}");
            let o = run(
                cli(home.path(), &m.endpoint),
                &["convert", "--storage-option", "part_size=5MiB", inp, &url],
            );
            ok(&o);
            let got = download(&m, "models", &format!("out/m.{ext}"), &d.path().join("got"));
            assert!(got == std::fs::read(&local).unwrap(), "{url}");
            // Multipart: its ETag says three parts.
            let etag = m.py(&format!(
                "print(s3.head_object(Bucket='models', Key='out/m.{ext}')['ETag'])"
            ));
            assert!(etag.trim().ends_with("-3\""), "{url}: {etag}");
            // And back: s3 -> local gives the local convert's bytes again.
            let back = d.path().join(format!("back.{ext}"));
            ok(&run(
                cli(home.path(), &m.endpoint),
                &["convert", &url, back.to_str().unwrap()],
            ));
            assert!(
                std::fs::read(&back).unwrap() == std::fs::read(&local).unwrap(),
                "{url}"
            );
        }
    }
    // A small output goes up as one PutObject (no parts); storage options set the endpoint.
    let small = d.path().join("small.safetensors");
    model(&small, 2, 1, 1);
    let mut c = cli(home.path(), "http://127.0.0.1:1");
    c.env_remove("AWS_ENDPOINT_URL");
    ok(&run(
        c,
        &[
            "convert",
            "--storage-option",
            &format!("endpoint_url={}", m.endpoint),
            small.to_str().unwrap(),
            "s3://models/small.safetensors",
        ],
    ));
    let got = download(&m, "models", "small.safetensors", &d.path().join("got"));
    assert!(got == std::fs::read(&small).unwrap());
    let (keys, uploads) = listing(&m, "models");
    assert_eq!(keys.len(), 4, "{keys:?}");
    assert!(uploads.is_empty(), "{uploads:?}");
}

#[test]
fn a_convert_that_fails_mid_way_leaves_no_object_and_no_upload() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("models");
    let (v1, v2) = (d.path().join("v1"), d.path().join("v2"));
    model(&v1, 8, 4, 1);
    model(&v2, 8, 4, 2);
    m.put_file("models", "in.safetensors", &v1);
    // The input is read over plain HTTP through a forwarder that replaces it with another
    // version before its 6th request: by then 5 MiB parts of the output are uploaded, and the
    // next read fails (the object changed during the read).
    let (endpoint, v2s) = (m.endpoint.clone(), v2.to_str().unwrap().to_owned());
    let proxy = Proxy::start_with_hook(
        &m.endpoint,
        6,
        Box::new(move || {
            let code = format!(
                "import boto3\nboto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='{KEY}', \
                 aws_secret_access_key='{SECRET}', region_name='us-east-1').upload_file({v2s:?}, 'models', 'in.safetensors')"
            );
            let s = Command::new(moto::python())
                .args(["-c", &code])
                .status()
                .unwrap();
            assert!(s.success());
        }),
    );
    for ext in ["safetensors", "gguf"] {
        m.put_file("models", "in.safetensors", &v1);
        proxy.requests.store(0, Ordering::SeqCst);
        let url = format!("s3://models/out.{ext}");
        let o = run(
            cli(home.path(), &m.endpoint),
            &[
                "convert",
                "--storage-option",
                "part_size=5MiB",
                &format!("{}/models/in.safetensors", proxy.endpoint),
                &url,
            ],
        );
        let e = err(&o);
        assert!(e.contains("changed during the read"), "{e}");
        let (keys, uploads) = listing(&m, "models");
        assert_eq!(keys, vec!["in.safetensors"], "{url}");
        assert!(uploads.is_empty(), "{url}: {uploads:?}");
    }
}

#[test]
fn a_writer_killed_mid_upload_leaves_no_object() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("models");
    let input = d.path().join("in.safetensors");
    model(&input, 16, 4, 3);
    let proxy = Proxy::start(&m.endpoint);
    let mut c = cli(home.path(), &proxy.endpoint);
    let mut child = c
        .args([
            "convert",
            "--storage-option",
            "part_size=5MiB",
            "--storage-option",
            "max_concurrency=2",
            input.to_str().unwrap(),
            "s3://models/killed.safetensors",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the upload is started and a few parts are on their way.
    let t = Instant::now();
    while proxy.requests.load(Ordering::SeqCst) < 4 {
        assert!(t.elapsed() < Duration::from_secs(60), "no upload started");
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the kill"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (keys, uploads) = listing(&m, "models");
    assert!(keys.is_empty(), "{keys:?}");
    // Its upload stays open (no process is left to abort it): `list_uploads` finds it.
    assert_eq!(uploads, vec!["killed.safetensors"]);
}

#[test]
fn refusals_and_errors_name_the_url() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("models");
    let input = d.path().join("in.safetensors");
    model(&input, 2, 1, 4);
    let inp = input.to_str().unwrap();
    let c = || cli(home.path(), &m.endpoint);

    let e = err(&run(c(), &["convert", inp, "s3://nobucket/m.safetensors"]));
    assert!(
        e.contains("s3://nobucket/m.safetensors: no such bucket 'nobucket'"),
        "{e}"
    );
    let closed = format!("http://127.0.0.1:{}", moto::free_port());
    let e = err(&run(
        cli(home.path(), &closed),
        &[
            "convert",
            "--storage-option",
            "max_attempts=2",
            inp,
            "s3://models/m.safetensors",
        ],
    ));
    assert!(
        e.contains("s3://models/m.safetensors: cannot reach the endpoint: http://127.0.0.1:"),
        "{e}"
    );
    for (args, why) in [
        (
            vec!["--shard-size", "1MB", "s3://models/sh/model.safetensors"],
            "a sharded checkpoint (--shard-size) to s3:// URLs is not supported",
        ),
        (
            vec!["--split-max-tensors", "1", "s3://models/m.gguf"],
            "a split GGUF model to s3:// URLs is not supported",
        ),
        (
            vec!["--append", "s3://models/m.zt"],
            "appending to a zTensor file to s3:// URLs",
        ),
        (vec!["s3://models/m.onnx"], "ONNX output"),
        (vec!["hf://o/r/m.safetensors"], "hf:// is read only"),
        (
            vec!["ftp://b/m.safetensors"],
            "unsupported URL scheme \"ftp\"",
        ),
    ] {
        let out = *args.last().unwrap();
        let mut a = vec!["convert", inp];
        a.extend(&args);
        let e = err(&run(c(), &a));
        assert!(e.contains(why) && e.contains(out), "{e}");
    }
    let (keys, uploads) = listing(&m, "models");
    assert!(
        keys.is_empty() && uploads.is_empty(),
        "{keys:?} {uploads:?}"
    );
}

/// Peak `RssAnon` of a child, sampled from /proc every few milliseconds, in MiB; with its
/// exit status.
fn peak_rss_anon_mib(mut c: Command) -> (bool, u64) {
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status) {
            if let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = peak.max(kb);
            }
        }
        if let Some(st) = child.try_wait().unwrap() {
            return (st.success(), peak / 1024);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn peak_anonymous_memory_is_bounded_by_the_parts_not_the_model() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("models");
    // 192 MiB through 5 MiB parts, 2 at once: (2 + 1) × 5 MiB in parts.
    let input = d.path().join("in.safetensors");
    model(&input, 12, 16, 5);
    for ext in ["safetensors", "gguf"] {
        let mut c = cli(home.path(), &m.endpoint);
        c.args([
            "convert",
            "--pread",
            "--storage-option",
            "part_size=5MiB",
            "--storage-option",
            "max_concurrency=2",
            input.to_str().unwrap(),
            &format!("s3://models/big.{ext}"),
        ]);
        let (success, peak) = peak_rss_anon_mib(c);
        assert!(success);
        eprintln!("convert of 192 MiB to s3://…/big.{ext}: peak RssAnon {peak} MiB");
        assert!(peak < 64, "{ext}: peak RssAnon {peak} MiB");
    }
}
