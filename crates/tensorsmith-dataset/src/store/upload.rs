//! Shards uploaded while the tasks still write (batch mode on an object store): each shard,
//! once complete in staging, goes to a queue of [`QUEUED_PER_UPLOADER`] × the store's
//! concurrency, uploaded by that many threads to its final name and then removed from
//! staging. A full queue makes the task wait, so staging holds at most the shards being
//! written (one per task), queued and in flight, whatever the dataset's size. Shards of KV
//! writes are rewritten after their tasks (duplicates resolved), so they go at the commit.

use crate::error::{DatasetError, Result};
use crate::store::seam::Store;
use std::collections::HashSet;
use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::sync::Mutex;

/// Shards queued per upload thread.
pub(crate) const QUEUED_PER_UPLOADER: usize = 1;

/// What the uploads of one write did: the shards uploaded, the first failure.
#[derive(Default)]
pub(crate) struct Uploaded {
    pub names: HashSet<String>,
    pub error: Option<DatasetError>,
}

/// Runs `f` with a function that queues a shard of `staging` for upload to `store`; returns
/// what `f` returned and what was uploaded once every queued shard is done.
pub(crate) fn uploading<T>(
    store: &dyn Store,
    staging: &Path,
    f: impl FnOnce(&(dyn Fn(&str) + Sync)) -> T,
) -> (T, Uploaded) {
    let threads = store.concurrency().max(1);
    let done = Mutex::new(Uploaded::default());
    let (tx, rx) = sync_channel::<String>(threads * QUEUED_PER_UPLOADER);
    let rx = Mutex::new(rx);
    let out = std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                let Ok(name) = next else { return };
                let failed = done
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .error
                    .is_some();
                if failed {
                    // Drained without uploading: the write fails anyway.
                    continue;
                }
                let r = store.adopt(&name, &staging.join(&name));
                let mut d = done.lock().unwrap_or_else(|p| p.into_inner());
                match r {
                    Ok(()) => {
                        d.names.insert(name);
                    }
                    Err(e) => {
                        d.error.get_or_insert(e);
                    }
                }
            });
        }
        let queue = |name: &str| {
            // A send fails only when every upload thread is gone: never while `tx` lives.
            let _ = tx.send(name.to_string());
        };
        let out = f(&queue);
        drop(tx);
        out
    });
    (out, done.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// Deletes what an abandoned write uploaded (best effort: `dataset clean` takes the rest).
pub(crate) fn remove_uploaded(store: &dyn Store, uploaded: &Uploaded) {
    for n in &uploaded.names {
        let _ = store.delete(n);
    }
}

/// The first upload failure as the write's error.
pub(crate) fn check(uploaded: &mut Uploaded) -> Result<()> {
    match uploaded.error.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
