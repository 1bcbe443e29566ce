"""`tensorsmith.torch.TensorDataset`: a dataset version as a map-style
`torch.utils.data.Dataset` of CPU tensors that are views of the shards (no copy)."""

from __future__ import annotations

from typing import Any

import torch

from ._loading.slicing import positions
from ._options import Names, PathOrUrl, StorageOptions
from ._training.shards import OPEN_SHARDS, Shards, shared_batch, shared_copy


def _in_worker():
    return torch.utils.data.get_worker_info() is not None


class TensorDataset(torch.utils.data.Dataset):
    """Map-style: `len(ds)`, `ds[i]` a dict column -> CPU tensor, a view of the shard's
    copy-on-write map (no copy; writing to it copies the touched page and never reaches the
    file), `ds[a:b]` a batch (views within a shard, concatenated across shards), `ds[[i, j]]`
    (a list, 1-D array or tensor of integers) a batch of those samples, stacked.

    Batch mode: sample i. KV mode: one sample per name (the tensor key up to its last
    `kv_separator`), `ds[i]` the i-th name in sorted order, `ds.sample(name)` by name; each a
    dict column -> tensor of the name's tensors (`ds.names()` lists them).

    `columns` reads only those columns. The dataset version is the one current when it is
    opened (or `version`), and DataLoader workers (fork or spawn) read that version, each
    mapping the shards it reads itself, at most `open_shards` at once. In a worker, samples
    handed back one by one (`batch_size=None`) are copied into shared memory (a shard's map
    never crosses to another process); batches are collated from the views, one copy, as for
    any dataset. BF16, F16 and 8-bit float samples come out as the torch dtype.

    A dataset on an object store (`s3://`, `az://`, `gs://`, with `storage_options`): each
    shard is fetched whole into the node's cache (`cache_dir`, at most `cache_limit` bytes;
    shared by every process of the node, see `TensorIterableDataset`) when a sample of it is
    first asked for, and mapped from there: samples are views of the cached file. Random
    access over a dataset larger than the cache fetches shards again as they are evicted:
    read such datasets in shard order (`TensorIterableDataset`'s block shuffle).
    """

    def __init__(self, path: PathOrUrl, columns: Names = None, *, version: int | None = None,
                 kv_separator: str = "__", open_shards: int = OPEN_SHARDS,
                 storage_options: StorageOptions = None, cache_dir: PathOrUrl | None = None,
                 cache_limit: int | None = None) -> None:
        self._s = Shards(path, version, columns, kv_separator, open_shards, storage_options,
                         cache_dir, cache_limit)

    @property
    def version(self) -> int:
        """The dataset version read (0: a dataset written before versions)."""
        return self._s.version

    @property
    def mode(self) -> str:
        """"batch" or "kv"."""
        return self._s.mode

    @property
    def columns(self) -> list[str]:
        return list(self._s.columns)

    def names(self) -> list[str]:
        """KV mode: the names, sorted (`ds[i]` is `ds.sample(ds.names()[i])`)."""
        if self._s.mode != "kv":
            raise TypeError("names are for KV-mode datasets")
        return list(self._s.names)

    def __len__(self) -> int:
        return self._s.len

    def __getitem__(self, i: int | slice) -> dict[str, torch.Tensor]:
        if isinstance(i, slice):
            a, b, step = i.indices(self._s.len)
            if step == 1 and self._s.mode == "batch":
                batch = self._s.run(a, max(a, b))
                return shared_copy(batch) if _in_worker() else batch
            return self._stack(range(a, b, step))
        if isinstance(i, str):
            return self.sample(i)
        pos = positions(i)
        if isinstance(pos, list):
            return self._stack(pos)
        sample = self._s.sample(self._s.index(pos))
        return shared_copy(sample) if _in_worker() else sample

    def __getitems__(self, indices):
        """A DataLoader batch's samples as views: its collate copies them once."""
        return self._s.samples(indices)

    def sample(self, name: str) -> dict[str, torch.Tensor]:
        """KV mode: the tensors of `name`, by column (views of its shards)."""
        if self._s.mode != "kv":
            raise TypeError("samples by name are for KV-mode datasets")
        sample = self._s.named(name)
        return shared_copy(sample) if _in_worker() else sample

    def _stack(self, indices):
        samples = [self._s.sample(self._s.index(i)) for i in indices]
        if not samples:
            if self._s.mode == "batch":
                return self._s.run(0, 0)  # each column's dtype and sample shape
            return {c: torch.empty(0) for c in self._s.columns}
        if _in_worker():
            return shared_batch(samples)
        return {c: torch.stack([s[c] for s in samples]) for c in samples[0]}
