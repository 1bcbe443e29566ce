//! `az://` (Azure Blob Storage, against Azurite, which checks every SAS signature) and `gs://`
//! (Cloud Storage, against gcp-storage-emulator) read as the local file reads: inspect, hash,
//! validate and convert give the same answers and bytes; credentials from a connection
//! string, a SAS the Azure SDK made, the account key, `STORAGE_EMULATOR_HOST` or
//! `--storage-option`, Google credential files exchanged at a token endpoint stand-in;
//! failures worded by cause, naming the URL and never a key or signature.
//! Both servers are required, not skipped (`scripts/test` installs them).

#[path = "object_store/emulators.rs"]
mod emulators;
#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/proxy.rs"]
mod proxy;

use emulators::{rsa_key, Azurite, GcsEmulator, TokenServer, AZ_ACCOUNT, AZ_KEY};
use proxy::Proxy;
use std::path::Path;
use std::process::{Command, Output};
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
    c.env("HOME", "/nonexistent"); // no gcloud credentials of the machine's user
    c
}

/// The CLI running `args` with `opts` as `--storage-option`s (after the command's arguments).
fn cmd(args: &[&str], opts: &[(&str, &str)]) -> Command {
    let mut c = bin();
    c.args(args);
    for (k, v) in opts {
        c.args(["--storage-option", &format!("{k}={v}")]);
    }
    c
}

fn ok(mut c: Command, args: &[&str]) -> String {
    let o = c.args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fails(mut c: Command, args: &[&str]) -> (Option<i32>, String) {
    let o: Output = c.args(args).output().unwrap();
    assert!(!o.status.success(), "{args:?} succeeded");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A safetensors file of 8 tensors, `mib` MiB in all.
fn model(path: &Path, mib: usize) {
    let mut w = Writer::new();
    let each = (mib << 20) / 8;
    for i in 0..8u8 {
        let data: Vec<u8> = (0..each).map(|j| (j as u8).wrapping_mul(31) ^ i).collect();
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

/// inspect (header only: under 1 MiB through `counted`), hash, validate and convert of `url`
/// give what the local `file` gives, with `settings` applied to each command.
fn reads_as_local(url: &str, file: &Path, counted: &Proxy, settings: &dyn Fn(&mut Command)) {
    let d = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut c = bin();
        settings(&mut c);
        ok(c, args)
    };
    let local = file.to_str().unwrap();
    let remote: serde_json::Value =
        serde_json::from_str(&run(&["inspect", "--json", url])).unwrap();
    let want: serde_json::Value =
        serde_json::from_str(&ok(bin(), &["inspect", "--json", local])).unwrap();
    assert_eq!(remote["tensors"], want["tensors"], "{url}");
    let moved = counted.down.load(std::sync::atomic::Ordering::SeqCst);
    assert!(moved < 1 << 20, "inspect of {url} moved {moved} bytes");
    assert_eq!(
        run(&["hash", url]),
        ok(bin(), &["hash", local]).replace(local, url)
    );
    run(&["validate", url]);
    let (a, b) = (d.path().join("a.zt"), d.path().join("b.zt"));
    ok(bin(), &["convert", local, a.to_str().unwrap()]);
    run(&["convert", url, b.to_str().unwrap()]);
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "{url}"
    );
}

#[test]
fn azure_blobs_read_as_local_files_with_every_credential() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("m.safetensors");
    model(&file, 12);
    let az = Azurite::start();
    az.container("models", false);
    az.container("public", true);
    az.put_file("models", "dir/m a.safetensors", &file);
    az.put_file("public", "m.safetensors", &file);
    let counted = Proxy::start(&az.endpoint.replace(&format!("/{AZ_ACCOUNT}"), ""));
    let through = format!("{}/{AZ_ACCOUNT}", counted.endpoint);

    // The account key from a connection string (a SAS signed per request, checked by Azurite).
    let cs = format!(
        "DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={AZ_KEY};BlobEndpoint={through};"
    );
    reads_as_local("az://models/dir/m a.safetensors", &file, &counted, &|c| {
        c.env("AZURE_STORAGE_CONNECTION_STRING", &cs);
    });
    // The key and account from storage options; a SAS the Azure SDK made; anonymous, public.
    let key_opts = [
        ("account_name", AZ_ACCOUNT),
        ("account_key", AZ_KEY),
        ("endpoint_url", az.endpoint.as_str()),
    ];
    let sas = az.sdk_sas("models", "dir/m a.safetensors");
    let url = "az://models/dir/m a.safetensors";
    let hash = ok(bin(), &["hash", file.to_str().unwrap()]).replace(file.to_str().unwrap(), url);
    assert_eq!(ok(cmd(&["hash", url], &key_opts), &[]), hash);
    let mut c = cmd(&["hash", url], &[("endpoint_url", &az.endpoint)]);
    c.env("AZURE_STORAGE_ACCOUNT_NAME", AZ_ACCOUNT)
        .env("AZURE_STORAGE_SAS_TOKEN", &sas);
    assert_eq!(ok(c, &[]), hash);
    let public = "az://public/m.safetensors";
    let mut c = cmd(&["hash", public], &[("endpoint_url", &az.endpoint)]);
    c.env("AZURE_STORAGE_ACCOUNT_NAME", AZ_ACCOUNT);
    assert_eq!(ok(c, &[]), hash.replace(url, public));

    // Failures, worded by cause; no key or signature shown.
    let wrong_key = "AAAA".repeat(22);
    let with = |extra: &[(&str, &str)], url: &str| {
        let mut opts = vec![
            ("account_name", AZ_ACCOUNT),
            ("endpoint_url", az.endpoint.as_str()),
        ];
        opts.extend_from_slice(extra);
        fails(cmd(&["inspect", url], &opts), &[])
    };
    let (code, e) = with(&[("account_key", &wrong_key)], url);
    assert!(e.contains("access denied") && e.contains(url), "{e}");
    assert!(e.contains("account key was refused"), "{e}");
    assert_eq!(code, Some(2));
    let (_, e) = with(
        &[("account_key", AZ_KEY)],
        "az://models/dir/none.safetensors",
    );
    assert!(
        e.contains("no blob 'dir/none.safetensors' in container 'models'"),
        "{e}"
    );
    let (_, e) = with(&[("account_key", AZ_KEY)], "az://nocontainer/m.safetensors");
    assert!(
        e.contains("no container 'nocontainer' in storage account 'devstoreaccount1'"),
        "{e}"
    );
    let (_, anonymous) = with(&[], url);
    assert!(anonymous.contains("anonymous"), "{anonymous}");
    let (_, bad_sas) = with(
        &[("sas_token", "sv=2022-11-02&sr=b&sp=r&sig=bm9wZQ%3D%3D")],
        url,
    );
    assert!(bad_sas.contains("SAS token was refused"), "{bad_sas}");
    let (_, not_b64) = with(&[("account_key", "not base64!")], url);
    assert!(not_b64.contains("not base64"), "{not_b64}");
    for e in [&e, &anonymous, &bad_sas, &not_b64] {
        assert!(
            !e.contains(AZ_KEY) && !e.contains("sig=") && !e.contains("base64!"),
            "{e}"
        );
    }
    let (_, e) = fails(bin(), &["inspect", "az://models/m.safetensors"]);
    assert!(e.contains("no storage account"), "{e}");
}

#[test]
fn gcs_objects_read_as_local_files() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("m.safetensors");
    model(&file, 12);
    let gcs = GcsEmulator::start();
    gcs.bucket("models");
    gcs.put_file("models", "dir/m a.safetensors", &file);
    let counted = Proxy::start(&gcs.endpoint);
    let host = counted.endpoint.trim_start_matches("http://").to_owned();
    reads_as_local("gs://models/dir/m a.safetensors", &file, &counted, &|c| {
        c.env("STORAGE_EMULATOR_HOST", &host);
    });
    let missing = "gs://models/dir/none.safetensors";
    let (_, e) = fails(
        cmd(&["inspect", missing], &[("endpoint_url", &gcs.endpoint)]),
        &[],
    );
    assert!(
        e.contains("gs://models/dir/none.safetensors")
            && e.contains("no object 'dir/none.safetensors' in bucket 'models'"),
        "{e}"
    );
    let (_, e) = fails(bin(), &["inspect", "ftp://h/m.safetensors"]);
    assert!(e.contains("unsupported URL scheme \"ftp\""), "{e}");
}

#[test]
fn gcs_credential_files_are_exchanged_for_tokens() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("m.safetensors");
    model(&file, 1);
    let gcs = GcsEmulator::start();
    gcs.bucket("models");
    gcs.put_file("models", "m.safetensors", &file);
    let key = rsa_key(&d.path().join("key.pem"));
    let tokens = TokenServer::start(&d.path().join("key.pem"));
    let write = |name: &str, v: serde_json::Value| {
        let p = d.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let service = write(
        "sa.json",
        serde_json::json!({
            "type": "service_account", "client_email": "reader@test.iam.gserviceaccount.com",
            "private_key_id": "k1", "private_key": key, "token_uri": tokens.token_uri,
        }),
    );
    let user = |secret: &str| {
        serde_json::json!({
            "type": "authorized_user", "client_id": "cid", "client_secret": secret,
            "refresh_token": "rt-1", "token_uri": tokens.token_uri,
        })
    };
    let (good_user, bad_user) = (
        write("u.json", user("cs")),
        write("bad.json", user("wrong")),
    );
    let url = "gs://models/m.safetensors";
    for (creds, token) in [(&service, "ya29.jwt-ok"), (&good_user, "ya29.refresh-ok")] {
        let counted = Proxy::start(&gcs.endpoint);
        let mut c = cmd(&["hash", url], &[("endpoint_url", &counted.endpoint)]);
        c.env("GOOGLE_APPLICATION_CREDENTIALS", creds);
        ok(c, &[]);
        let sent = counted.sent_text().to_ascii_lowercase();
        assert!(
            sent.contains(&format!("authorization: bearer {token}")),
            "{sent}"
        );
    }
    // gcloud's application-default credentials, found under HOME.
    let home = tempfile::tempdir().unwrap();
    let adc = home.path().join(".config/gcloud");
    std::fs::create_dir_all(&adc).unwrap();
    std::fs::copy(&good_user, adc.join("application_default_credentials.json")).unwrap();
    let mut c = cmd(&["hash", url], &[("endpoint_url", &gcs.endpoint)]);
    c.env("HOME", home.path());
    ok(c, &[]);

    let mut c = cmd(&["inspect", url], &[("endpoint_url", &gcs.endpoint)]);
    c.env("GOOGLE_APPLICATION_CREDENTIALS", &bad_user);
    let (_, e) = fails(c, &[]);
    assert!(
        e.contains(url)
            && e.contains(&format!(
                "the token endpoint {} refused the user",
                tokens.token_uri
            ))
            && e.contains("invalid_grant"),
        "{e}"
    );
    assert!(!e.contains("wrong") && !e.contains("rt-1"), "{e}");
    let mut c = cmd(&["inspect", url], &[("endpoint_url", &gcs.endpoint)]);
    c.env("GOOGLE_APPLICATION_CREDENTIALS", d.path().join("none.json"));
    let (_, e) = fails(c, &[]);
    assert!(e.contains("none.json: cannot be read"), "{e}");
}
