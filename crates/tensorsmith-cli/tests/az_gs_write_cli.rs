//! `convert` to `az://`/`abfs://` (against Azurite, which checks every SAS signature) and to
//! `gs://` (against gcp-storage-emulator): safetensors, GGUF and zTensor outputs are the bytes
//! of a local convert and read back through the URL; multi-part outputs stay within the parts
//! in memory; a convert failing mid-way leaves no blob or object; refusals and errors name the
//! URL, never a key or signature. Both servers are required, not skipped.

#[path = "object_store/emulators.rs"]
mod emulators;
#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/proxy.rs"]
mod proxy;

use emulators::{py, Azurite, GcsEmulator, AZ_ACCOUNT, AZ_KEY};
use proxy::Proxy;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::Writer;

/// The CLI with no store settings from the caller's environment.
fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tensorsmith"));
    for (k, _) in std::env::vars() {
        if k.starts_with("AZURE_") || k.starts_with("GOOGLE_") || k == "STORAGE_EMULATOR_HOST" {
            c.env_remove(k);
        }
    }
    c.env("HOME", "/nonexistent");
    c
}

/// The CLI running `args`, then `opts` as `--storage-option`s.
fn cmd(args: &[&str], opts: &[(&str, &str)]) -> Command {
    let mut c = bin();
    c.args(args);
    for (k, v) in opts {
        c.args(["--storage-option", &format!("{k}={v}")]);
    }
    c
}

fn out(mut c: Command) -> Output {
    c.output().unwrap()
}

fn ok(c: Command) -> String {
    let o = out(c);
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(c: Command) -> String {
    let o = out(c);
    assert!(!o.status.success(), "succeeded");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A safetensors file of 8 tensors, `mib` MiB in all, varied by `seed`.
fn model(path: &Path, mib: usize, seed: u8) {
    let mut w = Writer::new();
    let each = (mib << 20) / 8;
    for i in 0..8u8 {
        let data: Vec<u8> = (0..each)
            .map(|j| (j as u8).wrapping_mul(31) ^ i ^ seed)
            .collect();
        w.add(
            &format!("layers.{i}.weight"),
            DType::I8,
            &[each as u64],
            data,
        )
        .unwrap();
    }
    w.write_file(path).unwrap();
}

/// Peak `RssAnon` of a child, sampled from /proc every few milliseconds, in MiB; with its
/// exit status.
fn peak_rss_anon_mib(mut c: Command) -> (bool, u64) {
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
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

/// The names of the committed blobs of `container`.
fn blobs(az: &Azurite, container: &str) -> Vec<String> {
    let s = az.py(&format!(
        "print(sorted(b.name for b in svc.get_container_client('{container}').list_blobs()))"
    ));
    serde_json::from_str(&s.trim().replace('\'', "\"")).unwrap()
}

fn az_download(az: &Azurite, container: &str, blob: &str, to: &Path) -> Vec<u8> {
    az.py(&format!(
        "open({:?}, 'wb').write(svc.get_blob_client('{container}', {blob:?}).download_blob().readall())",
        to.to_str().unwrap()
    ));
    std::fs::read(to).unwrap()
}

#[test]
fn azure_outputs_are_the_bytes_of_a_local_convert() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.safetensors");
    model(&input, 16, 0);
    let inp = input.to_str().unwrap();
    let az = Azurite::start();
    az.container("out", false);
    let key = [
        ("account_name", AZ_ACCOUNT),
        ("account_key", AZ_KEY),
        ("endpoint_url", az.endpoint.as_str()),
    ];
    // 16 MiB through 5 MiB parts: four blocks and a block list; 1 MiB: one Put Blob.
    for (ext, part) in [("safetensors", "5MiB"), ("gguf", "5MiB"), ("zt", "5MiB")] {
        let local = d.path().join(format!("local.{ext}"));
        ok(cmd(&["convert", inp, local.to_str().unwrap()], &[]));
        let url = format!("az://out/dir/m.{ext}");
        let mut opts = key.to_vec();
        opts.extend([("part_size", part), ("max_concurrency", "3")]);
        ok(cmd(&["convert", inp, &url], &opts));
        let got = az_download(&az, "out", &format!("dir/m.{ext}"), &d.path().join("got"));
        assert!(got == std::fs::read(&local).unwrap(), "{url}");
        let hash = |p: &str, o: &[(&str, &str)]| ok(cmd(&["hash", p], o)).replace(p, "X");
        assert_eq!(
            hash(&url, &key),
            hash(local.to_str().unwrap(), &[]),
            "{url}"
        );
    }
    // Smaller than one part (one Put Blob), to Hadoop's abfs:// form, with the connection
    // string's key.
    let small = d.path().join("small.safetensors");
    model(&small, 1, 3);
    let url = format!("abfs://out@{AZ_ACCOUNT}.dfs.core.windows.net/small.safetensors");
    let mut c = cmd(&["convert", small.to_str().unwrap(), &url], &[]);
    c.env("AZURE_STORAGE_CONNECTION_STRING", az.connection_string());
    ok(c);
    let got = az_download(&az, "out", "small.safetensors", &d.path().join("got"));
    assert!(got == std::fs::read(&small).unwrap());
    // A SAS the Azure SDK made with create and write permissions is used as it is; a
    // read-only one is refused, and the error says why.
    let sas = |perm: &str| {
        py(&format!(
            "import datetime\n\
             from azure.storage.blob import generate_blob_sas, BlobSasPermissions\n\
             print(generate_blob_sas('{AZ_ACCOUNT}', 'out', 'sas.safetensors', \
             account_key='{AZ_KEY}', permission=BlobSasPermissions({perm}), \
             expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)))"
        ))
        .trim()
        .to_owned()
    };
    let url = "az://out/sas.safetensors";
    let with_sas = |s: &str| {
        let mut c = cmd(
            &["convert", "--storage-option", "part_size=5MiB", inp, url],
            &[("endpoint_url", &az.endpoint)],
        );
        c.env("AZURE_STORAGE_ACCOUNT_NAME", AZ_ACCOUNT)
            .env("AZURE_STORAGE_SAS_TOKEN", s);
        c
    };
    let read_only = sas("read=True");
    let e = err(with_sas(&read_only));
    assert!(
        e.contains(url) && e.contains("without create and write permissions"),
        "{e}"
    );
    assert!(!e.contains("sig="), "{e}");
    ok(with_sas(&sas("create=True, write=True")));
    let got = az_download(&az, "out", "sas.safetensors", &d.path().join("got"));
    assert!(got == std::fs::read(&input).unwrap());
}

#[test]
fn azure_failures_leave_no_blob_and_name_the_url() {
    let d = tempfile::tempdir().unwrap();
    let (v1, v2) = (d.path().join("v1"), d.path().join("v2"));
    model(&v1, 16, 1);
    model(&v2, 16, 2);
    let az = Azurite::start();
    az.container("public", true);
    az.container("out", false);
    az.put_file("public", "in.safetensors", &v1);
    // The input is read over plain HTTP through a forwarder that replaces it before its 6th
    // request: by then blocks of the output are up, and the next read fails.
    let v2s = v2.to_str().unwrap().to_owned();
    let cs = az.connection_string();
    let origin = az.endpoint.replace(&format!("/{AZ_ACCOUNT}"), "");
    let proxy = Proxy::start_with_hook(
        &origin,
        6,
        Box::new(move || {
            py(&format!(
                "from azure.storage.blob import BlobServiceClient\n\
                 svc = BlobServiceClient.from_connection_string({cs:?})\n\
                 svc.get_container_client('public').upload_blob('in.safetensors', \
                 open({v2s:?}, 'rb'), overwrite=True)"
            ));
        }),
    );
    let key = [
        ("account_name", AZ_ACCOUNT),
        ("account_key", AZ_KEY),
        ("endpoint_url", az.endpoint.as_str()),
    ];
    let input = format!("{}/{AZ_ACCOUNT}/public/in.safetensors", proxy.endpoint);
    for ext in ["safetensors", "gguf"] {
        az.put_file("public", "in.safetensors", &v1);
        proxy.requests.store(0, Ordering::SeqCst);
        let url = format!("az://out/m.{ext}");
        let mut opts = key.to_vec();
        opts.push(("part_size", "5MiB"));
        let e = err(cmd(&["convert", "--pread", &input, &url], &opts));
        assert!(e.contains("changed during the read"), "{e}");
        assert!(blobs(&az, "out").is_empty(), "{url}");
    }
    // Wrong key, missing container: worded by cause, naming the URL, no key or signature.
    let v1s = v1.to_str().unwrap();
    let wrong = "AAAA".repeat(22);
    let mut opts = key.to_vec();
    opts[1] = ("account_key", &wrong);
    let e = err(cmd(&["convert", v1s, "az://out/w.safetensors"], &opts));
    assert!(
        e.contains("az://out/w.safetensors") && e.contains("account key was refused"),
        "{e}"
    );
    let e2 = err(cmd(
        &["convert", v1s, "az://nocontainer/w.safetensors"],
        &key,
    ));
    assert!(
        e2.contains("az://nocontainer/w.safetensors")
            && e2.contains("no container 'nocontainer' in storage account"),
        "{e2}"
    );
    for e in [&e, &e2] {
        assert!(
            !e.contains(AZ_KEY) && !e.contains(&wrong) && !e.contains("sig="),
            "{e}"
        );
    }
    assert!(blobs(&az, "out").is_empty());
    // The Hub stays read only; unknown schemes are refused by name.
    let e = err(cmd(&["convert", v1s, "hf://o/r/m.safetensors"], &[]));
    assert!(e.contains("hf:// is read only"), "{e}");
    let e = err(cmd(&["convert", v1s, "ftp://b/m.safetensors"], &[]));
    assert!(e.contains("unsupported URL scheme \"ftp\""), "{e}");
}

#[test]
fn azure_peak_memory_is_bounded_by_the_parts_not_the_model() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.safetensors");
    model(&input, 96, 4);
    let az = Azurite::start();
    az.container("out", false);
    // 96 MiB through 5 MiB blocks, 2 at once: (2 + 1) × 5 MiB in parts.
    for ext in ["safetensors", "gguf"] {
        let url = format!("az://out/big.{ext}");
        let c = cmd(
            &["convert", "--pread", input.to_str().unwrap(), &url],
            &[
                ("account_name", AZ_ACCOUNT),
                ("account_key", AZ_KEY),
                ("endpoint_url", az.endpoint.as_str()),
                ("part_size", "5MiB"),
                ("max_concurrency", "2"),
            ],
        );
        let (success, peak) = peak_rss_anon_mib(c);
        assert!(success, "{url}");
        eprintln!("convert of 96 MiB to {url}: peak RssAnon {peak} MiB");
        assert!(peak < 48, "{url}: peak RssAnon {peak} MiB");
    }
    assert_eq!(blobs(&az, "out"), vec!["big.gguf", "big.safetensors"]);
}

/// The names of the objects of `bucket`.
fn objects(gcs: &GcsEmulator, bucket: &str) -> Vec<String> {
    let s = py(&format!(
        "import json, urllib.request\n\
         r = json.load(urllib.request.urlopen('{}/storage/v1/b/{bucket}/o'))\n\
         print(json.dumps(sorted(i['name'] for i in r.get('items', []))))",
        gcs.endpoint
    ));
    serde_json::from_str(s.trim()).unwrap()
}

fn gcs_download(gcs: &GcsEmulator, bucket: &str, object: &str, to: &Path) -> Vec<u8> {
    py(&format!(
        "import urllib.request, urllib.parse\n\
         open({:?}, 'wb').write(urllib.request.urlopen('{}/{bucket}/' + \
         urllib.parse.quote({object:?})).read())",
        to.to_str().unwrap(),
        gcs.endpoint
    ));
    std::fs::read(to).unwrap()
}

#[test]
fn gcs_outputs_are_the_bytes_of_a_local_convert() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.safetensors");
    model(&input, 16, 5);
    let inp = input.to_str().unwrap();
    let gcs = GcsEmulator::start();
    gcs.bucket("out");
    // 16 MiB through 5 MiB chunks of a resumable upload, the last with the total.
    for ext in ["safetensors", "gguf", "zt"] {
        let local = d.path().join(format!("local.{ext}"));
        ok(cmd(&["convert", inp, local.to_str().unwrap()], &[]));
        let url = format!("gs://out/dir/m.{ext}");
        let mut c = cmd(&["convert", inp, &url], &[("part_size", "5MiB")]);
        c.env("STORAGE_EMULATOR_HOST", &gcs.endpoint);
        ok(c);
        let got = gcs_download(&gcs, "out", &format!("dir/m.{ext}"), &d.path().join("got"));
        assert!(got == std::fs::read(&local).unwrap(), "{url}");
        let from = ok(cmd(&["hash", &url], &[("endpoint_url", &gcs.endpoint)]));
        let want = ok(cmd(&["hash", local.to_str().unwrap()], &[]));
        assert_eq!(
            from.replace(&url, "X"),
            want.replace(local.to_str().unwrap(), "X")
        );
    }
    // Exactly one 5 MiB chunk: the commit sends no bytes, only the total; then the same file
    // smaller than one part: one media upload.
    let src = d.path().join("exact.safetensors");
    let target = 5 << 20;
    let write = |n: usize| {
        let mut w = Writer::new();
        w.add("t", DType::I8, &[n as u64], vec![7; n]).unwrap();
        w.write_file(&src).unwrap();
        std::fs::metadata(&src).unwrap().len() as usize
    };
    let first = target - 1000;
    let len = write(first);
    assert_eq!(write(first + target - len), target);
    for (name, part) in [("exact", "5MiB"), ("small", "8MiB")] {
        let url = format!("gs://out/{name}.safetensors");
        ok(cmd(
            &["convert", src.to_str().unwrap(), &url],
            &[("endpoint_url", &gcs.endpoint), ("part_size", part)],
        ));
        let got = gcs_download(
            &gcs,
            "out",
            &format!("{name}.safetensors"),
            &d.path().join("g"),
        );
        assert!(
            got == std::fs::read(&src).unwrap(),
            "{url} ({} bytes)",
            got.len()
        );
    }
}

#[test]
fn gcs_failures_leave_no_object_and_name_the_url() {
    let d = tempfile::tempdir().unwrap();
    let (v1, v2) = (d.path().join("v1"), d.path().join("v2"));
    model(&v1, 16, 6);
    model(&v2, 16, 7);
    let gcs = GcsEmulator::start();
    gcs.bucket("out");
    // The input is read over plain HTTP from Azurite (the emulator serves one request at a
    // time, so it cannot replace an object mid-read) through a forwarder that replaces it
    // before its 6th request: by then chunks of the output are up, and the next read fails.
    let az = Azurite::start();
    az.container("public", true);
    az.put_file("public", "in.safetensors", &v1);
    let (cs, v2s) = (az.connection_string(), v2.to_str().unwrap().to_owned());
    let origin = az.endpoint.replace(&format!("/{AZ_ACCOUNT}"), "");
    let proxy = Proxy::start_with_hook(
        &origin,
        6,
        Box::new(move || {
            py(&format!(
                "from azure.storage.blob import BlobServiceClient\n\
                 svc = BlobServiceClient.from_connection_string({cs:?})\n\
                 svc.get_container_client('public').upload_blob('in.safetensors', \
                 open({v2s:?}, 'rb'), overwrite=True)"
            ));
        }),
    );
    let input = format!("{}/{AZ_ACCOUNT}/public/in.safetensors", proxy.endpoint);
    for ext in ["safetensors", "gguf"] {
        az.put_file("public", "in.safetensors", &v1);
        proxy.requests.store(0, Ordering::SeqCst);
        let url = format!("gs://out/m.{ext}");
        let opts = [
            ("endpoint_url", gcs.endpoint.as_str()),
            ("part_size", "5MiB"),
        ];
        let e = err(cmd(&["convert", "--pread", &input, &url], &opts));
        assert!(e.contains("changed during the read"), "{e}");
        assert!(objects(&gcs, "out").is_empty(), "{url}");
    }
    // A missing bucket, large and small outputs; a refused token: named, never shown.
    let v1s = v1.to_str().unwrap();
    for part in ["5MiB", "64MiB"] {
        let url = "gs://nobucket/m.safetensors";
        let e = err(cmd(
            &["convert", v1s, url],
            &[("endpoint_url", &gcs.endpoint), ("part_size", part)],
        ));
        assert!(
            e.contains(url) && e.contains("no such bucket 'nobucket'"),
            "{e}"
        );
    }
    let closed = format!("http://127.0.0.1:{}", moto::free_port());
    let e = err(cmd(
        &["convert", v1s, "gs://out/m.safetensors"],
        &[
            ("endpoint_url", &closed),
            ("token", "ya29.secret"),
            ("max_attempts", "2"),
        ],
    ));
    assert!(
        e.contains("gs://out/m.safetensors") && e.contains("cannot reach the endpoint"),
        "{e}"
    );
    assert!(!e.contains("ya29"), "{e}");
    assert!(objects(&gcs, "out").is_empty());
}

#[test]
fn gcs_peak_memory_is_bounded_by_the_parts_not_the_model() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.safetensors");
    model(&input, 96, 8);
    let gcs = GcsEmulator::start();
    gcs.bucket("out");
    // 96 MiB through 5 MiB chunks, one at a time: 2 × 5 MiB in parts.
    let url = "gs://out/big.safetensors";
    let c = cmd(
        &["convert", "--pread", input.to_str().unwrap(), url],
        &[("endpoint_url", &gcs.endpoint), ("part_size", "5MiB")],
    );
    let (success, peak) = peak_rss_anon_mib(c);
    assert!(success, "{url}");
    eprintln!("convert of 96 MiB to {url}: peak RssAnon {peak} MiB");
    assert!(peak < 40, "{url}: peak RssAnon {peak} MiB");
    assert_eq!(objects(&gcs, "out"), vec!["big.safetensors"]);
}
