//! The one tokio runtime of the process, on which the object-store clients (`object_store`,
//! async) run, for callers that are all synchronous: [`block_on`] runs a future on it from
//! any thread (rayon workers, upload threads, Python calls with the GIL released).
//!
//! Made at the first use, and made again in a child after a `fork` (Spark's forked Python
//! workers, PyTorch DataLoader workers): the parent's runtime threads do not exist there,
//! so the runtime is tied to the pid that made it, and a child's first call makes its own
//! (the parent's is leaked, never shut down: its threads are not there to join). Also
//! installs ring as the process's rustls provider (reqwest is built without one), once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::runtime::{Builder, Runtime};

/// The runtime and the pid of the process that made it.
static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// The process's runtime, made now if there is none for this pid.
pub(crate) fn handle() -> Arc<Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    match &*slot {
        Some((made_by, rt)) if *made_by == pid => return Arc::clone(rt),
        Some(_) => {
            // A forked child: the parent's worker threads are gone; never drop it.
            if let Some((_, parent)) = slot.take() {
                std::mem::forget(parent);
            }
        }
        None => {}
    }
    install_tls();
    let rt = Arc::new(
        Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get().min(8)))
            .thread_name("tensorsmith-io")
            .enable_all()
            .build()
            .expect("the I/O runtime starts"),
    );
    *slot = Some((pid, Arc::clone(&rt)));
    rt
}

/// Installs ring as the process's rustls provider (reqwest, built without one, asks for
/// the process default when a client is built), once; one installed already is kept.
pub(crate) fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Clients made in this process, by a key of everything they are made of: the objects of a
/// bucket or container share one client, its connections and its token, not one per open.
/// A forked child makes its own (the parent's connection tasks belong to the parent's
/// runtime, and are never dropped here).
pub(crate) struct PerProcess<T>(Mutex<Option<Made<T>>>);

/// The pid that made the clients, and the clients by key.
type Made<T> = (u32, HashMap<String, Arc<T>>);

impl<T> PerProcess<T> {
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess(Mutex::new(None))
    }

    /// The client under `key`, made by `make` if this process has none.
    pub(crate) fn get_or_make<E>(
        &self,
        key: String,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let pid = std::process::id();
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_none_or(|(made_by, _)| *made_by != pid) {
            if let Some(parent) = slot.replace((pid, HashMap::new())) {
                std::mem::forget(parent);
            }
        }
        let made = &mut slot.as_mut().expect("just set").1;
        if let Some(c) = made.get(&key) {
            return Ok(Arc::clone(c));
        }
        install_tls();
        let c = Arc::new(make()?);
        made.insert(key, Arc::clone(&c));
        Ok(c)
    }
}

/// Runs `f` to completion on the process's runtime, blocking this (synchronous) thread.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    handle().block_on(f)
}

/// Runs `f` as a task on the runtime's worker threads and blocks this thread until it is
/// done: for futures woken many times (a response body streamed chunk by chunk), which then
/// run where the connection's I/O is driven instead of waking this thread once per chunk
/// (with [`block_on`], ten parallel 8 MiB GETs cost a thread wake-up per network chunk).
/// A panic in the task is resumed here; the runtime is never shut down, so the task is
/// never cancelled.
pub(crate) fn run<F>(f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    wait(spawn(f))
}

/// Starts `f` as a task on the runtime's worker threads; [`wait`] blocks for its output.
pub(crate) fn spawn<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    handle().spawn(f)
}

/// Blocks this (synchronous) thread until `task` is done (a panic in it is resumed here).
pub(crate) fn wait<T>(task: tokio::task::JoinHandle<T>) -> T {
    match handle().block_on(task) {
        Ok(out) => out,
        Err(e) => match e.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            Err(e) => unreachable!("the process's runtime is never shut down: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_runtime_per_process() {
        let a = super::handle();
        let b = super::handle();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert_eq!(super::block_on(async { 41 + 1 }), 42);
        assert_eq!(super::run(async { 41 + 1 }), 42);
    }

    #[test]
    fn one_client_per_key_and_process() {
        static MADE: super::PerProcess<String> = super::PerProcess::new();
        let a = MADE
            .get_or_make::<()>("k".into(), || Ok("a".into()))
            .unwrap();
        let b = MADE
            .get_or_make::<()>("k".into(), || Ok("b".into()))
            .unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert_eq!(
            MADE.get_or_make("j".into(), || Err("refused")),
            Err("refused")
        );
        let c = MADE
            .get_or_make::<()>("j".into(), || Ok("c".into()))
            .unwrap();
        assert_eq!(*c, "c", "a failed make leaves nothing behind");
    }
}
