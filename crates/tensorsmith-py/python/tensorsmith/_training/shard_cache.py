"""A node's local cache of the shards of datasets on object stores, for `tensorsmith.torch`'s
datasets: whole shards fetched by the native store layer (`_native.fetch_into`: one GET per
shard on S3 and Azure, so one version; its length checked against the manifest's) into files
of `cache_dir`, then memory-mapped as local shards are (samples are views of the map). Only
files named as this cache names them are counted or evicted: a user's own files stay.

One folder per node, shared by every rank and DataLoader worker through file locks:
- `<key>.lock` per shard (flock): held exclusive while the shard is fetched, checked or
  evicted, shared while a reader has it open. A shard is never fetched twice at once, and
  never evicted while open.
- `.lock` for the folder: held while space is counted and reserved. A fetch first creates its
  `<key>.part` at the shard's full size (`posix_fallocate`) under this lock, after evicting
  shards nobody holds (least recently acquired first) until the data files (`*.safetensors`
  and `*.part`) fit in `cache_limit` with it: the files on disk never sum above the limit.
  The part is renamed to `<key>.safetensors` once complete. A shard's mtime is when it was
  last acquired (a prefetched one not yet acquired: a day ahead, so it goes last).
- `<key>` is a hash of the shard's URL, size and manifest digest: a shard of another version
  (another name or content) is another file, and a restart finds its shards again. A shard
  found on disk is checked once per process before use (its size against the manifest's; its
  per-tensor digests, when the manifest records a content digest, against its data); a
  corrupt one is removed and fetched again.

A shard larger than the limit, a full disk, or space held by open shards for longer than
`wait_s` is `CacheFull`, never a hang. Space freed by eviction returns to the disk once no
tensor maps the evicted file any more (samples handed out keep their shard mapped).
"""

import fcntl
import hashlib
import mmap
import os
import time

import numpy as np

from .. import _native
from ..errors import CacheFull, DatasetCorrupt, OptionError, TensorsmithError

DATA, PART, LOCK = ".safetensors", ".part", ".lock"
WAIT_S = 30.0  # for space held by open shards (a cache too small for the node's readers)
LOCK_WAIT_S = 600.0  # for another process's fetch of the same shard
AHEAD_S = 86400.0  # a prefetched shard's mtime is this far ahead until it is acquired


def shard_key(url, size, digest):
    return hashlib.sha256(f"{url}\n{size}\n{digest or ''}".encode()).hexdigest()[:32]


def ours(name):
    """A cache file this cache names (`<32 hex digits of shard_key>.safetensors` or `.part`):
    anything else in the folder is the user's, never counted or evicted."""
    key, dot, ext = name.partition(".")
    return (dot and "." + ext in (DATA, PART) and len(key) == 32
            and all(c in "0123456789abcdef" for c in key))


def cache_bytes(folder):
    """The bytes of the data files in a cache folder (complete shards and fetches under
    way): what `cache_limit` bounds."""
    total = 0
    for e in os.scandir(folder):
        if ours(e.name):
            try:
                total += e.stat().st_size
            except FileNotFoundError:
                pass
    return total


class ShardCache:
    """The cache folder as one process sees it: shards it holds open (a shared lock each),
    shards it checked, and what it fetched and evicted (`fetched`, `evicted`: (key, bytes)
    lists, for tests and measurements)."""

    def __init__(self, folder, limit, storage, wait_s=WAIT_S):
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise OptionError(f"cache_limit must be a positive number of bytes or None, not "
                              f"{limit!r}")
        self.folder = os.path.abspath(os.fspath(folder))
        os.makedirs(self.folder, exist_ok=True)
        self.limit, self.storage, self.wait_s = limit, list(storage), float(wait_s)
        self._reset()

    def _reset(self):
        self.held = {}  # key -> fd holding a shared lock
        self.checked = set()
        self.fetched, self.evicted = [], []

    def __getstate__(self):
        return {"folder": self.folder, "limit": self.limit, "storage": self.storage,
                "wait_s": self.wait_s}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset()

    def __del__(self):
        for fd in getattr(self, "held", {}).values():
            try:
                os.close(fd)
            except OSError:
                pass

    def after_fork(self):
        """In a forked child: the parent's locks are the parent's (closing the inherited
        descriptors leaves them to it)."""
        for fd in self.held.values():
            os.close(fd)
        self._reset()

    def _path(self, key, ext):
        return os.path.join(self.folder, key + ext)

    # --- use ------------------------------------------------------------------------------

    def acquire(self, key, url, size, digest, release=None):
        """The local path of the shard, fetched if missing or corrupt, held open (shared
        lock) until `release(key)`. `release`, a callable, closes one of this process's open
        shards when space is short (True if it closed one)."""
        if key in self.held:
            return self._path(key, DATA)
        data = self._path(key, DATA)
        fd = os.open(self._path(key, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                _flock(fd, fcntl.LOCK_SH, deadline, url)
                if self._good(key, data, size, digest):
                    break
                fcntl.flock(fd, fcntl.LOCK_UN)
                _flock(fd, fcntl.LOCK_EX, deadline, url)
                if not self._good(key, data, size, digest):
                    _remove(data)
                    self._fetch(key, url, size, digest, release)
                fcntl.flock(fd, fcntl.LOCK_SH)  # not atomic: check it is still there
                if os.path.exists(data):
                    break
                fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)
            raise
        # Eviction takes the shards acquired longest ago first: the time set explicitly, to
        # the nanosecond (a plain touch takes the kernel's coarse clock: ties within a tick).
        now = time.time_ns()
        os.utime(data, ns=(now, now))
        self.held[key] = fd
        return data

    def release(self, key):
        fd = self.held.pop(key, None)
        if fd is not None:
            os.close(fd)

    def prefetch(self, key, url, size, digest):
        """Fetches the shard ahead of its use if nobody is fetching or holding it and space
        can be made without waiting; False only when there was no room."""
        data = self._path(key, DATA)
        fd = os.open(self._path(key, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True  # fetched or used by another reader right now
            if os.path.exists(data):
                return True  # checked by whoever acquires it
            try:
                self._fetch(key, url, size, digest, None, wait=False)
            except CacheFull:
                return False
            # Not used yet: evicted after every shard used (acquire sets the real time).
            future = time.time_ns() + int(AHEAD_S * 1e9)
            os.utime(data, ns=(future, future))
            return True
        finally:
            os.close(fd)

    def _good(self, key, data, size, digest):
        """Whether the cached file is the shard: its size, its header (a safetensors file
        whose tensors fit it), and its digests where the manifest records a content digest
        (once per process). Without digests a damaged value goes unseen: write datasets
        with a digest for that."""
        try:
            if os.stat(data).st_size != size:
                return False
        except FileNotFoundError:
            return False
        if key in self.checked:
            return True
        try:
            if digest:
                _check_digests(data)
            else:
                _native.File(data)
        except (TensorsmithError, OSError):
            return False
        self.checked.add(key)
        return True

    # --- fetch and space --------------------------------------------------------------------

    def _fetch(self, key, url, size, digest, release, wait=True):
        """Fetches the shard into `<key>.part`, then renames it (the caller holds the
        shard's exclusive lock)."""
        part = self._reserve(key, url, size, release, wait)
        try:
            fd = os.open(part, os.O_RDWR)
            try:
                if size:
                    with mmap.mmap(fd, size) as mm:
                        buf = np.frombuffer(mm, dtype=np.uint8)
                        try:
                            # One GET on S3 and Azure (one version), `size` bytes long.
                            _native.fetch_into(url, self.storage, buf.ctypes.data, size)
                        finally:
                            del buf  # else closing the map hides the error behind its own
                        mm.flush()
            finally:
                os.close(fd)
            if digest:
                try:
                    _check_digests(part)
                except TensorsmithError as e:
                    raise DatasetCorrupt(f"{url}: the shard on the store fails its digests: "
                                         f"{e}") from None
            os.replace(part, self._path(key, DATA))
        except BaseException:
            _remove(part)
            raise
        self.checked.add(key)
        self.fetched.append((key, size))

    def _reserve(self, key, url, size, release, wait):
        """Creates `<key>.part` at `size` bytes once the data files fit the limit with it,
        evicting shards nobody holds (least recently acquired first)."""
        if self.limit is not None and size > self.limit:
            raise CacheFull(f"cache_limit {self.limit} bytes is smaller than shard {url} "
                            f"({size} bytes): raise cache_limit")
        deadline = time.monotonic() + self.wait_s
        while True:
            with _Locked(os.path.join(self.folder, LOCK)):
                used = cache_bytes(self.folder)
                if self.limit is not None and used + size > self.limit:
                    used -= self._evict(used + size - self.limit, key)
                if self.limit is None or used + size <= self.limit:
                    return self._allocate(key, url, size, used)
            if not wait:
                raise CacheFull("no space without waiting")
            if release is not None and release():
                continue
            if time.monotonic() > deadline:
                raise CacheFull(
                    f"cache_limit {self.limit} bytes: shard {url} ({size} bytes) does not fit "
                    f"beside the shards this node's readers hold open ({used} bytes in "
                    f"{self.folder}) after {self.wait_s:.0f} s: raise cache_limit, or read "
                    "with fewer ranks, workers or open shards per node")
            time.sleep(0.05)

    def _allocate(self, key, url, size, used):
        part = self._path(key, PART)
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if size:
                os.posix_fallocate(fd, 0, size)
        except OSError as e:
            os.close(fd)
            _remove(part)
            raise CacheFull(f"{self.folder}: no room on the disk for shard {url} ({size} "
                            f"bytes; the cache holds {used}): {e.strerror}") from None
        os.close(fd)
        return part

    def _evict(self, need, keep):
        """Removes shards no reader holds, least recently acquired first, until `need`
        bytes are freed (or none is left); returns the bytes freed. Also removes the parts
        of fetches that died."""
        files = []
        for e in os.scandir(self.folder):
            if ours(e.name) and not e.name.startswith(keep):
                try:
                    st = e.stat()
                except FileNotFoundError:
                    continue
                files.append((e.name.endswith(DATA), st.st_mtime_ns, e.name, st.st_size))
        freed = 0
        for _, _, name, nbytes in sorted(files):  # dead parts first, then by age
            if freed >= need:
                break
            key = name.rsplit(".", 1)[0]
            if key in self.held:
                continue
            fd = os.open(self._path(key, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue  # open or being fetched
            try:
                if _remove(os.path.join(self.folder, name)):
                    freed += nbytes
                    if name.endswith(DATA):
                        self.evicted.append((key, nbytes))
            finally:
                os.close(fd)
        return freed


class _Locked:
    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        os.close(self.fd)


def _flock(fd, op, deadline, url):
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise CacheFull(f"{url}: waited {LOCK_WAIT_S:.0f} s for another reader's "
                                "fetch of this shard") from None
            time.sleep(0.01)


def _check_digests(path):
    f = _native.File(path)
    if "tensorsmith.digest" not in (f.metadata() or {}):
        raise DatasetCorrupt(f"{path}: no digest record, though the manifest has one")
    for name in f.names():
        f.check_digests(name)


def _remove(path):
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False
