"""One version of a dataset as PyTorch CPU tensors, for `tensorsmith.torch`'s datasets.

Each shard is opened through `_torch.Reader`: its tensors are views of a private,
copy-on-write map of the shard file (no copy; a write copies the touched page, never
reaching the file). At most `open_shards` shards are mapped at once per process, the least
recently used closed first (tensors handed out keep their own shard mapped). The object
pickles as (path, version, columns): a DataLoader worker started by spawn reopens the same
version, and one started by fork drops the maps it inherited and opens its own.

A dataset on an object store (`s3://`, `az://`, `gs://`, with `storage_options`): the
manifest of the version is read once; each shard is fetched whole into the node's cache
(`_shard_cache.ShardCache`: `cache_dir`, `cache_limit`) when first needed (or ahead, by
`prefetch`), then mapped from there as a local shard is; closing it lets the cache evict it.

Tensors of a shard's map must not cross a process boundary as they are (torch would share
the whole shard's storage, or fail to): `shared_batch` copies samples into one fresh
shared-memory tensor, as PyTorch's own collate does in a worker.
"""

import bisect
import hashlib
import json
import os
import tempfile
from collections import OrderedDict

import torch

from .. import _native
from .._options import storage_pairs
from .shard_cache import ShardCache, shard_key
from .._torch import Reader
from ..errors import InvalidInput, OptionError, TensorNotFound

# Shards mapped at once per process (the bounded buffer a shuffled read goes through).
OPEN_SHARDS = 16
# Where shards of datasets on stores are cached when no cache_dir is given.
CACHE_DIR = os.path.join(tempfile.gettempdir(), "tensorsmith-cache")


class Shards:
    """Samples of one dataset version: batch mode, sample i (a dict column -> tensor);
    KV mode, name i in sorted order (a dict column -> tensor of the name's tensors)."""

    def __init__(self, path, version=None, columns=None, kv_separator="__",
                 open_shards=OPEN_SHARDS, storage_options=None, cache_dir=None,
                 cache_limit=None):
        self.path = os.fspath(path)
        self.cache = None
        if "://" in str(self.path):
            storage = storage_pairs(storage_options)
            r = _native.DatasetReader(self.path, version, storage)
            self.cache = ShardCache(CACHE_DIR if cache_dir is None else cache_dir,
                                    cache_limit, storage)
        else:
            r = _native.DatasetReader(self.path, version)
        self.version, self.mode = r.version, r.mode
        self.kv_separator = kv_separator
        self.open_shards = max(1, int(open_shards))
        m = json.loads(r.manifest_json())
        # Which dataset this is, beyond its version number (a folder removed and written
        # again starts at version 1 again): its shards' names, each with its writer's uuid.
        self.fingerprint = hashlib.sha256(
            "\n".join(s["shard_path"] for s in m["shards"]).encode()).hexdigest()[:16]
        if self.cache is not None:
            base = self.path.rstrip("/")
            self.files = [base + "/" + s["shard_path"] for s in m["shards"]]
            self.sizes = [int(s["bytes"]) for s in m["shards"]]
            self.digests = [s.get("content_digest") for s in m["shards"]]
            self.keys = [shard_key(u, b, d)
                         for u, b, d in zip(self.files, self.sizes, self.digests)]
        else:
            self.files = [os.path.join(self.path, s["shard_path"]) for s in m["shards"]]
        wanted = _columns(columns)
        if self.mode == "batch":
            have = list(m["schema"])
            self.columns = _check(wanted, have) if wanted is not None else have
            self.starts = r.shard_starts()
            self.len = len(r)
            self.names = None
        else:
            by_name = {}
            have = set()
            for key, shard in zip(r.keys(), r.key_shards()):
                name, found, col = key.rpartition(kv_separator)
                if not found:
                    raise OptionError(f"tensor key {key!r} has no separator {kv_separator!r} "
                                      "(set kv_separator)")
                have.add(col)
                by_name.setdefault(name, {})[col] = (key, shard)
            if wanted is not None:
                _check(wanted, sorted(have))
                by_name = {n: {c: v for c, v in cols.items() if c in wanted}
                           for n, cols in by_name.items()}
                by_name = {n: cols for n, cols in by_name.items() if cols}
            self.columns = sorted(have) if wanted is None else wanted
            self.names = sorted(by_name)
            self.by_name = by_name
            self.position = {n: i for i, n in enumerate(self.names)}
            self.len = len(self.names)
        self._reset()

    def _reset(self):
        self._open = OrderedDict()
        self._pid = os.getpid()

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_open"], state["_pid"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset()

    def _shard(self, k):
        """Shard k's reader (batch mode: with its columns as whole-shard views)."""
        if self._pid != os.getpid():  # a forked child: its own maps (and cache locks)
            self._reset()
            if self.cache is not None:
                self.cache.after_fork()
        entry = self._open.get(k)
        if entry is not None:
            self._open.move_to_end(k)
            return entry
        if self.cache is None:
            local = self.files[k]
        else:
            local = self.cache.acquire(self.keys[k], self.files[k], self.sizes[k],
                                       self.digests[k], self._close_oldest)
        try:
            reader = Reader(_native.File(local), "mmap")
            cols = ({c: reader.tensor(c) for c in self.columns}
                    if self.mode == "batch" else None)
        except BaseException:
            self._drop(k)
            raise
        entry = self._open[k] = (reader, cols)
        while len(self._open) > self.open_shards:
            self._drop(next(iter(self._open)))
        return entry

    def _drop(self, k):
        """Closes shard k (its maps stay while tensors use them); a cached one may go."""
        self._open.pop(k, None)
        if self.cache is not None:
            self.cache.release(self.keys[k])

    def _close_oldest(self):
        """Closes the least recently used open shard, for a cache short of space."""
        if not self._open:
            return False
        self._drop(next(iter(self._open)))
        return True

    def release(self, k):
        """Shard k is no longer needed by this process's reads: closed, so the cache may
        evict it."""
        if k in self._open or self.cache is not None:
            self._drop(k)

    def prefetch(self, k):
        """Fetches shard k of a store dataset into the cache ahead of its use, when that
        needs no wait (False if not done)."""
        if self.cache is None:
            return True
        return self.cache.prefetch(self.keys[k], self.files[k], self.sizes[k],
                                   self.digests[k])

    def index(self, i):
        i = int(i)
        if i < 0:
            i += self.len
        if not 0 <= i < self.len:
            raise IndexError(f"index {i} out of range for a dataset of {self.len} samples")
        return i

    def sample(self, i):
        """Sample (or name) i as views of its shard."""
        if self.mode == "batch":
            k = bisect.bisect_right(self.starts, i) - 1
            cols = self._shard(k)[1]
            row = i - self.starts[k]
            return {c: t[row] for c, t in cols.items()}
        return self.named(self.names[i])

    def samples(self, indices):
        """Samples at `indices` (any ints; negative from the end) as views of their shards:
        a DataLoader batch's. A run of indices in one shard looks the shard up once."""
        if self.mode != "batch":
            return [self.sample(self.index(i)) for i in indices]
        n, starts, out = self.len, self.starts, []
        lo = hi = 0
        items = ()
        for i in indices:
            i = int(i)
            if i < 0:
                i += n
            if not lo <= i < hi:
                if not 0 <= i < n:
                    raise IndexError(f"index {i} out of range for a dataset of {n} samples")
                k = bisect.bisect_right(starts, i) - 1
                lo, hi = starts[k], starts[k + 1] if k + 1 < len(starts) else n
                items = tuple(self._shard(k)[1].items())
            row = i - lo
            out.append({c: t[row] for c, t in items})
        return out

    def named(self, name):
        """KV mode: the tensors of `name`, by column."""
        cols = self.by_name.get(name)
        if cols is None:
            raise TensorNotFound(f"no name {name!r} in the dataset")
        return {c: self._shard(shard)[0].tensor(key) for c, (key, shard) in cols.items()}

    def run(self, a, b):
        """Samples a..b (batch mode) as one batch per column: views when they lie in one
        shard, else concatenated (a copy)."""
        pieces = []
        while a < b:
            k = bisect.bisect_right(self.starts, a) - 1
            end = self.starts[k + 1] if k + 1 < len(self.starts) else self.len
            row, n = a - self.starts[k], min(b, end) - a
            pieces.append({c: t[row:row + n] for c, t in self._shard(k)[1].items()})
            a += n
        if len(pieces) == 1:
            return pieces[0]
        if not pieces:
            # No samples: each column's dtype and sample shape, as the NumPy Dataset gives.
            if not self.starts:
                return {c: torch.empty(0) for c in self.columns}
            return {c: torch.empty((0, *t.shape[1:]), dtype=t.dtype)
                    for c, t in self._shard(0)[1].items()}
        return {c: torch.cat([p[c] for p in pieces]) for c in self.columns}


def shared_batch(samples):
    """Samples (dicts column -> tensor) stacked per column into fresh shared-memory tensors:
    the one copy a DataLoader worker makes anyway, and nothing of a shard's map handed on."""
    first = samples[0]
    out = {}
    for c, t in first.items():
        parts = [s.get(c) for s in samples]
        if any(p is None or p.shape != t.shape for p in parts):
            raise InvalidInput(f"column {c!r}: the samples of a batch have different shapes "
                               "or lack the column; read KV names of different shapes one by "
                               "one (batch_size=None)")
        storage = t._typed_storage()._new_shared(t.numel() * len(parts), device="cpu")
        dst = t.new(storage).resize_(len(parts), *t.shape)
        torch.stack(parts, out=dst)
        out[c] = dst
    return out


def shared_copy(batch):
    """A batch of views (dict column -> tensor) copied into shared memory."""
    out = {}
    for c, t in batch.items():
        storage = t._typed_storage()._new_shared(t.numel(), device="cpu")
        dst = t.new(storage).resize_(t.shape)
        dst.copy_(t)
        out[c] = dst
    return out


def _columns(columns):
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = [columns]
    return list(columns)


def _check(wanted, have):
    missing = [c for c in wanted if c not in have]
    if missing:
        raise OptionError(f"columns: {missing} not in the dataset (it has {list(have)})")
    return wanted
