"""`tensorsmith.torch.TensorIterableDataset`: a dataset version as a
`torch.utils.data.IterableDataset`, split between DDP ranks and DataLoader workers by
ranges of samples, optionally in a global shuffled order."""

import torch

from ._torch_shards import OPEN_SHARDS, Shards, shared_batch, shared_copy
from .errors import OptionError


class TensorIterableDataset(torch.utils.data.IterableDataset):
    """Samples (or batches of `batch_size` samples) of one dataset version as dicts column
    -> CPU tensor. Batch mode: a sample per row; KV mode: a sample per name, in name order
    (see `TensorDataset`).

    Order: the samples in order, or with `shuffle=seed` a global permutation of all samples,
    drawn from the seed and the epoch (`set_epoch`, as DistributedSampler's). Under
    torch.distributed each rank takes every world_size-th sample of that order from its rank
    on; the order is first padded by repeating its first samples to a multiple of the world
    size (as DistributedSampler does), or cut to one with `drop_last=True`, so every rank gets
    the same number. A rank's samples are then split between its DataLoader workers in
    contiguous ranges (by `get_worker_info()`), so any number of workers works with any number
    of shards; with `batch_size`, the ranges are whole batches of the rank's order (only the
    last batch may be short), so `len()` is the number of batches a DataLoader yields whatever
    its `num_workers`. Apart from the padding, each sample is read once per epoch across ranks
    and workers.

    Reading: unshuffled, a batch within one shard is a view of its map (outside workers),
    else one copy. Shuffled, samples are read where the permutation puts them, through a
    per-process buffer of `open_shards` mapped shards (16 by default; the least recently used
    unmapped first): each batch gathers samples from anywhere in the dataset, so a batch costs
    `batch_size` random reads (page-cache hits when the dataset fits in memory, disk seeks
    when it does not) where a shard-order shuffle reads each shard once, sequentially, but
    mixes samples only within the shards it holds at once. In a DataLoader worker, batches
    are built in shared memory (one copy; a shard's map never crosses processes): use the
    DataLoader with `batch_size=None` when `batch_size` is set here.

    The version read is the one current when the object is made (or `version`); workers
    started by fork or spawn read that version. With `persistent_workers=True`, call
    `set_epoch` before the workers start: they keep the epoch they were started with. The rank
    and world size are torch.distributed's when the object is made (make it after
    `init_process_group`), or `rank` and `world_size`.
    """

    def __init__(self, path, shuffle=None, batch_size=None, columns=None, *, drop_last=False,
                 rank=None, world_size=None, version=None, kv_separator="__",
                 open_shards=OPEN_SHARDS):
        if shuffle is not None and (isinstance(shuffle, bool) or not isinstance(shuffle, int)):
            raise OptionError(f"shuffle must be an integer seed or None, not {shuffle!r}")
        if batch_size is not None and (isinstance(batch_size, bool)
                                       or not isinstance(batch_size, int) or batch_size < 1):
            raise OptionError(f"batch_size must be a positive integer or None, not "
                              f"{batch_size!r}")
        self._s = Shards(path, version, columns, kv_separator, open_shards)
        self.shuffle, self.batch_size, self.drop_last = shuffle, batch_size, drop_last
        self.epoch = 0
        # Taken here, in the rank's own process: DataLoader workers have no process group.
        r, w = _rank_world()
        self.rank = r if rank is None else int(rank)
        self.world_size = w if world_size is None else int(world_size)
        if not 0 <= self.rank < self.world_size:
            raise OptionError(f"rank {self.rank} is not in 0..{self.world_size}")

    @property
    def version(self):
        return self._s.version

    @property
    def mode(self):
        return self._s.mode

    def set_epoch(self, epoch: int):
        """The epoch whose permutation (and DDP share) the next iteration reads."""
        self.epoch = int(epoch)

    def _order(self):
        n = self._s.len
        if self.shuffle is None:
            return None, n
        g = torch.Generator()
        g.manual_seed((int(self.shuffle) * 1_000_003 + self.epoch) & (2**63 - 1))
        return torch.randperm(n, generator=g), n

    def indices(self, rank=None, world=None, worker=0, workers=1):
        """The samples this rank's worker reads this epoch, in order: a range when
        unshuffled and undistributed, else a tensor of indices."""
        if rank is None:
            rank, world = self.rank, self.world_size
        perm, n = self._order()
        if world > 1:
            total = n // world * world if self.drop_last else -(-n // world) * world
            idx = perm if perm is not None else torch.arange(n)
            if total > n:
                reps = -(-total // max(n, 1))
                idx = idx.repeat(reps)
            idx = idx[:total][rank::world]
        else:
            idx = perm if perm is not None else range(n)
        m = len(idx)
        step = self.batch_size or 1
        batches = -(-m // step)  # split in whole batches, however many workers
        lo = batches * worker // workers * step
        hi = min(batches * (worker + 1) // workers * step, m)
        return idx[lo:hi]

    def __len__(self):
        """Samples (or batches) this rank reads per epoch, over all its workers."""
        n = len(self.indices())
        return n if self.batch_size is None else -(-n // self.batch_size)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        idx = self.indices(worker=worker, workers=workers)
        s, in_worker = self._s, info is not None
        step = self.batch_size or 1
        contiguous = isinstance(idx, range) and s.mode == "batch"
        for a in range(0, len(idx), step):
            if contiguous:
                lo = idx[a]
                batch = s.run(lo, lo + min(step, len(idx) - a))
                if self.batch_size is None:
                    batch = {c: t[0] for c, t in batch.items()}
                yield shared_copy(batch) if in_worker else batch
                continue
            part = idx[a:a + step]
            samples = [s.sample(int(i)) for i in part]
            if self.batch_size is None:
                yield shared_copy(samples[0]) if in_worker else samples[0]
            elif in_worker:
                yield shared_batch(samples)
            else:
                yield {c: torch.stack([x[c] for x in samples]) for c in samples[0]}


def _rank_world():
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
