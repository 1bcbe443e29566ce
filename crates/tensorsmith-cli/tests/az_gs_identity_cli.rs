//! Azure and Google Cloud identities as the clouds hand them out, against stand-ins that
//! refuse anything else (tests/python/cloud_identity_standins.py: the VM metadata service,
//! App Service's identity endpoint, Entra ID's token endpoint for client secrets and
//! federated tokens, a fake `az`, the GCE metadata server, and proxies in front of Azurite
//! and fake-gcs-server that let a request through only with a bearer token one of them
//! issued, unexpired): each source is found and used for reads and writes, a source that is
//! absent lets the next be tried, a broken one is an error naming it. No test asks
//! 169.254.169.254: the managed identity's endpoint and `GCE_METADATA_IP` are always a
//! stand-in or a closed port.

#[path = "object_store/emulators.rs"]
mod emulators;
#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/standin_process.rs"]
mod standin_process;

use emulators::{Azurite, FakeGcs};
use moto::free_port;
use standin_process::{model, ok, run, stderr, StandinProcess};
use std::path::Path;
use std::process::{Command, Output};

/// The stand-ins in front of an Azurite; stopped when dropped.
struct Standins {
    p: StandinProcess,
    _azurite: Azurite,
    gcs: FakeGcs,
    _dir: tempfile::TempDir,
}

impl Standins {
    fn start() -> Standins {
        let azurite = Azurite::start();
        azurite.container("models", false);
        azurite.put_file("models", "m.safetensors", Path::new(&model()));
        let gcs = FakeGcs::start();
        gcs.bucket("models");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.jsonl");
        let p = StandinProcess::start(
            "cloud_identity_standins.py",
            &[
                "--azurite-blob-endpoint",
                &azurite.endpoint,
                "--fake-gcs-endpoint",
                &gcs.endpoint,
                "--azure-upstream",
                "sas",
                "--log",
                log.to_str().unwrap(),
                "--lifetime",
                "600",
                "--workdir",
                dir.path().to_str().unwrap(),
            ],
        );
        Standins {
            p,
            _azurite: azurite,
            gcs,
            _dir: dir,
        }
    }

    fn gcp(&self, key: &str) -> &str {
        self.p.info["gcp"][key].as_str().unwrap_or_default()
    }

    /// The CLI reading `gs://` through the bearer-checking proxy, with `env`.
    fn gs_cli(&self, home: &Path, env: &[(&str, String)]) -> Command {
        let mut c = self.cli(home, env);
        c.env("STORAGE_EMULATOR_HOST", "");
        c
    }

    /// The metadata server's environment (its host, and the fallback IP the same).
    fn metadata_env(&self) -> Vec<(&'static str, String)> {
        let host = self.gcp("metadata_host").to_owned();
        vec![
            ("GCE_METADATA_HOST", host.clone()),
            ("GCE_METADATA_IP", host),
        ]
    }

    fn az(&self, key: &str) -> &str {
        self.p.info["azure"][key].as_str().unwrap_or_default()
    }

    /// The CLI with no cloud settings of the caller, the storage account behind the proxy,
    /// the managed identity's endpoint a closed port (never 169.254.169.254), and `env`.
    fn cli(&self, home: &Path, env: &[(&str, String)]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tensorsmith"));
        for (k, _) in std::env::vars() {
            let cloud = [
                "AZURE_",
                "AWS_",
                "GOOGLE_",
                "GCE_",
                "IDENTITY_",
                "MSI_",
                "HF_",
            ];
            if cloud.iter().any(|p| k.starts_with(p)) {
                c.env_remove(k);
            }
        }
        c.env("HOME", home)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("GCE_METADATA_IP", format!("127.0.0.1:{}", free_port()))
            .env("AZURE_STORAGE_ACCOUNT_NAME", self.az("account"))
            .env("AZURE_STORAGE_ENDPOINT", self.az("blob_endpoint"));
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    /// The environment of `source` as the stand-ins describe it (`PATH_PREPEND`: `az`).
    fn env_of(&self, source: &str) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let env = self.p.info["azure"]["env"][source].as_object().unwrap();
        for (k, v) in env {
            let v = v.as_str().unwrap().to_owned();
            let k: &'static str = Box::leak(k.clone().into_boxed_str());
            if k == "PATH_PREPEND" {
                out.push(("PATH", format!("{v}:{}", std::env::var("PATH").unwrap())));
            } else {
                out.push((k, v));
            }
        }
        out
    }

    /// Tokens issued by `source`.
    fn issued(&self, source: &str) -> usize {
        self.p
            .events("issue")
            .iter()
            .filter(|e| e["source"] == source)
            .count()
    }
}

fn digest(out: &str) -> String {
    out.split_whitespace().next().unwrap_or_default().to_owned()
}

#[test]
fn every_azure_source_is_found_and_used_for_reads_and_writes() {
    let s = Standins::start();
    let home = tempfile::tempdir().unwrap();
    let local = digest(&ok(&run(s.cli(home.path(), &[]), &["hash", &model()])));
    // (environment of the stand-ins, the issuer's name for the source)
    for (env, issuer) in [
        ("imds", "imds"),
        ("app_service", "app_service"),
        ("client_secret", "client_secret"),
        ("workload_identity", "workload_identity"),
        ("azure_cli", "azure_cli"),
    ] {
        let before = s.issued(issuer);
        let vars = s.env_of(env);
        let got = ok(&run(
            s.cli(home.path(), &vars),
            &["hash", "az://models/m.safetensors"],
        ));
        assert_eq!(digest(&got), local, "{env}");
        assert!(s.issued(issuer) > before, "{env}: no token from {issuer}");
        let out = format!("az://models/from-{env}.safetensors");
        ok(&run(
            s.cli(home.path(), &vars),
            &["convert", &model(), &out],
        ));
        let back = ok(&run(s.cli(home.path(), &vars), &["hash", &out]));
        assert_eq!(digest(&back), local, "{env}");
    }
    // One process, two blobs of the container: one token (lifetime 600 s), not one a blob.
    let before = s.issued("imds");
    let vars = s.env_of("imds");
    ok(&run(
        s.cli(home.path(), &vars),
        &[
            "diff",
            "az://models/m.safetensors",
            "az://models/from-imds.safetensors",
        ],
    ));
    assert_eq!(s.issued("imds"), before + 1);
    let refused: Vec<_> =
        s.p.events("refuse")
            .into_iter()
            .filter(|e| e["source"] == "azure_proxy")
            .collect();
    assert!(refused.is_empty(), "{refused:?}");
}

#[test]
fn absent_azure_sources_fall_through_broken_ones_are_named() {
    let s = Standins::start();
    let home = tempfile::tempdir().unwrap();
    let url = "az://models/m.safetensors";
    // Client id and tenant without a secret or a token file: neither Entra source is
    // configured, so the announced managed identity is used, before the Azure CLI.
    let mut vars = s.env_of("imds");
    vars.extend(s.env_of("azure_cli"));
    vars.push(("AZURE_TENANT_ID", s.az("tenant_id").to_owned()));
    let before = (s.issued("imds"), s.issued("azure_cli"));
    ok(&run(s.cli(home.path(), &vars), &["hash", url]));
    assert!(s.issued("imds") > before.0);
    assert_eq!(s.issued("azure_cli"), before.1);
    // credential_source forces the CLI over the managed identity.
    ok(&run(
        s.cli(home.path(), &vars),
        &[
            "hash",
            url,
            "--storage-option",
            "credential_source=azure_cli",
        ],
    ));
    assert!(s.issued("azure_cli") > before.1);

    // Broken: each error names the source, never the secret.
    let secret = s.az("client_secret").to_owned();
    let mut wrong = s.env_of("client_secret");
    for (k, v) in wrong.iter_mut() {
        if *k == "AZURE_CLIENT_SECRET" {
            *v = "not-the-secret".into();
        }
    }
    let e = stderr(&run(s.cli(home.path(), &wrong), &["hash", url]));
    assert!(
        e.contains(url) && e.contains("client secret of service principal"),
        "{e}"
    );
    assert!(!e.contains("not-the-secret") && !e.contains(&secret), "{e}");
    let mut no_file = s.env_of("workload_identity");
    for (k, v) in no_file.iter_mut() {
        if *k == "AZURE_FEDERATED_TOKEN_FILE" {
            *v = "/nonexistent/token".into();
        }
    }
    let e = stderr(&run(s.cli(home.path(), &no_file), &["hash", url]));
    assert!(
        e.contains("workload identity") && e.contains("/nonexistent/token"),
        "{e}"
    );
    let closed = format!("http://127.0.0.1:{}/msi/token", free_port());
    let e = stderr(&run(
        s.cli(home.path(), &[("AZURE_MSI_ENDPOINT", closed.clone())]),
        &["hash", url, "--storage-option", "max_attempts=1"],
    ));
    assert!(e.contains("managed identity") && e.contains(&closed), "{e}");
    let e = stderr(&run(
        s.cli(home.path(), &[("PATH", "/nonexistent".into())]),
        &[
            "hash",
            url,
            "--storage-option",
            "credential_source=azure_cli",
        ],
    ));
    assert!(e.contains("Azure CLI"), "{e}");
    let e = stderr(&run(
        s.cli(home.path(), &[]),
        &[
            "hash",
            url,
            "--storage-option",
            "credential_source=client_secret",
        ],
    ));
    assert!(
        e.contains("credential_source=client_secret is not configured"),
        "{e}"
    );
    // Nothing configured: anonymous, refused by the proxy, saying so.
    let e = stderr(&run(s.cli(home.path(), &[]), &["hash", url]));
    assert!(e.contains("anonymous"), "{e}");
}

/// `args` with the proxy as `endpoint_url`.
fn via_proxy<'a>(s: &'a Standins, args: &[&'a str]) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    v.push("--storage-option".into());
    v.push(format!("endpoint_url={}", s.gcp("gcs_endpoint")));
    v
}

fn run_owned(c: Command, args: &[String]) -> Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run(c, &refs)
}

#[test]
fn the_gce_metadata_server_is_found_and_used_for_reads_and_writes() {
    let s = Standins::start();
    let home = tempfile::tempdir().unwrap();
    let local = digest(&ok(&run(s.cli(home.path(), &[]), &["hash", &model()])));
    // The object, put straight into fake-gcs-server.
    let direct = format!("endpoint_url={}", s.gcs.endpoint);
    ok(&run(
        s.gs_cli(home.path(), &[]),
        &[
            "convert",
            &model(),
            "gs://models/m.safetensors",
            "--storage-option",
            &direct,
        ],
    ));
    let url = "gs://models/m.safetensors";
    let vars = s.metadata_env();
    let before = s.issued("gce_metadata");
    let got = ok(&run_owned(
        s.gs_cli(home.path(), &vars),
        &via_proxy(&s, &["hash", url]),
    ));
    assert_eq!(digest(&got), local);
    assert!(
        s.issued("gce_metadata") > before,
        "no token from the metadata server"
    );
    let out = "gs://models/from-metadata.safetensors";
    ok(&run_owned(
        s.gs_cli(home.path(), &vars),
        &via_proxy(&s, &["convert", &model(), out]),
    ));
    let back = ok(&run_owned(
        s.gs_cli(home.path(), &vars),
        &via_proxy(&s, &["hash", out]),
    ));
    assert_eq!(digest(&back), local);
    let refused: Vec<_> =
        s.p.events("refuse")
            .into_iter()
            .filter(|e| e["source"] == "gcs_proxy")
            .collect();
    assert!(refused.is_empty(), "{refused:?}");

    // A token given comes first; credential_source=metadata forces the metadata server.
    let mut with_token = vars.clone();
    with_token.push(("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.not-issued".into()));
    let e = stderr(&run_owned(
        s.gs_cli(home.path(), &with_token),
        &via_proxy(&s, &["hash", url]),
    ));
    assert!(
        e.contains("access token was refused") && !e.contains("ya29"),
        "{e}"
    );
    let before = s.issued("gce_metadata");
    ok(&run_owned(
        s.gs_cli(home.path(), &with_token),
        &via_proxy(
            &s,
            &[
                "hash",
                url,
                "--storage-option",
                "credential_source=metadata",
            ],
        ),
    ));
    assert!(s.issued("gce_metadata") > before);

    // Absent (no GCE_METADATA_HOST): anonymous, refused by the proxy, saying so.
    let e = stderr(&run_owned(
        s.gs_cli(home.path(), &[]),
        &via_proxy(&s, &["hash", url]),
    ));
    assert!(e.contains(url) && e.contains("anonymous"), "{e}");
    // Broken: a metadata server that does not answer is named.
    let closed = format!("127.0.0.1:{}", free_port());
    let e = stderr(&run_owned(
        s.gs_cli(
            home.path(),
            &[
                ("GCE_METADATA_HOST", closed.clone()),
                ("GCE_METADATA_IP", closed.clone()),
            ],
        ),
        &via_proxy(&s, &["hash", url, "--storage-option", "max_attempts=1"]),
    ));
    assert!(
        e.contains(url) && e.contains("GCE metadata server") && e.contains(&closed),
        "{e}"
    );
    let e = stderr(&run_owned(
        s.gs_cli(home.path(), &[]),
        &via_proxy(
            &s,
            &[
                "hash",
                url,
                "--storage-option",
                "credential_source=service_account",
            ],
        ),
    ));
    assert!(
        e.contains("credential_source=service_account is not configured"),
        "{e}"
    );
}
