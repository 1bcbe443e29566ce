"""TensorSampler: a map-style TensorDataset's orders for a DataLoader (in order, the global
permutation, the block shuffle), the same indices a TensorIterableDataset reads on each rank
of each world size, and its mid-epoch resume: exact on the same world size (with DataLoader
workers prefetching indices, which must not count), elastic on another (every unseen sample
read once), a state interchangeable with the iterable dataset's, torchdata's
StatefulDataLoader, and states of another seed or shuffle refused. Every case compares the
sample ids read with those of an uninterrupted run."""

import pytest
import torch
from torch.utils.data import DataLoader

from tensorsmith.errors import OptionError
from tensorsmith.torch import TensorDataset, TensorIterableDataset, TensorSampler

from test_torch_dataset import write_batch, write_kv
from test_torch_resume import check_elastic, shuffle_kw

N = 103  # 4 shards of 32 and a tail of 7
SHUFFLES = [None, 7, "block:7:40"]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampler")
    write_batch(root / "batch", n=N)
    return root / "batch"


def ids(batch):
    return [int(v) for v in batch["idx"].reshape(-1, batch["idx"].shape[-1])[:, 0]]


def epoch_ids(ds, sampler, batch_size=5, workers=0, steps=None):
    """The sample ids of each batch one pass of a loader reads (the first `steps` batches)."""
    dl = DataLoader(ds, batch_size=batch_size, sampler=sampler, num_workers=workers)
    out = []
    for b in dl:
        if steps is not None and len(out) == steps:
            break
        out.append(ids(b))
    return out


@pytest.mark.parametrize("shuffle", SHUFFLES)
@pytest.mark.parametrize("world", [1, 2, 3])
def test_the_order_is_the_iterable_datasets(path, shuffle, world):
    ds = TensorDataset(path)
    for epoch in (0, 1):
        for rank in range(world):
            s = TensorSampler(ds, rank=rank, world_size=world, **shuffle_kw(shuffle))
            it = TensorIterableDataset(path, rank=rank, world_size=world, **shuffle_kw(shuffle))
            s.set_epoch(epoch)
            it.set_epoch(epoch)
            want = [int(i) for i in it.indices()]
            assert list(s) == want and len(s) == len(want)
            assert [i for b in epoch_ids(ds, s) for i in b] == want
    if shuffle is not None:
        a = TensorSampler(ds, **shuffle_kw(shuffle))
        b = TensorSampler(ds, **shuffle_kw(shuffle))
        b.set_epoch(1)
        assert sorted(a) == list(range(N)) and list(a) != list(b)


@pytest.mark.parametrize("shuffle", SHUFFLES)
@pytest.mark.parametrize("workers", [0, 2])
def test_exact_resume_on_the_same_world_size(path, shuffle, workers):
    """k steps, the state (consumed = k * batch_size: the workers prefetched more), a new
    sampler loading it: the rest of the epoch exactly, on every rank."""
    ds, world, k = TensorDataset(path), 2, 4
    for rank in range(world):
        kw = dict(rank=rank, world_size=world, **shuffle_kw(shuffle))
        whole = epoch_ids(ds, TensorSampler(ds, **kw), workers=workers)
        s = TensorSampler(ds, **kw)
        assert epoch_ids(ds, s, workers=workers, steps=k) == whole[:k]
        state = s.state_dict(consumed=k * 5)
        again = TensorSampler(ds, **kw)
        again.load_state_dict(state)
        assert epoch_ids(ds, again, workers=workers) == whole[k:]
        # The next epoch is a fresh one.
        again.set_epoch(1)
        fresh = TensorSampler(ds, **kw)
        fresh.set_epoch(1)
        assert list(again) == list(fresh)


@pytest.mark.parametrize("shuffle", SHUFFLES)
@pytest.mark.parametrize("new_world", [1, 3, 4])
def test_elastic_resume_reads_every_unseen_sample_once(path, shuffle, new_world):
    ds, world, k = TensorDataset(path), 2, 3
    before, state = [], None
    for rank in range(world):
        s = TensorSampler(ds, rank=rank, world_size=world, **shuffle_kw(shuffle))
        before.append(epoch_ids(ds, s, steps=k))
        state = s.state_dict(consumed=k * 5)  # the ranks move in step: any rank's state
    after = []
    for rank in range(new_world):
        s = TensorSampler(ds, rank=rank, world_size=new_world, **shuffle_kw(shuffle))
        s.load_state_dict(state)
        after.append([[i] for i in s])
    check_elastic(before, after, N, new_world, drop_last=False)


def test_the_state_is_the_iterable_datasets(path):
    """A sampler's state loads into TensorIterableDataset(batch_size=None) and back."""
    ds = TensorDataset(path)
    s = TensorSampler(ds, shuffle=3)
    it = iter(s)
    first = [next(it) for _ in range(10)]
    state = s.state_dict()  # num_workers=0: what it handed out
    iterable = TensorIterableDataset(path, shuffle=3)
    iterable.load_state_dict(state)
    rest = [int(x["idx"][0]) for x in iterable]
    assert first + rest == list(TensorSampler(ds, shuffle=3))
    back = TensorSampler(ds, shuffle=3)
    back.load_state_dict(iterable.state_dict(consumed=5))
    assert list(back) == list(TensorSampler(ds, shuffle=3))[15:]


def test_states_of_another_seed_or_shuffle_or_dataset_are_refused(path, tmp_path):
    ds = TensorDataset(path)
    state = TensorSampler(ds, shuffle=1).state_dict(consumed=3)
    with pytest.raises(OptionError, match="seed"):
        TensorSampler(ds, shuffle=2).load_state_dict(state)
    with pytest.raises(OptionError, match="shuffle"):
        TensorSampler(ds, shuffle=1, shuffle_kind="block").load_state_dict(state)
    write_batch(tmp_path / "other", n=N + 1)
    with pytest.raises(OptionError, match="sample count"):
        TensorSampler(TensorDataset(tmp_path / "other"), shuffle=1).load_state_dict(state)
    with pytest.raises(OptionError, match="TensorDataset"):
        TensorSampler(torch.utils.data.TensorDataset(torch.zeros(3)))
    write_kv(tmp_path / "kv")
    kv = TensorDataset(tmp_path / "kv")
    assert sorted(TensorSampler(kv, shuffle=1)) == list(range(len(kv)))


def test_torchdata_stateful_dataloader(path):
    """StatefulDataLoader keeps the sampler's state in its own and hands it back on load."""
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    ds = TensorDataset(path)
    whole = epoch_ids(ds, TensorSampler(ds, shuffle=5, shuffle_kind="block",
                                        shuffle_block_size=40))
    for workers in (0, 2):
        dl = sdl.StatefulDataLoader(ds, batch_size=5, num_workers=workers, sampler=TensorSampler(
            ds, shuffle=5, shuffle_kind="block", shuffle_block_size=40))
        it = iter(dl)
        got = [ids(next(it)) for _ in range(6)]
        state = dl.state_dict()
        del it
        again = sdl.StatefulDataLoader(ds, batch_size=5, num_workers=workers,
                                       sampler=TensorSampler(ds, shuffle=5, shuffle_kind="block",
                                                             shuffle_block_size=40))
        again.load_state_dict(state)
        assert got + [ids(b) for b in again] == whole, workers
