"""`tensorsmith.torch.TensorIterableDataset`: a dataset version as a
`torch.utils.data.IterableDataset`, split between DDP ranks (every world_size-th sample)
and DataLoader workers (items in turn), optionally in a global shuffled order or a block
shuffle, with exact and elastic mid-epoch resume (`state_dict`/`load_state_dict`), from a
local folder or an object store (through a node-local shard cache)."""

from __future__ import annotations

import sys
from typing import Any, Iterator

import torch

from ._training.block_shuffle import block_order
from ._training.read_ahead import ReadAhead
from ._training.shards import OPEN_SHARDS, Shards, shared_batch, shared_copy
from ._options import Names, PathOrUrl, StorageOptions
from .errors import OptionError

STATE_FORMAT = "tensorsmith.TensorIterableDataset/1"
SHUFFLE_BLOCK_SIZE = 1 << 16  # samples in the block shuffle's window
READ_AHEAD = 4  # shards a store dataset's reader fetches ahead of its position


class TensorIterableDataset(torch.utils.data.IterableDataset):
    """Samples (or batches of `batch_size` samples) of one dataset version as dicts column
    -> CPU tensor. Batch mode: a sample per row; KV mode: a sample per name, in name order
    (see `TensorDataset`).

    Order: the samples in order, or with `shuffle=seed` a global permutation of all samples,
    drawn from the seed and the epoch (`set_epoch`, as DistributedSampler's); with
    `shuffle_kind="block"` as well, a block shuffle for streaming: the shards permuted, then
    the samples shuffled within a moving window of `shuffle_block_size` samples (a
    shard-permuted jittered sort, see `_block_shuffle`: no sample moves `shuffle_block_size`
    places or more from its place in the permuted shards' stream, so a reader needs only the
    few shards that window covers, each read once, in order). Either order is a function of
    (seed, epoch, dataset version) only, the same whatever the number of ranks and workers. Under
    torch.distributed each rank takes every world_size-th sample of that order from its rank
    on; the order is first padded by repeating its first samples to a multiple of the world
    size (as DistributedSampler does), or cut to one with `drop_last=True`, so every rank gets
    the same number. A rank's order is cut into items (batches of `batch_size` samples, only
    the last one short, or samples) which its DataLoader workers take in turn (by
    `get_worker_info()`: worker w items w, w + K, ...; with a loader that batches, runs of
    its batch_size items: worker w runs w, w + K, ...), so any number of workers works with
    any number of shards, and a loader, taking an item (or a batch) from each worker in
    turn, yields the rank's order whatever its `num_workers` and `batch_size`; `len()` is
    the number of items it yields. Apart from the padding, each sample is read once per epoch across ranks
    and workers.

    Resume: `state_dict(consumed)` is the whole job's position in the epoch (the samples of
    the epoch's order every rank together consumed), and `load_state_dict(state)`, on every
    rank of a new job of any world size and worker count, reads the rest of that epoch: the
    same items an uninterrupted run would read on the same world size, each sample not yet
    read once on another. torchdata's `StatefulDataLoader` works too (each worker's state
    in the loader's; `load_state_dict` here also takes a loader's state).

    Reading: unshuffled, a batch within one shard is a view of its map (outside workers),
    else one copy. Shuffled, samples are read where the permutation puts them, through a
    per-process buffer of `open_shards` mapped shards (16 by default; the least recently used
    unmapped first): each batch gathers samples from anywhere in the dataset, so a batch costs
    `batch_size` random reads (page-cache hits when the dataset fits in memory, disk seeks
    when it does not) where a shard-order shuffle reads each shard once, sequentially, but
    mixes samples only within the shards it holds at once. In a DataLoader worker, batches
    are built in shared memory (one copy; a shard's map never crosses processes): use the
    DataLoader with `batch_size=None` when `batch_size` is set here.

    A store dataset (`s3://`, `az://`, `gs://` URL, with `storage_options`): shards are
    fetched whole (one GET each on S3 and Azure, its length checked) into `cache_dir`, one
    folder per node shared by every rank and worker there (file locks: each shard fetched
    once), its data files never above `cache_limit` bytes (None: unbounded), then mapped as
    local shards are. Each process fetches the next `read_ahead` shards its order needs, a
    thread each (at most 4), while it reads, and lets go of a shard once past its last use (the cache evicts
    those, least recently used first, when it needs room). The cache survives a restart: a
    shard found there is checked (size, and digests where the manifest records them) and
    reused. A `cache_limit` below a shard, or below what this node's readers hold open at
    once, or a full disk, is `tensorsmith.errors.CacheFull`. The global shuffle needs every
    shard all epoch long: below the dataset's size, shards are fetched again as they are
    evicted; the block shuffle (or the order) reads each once while it fits
    2 * shuffle_block_size samples' shards per reader.

    The version read is the one current when the object is made (or `version`); workers
    started by fork or spawn read that version. With `persistent_workers=True`, call
    `set_epoch` before the workers start: they keep the epoch they were started with. The rank
    and world size are torch.distributed's when the object is made (make it after
    `init_process_group`), or `rank` and `world_size`.
    """

    def __init__(self, path: PathOrUrl, shuffle: int | None = None,
                 batch_size: int | None = None, columns: Names = None, *,
                 drop_last: bool = False, rank: int | None = None,
                 world_size: int | None = None, version: int | None = None,
                 kv_separator: str = "__", open_shards: int = OPEN_SHARDS,
                 shuffle_kind: str = "global", shuffle_block_size: int = SHUFFLE_BLOCK_SIZE,
                 storage_options: StorageOptions = None, cache_dir: PathOrUrl | None = None,
                 cache_limit: int | None = None, read_ahead: int = READ_AHEAD,
                 _shards: Any = None) -> None:
        if shuffle is not None and (isinstance(shuffle, bool) or not isinstance(shuffle, int)):
            raise OptionError(f"shuffle must be an integer seed or None, not {shuffle!r}")
        if batch_size is not None and (isinstance(batch_size, bool)
                                       or not isinstance(batch_size, int) or batch_size < 1):
            raise OptionError(f"batch_size must be a positive integer or None, not "
                              f"{batch_size!r}")
        if shuffle_kind not in ("global", "block"):
            raise OptionError(f"shuffle_kind must be 'global' or 'block', not {shuffle_kind!r}")
        if shuffle_kind == "block" and shuffle is None:
            raise OptionError("shuffle_kind='block' needs a seed: shuffle=<int>")
        if (isinstance(shuffle_block_size, bool) or not isinstance(shuffle_block_size, int)
                or shuffle_block_size < 1):
            raise OptionError(f"shuffle_block_size must be a positive integer, not "
                              f"{shuffle_block_size!r}")
        # `_shards`: another dataset's (TensorSampler's order over a TensorDataset).
        self._s = _shards if _shards is not None else Shards(
            path, version, columns, kv_separator, open_shards, storage_options, cache_dir,
            cache_limit)
        self.shuffle, self.batch_size, self.drop_last = shuffle, batch_size, drop_last
        self.shuffle_kind, self.shuffle_block_size = shuffle_kind, shuffle_block_size
        self.read_ahead = int(read_ahead)
        self.epoch = 0
        # Resume: the epoch's position this object's iterations start from (samples of the
        # epoch's order the job consumed), the worker's own items to skip (a StatefulDataLoader
        # worker's state), and the items the current iteration handed out.
        self._start, self._skip, self._iter_skip, self._yielded = 0, 0, 0, 0
        # The DataLoader's batch size as a worker sees it (see `_loader_batch`; None until
        # the loader first asks), and the one of a worker state loaded (its skip counts items
        # of runs of that size).
        self._chunk, self._state_chunk = None, 1
        # Taken here, in the rank's own process: DataLoader workers have no process group.
        r, w = _rank_world()
        self.rank = r if rank is None else int(rank)
        self.world_size = w if world_size is None else int(world_size)
        if not 0 <= self.rank < self.world_size:
            raise OptionError(f"rank {self.rank} is not in 0..{self.world_size}")

    @property
    def version(self) -> int:
        return self._s.version

    @property
    def mode(self) -> str:
        return self._s.mode

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose permutation (and DDP share) the next iteration reads. Another epoch
        than the current one also drops a position loaded by `load_state_dict`."""
        epoch = int(epoch)
        if epoch != self.epoch:
            self._start = 0
        self.epoch = epoch

    def _perm(self):
        n = self._s.len
        if self.shuffle is None:
            return None
        if self.shuffle_kind == "block":
            sizes, units = self._shard_groups()
            order = block_order(sizes, self.shuffle, self.epoch, self.shuffle_block_size)
            return order if units is None else units[order]
        g = torch.Generator()
        g.manual_seed((int(self.shuffle) * 1_000_003 + self.epoch) & (2**63 - 1))
        return torch.randperm(n, generator=g)

    def _shard_groups(self):
        """The samples grouped by shard, for the block shuffle: (samples per shard, in shard
        order; None, or the sample index of each place when a shard's samples are not
        contiguous). KV mode: names by the shard of their first column's tensor, then in
        name order."""
        s = self._s
        if s.mode == "batch":
            return [b - a for a, b in zip(s.starts, list(s.starts[1:]) + [s.len])], None
        shard = torch.tensor([min(s.by_name[n].items())[1][1] for n in s.names],
                             dtype=torch.long)
        units = torch.argsort(shard, stable=True)
        counts = torch.bincount(shard) if len(shard) else torch.zeros(0, dtype=torch.long)
        return [int(c) for c in counts if c], units

    def _rank_order(self, rank, world, start=None):
        """The samples of the epoch's order from `start` (the job's position) that this rank
        reads, in order: a range when unshuffled and undistributed, else a tensor. The rest of
        the order is padded with its first samples (from the epoch's first one) to a multiple
        of the world size, or cut to one with drop_last: from position 0 this is
        DistributedSampler's share."""
        start = self._start if start is None else start
        n = self._s.len
        perm = self._perm()
        rest = n - start
        if world == 1:
            return range(start, n) if perm is None else perm[start:]
        total = rest // world * world if self.drop_last else -(-rest // world) * world
        order = perm if perm is not None else torch.arange(n)
        idx = order[start:]
        if total > rest:
            reps = -(-(total - rest) // max(n, 1))
            idx = torch.cat([idx, order.repeat(reps)[:total - rest]])
        return idx[:total][rank::world]

    def _worker_items(self, idx, worker, workers, chunk=1):
        """This worker's share of a rank's order: runs of `chunk` items (samples, or batches
        of batch_size) worker, worker + workers, ... (item numbers: a range for single
        items, else a tensor), so the loader, taking a run (its batch: `chunk` is its
        batch_size, 1 when it does not batch) from each worker in turn, hands them on in the
        rank's order whatever its num_workers and batch_size."""
        n = -(-len(idx) // (self.batch_size or 1))
        if chunk == 1:
            return range(worker, n, workers)
        return _spread(torch.arange(worker, -(-n // chunk), workers, dtype=torch.long), chunk, n)

    def indices(self, rank: int | None = None, world: int | None = None, worker: int = 0,
                workers: int = 1, loader_batch_size: int = 1) -> range | torch.Tensor:
        """The samples this rank's worker reads this epoch (from the loaded position), in
        order: a range when unshuffled, undistributed and in one process, else a tensor.
        `loader_batch_size`: the DataLoader's batch_size (items it collates per batch)."""
        if rank is None:
            rank, world = self.rank, self.world_size
        idx = self._rank_order(rank, world)
        if workers == 1:
            return idx
        step = self.batch_size or 1
        parts = [torch.as_tensor(idx[j * step:(j + 1) * step])
                 for j in self._worker_items(idx, worker, workers, loader_batch_size)]
        return torch.cat(parts) if parts else torch.empty(0, dtype=torch.long)

    def __len__(self) -> int:
        """Samples (or batches) this rank reads per epoch (from the loaded position), over all
        its workers."""
        n = len(self._rank_order(self.rank, self.world_size))
        return n if self.batch_size is None else -(-n // self.batch_size)

    # --- resume -------------------------------------------------------------------------

    def _shuffle_desc(self):
        """The state's `shuffle`: None (in order), "global", or "block:<block size>"."""
        if self.shuffle is None:
            return None
        if self.shuffle_kind == "block":
            return f"block:{self.shuffle_block_size}"
        return "global"

    def _base_state(self):
        return {"format": STATE_FORMAT, "dataset_version": self._s.version,
                "dataset": self._s.fingerprint,
                "samples": self._s.len, "seed": self.shuffle, "epoch": self.epoch,
                "world_size": self.world_size, "batch_size": self.batch_size,
                "drop_last": self.drop_last, "shuffle": self._shuffle_desc()}

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """The whole job's position in the epoch, as a dict of plain values (see
        `load_state_dict`): the format, dataset version, sample count, seed, epoch, world
        size, batch size, drop_last and `position`, the number of samples of the epoch's
        order (the global permutation, or the samples in order) that every rank together has
        consumed: all of those before it and none after.

        `consumed` is the number of items (batches with `batch_size`, else samples) this rank's
        training loop has taken from the current iteration: what it trained on, not what
        DataLoader workers prefetched. The ranks move in step under DDP, so one rank's count
        is the job's. Without it, the count of items this object handed out itself: right when
        it is iterated in this process (`num_workers=0`, or directly), and inside a
        DataLoader worker (where torchdata's `StatefulDataLoader` calls it) the worker's own
        count, which `load_state_dict` combines from the loader's state. With workers and a
        plain DataLoader, pass `consumed` (the loop's steps in this iteration, from 0 when it
        started: in a resumed job, from the resumed position, not the epoch's global step):
        the workers
        split the rank's items in turn (worker w takes items w, w + K, ..., or runs of the
        loader's batch_size items when it batches) and the loader hands them on in turn, so
        the first `consumed` items it delivered are the first `consumed` of the rank's order
        whatever the number of workers (a loader batching B samples: consumed = steps * B)."""
        st = self._base_state()
        info = torch.utils.data.get_worker_info()
        if consumed is None and info is not None:
            st.update(position=self._start, worker=info.id, workers=info.num_workers,
                      worker_items=self._skip + self._iter_skip + self._yielded,
                      loader_batch=self._chunk)
            return st
        if consumed is None:
            consumed = self._yielded
        if isinstance(consumed, bool) or not isinstance(consumed, int) or consumed < 0:
            raise OptionError(f"consumed must be a count of items (>= 0), not {consumed!r}")
        st["position"] = _advance(self._s.len, self._start, consumed, self.world_size,
                                  self.batch_size, self.drop_last)
        return st

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a state taken by `state_dict` on any rank of a job of any world size
        and worker count (or from torchdata's `StatefulDataLoader.state_dict()` holding
        this dataset's states): this object's next iteration reads the rest of the state's
        epoch, from its position, split between this job's ranks and workers (the rest padded
        with the epoch's first samples to equal shares, or cut with drop_last). With the
        state's own world size and batch size, each rank reads exactly what an uninterrupted
        run would have read after that point; with others, each sample the old job had not
        reached is read once. `set_epoch` with the next epoch starts it from its beginning.
        A state of another dataset version, sample count or seed is refused (OptionError).
        Workers kept by `persistent_workers=True` keep the position they started with: make
        a new loader for the next epoch."""
        own = _find_states(state)
        if not own:
            raise OptionError("the state holds no TensorIterableDataset state (format "
                              f"{STATE_FORMAT!r})")
        first = own[0]
        if "worker" not in first and any(st != first for st in own[1:]):
            raise OptionError(f"the state holds {len(own)} different TensorIterableDataset "
                              "states: load one")
        for st in own:
            self._check_state(st)
        info = torch.utils.data.get_worker_info()
        if "worker" in first and info is not None and len(own) == 1:
            # In a StatefulDataLoader worker: this worker's own share, resumed.
            if (first["worker"], first["workers"]) != (info.id, info.num_workers):
                raise OptionError(f"worker state {first['worker']} of {first['workers']} "
                                  f"loaded in worker {info.id} of {info.num_workers}")
            self.epoch, self._start = int(first["epoch"]), int(first["position"])
            self._skip, self._iter_skip, self._yielded = int(first["worker_items"]), 0, 0
            self._state_chunk = int(first.get("loader_batch") or 1)
            return
        if "worker" in first:
            # A StatefulDataLoader's state: its workers' states as of its last snapshot, and
            # the items it yielded since (snapshot_every_n_steps > 1).
            since = state.get("_steps_since_snapshot", 0) if isinstance(state, dict) else 0
            position = self._combine(own, int(since or 0))
        else:
            position = int(first["position"])
        self.epoch, self._start = int(first["epoch"]), min(position, self._s.len)
        self._skip = self._iter_skip = self._yielded = 0

    def _check_state(self, st):
        if st.get("format") != STATE_FORMAT:
            raise OptionError(f"state format {st.get('format')!r} is not {STATE_FORMAT!r}")
        # States from before the block shuffle have no "shuffle": the global one, if seeded.
        kind = st.get("shuffle", None if st.get("seed") is None else "global")
        for key, theirs, mine, what in (
                ("dataset_version", st.get("dataset_version"), self._s.version,
                 "dataset version"),
                ("samples", st.get("samples"), self._s.len, "sample count"),
                ("seed", st.get("seed"), self.shuffle, "seed (shuffle)"),
                ("shuffle", kind, self._shuffle_desc(),
                 "shuffle (shuffle_kind, shuffle_block_size)")):
            if theirs != mine:
                hint = (" (pass version= to read the state's version, if it is still kept)"
                        if key == "dataset_version" else "")
                raise OptionError(f"the state is of another {what}: {theirs!r}, this "
                                  f"dataset's is {mine!r}{hint}")
        # States from before the fingerprint have none: their version and count must do.
        if st.get("dataset", self._s.fingerprint) != self._s.fingerprint:
            raise OptionError("the state is of another dataset: same version number and "
                              "sample count, other shards (a folder written anew)")
        fields = [("position", 0, self._s.len), ("epoch", 0, None)]
        if "worker" in st:
            fields += [("workers", 1, None), ("worker_items", 0, None), ("world_size", 1, None)]
            workers = st.get("workers")
            if isinstance(workers, int) and not isinstance(workers, bool):
                fields.append(("worker", 0, workers - 1))
        for key, low, high in fields:
            v = st.get(key)
            if isinstance(v, bool) or not isinstance(v, int) or v < low or (
                    high is not None and v > high):
                span = f"{low}..{high}" if high is not None else f">= {low}"
                raise OptionError(f"the state's {key!r} is {v!r}: an integer {span} was "
                                  f"expected (a damaged or edited state)")

    def _combine(self, workers, since=0):
        """A rank's position from its StatefulDataLoader workers' states: the loader handed on
        item j of the rank's order from worker j % K, so the items delivered are those up to
        the latest any worker's state accounts for."""
        first = workers[0]
        k = int(first["workers"])
        if sorted(int(w["worker"]) for w in workers) != list(range(k)) or any(
                (w["workers"], w["position"], w["epoch"], w["world_size"])
                != (first["workers"], first["position"], first["epoch"], first["world_size"])
                for w in workers):
            raise OptionError("the workers' states do not belong to one loader")
        # The loader's batches: runs of `chunk` items, run r from worker r % K; `since`
        # counts batches too (those delivered after the snapshot).
        # (A batching loader's worker it has not asked yet has not seen the batch size:
        # None; states from before loader_batch was recorded: 1.)
        chunks = {int(w.get("loader_batch", 1)) for w in workers
                  if w.get("loader_batch", 1) is not None}
        if len(chunks) > 1:
            raise OptionError("the workers' states do not belong to one loader")
        if not chunks and since:
            raise OptionError(
                f"the state is {since} batches past a snapshot taken before any worker handed "
                "out an item, so it does not say how many samples a batch held: take states "
                "with snapshot_every_n_steps=1 to resume on another number of workers, or "
                "resume this loader with its own workers (StatefulDataLoader.load_state_dict)")
        chunk = chunks.pop() if chunks else 1
        runs = max((int(w["worker"]) + k * (-(-int(w["worker_items"]) // chunk) - 1) + 1
                    for w in workers if int(w["worker_items"]) > 0), default=0)
        return _advance(self._s.len, int(first["position"]), (runs + since) * chunk,
                        int(first["world_size"]), first["batch_size"], bool(first["drop_last"]))

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        idx = self._rank_order(self.rank, self.world_size)
        # A loaded worker state's skip is for this one iteration.
        self._iter_skip, self._skip, self._yielded = self._skip, 0, 0
        # A loader that does not batch takes one item a turn, known now; a batching one's
        # batch size is known at its first request.
        self._chunk = None if _fetcher_batches(sys._getframe(1)) else 1
        if info is None:
            return self._read(idx, self._worker_items(idx, 0, 1)[self._iter_skip:], False)
        return self._worker_read(idx, worker, workers)

    def _worker_read(self, idx, worker, workers):
        """A DataLoader worker's items, split once the loader first asks for one: by then
        its batch size (the items it takes from this worker per batch) is known."""
        self._chunk = _loader_batch(sys._getframe(1))
        if self._iter_skip and self._chunk != self._state_chunk:
            raise OptionError(f"this worker's state is of a loader of batch_size "
                              f"{self._state_chunk}, this loader's is {self._chunk}: resume "
                              f"with the same batch_size, or load the state into the dataset "
                              f"(ds.load_state_dict) for a new split")
        # (One worker: runs of any size are its items in order.)
        chunk = self._chunk if workers > 1 else 1
        items = self._worker_items(idx, worker, workers, chunk)[self._iter_skip:]
        yield from self._read(idx, items, True)

    def _read(self, idx, items, in_worker):
        s = self._s
        step = self.batch_size or 1
        ahead = None
        if s.cache is not None and s.mode == "batch" and len(items):
            ahead = ReadAhead(s, _samples_of(idx, items, step), self.read_ahead)
        try:
            yield from self._items(idx, items, in_worker, ahead)
        finally:
            if ahead is not None:
                ahead.close()

    def _items(self, idx, items, in_worker, ahead):
        s = self._s
        contiguous = isinstance(idx, range) and s.mode == "batch"
        step = self.batch_size or 1
        pos = 0
        for j in items:
            j = int(j)
            a, b = j * step, min((j + 1) * step, len(idx))
            if ahead is not None:
                ahead.at(pos)
                pos += b - a
            if contiguous:
                batch = s.run(idx[a], idx[a] + b - a)
                if self.batch_size is None:
                    batch = {c: t[0] for c, t in batch.items()}
                out = shared_copy(batch) if in_worker else batch
            else:
                samples = [s.sample(int(i)) for i in idx[a:b]]
                if self.batch_size is None:
                    out = shared_copy(samples[0]) if in_worker else samples[0]
                elif in_worker:
                    out = shared_batch(samples)
                else:
                    out = {c: torch.stack([x[c] for x in samples]) for c in samples[0]}
            self._yielded += 1
            yield out


def _fetcher_batches(frame):
    """Whether the DataLoader fetcher making this iterator (torch's iterable fetcher, whose
    `__init__` calls iter() on the dataset) batches: True, False, or None where the caller
    is not one."""
    if frame is not None and "auto_collation" in frame.f_locals:
        return bool(frame.f_locals["auto_collation"])
    return None


def _loader_batch(frame):
    """The items a DataLoader worker's fetcher takes from this dataset's iterator per batch:
    its batch_size when it batches, else 1. Torch's iterable fetcher (`fetch`, which calls
    next() on the iterator, `frame` or one of its callers) holds the batch's indices; a
    loader that does not batch, or another caller, gives 1 (items in turn, as before)."""
    for _ in range(3):
        if frame is None:
            break
        loc = frame.f_locals
        if frame.f_code.co_name == "fetch" and "possibly_batched_index" in loc:
            index = loc["possibly_batched_index"]
            batching = getattr(loc.get("self"), "auto_collation", False)
            return len(index) if batching and hasattr(index, "__len__") and len(index) else 1
        frame = frame.f_back
    return 1


def _spread(runs, width, limit):
    """Runs `runs` (numbers) of `width` consecutive positions each, as the positions in
    order, those below `limit`: runs [1, 3] of width 2 are positions 2, 3, 6, 7."""
    at = (runs[:, None] * width + torch.arange(width, dtype=torch.long)[None, :]).reshape(-1)
    return at[at < limit]


def _samples_of(idx, items, step):
    """The samples a worker reads, in order: items `items` (item numbers: a range, or a
    tensor of them) of `step` samples of the rank's order `idx`."""
    if isinstance(items, range):
        j = torch.arange(items.start, items.stop, items.step, dtype=torch.long)
    else:
        j = torch.as_tensor(items, dtype=torch.long)
    at = _spread(j, step, len(idx))
    if isinstance(idx, range):
        return at * idx.step + idx.start
    return torch.as_tensor(idx)[at]


def _advance(n, start, items, world, batch_size, drop_last):
    """The job's position in an epoch of n samples after each of `world` ranks took `items`
    items (of `batch_size` samples, or samples) of the order from position `start`."""
    rest = n - start
    total = rest // world * world if drop_last else -(-rest // world) * world
    took = int(items) * (batch_size or 1)
    if took >= total // world:
        return n  # the epoch's order is done (a tail cut by drop_last stays unread)
    return min(start + took * world, n)


def _find_states(state):
    """This dataset's states in `state`: itself, or those nested in a loader's state."""
    found = []
    if isinstance(state, dict):
        if state.get("format") == STATE_FORMAT:
            return [state]
        for v in state.values():
            found += _find_states(v)
    elif isinstance(state, (list, tuple)):
        for v in state:
            found += _find_states(v)
    return found


def _rank_world():
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
