//! A remote input file (`s3://`, `az://`, `gs://`, `hf://`, `http(s)://`) read by range
//! through a bounded block cache: blocks of `part_size` bytes (aligned), each one ranged GET
//! through the byte layer's reader (which pins the version opened: an object replaced between
//! two blocks is `ChangedDuringRead`, never a mix), fetched when first read. A read that
//! continues a sequential stream (the block before it is the last one that stream read) also
//! starts fetching the stream's next blocks in the background, up to `max_concurrency` GETs
//! in flight, so the network works while the caller decodes.
//!
//! Memory: a block a sequential stream has passed is dropped, so a reader holds the block each
//! stream reads, the one before it, and the blocks read ahead; the blocks read ahead and not
//! read yet (in flight or landed) of every reader of one input together number at most
//! `max_concurrency` (each holds a token until it is read or dropped: counting only the GETs
//! in flight let two readers' landed blocks pile up to twice that). So a write holds about
//! (`max_concurrency` + 2 × streams) × `part_size` of input, and never more than
//! `max_concurrency + SPARE_BLOCKS` blocks per reader (least recently used dropped first).
//! Each task of a write opens its own reader over the shared, pinned remote file.

use bytes::Bytes;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tensorsmith::bytes::ReadAt;

/// Blocks kept beyond those read ahead: the current block of a few interleaved streams (the
/// columns of a row group read side by side).
const SPARE_BLOCKS: usize = 4;

/// Sequential streams followed at once (a row group's columns, read in turn).
const STREAMS: usize = 8;

/// A remote file read through a bounded cache of part-sized blocks with read-ahead.
#[derive(Clone)]
pub(crate) struct RemoteChunks {
    shared: Arc<Shared>,
}

struct Shared {
    source: Arc<dyn ReadAt>,
    len: u64,
    block: u64,
    /// Blocks fetched at once, at most (GETs in flight).
    ahead: usize,
    /// Read-ahead GETs in flight in every reader of one input (at most `ahead` together).
    flights: Arc<AtomicUsize>,
    /// Blocks held at once, fetched or in flight.
    cap: usize,
    /// The byte ranges this reader will read (a task's column chunks), sorted: blocks outside
    /// them are never read ahead. Empty: any.
    within: Vec<Range<u64>>,
    state: Mutex<State>,
    changed: Condvar,
    /// Blocks fetched so far (tests: the reads stay bounded).
    fetched: AtomicU64,
}

#[derive(Default)]
struct State {
    blocks: HashMap<u64, Slot>,
    /// A clock for least-recently-used eviction.
    tick: u64,
    loading: usize,
    /// The last block of each sequential stream followed, most recent last.
    streams: Vec<u64>,
}

enum Slot {
    Loading,
    /// `ahead`: fetched by read-ahead and not read yet: it holds one of the input's
    /// read-ahead tokens (`flights`) until it is read or dropped.
    Ready {
        bytes: Bytes,
        used: u64,
        ahead: bool,
    },
}

impl std::fmt::Debug for RemoteChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteChunks")
            .field("source", &self.shared.source)
            .field("block", &self.shared.block)
            .finish()
    }
}

impl RemoteChunks {
    /// A reader of `source` in blocks of `part_size`, `max_concurrency` fetched at once.
    #[cfg(test)]
    pub(crate) fn new(source: Arc<dyn ReadAt>, part_size: u64, max_concurrency: usize) -> Self {
        let flights = Arc::new(AtomicUsize::new(0));
        Self::within(source, part_size, max_concurrency, flights, Vec::new())
    }

    /// A reader that will read only `within` (byte ranges): read-ahead stays inside them.
    /// `flights` counts the read-ahead GETs of every reader of the same input: together at
    /// most `max_concurrency`.
    pub(crate) fn within(
        source: Arc<dyn ReadAt>,
        part_size: u64,
        max_concurrency: usize,
        flights: Arc<AtomicUsize>,
        mut within: Vec<Range<u64>>,
    ) -> Self {
        within.sort_unstable_by_key(|r| (r.start, r.end));
        let ahead = max_concurrency.max(1);
        RemoteChunks {
            shared: Arc::new(Shared {
                len: source.len(),
                source,
                block: part_size.max(1),
                ahead,
                flights,
                cap: ahead + SPARE_BLOCKS,
                within,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
                fetched: AtomicU64::new(0),
            }),
        }
    }

    /// Blocks fetched so far by this reader.
    #[cfg(test)]
    pub(crate) fn fetched(&self) -> u64 {
        self.shared.fetched.load(Ordering::Relaxed)
    }

    /// Block `k`, fetched now unless held or in flight; a read continuing a stream starts
    /// fetching that stream's next blocks.
    fn block(&self, k: u64) -> tensorsmith::Result<Bytes> {
        let s = &self.shared;
        let mut st = s.lock();
        let sequential = k > 0 && st.streams.contains(&(k - 1));
        st.follow(k);
        // The block a stream has passed is dropped once no stream is at it: a sequential
        // reader holds the block it reads, the one before and those in flight.
        if sequential && k >= 2 && !st.streams.contains(&(k - 2)) {
            if let Some(Slot::Ready { .. }) = st.blocks.get(&(k - 2)) {
                let gone = st.blocks.remove(&(k - 2));
                s.dropped(gone);
            }
        }
        loop {
            st.tick += 1;
            let tick = st.tick;
            match st.blocks.get_mut(&k) {
                Some(Slot::Ready { bytes, used, ahead }) => {
                    *used = tick;
                    if std::mem::take(ahead) {
                        s.flights.fetch_sub(1, Ordering::AcqRel);
                    }
                    let b = bytes.clone();
                    if sequential {
                        Shared::read_ahead(s, &mut st, k);
                    }
                    return Ok(b);
                }
                Some(Slot::Loading) => st = s.changed.wait(st).unwrap_or_else(|e| e.into_inner()),
                None => {
                    s.make_room(&mut st, k);
                    st.blocks.insert(k, Slot::Loading);
                    st.loading += 1;
                    if sequential {
                        Shared::read_ahead(s, &mut st, k);
                    }
                    drop(st);
                    let got = s.fetch(k);
                    let mut st = s.lock();
                    st.loading -= 1;
                    let out = match got {
                        Ok(b) => {
                            st.tick += 1;
                            let used = st.tick;
                            st.blocks.insert(
                                k,
                                Slot::Ready {
                                    bytes: b.clone(),
                                    used,
                                    ahead: false,
                                },
                            );
                            Ok(b)
                        }
                        Err(e) => {
                            st.blocks.remove(&k);
                            Err(e)
                        }
                    };
                    s.changed.notify_all();
                    return out;
                }
            }
        }
    }

    /// Fills `buf` from `offset`, block by block.
    fn fill(&self, offset: u64, buf: &mut [u8]) -> tensorsmith::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.shared.len)
            .ok_or_else(|| {
                tensorsmith::Error::from(tensorsmith::ErrorKind::Truncated {
                    needed: offset.saturating_add(buf.len() as u64),
                    available: self.shared.len,
                })
            })?;
        let bs = self.shared.block;
        let mut at = offset;
        while at < end {
            let k = at / bs;
            let b = self.block(k)?;
            let lo = (at - k * bs) as usize;
            let n = ((end - at) as usize).min(b.len() - lo);
            let o = (at - offset) as usize;
            buf[o..o + n].copy_from_slice(&b[lo..lo + n]);
            at += n as u64;
        }
        Ok(())
    }

    /// The bytes of `offset..offset + n`: a slice of one block where they lie in one (no copy).
    pub(crate) fn bytes(&self, offset: u64, n: usize) -> tensorsmith::Result<Bytes> {
        let bs = self.shared.block;
        let k = offset / bs;
        let lo = offset - k * bs;
        if n > 0 && lo + n as u64 <= bs && offset + n as u64 <= self.shared.len {
            let b = self.block(k)?;
            return Ok(b.slice(lo as usize..lo as usize + n));
        }
        let mut v = vec![0u8; n];
        self.fill(offset, &mut v)?;
        Ok(Bytes::from(v))
    }

    /// Drops every fetched block (blocks in flight land and are kept).
    pub(crate) fn release(&self) {
        let mut st = self.shared.lock();
        let ready: Vec<u64> = (st.blocks.iter())
            .filter(|(_, s)| !matches!(s, Slot::Loading))
            .map(|(&k, _)| k)
            .collect();
        for k in ready {
            let gone = st.blocks.remove(&k);
            self.shared.dropped(gone);
        }
        st.streams.clear();
    }

    /// A sequential reader from `offset` (Arrow IPC input, Parquet page headers).
    pub(crate) fn reader_at(&self, offset: u64) -> ChunkCursor {
        ChunkCursor {
            chunks: self.clone(),
            pos: offset,
        }
    }
}

impl Shared {
    /// Whether block `k` holds bytes this reader will read.
    fn wanted(&self, k: u64) -> bool {
        let (lo, hi) = (k * self.block, (k + 1) * self.block);
        if self.within.is_empty() {
            return true;
        }
        // The ranges starting before the block's end; one of them must end after its start.
        let n = self.within.partition_point(|r| r.start < hi);
        self.within[..n].iter().rev().any(|r| r.end > lo)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One block, by one ranged GET (a block is one part).
    fn fetch(&self, k: u64) -> tensorsmith::Result<Bytes> {
        let start = k * self.block;
        let end = (start + self.block).min(self.len);
        self.fetched.fetch_add(1, Ordering::Relaxed);
        let b = self.source.read(start..end)?;
        Ok(Bytes::from(b.into_owned()))
    }

    /// A block taken out of the cache: its read-ahead token, if it still holds one, goes back.
    fn dropped(&self, slot: Option<Slot>) {
        if let Some(Slot::Ready { ahead: true, .. }) = slot {
            self.flights.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Drops least recently used fetched blocks (never `keep`) until one more fits.
    fn make_room(&self, st: &mut State, keep: u64) {
        while st.blocks.len() >= self.cap {
            let victim = st
                .blocks
                .iter()
                .filter_map(|(&b, s)| match s {
                    Slot::Ready { used, .. } if b != keep => Some((*used, b)),
                    _ => None,
                })
                .min();
            match victim {
                Some((_, b)) => {
                    let gone = st.blocks.remove(&b);
                    self.dropped(gone);
                }
                None => return,
            }
        }
    }

    /// Starts fetching the blocks after `k` (up to `ahead` of them, while GETs in flight and
    /// blocks held stay within their bounds) on background threads.
    fn read_ahead(this: &Arc<Shared>, st: &mut State, k: u64) {
        let last = this.len.div_ceil(this.block);
        for next in k + 1..(k + 1 + this.ahead as u64).min(last) {
            if st.blocks.contains_key(&next) || !this.wanted(next) {
                continue;
            }
            if st.loading >= this.ahead {
                break;
            }
            this.make_room(st, k);
            if st.blocks.len() >= this.cap {
                break;
            }
            let taken = this
                .flights
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < this.ahead).then_some(n + 1)
                });
            if taken.is_err() {
                break;
            }
            st.blocks.insert(next, Slot::Loading);
            st.loading += 1;
            let shared = Arc::clone(this);
            std::thread::spawn(move || {
                let got = shared.fetch(next);
                let mut st = shared.lock();
                st.loading -= 1;
                match got {
                    // Its token stays with it until it is read or dropped.
                    Ok(bytes) => {
                        st.tick += 1;
                        let used = st.tick;
                        let ahead = true;
                        st.blocks.insert(next, Slot::Ready { bytes, used, ahead });
                    }
                    // The reader fetches it again itself, and sees the error then.
                    Err(_) => {
                        st.blocks.remove(&next);
                        shared.flights.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                shared.changed.notify_all();
            });
        }
    }
}

impl Drop for Shared {
    /// Read-ahead blocks never read give their tokens back with the reader.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let unread = (st.blocks.values())
            .filter(|s| matches!(s, Slot::Ready { ahead: true, .. }))
            .count();
        self.flights.fetch_sub(unread, Ordering::AcqRel);
    }
}

impl State {
    /// Notes that a stream read block `k`: it continues the stream that read `k - 1` or `k`,
    /// else starts a new one (the oldest forgotten).
    fn follow(&mut self, k: u64) {
        if let Some(i) = self
            .streams
            .iter()
            .position(|&b| b == k || Some(b) == k.checked_sub(1))
        {
            self.streams.remove(i);
        } else if self.streams.len() >= STREAMS {
            self.streams.remove(0);
        }
        self.streams.push(k);
    }
}

impl ReadAt for RemoteChunks {
    fn len(&self) -> u64 {
        self.shared.len
    }

    fn read(&self, range: Range<u64>) -> tensorsmith::Result<Cow<'_, [u8]>> {
        let n = range
            .end
            .checked_sub(range.start)
            .ok_or(tensorsmith::ErrorKind::Truncated {
                needed: range.end,
                available: self.shared.len,
            })?;
        let mut v = vec![0u8; n as usize];
        self.fill(range.start, &mut v)?;
        Ok(Cow::Owned(v))
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> tensorsmith::Result<()> {
        self.fill(offset, buf)
    }

    /// Block by block, straight from the cache (no second buffer).
    fn copy_to(&self, range: Range<u64>, out: &mut dyn io::Write) -> tensorsmith::Result<()> {
        if range.start > range.end || range.end > self.shared.len {
            return Err(tensorsmith::ErrorKind::Truncated {
                needed: range.end,
                available: self.shared.len,
            }
            .into());
        }
        let bs = self.shared.block;
        let mut at = range.start;
        while at < range.end {
            let k = at / bs;
            let b = self.block(k)?;
            let lo = (at - k * bs) as usize;
            let n = ((range.end - at) as usize).min(b.len() - lo);
            out.write_all(&b[lo..lo + n])?;
            at += n as u64;
        }
        Ok(())
    }
}

/// A position in a [`RemoteChunks`], read sequentially (block by block, with read-ahead).
pub(crate) struct ChunkCursor {
    chunks: RemoteChunks,
    pos: u64,
}

impl Read for ChunkCursor {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let s = &self.chunks.shared;
        if self.pos >= s.len || buf.is_empty() {
            return Ok(0);
        }
        let k = self.pos / s.block;
        let b = self.chunks.block(k).map_err(io::Error::other)?;
        let lo = (self.pos - k * s.block) as usize;
        let n = buf.len().min(b.len() - lo);
        buf[..n].copy_from_slice(&b[lo..lo + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ChunkCursor {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let len = self.chunks.shared.len;
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| io::Error::other("seek before the start"))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_match_the_source_and_stay_bounded() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let r = RemoteChunks::new(Arc::new(data.clone()), 64, 3);
        for (a, b) in [(0, 10), (60, 70), (63, 200), (990, 1000), (0, 1000)] {
            assert_eq!(&r.read(a..b).unwrap()[..], &data[a as usize..b as usize]);
            assert_eq!(
                &r.bytes(a, (b - a) as usize).unwrap()[..],
                &data[a as usize..b as usize]
            );
        }
        assert!(r.read(990..1001).is_err());
        let mut out = Vec::new();
        r.copy_to(5..999, &mut out).unwrap();
        assert_eq!(out, &data[5..999]);
        let mut all = Vec::new();
        r.reader_at(100).read_to_end(&mut all).unwrap();
        assert_eq!(all, &data[100..]);
        assert!(r.shared.lock().blocks.len() <= 3 + SPARE_BLOCKS);
        // A sequential read, read ahead, fetches each block once.
        let fresh = RemoteChunks::new(Arc::new(data.clone()), 64, 3);
        let mut all = Vec::new();
        fresh.reader_at(0).read_to_end(&mut all).unwrap();
        assert_eq!(all, data);
        assert_eq!(fresh.fetched(), 1000u64.div_ceil(64));
        // Read-ahead stays inside the ranges given.
        let flights = Arc::new(AtomicUsize::new(0));
        let within =
            RemoteChunks::within(Arc::new(data.clone()), 64, 3, flights, vec![0..40, 40..100]);
        within.bytes(0, 10).unwrap();
        within.bytes(64, 10).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(within.fetched(), 2);
    }

    #[test]
    fn blocks_read_ahead_and_not_read_yet_stay_within_the_inputs_bound() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        let flights = Arc::new(AtomicUsize::new(0));
        let open = || {
            RemoteChunks::within(
                Arc::new(data.clone()),
                64,
                3,
                Arc::clone(&flights),
                Vec::new(),
            )
        };
        let (a, b) = (open(), open());
        // Both start a sequential stream: each read continues it and reads ahead.
        for r in [&a, &b] {
            r.bytes(0, 8).unwrap();
            r.bytes(64, 8).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let unread = |r: &RemoteChunks| {
            let st = r.shared.lock();
            (st.blocks.values())
                .filter(|s| matches!(s, Slot::Ready { ahead: true, .. } | Slot::Loading))
                .count()
        };
        // Landed but unread, the blocks read ahead keep their tokens: the two readers
        // together hold at most 3, not 3 each.
        assert!(
            unread(&a) + unread(&b) <= 3,
            "{} + {}",
            unread(&a),
            unread(&b)
        );
        assert_eq!(flights.load(Ordering::Acquire), unread(&a) + unread(&b));
        // Reading on gives tokens back as blocks are read; dropping a reader returns the rest.
        let mut all = Vec::new();
        a.reader_at(128).read_to_end(&mut all).unwrap();
        assert_eq!(all, &data[128..]);
        drop(a);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(flights.load(Ordering::Acquire), unread(&b));
        drop(b);
        // (A fetch thread still landing holds the reader until it is done.)
        let t0 = std::time::Instant::now();
        while flights.load(Ordering::Acquire) != 0 && t0.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(flights.load(Ordering::Acquire), 0);
    }
}
