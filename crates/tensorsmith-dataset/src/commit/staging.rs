//! Staging folders (`_tensorsmith_staging-*` of `write_dataset`, `_tensorsmith_job-*` of a
//! distributed job) and their liveness. Each carries a marker with its start time and a
//! heartbeat its writer renews; a folder whose heartbeat is older than a limit belongs to a
//! writer that died between its tasks and its commit or abort, and `clean` (retention.rs)
//! removes it. A live
//! writer's folder is never touched: its heartbeat is always fresh.

use crate::error::{DatasetError, Result};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Prefix of `write_dataset`'s staging folders.
pub const STAGING_PREFIX: &str = "_tensorsmith_staging-";
/// Prefix of a distributed job's staging folder.
pub const JOB_STAGING_PREFIX: &str = "_tensorsmith_job-";
/// The marker inside a staging folder: `{"started_ms": …, "heartbeat_ms": …}`.
pub const MARKER_NAME: &str = "_tensorsmith_heartbeat.json";
/// How often a writer renews its heartbeat.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(60);
/// Heartbeats older than this mark a dead writer's folder (`dataset clean`, `verify`, and
/// every commit).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn read_marker(folder: &Path) -> Option<(u64, u64)> {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join(MARKER_NAME)).ok()?).ok()?;
    Some((v["started_ms"].as_u64()?, v["heartbeat_ms"].as_u64()?))
}

/// The name of the machine this process runs on (Linux: the kernel's hostname), `None` where
/// it cannot be read. A local write's staging folder is named after it (`…@<host>`), so that
/// its writer's process id is looked up only on the machine it ran on: a folder shared over
/// NFS holds the staging folders of writers on several machines.
pub(crate) fn this_host() -> Option<String> {
    static HOST: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
        let h = h.trim();
        // A file name's part: a hostname is letters, digits, dots and hyphens.
        let plain = !h.is_empty()
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        plain.then(|| h.to_string())
    })
    .clone()
}

/// Writes (or renews) the marker of `folder`: the start time is kept, the heartbeat is now.
/// Written under a temporary name and renamed, so a reader never sees half a marker.
pub fn mark(folder: &Path) -> Result<()> {
    let now = now_ms();
    let started = read_marker(folder).map_or(now, |(s, _)| s);
    let text = format!("{{\"started_ms\": {started}, \"heartbeat_ms\": {now}}}\n");
    // A name of its own: several tasks (threads or processes) may renew one folder at once.
    let tmp = folder.join(format!(".{MARKER_NAME}.{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, text).map_err(|e| DatasetError::io(&tmp, e))?;
    let to = folder.join(MARKER_NAME);
    std::fs::rename(&tmp, &to).map_err(|e| DatasetError::io(&to, e))
}

/// A heartbeat kept by a background thread until dropped (or [`Heartbeat::stop`]ped).
pub struct Heartbeat {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Marks `folder` now and renews the mark every `every` until stopped.
    pub fn start(folder: &Path, every: Duration) -> Result<Heartbeat> {
        mark(folder)?;
        let dir = folder.to_path_buf();
        // A folder removed by the commit or abort ends the heartbeat.
        Ok(Heartbeat::renewing(every, move || {
            dir.is_dir() && mark(&dir).is_ok()
        }))
    }

    /// Calls `renew` every `every` until stopped, or until `renew` returns false (what it
    /// marks is gone). The first mark is the caller's.
    pub fn renewing(every: Duration, renew: impl FnMut() -> bool + Send + 'static) -> Heartbeat {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s = stop.clone();
        let thread = std::thread::spawn(move || renew_until_stopped(&s, every, renew));
        Heartbeat {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the renewals and waits for the thread.
    pub fn stop(&mut self) {
        stop_renewals(&self.stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A stop flag and the condition its renewing thread waits on.
pub(crate) type StopFlag = (Mutex<bool>, Condvar);

/// Calls `renew` every `every` until `stop` is raised ([`stop_renewals`]) or `renew` returns
/// false: the body of a renewing thread, scoped or not.
pub(crate) fn renew_until_stopped(
    stop: &StopFlag,
    every: Duration,
    mut renew: impl FnMut() -> bool,
) {
    let (lock, cv) = stop;
    let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        // The flag is checked before each wait: a stop that came before the thread first
        // took the lock must not cost a whole interval.
        let (guard, _) = cv
            .wait_timeout_while(stopped, every, |stop| !*stop)
            .unwrap_or_else(|p| p.into_inner());
        if *guard {
            return;
        }
        // Renewed without the lock held: a stop does not wait for a slow renewal (a PUT to a
        // store) to be noticed.
        drop(guard);
        if !renew() {
            return;
        }
        stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
    }
}

/// Raises `stop`: its renewing thread returns at once.
pub(crate) fn stop_renewals(stop: &StopFlag) {
    *stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
    stop.1.notify_all();
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One staging folder in a dataset folder.
#[derive(Debug, Clone)]
pub struct StagingFolder {
    /// The staging folder's path (inside the dataset folder).
    pub path: PathBuf,
    /// Time since the last heartbeat (folders without a marker, from older writers: since the
    /// newest change to the folder or a file in it).
    pub idle: Duration,
    /// Milliseconds since the epoch at the writer's start, when the marker says.
    pub started_ms: Option<u64>,
}

/// Milliseconds since the epoch of the newest change to `folder` or a file directly in it.
fn newest_change_ms(folder: &Path) -> u64 {
    let ms = |m: std::io::Result<std::fs::Metadata>| {
        m.ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64)
    };
    let mut newest = ms(std::fs::metadata(folder));
    if let Ok(entries) = std::fs::read_dir(folder) {
        for e in entries.flatten() {
            newest = newest.max(ms(e.metadata()));
        }
    }
    newest
}

/// Every staging folder directly in `dir`, oldest heartbeat first.
pub fn staging_folders(dir: &Path) -> Result<Vec<StagingFolder>> {
    let now = now_ms();
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| DatasetError::io(dir, e))? {
        let e = e.map_err(|e| DatasetError::io(dir, e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(STAGING_PREFIX) || name.starts_with(JOB_STAGING_PREFIX))
            || !e.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        let path = e.path();
        let (started_ms, beat) = match read_marker(&path) {
            Some((s, b)) => (Some(s), b),
            None => (None, newest_change_ms(&path)),
        };
        out.push(StagingFolder {
            idle: Duration::from_millis(now.saturating_sub(beat)),
            started_ms,
            path,
        });
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.idle));
    Ok(out)
}

/// Staging folders in `dir` idle for longer than `older_than`.
pub fn stale_folders(dir: &Path, older_than: Duration) -> Result<Vec<StagingFolder>> {
    Ok(staging_folders(dir)?
        .into_iter()
        .filter(|f| f.idle > older_than)
        .collect())
}

/// `24h`, `30m`, `90s`, `7d`, `500ms`: a duration as the command line gives it.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad duration '{s}' (e.g. 24h, 30m, 90s, 7d)"))?;
    let ms = match unit {
        "ms" => 1,
        "s" | "" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        u => {
            return Err(format!(
                "unknown duration unit '{u}' in '{s}' (ms, s, m, h, d)"
            ))
        }
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration '{s}' out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_the_command_line_gives_them() {
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("h").is_err() && parse_duration("5y").is_err());
    }

    #[test]
    fn a_heartbeat_stops_at_once_whatever_its_interval() {
        let d = tempfile::tempdir().unwrap();
        for _ in 0..20 {
            let t = std::time::Instant::now();
            drop(Heartbeat::start(d.path(), Duration::from_secs(3600)).unwrap());
            assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        }
    }

    #[test]
    fn marks_keep_the_start_and_renew_the_heartbeat() {
        let d = tempfile::tempdir().unwrap();
        mark(d.path()).unwrap();
        let (s1, b1) = read_marker(d.path()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        mark(d.path()).unwrap();
        let (s2, b2) = read_marker(d.path()).unwrap();
        assert_eq!(s1, s2);
        assert!(b2 > b1);
    }
}
