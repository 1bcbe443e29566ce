//! `s3://` and `s3a://` reading against a real S3-compatible server (moto in server mode, from
//! the repository's `.venv`; required, not skipped): inspect, hash and convert give what the
//! local file gives, inspect moves only the header (counted by a forwarder in front of the
//! server), credentials come from the environment, a profile file or `--storage-option`,
//! failures are worded by cause and never show a secret or a signature, an object replaced
//! mid-read is caught, and shard indexes and ONNX external data resolve beside the URL.

#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/proxy.rs"]
mod proxy;

use moto::{bare_cli as bin, err, ok, repo_root, run, signed_cli as signed, Moto, KEY, SECRET};
use proxy::Proxy;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

/// A safetensors file of `mib` MiB of data in 8 tensors whose values follow `seed`.
fn big_safetensors(path: &Path, mib: usize, seed: u8) {
    let mut w = Writer::new();
    let each = (mib << 20) / 8;
    for i in 0..8 {
        let data: Vec<u8> = (0..each)
            .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i as u8 ^ seed))
            .collect();
        w.add(
            &format!("layers.{i}.weight"),
            DType::U8,
            &[each as u64],
            data,
        )
        .unwrap();
    }
    w.write_file(path).unwrap();
}

fn hash_line(o: &Output) -> String {
    ok(o).split_whitespace().next().unwrap().to_owned()
}

#[test]
fn s3_reads_as_the_local_file_does_and_fetches_only_headers() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("models");
    let st = d.path().join("m.safetensors");
    big_safetensors(&st, 16, 0);
    let gguf = repo_root().join("tests/data/gguf/every_type.gguf");
    m.put_file("models", "dir/m.safetensors", &st);
    m.put_file("models", "dir/every_type.gguf", &gguf);
    let proxy = Proxy::start(&m.endpoint);

    // inspect of a 16 MiB object: the header only.
    let o = run(
        signed(home.path(), &proxy.endpoint),
        &["inspect", "--json", "s3://models/dir/m.safetensors"],
    );
    let remote: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    let local: serde_json::Value = serde_json::from_str(&ok(&run(
        bin(home.path()),
        &["inspect", "--json", st.to_str().unwrap()],
    )))
    .unwrap();
    assert_eq!(remote["tensors"], local["tensors"]);
    let moved = proxy.down.load(std::sync::atomic::Ordering::SeqCst);
    assert!(moved < 1 << 20, "inspect moved {moved} bytes");

    for (key, path) in [("dir/m.safetensors", &st), ("dir/every_type.gguf", &gguf)] {
        let local = hash_line(&run(bin(home.path()), &["hash", path.to_str().unwrap()]));
        for scheme in ["s3", "s3a"] {
            let url = format!("{scheme}://models/{key}");
            let o = run(signed(home.path(), &m.endpoint), &["hash", &url]);
            assert_eq!(hash_line(&o), local, "{url}");
        }
        let ext = path.extension().unwrap().to_str().unwrap();
        let (a, b) = (
            d.path().join(format!("a.{ext}")),
            d.path().join(format!("b.{ext}")),
        );
        ok(&run(
            bin(home.path()),
            &["convert", path.to_str().unwrap(), a.to_str().unwrap()],
        ));
        let url = format!("s3://models/{key}");
        ok(&run(
            signed(home.path(), &m.endpoint),
            &["convert", &url, b.to_str().unwrap()],
        ));
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{url}"
        );
    }
}

#[test]
fn credentials_from_the_environment_a_profile_and_storage_options() {
    let home = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("bkt");
    let st = repo_root().join("tests/data/safetensors/dtype_bfloat16.safetensors");
    m.put_file("bkt", "m.safetensors", &st);
    let url = "s3://bkt/m.safetensors";

    let p = Proxy::start(&m.endpoint);
    let mut c = bin(home.path());
    c.env("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .env("AWS_ENDPOINT_URL_S3", &p.endpoint)
        .env("AWS_REGION", "eu-west-3");
    ok(&run(c, &["inspect", url]));
    let sent = p.sent_text();
    assert!(sent.contains("Credential=AKIAFROMENV/"), "{sent}");
    assert!(sent.contains("/eu-west-3/s3/aws4_request"), "{sent}");

    let p = Proxy::start(&m.endpoint);
    let creds = home.path().join("creds");
    let config = home.path().join("conf");
    std::fs::write(
        &creds,
        "[dev]\naws_access_key_id = AKIAFROMPROFILE\naws_secret_access_key = s\n",
    )
    .unwrap();
    // Profile dev's region and endpoint (the proxy's).
    let dev_config = |endpoint: &str| {
        let text = format!("[profile dev]\nregion = ap-south-1\nendpoint_url = {endpoint}\n");
        std::fs::write(&config, text).unwrap();
    };
    dev_config(&p.endpoint);
    let mut c = bin(home.path());
    c.env("AWS_PROFILE", "dev")
        .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
        .env("AWS_CONFIG_FILE", &config);
    ok(&run(c, &["inspect", url]));
    let sent = p.sent_text();
    assert!(sent.contains("Credential=AKIAFROMPROFILE/"), "{sent}");
    assert!(sent.contains("/ap-south-1/s3/aws4_request"), "{sent}");

    // The environment's keys win over AWS_PROFILE, but a profile named by the options is
    // the one used (as boto3's Session(profile_name=) and the AWS CLI's --profile).
    for (named, want) in [(false, "AKIAFROMENV"), (true, "AKIAFROMPROFILE")] {
        let p = Proxy::start(&m.endpoint);
        dev_config(&p.endpoint);
        let mut c = bin(home.path());
        c.env("AWS_SHARED_CREDENTIALS_FILE", &creds)
            .env("AWS_CONFIG_FILE", &config)
            .env("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
            .env("AWS_SECRET_ACCESS_KEY", "s");
        match named {
            true => c.args(["inspect", "--storage-option", "profile=dev", url]),
            false => c.env("AWS_PROFILE", "dev").args(["inspect", url]),
        };
        ok(&run(c, &[]));
        let sent = p.sent_text();
        assert!(
            sent.contains(&format!("Credential={want}/")),
            "{named}: {sent}"
        );
    }

    // Storage options win over the environment.
    let p = Proxy::start(&m.endpoint);
    let mut c = signed(home.path(), "http://127.0.0.1:1");
    c.arg("inspect")
        .args([
            "--storage-option",
            "key=AKIAFROMOPTION",
            "--storage-option",
            "aws_secret_access_key=s",
        ])
        .args(["--storage-option", &format!("endpoint_url={}", p.endpoint)]);
    ok(&run(c, &[url]));
    assert!(p.sent_text().contains("Credential=AKIAFROMOPTION/"));

    // No credentials: an unsigned request, which this bucket refuses.
    let p = Proxy::start(&m.endpoint);
    let mut c = bin(home.path());
    c.env("AWS_ENDPOINT_URL", &p.endpoint);
    let e = err(&run(c, &["inspect", url]));
    assert!(!p.sent_text().to_lowercase().contains("authorization:"));
    assert!(
        e.contains("s3://bkt/m.safetensors: access denied") && e.contains("no credentials"),
        "{e}"
    );

    let e = err(&run(
        bin(home.path()),
        &["inspect", "--storage-option", "bogus=1", url],
    ));
    assert!(e.contains("unknown key \"bogus\""), "{e}");
}

#[test]
fn failures_name_the_url_and_the_cause_never_a_secret() {
    let home = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("bkt");
    let st = repo_root().join("tests/data/safetensors/dtype_bfloat16.safetensors");
    m.put_file("bkt", "m.safetensors", &st);
    let no_secret = |e: &str| {
        assert!(
            !e.contains(SECRET) && !e.contains("X-Amz-Signature") && !e.contains("Signature="),
            "{e}"
        );
    };

    let o = run(
        signed(home.path(), &m.endpoint),
        &["inspect", "s3://nob/m.safetensors"],
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        e.contains("s3://nob/m.safetensors: no such bucket 'nob'"),
        "{e}"
    );
    no_secret(&e);

    let e = err(&run(
        signed(home.path(), &m.endpoint),
        &["inspect", "s3://bkt/none.safetensors"],
    ));
    assert!(
        e.contains(
            "s3://bkt/none.safetensors: not found: no object 'none.safetensors' in bucket 'bkt'"
        ),
        "{e}"
    );
    no_secret(&e);

    let closed = format!("http://127.0.0.1:{}", moto::free_port());
    let t = Instant::now();
    let e = err(&run(
        signed(home.path(), &closed),
        &["inspect", "s3://bkt/m.safetensors"],
    ));
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert!(
        e.contains("s3://bkt/m.safetensors: cannot reach the endpoint: http://127.0.0.1:"),
        "{e}"
    );
    no_secret(&e);

    // Outputs no store takes are refused by name before the input is opened.
    for (out, why) in [
        ("hf://o/r/out.safetensors", "hf:// is read only"),
        ("ftp://h/out.safetensors", "unsupported URL scheme \"ftp\""),
        ("https://h/out.safetensors", "writing to https:// URLs"),
    ] {
        let e = err(&run(
            bin(home.path()),
            &["convert", "s3://bkt/m.safetensors", out],
        ));
        assert!(e.contains(why), "{e}");
    }

    // A wrong secret, against a moto that checks credentials (IAM mode). moto checks only
    // Authorization headers, not presigned URLs, so it answers 500 rather than 403; what is
    // checked here is that the secret and the signature never reach the output.
    let iam = Moto::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "2")]);
    iam.py("import json\niam = boto3.client('iam', endpoint_url=s3.meta.endpoint_url, aws_access_key_id='x', aws_secret_access_key='y', region_name='us-east-1')\niam.create_user(UserName='u')\nprint(iam.create_access_key(UserName='u')['AccessKey']['AccessKeyId'])");
    let mut c = bin(home.path());
    c.arg("inspect")
        .args([
            "--storage-option",
            "key=AKIAWRONGSECRET",
            "--storage-option",
            &format!("secret={SECRET}"),
        ])
        .args([
            "--storage-option",
            &format!("endpoint_url={}", iam.endpoint),
        ]);
    let e = err(&run(c, &["s3://bkt/m.safetensors"]));
    assert!(e.contains("s3://bkt/m.safetensors"), "{e}");
    no_secret(&e);
}

#[test]
fn an_object_replaced_during_a_read_is_caught() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("bkt");
    let (v1, v2) = (
        d.path().join("v1.safetensors"),
        d.path().join("v2.safetensors"),
    );
    big_safetensors(&v1, 8, 0);
    big_safetensors(&v2, 8, 1);
    m.put_file("bkt", "m.safetensors", &v1);
    let (endpoint, v2s) = (m.endpoint.clone(), v2.to_str().unwrap().to_owned());
    // Before the second request (the first read past the opening bytes), version 2 goes up.
    let proxy = Proxy::start_with_hook(
        &m.endpoint,
        2,
        Box::new(move || {
            let code = format!(
                "import boto3\nboto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='{KEY}', \
                 aws_secret_access_key='{SECRET}', region_name='us-east-1').upload_file({v2s:?}, 'bkt', 'm.safetensors')"
            );
            let s = Command::new(moto::python())
                .args(["-c", &code])
                .status()
                .unwrap();
            assert!(s.success());
        }),
    );
    let out = d.path().join("out.safetensors");
    let o = run(
        signed(home.path(), &proxy.endpoint),
        &["convert", "s3://bkt/m.safetensors", out.to_str().unwrap()],
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(
        e.contains("s3://bkt/m.safetensors") && e.contains("changed during the read"),
        "{e}"
    );
    assert!(!out.exists());
}

#[test]
fn shard_indexes_and_onnx_external_data_resolve_beside_the_url() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("bkt");
    let ck = d.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    let src = d.path().join("src.safetensors");
    big_safetensors(&src, 2, 3);
    let index = ck.join("model.safetensors");
    ok(&run(
        bin(home.path()),
        &[
            "convert",
            "--shard-size",
            "600KB",
            src.to_str().unwrap(),
            index.to_str().unwrap(),
        ],
    ));
    let mut names: Vec<PathBuf> = std::fs::read_dir(&ck)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() > 2, "{names:?}");
    for p in &names {
        let name = p.file_name().unwrap().to_str().unwrap();
        m.put_file("bkt", &format!("ck/{name}"), p);
    }
    let local_index = ck.join("model.safetensors.index.json");
    let local = hash_line(&run(
        bin(home.path()),
        &["hash", local_index.to_str().unwrap()],
    ));
    let o = run(
        signed(home.path(), &m.endpoint),
        &["hash", "s3://bkt/ck/model.safetensors.index.json"],
    );
    assert_eq!(hash_line(&o), local);

    let onnx = repo_root().join("tests/data/onnx/external");
    m.put_file("bkt", "onnx/m.onnx", &onnx.join("m.onnx"));
    m.put_file("bkt", "onnx/m.onnx.data", &onnx.join("m.onnx.data"));
    let local = hash_line(&run(
        bin(home.path()),
        &["hash", onnx.join("m.onnx").to_str().unwrap()],
    ));
    let o = run(
        signed(home.path(), &m.endpoint),
        &["hash", "s3://bkt/onnx/m.onnx"],
    );
    assert_eq!(hash_line(&o), local);
    let o = run(
        signed(home.path(), &m.endpoint),
        &["verify", "s3://bkt/onnx/m.onnx"],
    );
    ok(&o);
}

/// A model of over 20 MiB: a 22 MiB F32 tensor and a small BF16 one.
fn large_model(path: &Path) {
    let mut w = Writer::new();
    let big: Vec<u8> = (0..22u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 9) as u8)
        .collect();
    w.add("big", DType::F32, &[22 << 18], big).unwrap();
    w.add("small", DType::BF16, &[500], vec![7u8; 1000])
        .unwrap();
    w.write_file(path).unwrap();
}

#[test]
fn a_large_object_downloads_in_parts_as_the_storage_options_say() {
    let home = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let m = Moto::start();
    m.bucket("models");
    let st = d.path().join("m.safetensors");
    large_model(&st);
    m.put_file("models", "big/m.safetensors", &st);
    let local = d.path().join("local.safetensors");
    ok(&run(
        bin(home.path()),
        &["convert", st.to_str().unwrap(), local.to_str().unwrap()],
    ));
    let want = std::fs::read(&local).unwrap();
    // The big tensor past the first 256 KiB read at open: 21.75 MiB, in 5 MiB parts (5
    // requests) or in the default 8 MiB ones (3); then the small tensor (1).
    for (options, gets) in [
        (vec!["part_size=5MiB", "max_concurrency=4"], 1 + 5 + 1),
        (vec![], 1 + 3 + 1),
    ] {
        let proxy = Proxy::start(&m.endpoint);
        let out = d.path().join("remote.safetensors");
        let mut c = signed(home.path(), &proxy.endpoint);
        c.args([
            "convert",
            "s3://models/big/m.safetensors",
            out.to_str().unwrap(),
        ]);
        for o in &options {
            c.args(["--storage-option", o]);
        }
        ok(&c.output().unwrap());
        assert!(std::fs::read(&out).unwrap() == want, "{options:?}");
        let n = proxy.requests.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(n, gets, "{options:?}");
    }
}
