//! Datasets on Azure Blob Storage and Cloud Storage (issue 33) against real servers: Azurite
//! (which checks every SAS signature) and fake-gcs-server (the GCS emulator that honours
//! `ifGenerationMatch=0`; gcp-storage-emulator ignores it), both required, not skipped. Each
//! test runs on `az://` and on `gs://`, with the settings as `--storage-option`s: a write gives
//! the local write's shards byte for byte and its manifest but for names, `info`, `verify`,
//! `export` read it back, and so does a write whose input is on the store (a prefix); appends and overwrites make versions, overwritten shards are retired
//! until `clean`; 4 writer processes appending to one prefix each commit once (every row there
//! once, none lost); a writer killed before its commit point leaves the dataset as it was.

#[path = "object_store/dataset_files.rs"]
mod dataset_files;
#[path = "object_store/emulators.rs"]
mod emulators;
#[path = "object_store/moto.rs"]
mod moto;

use dataset_files::{b64, input, manifest_without_names, stem, write_args};
use emulators::{py, Azurite, FakeGcs};
use std::path::Path;
use std::process::{Command, Output};

/// One of the two servers, with a container or bucket `data`.
enum Server {
    Az(Azurite),
    Gs(FakeGcs),
}

impl Server {
    fn azure() -> Server {
        let a = Azurite::start();
        a.container("data", false);
        Server::Az(a)
    }

    fn gcs() -> Server {
        let g = FakeGcs::start();
        g.bucket("data");
        Server::Gs(g)
    }

    fn url(&self, path: &str) -> String {
        match self {
            Server::Az(_) => format!("az://data/{path}"),
            Server::Gs(_) => format!("gs://data/{path}"),
        }
    }

    /// The CLI running `args` with this server's settings, nothing from the environment.
    fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tensorsmith"));
        for (k, _) in std::env::vars() {
            if k.starts_with("AZURE_") || k.starts_with("GOOGLE_") || k == "STORAGE_EMULATOR_HOST" {
                c.env_remove(k);
            }
        }
        c.env("HOME", "/nonexistent").args(args);
        let opt = match self {
            Server::Az(a) => format!("connection_string={}", a.connection_string()),
            Server::Gs(g) => format!("endpoint_url={}", g.endpoint),
        };
        c.args(["--storage-option", &opt]);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cli(args).output().unwrap()
    }

    /// Uploads the local file `from` as `name` (the Azure SDK, or fake-gcs-server's JSON
    /// API): input for a write from the store.
    fn upload(&self, name: &str, from: &Path) {
        match self {
            Server::Az(a) => a.py(&format!(
                "svc.get_container_client('data').upload_blob({name:?}, open({from:?}, 'rb').read())"
            )),
            Server::Gs(g) => py(&format!(
                "import urllib.parse, urllib.request\n\
                 q = urllib.parse.quote({name:?}, safe='')\n\
                 r = urllib.request.Request('{}/upload/storage/v1/b/data/o?uploadType=media&name=' + q, data=open({from:?}, 'rb').read(), method='POST')\n\
                 urllib.request.urlopen(r).read()\n",
                g.endpoint
            )),
        };
    }

    /// Objects under `prefix/`: name below the prefix and bytes, by name (read by the Azure
    /// SDK, or through fake-gcs-server's JSON API).
    fn objects(&self, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let listing = match self {
            Server::Az(a) => a.py(&format!(
                "import base64\n\
                 c = svc.get_container_client('data')\n\
                 for b in c.list_blobs(name_starts_with='{prefix}/'):\n\
                 \x20   data = c.download_blob(b.name).readall()\n\
                 \x20   print(b.name[len('{prefix}/'):], base64.b64encode(data).decode())\n"
            )),
            Server::Gs(g) => py(&format!(
                "import base64, json, urllib.parse, urllib.request\n\
                 e = '{}/storage/v1/b/data/o'\n\
                 items = json.load(urllib.request.urlopen(e + '?prefix={prefix}/')).get('items', [])\n\
                 for o in items:\n\
                 \x20   q = urllib.parse.quote(o['name'], safe='')\n\
                 \x20   data = urllib.request.urlopen('{}/download/storage/v1/b/data/o/' + q + '?alt=media').read()\n\
                 \x20   print(o['name'][len('{prefix}/'):], base64.b64encode(data).decode())\n",
                g.endpoint, g.endpoint
            )),
        };
        let mut v: Vec<(String, Vec<u8>)> = listing
            .lines()
            .map(|l| {
                let (k, b) = l.split_once(' ').unwrap();
                (k.to_string(), b64(b))
            })
            .collect();
        v.sort();
        v
    }
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!e.contains("sig=") && !e.contains(emulators::AZ_KEY), "{e}");
    e
}

/// The first value of every sample of an exported Parquet file, sorted (read by pyarrow).
fn exported_rows(path: &Path) -> Vec<u32> {
    let out = py(&format!(
        "import pyarrow.parquet as pq\n\
         for s in pq.read_table({:?}).column('v').to_pylist():\n\
         \x20   print(int(s[0]))",
        path.to_str().unwrap()
    ));
    let mut v: Vec<u32> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    v.sort();
    v
}

fn same_as_local_and_reads_back(s: &Server) {
    let t = tempfile::tempdir().unwrap();
    let inp = t.path().join("in.arrow");
    input(&inp, 1, 11);
    let local = t.path().join("local");
    ok(&s.run(&write_args(&inp, local.to_str().unwrap(), "error")));
    let url = s.url("ds");
    ok(&s.run(&write_args(&inp, &url, "error")));
    let remote = s.objects("ds");
    let shards: Vec<(String, Vec<u8>)> = remote
        .iter()
        .filter(|(k, _)| k.starts_with("part-"))
        .map(|(k, b)| (stem(k), b.clone()))
        .collect();
    let mut local_shards: Vec<(String, Vec<u8>)> = std::fs::read_dir(&local)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("part-"))
        .map(|n| (stem(&n), std::fs::read(local.join(&n)).unwrap()))
        .collect();
    local_shards.sort();
    assert_eq!(shards.len(), 3);
    assert_eq!(shards, local_shards);
    // The input on the store too, named by its prefix (listed; `_SUCCESS` skipped).
    s.upload("in/part-0.arrow", &inp);
    s.upload("in/_SUCCESS", &t.path().join("local/dataset_manifest.json"));
    let from_store = s.url("from-store");
    ok(&s.run(&write_args(Path::new(&s.url("in/")), &from_store, "error")));
    let again: Vec<(String, Vec<u8>)> = s
        .objects("from-store")
        .into_iter()
        .filter(|(k, _)| k.starts_with("part-"))
        .map(|(k, b)| (stem(&k), b))
        .collect();
    assert_eq!(
        again, local_shards,
        "the store's input gives the local shards"
    );
    let manifest = remote
        .iter()
        .find(|(k, _)| k == "dataset_manifest.json")
        .unwrap();
    let local_manifest = std::fs::read_to_string(local.join("dataset_manifest.json")).unwrap();
    assert_eq!(
        manifest_without_names(std::str::from_utf8(&manifest.1).unwrap()),
        manifest_without_names(&local_manifest)
    );
    let keys: Vec<&str> = remote.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        keys.contains(&"_tensorsmith/versions/00000001.json")
            && keys.contains(&"_tensor_index.parquet"),
        "{keys:?}"
    );
    let info = ok(&s.run(&["dataset", "info", &url]));
    assert!(
        info.contains("samples: 11") && info.contains("version: 1"),
        "{info}"
    );
    let v = ok(&s.run(&["dataset", "verify", &url]));
    assert!(v.starts_with(&format!("ok: {url} (3 shards")), "{v}");
    let (e1, e2) = (t.path().join("l.parquet"), t.path().join("r.parquet"));
    ok(&s.run(&[
        "dataset",
        "export",
        local.to_str().unwrap(),
        e1.to_str().unwrap(),
    ]));
    ok(&s.run(&["dataset", "export", &url, e2.to_str().unwrap()]));
    assert_eq!(std::fs::read(&e1).unwrap(), std::fs::read(&e2).unwrap());
    let e = err(&s.run(&write_args(&inp, &url, "error")));
    assert!(
        e.contains(&format!("{url}: already holds a dataset")),
        "{e}"
    );
    let e = err(&s.run(&["dataset", "info", &s.url("nothing")]));
    assert!(
        e.contains(&s.url("nothing")) && e.contains("no dataset here"),
        "{e}"
    );
}

#[test]
fn an_azure_dataset_is_the_local_dataset_and_reads_back() {
    same_as_local_and_reads_back(&Server::azure());
}

#[test]
fn a_gcs_dataset_is_the_local_dataset_and_reads_back() {
    same_as_local_and_reads_back(&Server::gcs());
}

fn appends_overwrites_and_clean(s: &Server) {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a.arrow"), t.path().join("b.arrow"));
    input(&a, 1, 8);
    input(&b, 2, 4);
    let url = s.url("ds");
    ok(&s.run(&write_args(&a, &url, "error")));
    ok(&s.run(&write_args(&b, &url, "append")));
    let info = ok(&s.run(&["dataset", "info", &url]));
    assert!(
        info.contains("samples: 12") && info.contains("version: 2"),
        "{info}"
    );
    ok(&s.run(&write_args(&b, &url, "overwrite")));
    let info = ok(&s.run(&["dataset", "info", &url]));
    assert!(
        info.contains("samples: 4") && info.contains("version: 3"),
        "{info}"
    );
    assert!(info.contains("retired shards: 3"), "{info}");
    ok(&s.run(&["dataset", "verify", &url, "--version", "2"]));
    let parts = || {
        s.objects("ds")
            .into_iter()
            .filter(|(k, _)| k.starts_with("part-"))
            .count()
    };
    assert_eq!(parts(), 4);
    let c = ok(&s.run(&["dataset", "clean", &url, "--older-than", "0"]));
    assert!(c.contains("2 versions, 3 shards"), "{c}");
    assert_eq!(parts(), 1);
    let e = err(&s.run(&["dataset", "verify", &url, "--version", "2"]));
    assert!(
        e.contains(&format!(
            "version 2 of {url} was removed by `dataset clean`"
        )),
        "{e}"
    );
    ok(&s.run(&["dataset", "verify", &url]));
}

#[test]
fn appends_overwrites_retired_shards_and_clean_on_azure() {
    appends_overwrites_and_clean(&Server::azure());
}

#[test]
fn appends_overwrites_retired_shards_and_clean_on_gcs() {
    appends_overwrites_and_clean(&Server::gcs());
}

fn racing_writers_each_commit_once(s: &Server) {
    let t = tempfile::tempdir().unwrap();
    let base = t.path().join("base.arrow");
    input(&base, 9, 4);
    let url = s.url("race");
    ok(&s.run(&write_args(&base, &url, "error")));
    let inputs: Vec<_> = (1..=4)
        .map(|i| {
            let p = t.path().join(format!("in{i}.arrow"));
            input(&p, i, 4);
            p
        })
        .collect();
    let children: Vec<_> = inputs
        .iter()
        .map(|p| {
            s.cli(&write_args(p, &url, "append"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        ok(&c.wait_with_output().unwrap());
    }
    let info = ok(&s.run(&["dataset", "info", &url]));
    assert!(
        info.contains("samples: 20") && info.contains("version: 5"),
        "{info}"
    );
    ok(&s.run(&["dataset", "verify", &url]));
    // Every row there once: each writer's commit landed on a version of its own.
    let out = t.path().join("all.parquet");
    ok(&s.run(&["dataset", "export", &url, out.to_str().unwrap()]));
    let mut want: Vec<u32> = [9, 1, 2, 3, 4]
        .iter()
        .flat_map(|tag| (0..4).map(move |r| tag * 100 + r))
        .collect();
    want.sort();
    assert_eq!(exported_rows(&out), want);
}

#[test]
fn four_writers_racing_on_azure_each_commit_once() {
    racing_writers_each_commit_once(&Server::azure());
}

#[test]
fn four_writers_racing_on_gcs_each_commit_once() {
    racing_writers_each_commit_once(&Server::gcs());
}

/// A writer paused before its commit point (TENSORSMITH_TEST_COMMIT_PAUSE step 10, its shards
/// uploaded), then killed: the dataset is still version 1, whole; its shards are strays.
fn killed_writer_commits_nothing(s: &Server) {
    use std::io::BufRead;
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a.arrow"), t.path().join("b.arrow"));
    input(&a, 1, 8);
    input(&b, 2, 8);
    let url = s.url("k");
    ok(&s.run(&write_args(&a, &url, "error")));
    let mut child = s
        .cli(&write_args(&b, &url, "append"))
        .env("TENSORSMITH_TEST_COMMIT_PAUSE", "10")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    assert!(
        stderr
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("PAUSED")),
        "the writer never paused"
    );
    let _ = child.kill();
    child.wait().unwrap();
    let info = ok(&s.run(&["dataset", "info", &url]));
    assert!(
        info.contains("version: 1 ") && info.contains("samples: 8"),
        "{info}"
    );
    let o = s.run(&["dataset", "verify", &url]);
    // A killed writer's shards are noted; the dataset (version 1) is sound.
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.matches("note: part-").count(), 2, "{text}");
    assert_eq!(
        text.matches("a shard no version lists").count(),
        2,
        "{text}"
    );
    let versions: Vec<String> = s
        .objects("k")
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("_tensorsmith/versions/"))
        .collect();
    assert_eq!(versions, ["_tensorsmith/versions/00000001.json"]);
}

#[test]
fn a_writer_killed_before_its_commit_leaves_azure_as_it_was() {
    killed_writer_commits_nothing(&Server::azure());
}

#[test]
fn a_writer_killed_before_its_commit_leaves_gcs_as_it_was() {
    killed_writer_commits_nothing(&Server::gcs());
}

#[test]
fn an_abfs_url_names_the_azure_dataset_and_errors_name_the_url() {
    let s = Server::azure();
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a.arrow"), t.path().join("b.arrow"));
    input(&a, 1, 8);
    input(&b, 2, 4);
    // Hadoop's spelling of the same container (the account from the host, the endpoint from
    // the connection string), then an append through az://.
    let abfs = "abfss://data@devstoreaccount1.dfs.core.windows.net/h/ds";
    ok(&s.run(&write_args(&a, abfs, "error")));
    ok(&s.run(&write_args(&b, &s.url("h/ds"), "append")));
    let info = ok(&s.run(&["dataset", "info", abfs]));
    assert!(
        info.contains("samples: 12") && info.contains("version: 2"),
        "{info}"
    );
    let v = ok(&s.run(&["dataset", "verify", abfs]));
    assert!(v.starts_with(&format!("ok: {abfs} (")), "{v}");
    // A missing container is named, and no key or signature is shown.
    let e = err(&s.run(&write_args(&a, "az://nocontainer/ds", "error")));
    assert!(e.contains("az://nocontainer/"), "{e}");
}

#[test]
fn a_missing_gcs_bucket_is_named() {
    let s = Server::gcs();
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a.arrow");
    input(&a, 1, 8);
    let e = err(&s.run(&write_args(&a, "gs://nobucket/ds", "error")));
    assert!(e.contains("gs://nobucket/"), "{e}");
}
