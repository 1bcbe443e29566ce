//! The streaming part writer under every zTensor version: parts go to the output in file
//! order as soon as they and all before them are ready, while worker threads read and
//! compress the next few pieces (a window of a few per thread), so memory stays bounded
//! whatever the model size and compression overlaps writing. Digests are computed on the way.

use crate::codec;
use crate::digest::{DigestKind, Hasher};
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Digest, DigestScope};
use crate::sink::Rewind;
use crate::ztensor::part_source::PartBytes;
use crate::ztensor::prepared::pad;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

/// How a part is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encode {
    Raw,
    /// One zstd frame for the whole part (v0.1, v1.1), compressed as a stream.
    Frame(i32),
    /// zstd seekable: 1 MiB frames with checksums, then the seek table (v2).
    Seekable(i32),
}

/// One part to write, in file order.
pub(crate) struct PartJob<'p, 'a> {
    /// The object's name, for errors.
    pub name: &'p str,
    pub bytes: &'p PartBytes<'a>,
    pub encode: Encode,
    pub digest: Option<(DigestKind, DigestScope)>,
    /// A bool part: every byte must be 0 or 1 (zTensor's rule, which readers check), so a
    /// source holding another byte (safetensors does not forbid it) is refused, not written.
    pub bool_bytes: bool,
}

/// `range` of a job's bytes, checked against the job's data rule.
fn read<'p>(job: &'p PartJob<'p, '_>, range: Range<u64>) -> Result<Cow<'p, [u8]>> {
    let start = range.start;
    checked(job, start, job.bytes.read(range)?)
}

/// `r`, the job's bytes from `start` on, if they keep the job's data rule.
fn checked<'p>(job: &PartJob<'_, '_>, start: u64, r: Cow<'p, [u8]>) -> Result<Cow<'p, [u8]>> {
    if job.bool_bytes {
        if let Some(i) = crate::ztensor::layout::first_bad_bool(&r) {
            return Err(Error::new(ErrorKind::ZtLayoutData(format!(
                "bool bytes must be 0x00 or 0x01, byte {} is {:#04x}; zTensor readers refuse \
                 it, so it is not written",
                start + i as u64,
                r[i]
            )))
            .at_tensor(job.name));
        }
    }
    Ok(r)
}

/// How blobs are placed.
pub(crate) struct Placement {
    pub align: u64,
    /// v2's rules: an empty blob takes the next aligned offset without advancing, and a blob
    /// whose stored bytes equal one already written is not written again but points there.
    pub v2_blobs: bool,
}

/// Where a part went.
pub(crate) struct Written {
    pub offset: u64,
    pub stored_len: u64,
    pub digest: Option<Digest>,
}

/// Raw parts are copied in pieces of this size.
const RAW_CHUNK: u64 = 4 << 20;
/// A part compressed as one stream is read in pieces of this size.
const READ_CHUNK: u64 = 4 << 20;
/// A stream sends its compressed output in pieces of about this size.
const STREAM_PIECE: usize = 1 << 20;
/// Pieces a unit may have ready before the writer takes them.
const DEPTH: usize = 2;
/// Pieces a whole-part stream (v0.1, v1.1) may have ready: more than [`DEPTH`], because such a
/// unit is a whole part. With two, the worker on part N+1 stopped after 2 MiB of output while
/// part N was still being compressed, so parts were in effect compressed one at a time (v1.1
/// zstd-3 at 0.8-0.96x ztensor 1.1.1). With this many, a part of up to
/// `STREAM_DEPTH * STREAM_PIECE` compressed bytes is compressed whole while the parts before it
/// are written, and the window holds at most `window * STREAM_DEPTH` MiB of output.
const STREAM_DEPTH: usize = 8;
/// Units this small run on the writing thread itself: handing one to a worker (a channel, a
/// wake-up each way) costs more than the work, which for 20,000 tiny tensors was most of the
/// write. Raw up to 64 KiB (a copy); compressed up to 4 KiB (well under a millisecond even at
/// level 19). Such a unit sends at most three messages, fewer than `INLINE_DEPTH`, so running
/// it before its receiver is read cannot block.
const INLINE_RAW: u64 = 64 << 10;
const INLINE_COMPRESSED: u64 = 4 << 10;
const INLINE_DEPTH: usize = 8;

/// A piece of work for one thread; a part is one or more units, in order.
enum Unit {
    /// A range of a part, stored raw or as one seekable frame.
    Chunk {
        job: usize,
        range: Range<u64>,
        frame: Option<i32>,
    },
    /// A whole part as one zstd frame, compressed as a stream.
    Stream { job: usize, level: i32 },
    /// A part whose source is read whole (it cannot be read in pieces).
    Whole { job: usize },
}

impl Unit {
    fn job(&self) -> usize {
        match self {
            Unit::Chunk { job, .. } | Unit::Stream { job, .. } | Unit::Whole { job } => *job,
        }
    }

    /// Whether the writing thread runs it itself (see `INLINE_RAW`).
    fn inline(&self, job: &PartJob<'_, '_>) -> bool {
        let raw = match self {
            Unit::Chunk { frame, .. } => frame.is_none(),
            Unit::Whole { .. } => job.encode == Encode::Raw,
            Unit::Stream { .. } => false,
        };
        // (A small stream unit is one frame from this thread's reused context.)
        self.input_len(job) <= if raw { INLINE_RAW } else { INLINE_COMPRESSED }
    }

    /// The source bytes it handles (for progress).
    fn input_len(&self, job: &PartJob<'_, '_>) -> u64 {
        match self {
            Unit::Chunk { range, .. } => range.end - range.start,
            Unit::Stream { .. } | Unit::Whole { .. } => job.bytes.len(),
        }
    }
}

/// The decoded bytes a piece adds to a digest over decoded bytes.
enum Decoded<'p> {
    SameAsStored,
    Bytes(Cow<'p, [u8]>),
    Nothing,
}

struct Piece<'p> {
    stored: Cow<'p, [u8]>,
    decoded: Decoded<'p>,
    /// A seekable frame's (compressed, decompressed) sizes.
    frame: Option<(u32, u32)>,
}

enum Msg<'p> {
    Piece(Piece<'p>),
    Done,
    Failed(Error),
}

fn units_of(i: usize, job: &PartJob<'_, '_>) -> Vec<Unit> {
    let len = job.bytes.len();
    // Nothing to read: an empty seekable stream is its seek table alone (an empty frame,
    // though, is 9 bytes that a unit makes).
    if len == 0 && matches!(job.encode, Encode::Raw | Encode::Seekable(_)) {
        return Vec::new();
    }
    if job.bytes.whole() {
        return vec![Unit::Whole { job: i }];
    }
    let chunks = |size: u64, frame: Option<i32>| {
        (0..len.div_ceil(size))
            .map(|k| Unit::Chunk {
                job: i,
                range: k * size..((k + 1) * size).min(len),
                frame,
            })
            .collect()
    };
    match job.encode {
        Encode::Raw => chunks(RAW_CHUNK, None),
        Encode::Seekable(level) => chunks(codec::SEEKABLE_WRITE_FRAME as u64, Some(level)),
        Encode::Frame(level) => vec![Unit::Stream { job: i, level }],
    }
}

fn wants_decoded(job: &PartJob<'_, '_>) -> bool {
    matches!(job.digest, Some((_, DigestScope::Decoded)))
}

/// A worker: takes units in order from the queue until it closes.
fn worker<'p>(
    jobs: &'p [PartJob<'p, '_>],
    units: &[Unit],
    queue: &Mutex<Receiver<(usize, SyncSender<Msg<'p>>)>>,
) {
    loop {
        let next = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok((u, tx)) = next else { return };
        let msg = match run_unit(jobs, &units[u], &tx) {
            Ok(()) => Msg::Done,
            Err(e) => Msg::Failed(e),
        };
        // The writer may have stopped (an earlier error): nothing to tell then.
        let _ = tx.send(msg);
    }
}

fn send<'p>(tx: &SyncSender<Msg<'p>>, p: Piece<'p>) -> Result<()> {
    tx.send(Msg::Piece(p))
        .map_err(|_| Error::from(io::Error::from(io::ErrorKind::BrokenPipe)))
}

/// A whole part as one zstd frame (no checksum, as v0.1/v1.1 store it), then its decoded
/// bytes when a digest over decoded bytes needs them.
fn send_one_frame<'p>(
    tx: &SyncSender<Msg<'p>>,
    bytes: Cow<'p, [u8]>,
    level: i32,
    want_decoded: bool,
) -> Result<()> {
    let z = codec::compress_frame(&bytes, level, false)?;
    send(
        tx,
        Piece {
            stored: Cow::Owned(z),
            decoded: Decoded::Nothing,
            frame: None,
        },
    )?;
    if want_decoded {
        send(tx, decoded_only(bytes))?;
    }
    Ok(())
}

fn run_unit<'p>(jobs: &'p [PartJob<'p, '_>], unit: &Unit, tx: &SyncSender<Msg<'p>>) -> Result<()> {
    let job = &jobs[unit.job()];
    let want_decoded = wants_decoded(job);
    match *unit {
        Unit::Chunk {
            ref range, frame, ..
        } => {
            let r = read(job, range.clone())?;
            let piece = match frame {
                None => Piece {
                    stored: r,
                    decoded: Decoded::SameAsStored,
                    frame: None,
                },
                Some(level) => {
                    let z = codec::compress_frame(&r, level, true)?;
                    Piece {
                        frame: Some((z.len() as u32, r.len() as u32)),
                        stored: Cow::Owned(z),
                        decoded: if want_decoded {
                            Decoded::Bytes(r)
                        } else {
                            Decoded::Nothing
                        },
                    }
                }
            };
            send(tx, piece)
        }
        // A part that fits one read: one frame from the thread's reused compression context
        // (the same bytes as the streaming encoder fed in one piece; a fresh context per tiny
        // tensor at level 19 cost milliseconds each).
        Unit::Stream { level, .. } if job.bytes.len() <= READ_CHUNK => {
            let r = read(job, 0..job.bytes.len())?;
            send_one_frame(tx, r, level, want_decoded)
        }
        Unit::Stream { level, .. } => {
            let sink = ChannelWriter {
                tx,
                buf: Vec::with_capacity(STREAM_PIECE),
            };
            let mut enc = codec::frame_encoder(sink, level, false)?;
            let len = job.bytes.len();
            let mut off = 0;
            while off < len {
                let end = (off + READ_CHUNK).min(len);
                let r = read(job, off..end)?;
                enc.write_all(&r)?;
                if want_decoded {
                    send(tx, decoded_only(r))?;
                }
                off = end;
            }
            enc.finish()?.flush_rest()
        }
        Unit::Whole { .. } => {
            let all = checked(job, 0, job.bytes.all()?)?;
            match job.encode {
                Encode::Raw => send(
                    tx,
                    Piece {
                        stored: all,
                        decoded: Decoded::SameAsStored,
                        frame: None,
                    },
                ),
                Encode::Frame(level) => send_one_frame(tx, all, level, want_decoded),
                Encode::Seekable(level) => {
                    use rayon::prelude::*;
                    let frames: Vec<Vec<u8>> = all
                        .par_chunks(codec::SEEKABLE_WRITE_FRAME)
                        .map(|c| codec::compress_frame(c, level, true))
                        .collect::<Result<_>>()?;
                    for (z, c) in frames
                        .into_iter()
                        .zip(all.chunks(codec::SEEKABLE_WRITE_FRAME))
                    {
                        send(
                            tx,
                            Piece {
                                frame: Some((z.len() as u32, c.len() as u32)),
                                stored: Cow::Owned(z),
                                decoded: Decoded::Nothing,
                            },
                        )?;
                    }
                    if want_decoded {
                        send(tx, decoded_only(all))?;
                    }
                    Ok(())
                }
            }
        }
    }
}

fn decoded_only(bytes: Cow<'_, [u8]>) -> Piece<'_> {
    Piece {
        stored: Cow::Borrowed(&[]),
        decoded: Decoded::Bytes(bytes),
        frame: None,
    }
}

/// Sends a stream's compressed output to the writer in pieces of about [`STREAM_PIECE`].
struct ChannelWriter<'t, 'p> {
    tx: &'t SyncSender<Msg<'p>>,
    buf: Vec<u8>,
}

impl ChannelWriter<'_, '_> {
    fn send_buf(&mut self) -> io::Result<()> {
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(STREAM_PIECE));
        self.tx
            .send(Msg::Piece(Piece {
                stored: Cow::Owned(full),
                decoded: Decoded::Nothing,
                frame: None,
            }))
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }

    fn flush_rest(mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.send_buf()?;
        }
        Ok(())
    }
}

impl Write for ChannelWriter<'_, '_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= STREAM_PIECE {
            self.send_buf()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes every part of `jobs`, in order, to `out` (which has `*pos` bytes so far and
/// started empty); returns where each went.
pub(crate) fn write_parts<'p>(
    jobs: &'p [PartJob<'p, '_>],
    place: &Placement,
    out: &mut dyn Rewind,
    pos: &mut u64,
) -> Result<Vec<Written>> {
    let threads = rayon::current_num_threads().max(1);
    let window = 2 * threads + 2;
    let units: Vec<Unit> = jobs
        .iter()
        .enumerate()
        .flat_map(|(i, j)| units_of(i, j))
        .collect();
    crate::progress::expect(jobs.iter().map(|j| j.bytes.len()).sum());
    let (qtx, qrx) = sync_channel::<(usize, SyncSender<Msg<'p>>)>(window);
    let qrx = Mutex::new(qrx);
    std::thread::scope(|s| {
        for _ in 0..threads.min(units.len()) {
            s.spawn(|| worker(jobs, &units, &qrx));
        }
        // Returning drops the queue and every pending receiver, which stops the workers.
        Consumer {
            jobs,
            units: &units,
            queue: qtx,
            pending: VecDeque::new(),
            dispatched: 0,
            window,
        }
        .run(place, out, pos)
    })
}

struct Consumer<'p, 'a, 'u> {
    jobs: &'p [PartJob<'p, 'a>],
    units: &'u [Unit],
    queue: SyncSender<(usize, SyncSender<Msg<'p>>)>,
    pending: VecDeque<Receiver<Msg<'p>>>,
    dispatched: usize,
    window: usize,
}

impl<'p> Consumer<'p, '_, '_> {
    /// Hands units to the workers until `window` are queued or running.
    fn refill(&mut self) -> Result<()> {
        while self.dispatched < self.units.len() && self.pending.len() < self.window {
            let unit = &self.units[self.dispatched];
            if unit.inline(&self.jobs[unit.job()]) {
                let (tx, rx) = sync_channel(INLINE_DEPTH);
                let msg = match run_unit(self.jobs, unit, &tx) {
                    Ok(()) => Msg::Done,
                    Err(e) => Msg::Failed(e),
                };
                tx.send(msg).map_err(|_| stopped())?;
                self.pending.push_back(rx);
                self.dispatched += 1;
                continue;
            }
            let depth = match unit {
                Unit::Stream { .. } => STREAM_DEPTH,
                _ => DEPTH,
            };
            let (tx, rx) = sync_channel(depth);
            self.queue
                .send((self.dispatched, tx))
                .map_err(|_| stopped())?;
            self.pending.push_back(rx);
            self.dispatched += 1;
        }
        Ok(())
    }

    fn run(
        mut self,
        place: &Placement,
        out: &mut dyn Rewind,
        pos: &mut u64,
    ) -> Result<Vec<Written>> {
        let mut written = Vec::with_capacity(self.jobs.len());
        // Blobs written so far, by (stored length, XXH3-128 of the stored bytes).
        let mut seen: HashMap<(u64, u128), u64> = HashMap::new();
        let mut next = 0;
        for (i, job) in self.jobs.iter().enumerate() {
            if place.v2_blobs && job.encode == Encode::Raw && job.bytes.is_empty() {
                written.push(Written {
                    offset: pos.next_multiple_of(place.align),
                    stored_len: 0,
                    digest: job.digest.map(|(k, _)| Hasher::new(k).finish()),
                });
                continue;
            }
            let before = *pos;
            pad(out, pos, place.align)?;
            let mut offset = *pos;
            let mut digest = job.digest.map(|(k, scope)| (Hasher::new(k), scope));
            let mut same = place.v2_blobs.then(xxhash_rust::xxh3::Xxh3::new);
            let mut frames = Vec::new();
            let mut stored = |bytes: &[u8], out: &mut dyn Rewind, pos: &mut u64| -> Result<()> {
                out.write_all(bytes)?;
                *pos += bytes.len() as u64;
                if let Some(h) = same.as_mut() {
                    h.update(bytes);
                }
                Ok(())
            };
            while next < self.units.len() && self.units[next].job() == i {
                self.refill()?;
                let rx = self.pending.pop_front().expect("dispatched");
                next += 1;
                loop {
                    match rx.recv().map_err(|_| stopped())? {
                        Msg::Done => {
                            crate::progress::advance(self.units[next - 1].input_len(job));
                            break;
                        }
                        Msg::Failed(e) => return Err(e.at_tensor(job.name)),
                        Msg::Piece(p) => {
                            stored(&p.stored, out, pos)?;
                            if let Some((h, scope)) = digest.as_mut() {
                                match (*scope, &p.decoded) {
                                    (DigestScope::Stored, _)
                                    | (DigestScope::Decoded, Decoded::SameAsStored) => {
                                        h.update(&p.stored)
                                    }
                                    (DigestScope::Decoded, Decoded::Bytes(b)) => h.update(b),
                                    (DigestScope::Decoded, Decoded::Nothing) => {}
                                }
                            }
                            if let Some(f) = p.frame {
                                frames.push(f);
                            }
                        }
                    }
                }
                self.refill()?;
            }
            if matches!(job.encode, Encode::Seekable(_)) {
                let table = codec::seek_table_bytes(&frames);
                stored(&table, out, pos)?;
                if let Some((h, DigestScope::Stored)) = digest.as_mut() {
                    h.update(&table);
                }
            }
            let stored_len = *pos - offset;
            if let Some(h) = same {
                match seen.get(&(stored_len, h.digest128())) {
                    Some(&first) => {
                        out.rewind_to(before)?;
                        *pos = before;
                        offset = first;
                    }
                    None => {
                        seen.insert((stored_len, h.digest128()), offset);
                    }
                }
            }
            written.push(Written {
                offset,
                stored_len,
                digest: digest.map(|(h, _)| h.finish()),
            });
        }
        Ok(written)
    }
}

/// A worker went away without finishing its unit (it can only have panicked).
fn stopped() -> Error {
    ErrorKind::Io(io::Error::other("a compression worker stopped")).into()
}
