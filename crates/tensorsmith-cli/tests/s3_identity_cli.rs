//! AWS identities as the cloud hands them out, against stand-ins that refuse anything else
//! (tests/python/aws_standins.py: IMDSv2, the container endpoint, STS, and a proxy in front
//! of moto that accepts only requests signed with keys a stand-in issued, within their
//! lifetime, with their session token): each source is found and used for reads and writes,
//! a source that is absent lets the next be tried, a broken one is an error naming it, and
//! with no credentials anywhere a public object is read unsigned.

#[path = "object_store/moto.rs"]
mod moto;
#[path = "object_store/standin_process.rs"]
mod standin_process;

use moto::{bare_cli, python};
use standin_process::{model, ok, run, stderr, StandinProcess};
use std::path::Path;
use std::process::Command;

const STATIC_KEY: &str = "AKIASTATICSTANDIN";
const STATIC_SECRET: &str = "staticStandinSecret/never-printed";

/// The stand-ins and moto behind them, one process; stopped when dropped.
struct Standins {
    p: StandinProcess,
    _dir: tempfile::TempDir,
}

impl Standins {
    fn start(extra: &[&str]) -> Standins {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.jsonl");
        let static_key = format!("{STATIC_KEY}:{STATIC_SECRET}");
        let mut args = vec![
            "--moto-endpoint",
            "start",
            "--log",
            log.to_str().unwrap(),
            "--web-identity-token",
            "web-identity-token-of-the-pod",
            "--container-token",
            "container-token-of-the-task",
            "--static-key",
            &static_key,
            "--public-bucket",
            "public",
        ];
        args.extend_from_slice(extra);
        let s = Standins {
            p: StandinProcess::start("aws_standins.py", &args),
            _dir: dir,
        };
        s.boto(
            "for b in ('models', 'public'): s3.create_bucket(Bucket=b)\n\
             s3.upload_file(sys.argv[1], 'models', 'm.safetensors')\n\
             s3.upload_file(sys.argv[1], 'public', 'm.safetensors', ExtraArgs={'ACL': 'public-read'})",
            &[&model()],
        );
        s
    }

    /// Runs `code` with `s3` a boto3 client of moto itself (behind the proxy, any key).
    fn boto(&self, code: &str, args: &[&str]) {
        let prelude = format!(
            "import boto3, sys\ns3 = boto3.client('s3', endpoint_url='{}', \
             aws_access_key_id='x', aws_secret_access_key='y', region_name='us-east-1')\n",
            self.p.info["moto"].as_str().unwrap()
        );
        let o = Command::new(python())
            .args(["-c", &format!("{prelude}{code}")])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// The CLI with the environment of `source` (a key of the stand-ins' `env`).
    fn cli(&self, home: &Path, source: &str) -> Command {
        let mut c = bare_cli(home);
        let env = self.p.info["env"][source]
            .as_object()
            .unwrap_or_else(|| panic!("no environment for {source}"));
        for (k, v) in env {
            c.env(k, v.as_str().unwrap());
        }
        c
    }

    /// Key ids the stand-ins issued from `source`.
    fn issued(&self, source: &str) -> Vec<String> {
        self.p
            .events("issue")
            .iter()
            .filter(|e| e["source"] == source)
            .map(|e| e["key"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Key ids the proxy let through.
    fn used(&self) -> Vec<String> {
        self.p
            .events("s3")
            .iter()
            .map(|e| e["key"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

#[test]
fn every_aws_source_is_found_and_used_for_reads_and_writes() {
    let s = Standins::start(&[]);
    let home = tempfile::tempdir().unwrap();
    let local = ok(&run(bare_cli(home.path()), &["hash", &model()]));
    // The stand-ins' names for their sources, as their log writes them.
    for (env, issuer) in [
        ("imds", "imds"),
        ("container", "container"),
        ("container_token_file", "container"),
        ("web_identity", "web_identity"),
        ("profile_role", "assume_role"),
        ("profile_process", "credential_process"),
    ] {
        let before = s.used().len();
        let got = ok(&run(
            s.cli(home.path(), env),
            &["hash", "s3://models/m.safetensors"],
        ));
        assert_eq!(
            got.split_whitespace().next(),
            local.split_whitespace().next(),
            "{env}"
        );
        let issued = s.issued(issuer);
        assert!(!issued.is_empty(), "{env}: nothing issued by {issuer}");
        let used = &s.used()[before..];
        assert!(
            !used.is_empty() && used.iter().all(|k| issued.contains(k)),
            "{env}: requests signed with {used:?}, issued {issued:?}"
        );
        // A write: a convert uploaded to the bucket, read back.
        let out = format!("s3://models/from-{env}.safetensors");
        ok(&run(s.cli(home.path(), env), &["convert", &model(), &out]));
        let back = ok(&run(s.cli(home.path(), env), &["hash", &out]));
        assert_eq!(
            back.split_whitespace().next(),
            local.split_whitespace().next()
        );
    }
    assert!(
        s.p.events("s3_refused").is_empty(),
        "{:?}",
        s.p.events("s3_refused")
    );
}

#[test]
fn absent_sources_fall_through_broken_ones_are_named() {
    let s = Standins::start(&[]);
    let home = tempfile::tempdir().unwrap();
    let url = "s3://models/m.safetensors";

    // Web identity configured but absent from the file system: an error naming it, the
    // sources tried before it, never the token.
    let mut c = s.cli(home.path(), "web_identity");
    c.env(
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        home.path().join("no-such-token"),
    );
    let o = run(c, &["hash", url]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("web identity (role ") && e.contains("no-such-token"),
        "{e}"
    );
    assert!(e.contains("environment"), "{e}");

    // STS refuses a wrong token: its code is in the error.
    let bad_token = home.path().join("bad-token");
    std::fs::write(&bad_token, "not-the-pods-token").unwrap();
    let mut c = s.cli(home.path(), "web_identity");
    c.env("AWS_WEB_IDENTITY_TOKEN_FILE", &bad_token);
    let e = stderr(&run(c, &["hash", url]));
    assert!(e.contains("InvalidIdentityToken"), "{e}");
    assert!(!e.contains("not-the-pods-token"), "{e}");

    // The container endpoint refuses a wrong authorization token.
    let mut c = s.cli(home.path(), "container");
    c.env("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong");
    let e = stderr(&run(c, &["hash", url]));
    assert!(
        e.contains("container endpoint") && e.contains("HTTP 40"),
        "{e}"
    );

    // Nothing in the environment, a container endpoint absent: the chain goes on to the
    // instance metadata service, which answers.
    let mut c = s.cli(home.path(), "imds");
    c.env_remove("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    ok(&run(c, &["hash", url]));

    // The environment's keys come before the instance metadata service.
    let mut c = s.cli(home.path(), "imds");
    c.env("AWS_ACCESS_KEY_ID", STATIC_KEY)
        .env("AWS_SECRET_ACCESS_KEY", STATIC_SECRET);
    let n = s.issued("imds").len();
    ok(&run(c, &["hash", url]));
    assert_eq!(
        s.issued("imds").len(),
        n,
        "IMDS was asked though keys were set"
    );

    // credential_source forces one: the container, although IMDS is configured too.
    let mut c = s.cli(home.path(), "imds");
    c.env(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        s.p.info["container_uri"].as_str().unwrap(),
    )
    .env(
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "container-token-of-the-task",
    );
    let n = s.issued("container").len();
    ok(&run(
        c,
        &[
            "hash",
            "--storage-option",
            "credential_source=container",
            url,
        ],
    ));
    assert!(s.issued("container").len() > n);

    // No credentials anywhere: a private object is refused, and the error lists each source
    // tried; a public one is read unsigned.
    let c = s.cli(home.path(), "container");
    let mut c2 = c;
    c2.env_remove("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        .env_remove("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    let o = run(c2, &["hash", url]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("credential sources tried")
            && e.contains("web identity")
            && e.contains("AWS_EC2_METADATA_DISABLED"),
        "{e}"
    );
    let mut c3 = s.cli(home.path(), "container");
    c3.env_remove("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    ok(&run(c3, &["hash", "s3://public/m.safetensors"]));
    for secret in [
        STATIC_SECRET,
        "container-token-of-the-task",
        "web-identity-token-of-the-pod",
    ] {
        assert!(!e.contains(secret));
    }
}
