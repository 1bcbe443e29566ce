"""`tensorsmith.torch.TensorSampler`: the sample order of a map-style `TensorDataset` for a
DataLoader, with the orders of `TensorIterableDataset` (in order, a global permutation or the
block shuffle, each a function of seed, epoch and dataset version only), its DDP shares, and
its exact and elastic mid-epoch resume (`state_dict`/`load_state_dict`, the same state
format: a sampler's state and a `TensorIterableDataset(batch_size=None)`'s are one)."""

from __future__ import annotations

from typing import Any, Iterator

import torch

from .errors import OptionError
from .torch_iterable import SHUFFLE_BLOCK_SIZE, TensorIterableDataset


class TensorSampler(torch.utils.data.Sampler):
    """Indices of a `TensorDataset`'s samples for `DataLoader(ds, sampler=...)`: this rank's
    share of the epoch's order, as `TensorIterableDataset(path, shuffle, ...)` (with
    `batch_size=None`) would read them. `shuffle` is an integer seed or None (in order);
    `shuffle_kind="block"` is the block shuffle (shards permuted, samples shuffled within a
    window of `shuffle_block_size`: a shard-at-a-time read); `drop_last`, `rank` and
    `world_size` as DistributedSampler's (rank and world size from torch.distributed when
    not given). `set_epoch(epoch)` before each epoch.

    Resume: `state_dict(consumed)` is the whole job's position in the epoch, `consumed` being
    the samples this rank's loop has taken in this iteration (steps * batch_size with a
    DataLoader; the loader's workers prefetch indices, so pass it); without it, the indices
    this sampler handed out (right with `num_workers=0`). `load_state_dict(state)` on every
    rank of a new job, of any world size, makes the next iteration read the rest of that
    epoch: exactly the rest of the uninterrupted run on the same world size, each unseen
    sample once on another. A state of another dataset version, sample count, seed or shuffle
    is refused (OptionError)."""

    def __init__(self, dataset: Any, shuffle: int | None = None, *, shuffle_kind: str = "global",
                 shuffle_block_size: int = SHUFFLE_BLOCK_SIZE, drop_last: bool = False,
                 rank: int | None = None, world_size: int | None = None) -> None:
        shards = getattr(dataset, "_s", None)
        if shards is None or not hasattr(shards, "samples"):
            raise OptionError("TensorSampler orders a tensorsmith.torch.TensorDataset, not "
                              f"{type(dataset).__name__}")
        self._o = TensorIterableDataset(None, shuffle, None, drop_last=drop_last, rank=rank,
                                        world_size=world_size, shuffle_kind=shuffle_kind,
                                        shuffle_block_size=shuffle_block_size,
                                        _shards=shards)

    @property
    def rank(self) -> int:
        return self._o.rank

    @property
    def world_size(self) -> int:
        return self._o.world_size

    @property
    def epoch(self) -> int:
        return self._o.epoch

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration reads (another epoch than the current one
        drops a loaded position)."""
        self._o.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        o = self._o
        idx = o._rank_order(o.rank, o.world_size)
        o._yielded = 0
        for i in idx:
            o._yielded += 1
            yield int(i)

    def __len__(self) -> int:
        """Indices this rank gets this epoch (from a loaded position)."""
        return len(self._o)

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """The job's position in the epoch (see the class): `consumed` in samples."""
        return self._o.state_dict(consumed)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a state of `state_dict` (or of a `TensorIterableDataset` with
        `batch_size=None`), taken on any rank of a job of any world size."""
        self._o.load_state_dict(state)
