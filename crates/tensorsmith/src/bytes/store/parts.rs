//! Large remote reads as parallel ranged requests: a range cut into parts of `part_size`
//! bytes, up to `max_concurrency` of them fetched at once on scoped threads (no async
//! runtime), each part by its own `fetch` (which retries on its own), and written to a
//! writer in order ([`copy_parallel`]: a download; a large `read` writes into its buffer).
//! Memory is bounded by `max_concurrency × part_size`: a part is fetched only while fewer
//! than `max_concurrency` parts are being fetched or waiting to be written, and part buffers
//! are reused. The first failure stops the others from starting new parts and is the one
//! returned.
//!
//! One pipeline serves both shapes (reads and copies) to keep the Python extension small.

use crate::bytes::storage_options::Transfer;
use crate::error::{Error, Result};
use std::io::Write;
use std::ops::Range;
use std::sync::{Condvar, Mutex, MutexGuard};

/// Fetches the bytes of a range (within the file) into a buffer (a reused one, resized to
/// the range's length), and hands the buffer back filled. Owned, so that a fetch may fill it
/// on another thread (an async runtime's task).
pub type Fetch<'a> = dyn Fn(Range<u64>, Vec<u8>) -> Result<Vec<u8>> + Sync + 'a;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the fetching threads and the writing one share.
struct Pipeline {
    /// The next part to fetch.
    next: u64,
    /// Parts written so far (the next to write).
    written: u64,
    /// Parts fetched and not yet written: part `i` in slot `i % window`.
    done: Vec<Option<Vec<u8>>>,
    /// Buffers of written parts, for the next fetches.
    free: Vec<Vec<u8>>,
    failed: Option<Error>,
    stop: bool,
}

/// Writes the bytes of `range` to `out` in order, its parts fetched in parallel, at most
/// `max_concurrency` part buffers alive at once.
pub fn copy_parallel(
    range: Range<u64>,
    out: &mut dyn Write,
    transfer: &Transfer,
    fetch: &Fetch<'_>,
) -> Result<()> {
    let size = transfer.part_size.max(1);
    let n = (range.end - range.start).div_ceil(size);
    let part = |i: u64| {
        let start = range.start + i * size;
        start..(start + size).min(range.end)
    };
    let window = (transfer.max_concurrency.max(1) as u64).min(n);
    let state = Mutex::new(Pipeline {
        next: 0,
        written: 0,
        done: vec![None; window as usize],
        free: Vec::new(),
        failed: None,
        stop: false,
    });
    let changed = Condvar::new();
    let wait = |g| changed.wait(g).unwrap_or_else(|p| p.into_inner());
    let worker = || loop {
        let (i, buf) = {
            let mut st = lock(&state);
            while !st.stop && st.next < n && st.next >= st.written + window {
                st = wait(st);
            }
            if st.stop || st.next >= n {
                return;
            }
            st.next += 1;
            let buf = st.free.pop().unwrap_or_default();
            (st.next - 1, buf)
        };
        let got = fetch(part(i), buf);
        let mut st = lock(&state);
        match got {
            Ok(buf) => st.done[(i % window) as usize] = Some(buf),
            Err(e) => {
                st.failed.get_or_insert(e);
                st.stop = true;
            }
        }
        changed.notify_all();
    };
    let mut writer = || -> Result<()> {
        for i in 0..n {
            let buf = {
                let mut st = lock(&state);
                loop {
                    if let Some(e) = st.failed.take() {
                        return Err(e);
                    }
                    if let Some(b) = st.done[(i % window) as usize].take() {
                        break b;
                    }
                    st = wait(st);
                }
            };
            let wrote = out.write_all(&buf);
            let mut st = lock(&state);
            st.written = i + 1;
            st.free.push(buf);
            changed.notify_all();
            drop(st);
            wrote?;
        }
        Ok(())
    };
    std::thread::scope(|s| {
        for _ in 0..window {
            s.spawn(worker);
        }
        let result = writer();
        if result.is_err() {
            lock(&state).stop = true;
            changed.notify_all();
        }
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn transfer(conc: usize, part: u64) -> Transfer {
        Transfer {
            max_concurrency: conc,
            part_size: part,
            ..Transfer::default()
        }
    }

    #[test]
    fn parts_arrive_in_order_with_bounded_buffers() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let alive = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let fetch = |r: Range<u64>, mut buf: Vec<u8>| {
            buf.resize((r.end - r.start) as usize, 0);
            let now = alive.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            // Later parts finish first.
            std::thread::sleep(std::time::Duration::from_micros(3000 - r.start / 40));
            buf.copy_from_slice(&data[r.start as usize..r.end as usize]);
            alive.fetch_sub(1, Ordering::SeqCst);
            Ok(buf)
        };
        for (conc, part, range) in [
            (4, 1000, 3..99_999),
            (3, 7777, 0..100_000),
            (1, 999, 5..6000),
        ] {
            let mut out = Vec::new();
            copy_parallel(range.clone(), &mut out, &transfer(conc, part), &fetch).unwrap();
            assert_eq!(out, &data[range.start as usize..range.end as usize]);
            let mut buf = vec![0; (range.end - range.start) as usize];
            copy_parallel(
                range.clone(),
                &mut &mut buf[..],
                &transfer(conc, part),
                &fetch,
            )
            .unwrap();
            assert_eq!(buf, out);
            assert!(peak.swap(0, Ordering::SeqCst) <= conc);
        }
    }

    #[test]
    fn the_first_failure_is_returned_and_stops_the_rest() {
        let calls = AtomicUsize::new(0);
        let fetch = |r: Range<u64>, buf: Vec<u8>| {
            calls.fetch_add(1, Ordering::SeqCst);
            match r.start {
                3000 => Err(ErrorKind::Http("part 3 failed".into()).into()),
                _ => Ok(buf),
            }
        };
        let mut out = Vec::new();
        let e = copy_parallel(0..1_000_000, &mut out, &transfer(2, 1000), &fetch).unwrap_err();
        assert!(e.to_string().contains("part 3 failed"), "{e}");
        assert!(calls.load(Ordering::SeqCst) < 10);
        assert!(out.len() <= 3000);
    }
}
