"""The block shuffle (`shuffle_kind="block"`): a permutation of all samples, shards permuted
then samples moved less than `shuffle_block_size` places from the shards' stream; the same
one order whatever the ranks (1, 2, 3) and DataLoader workers (0, 2) that share it; another
order for another epoch or seed; refused without a seed or with a bad block size."""

import pytest
import torch
from torch.utils.data import DataLoader

from tensorsmith._training.block_shuffle import block_order
from tensorsmith.errors import OptionError
from tensorsmith.torch import TensorIterableDataset

from test_torch_dataset import write_batch

N, PER_SHARD = 150, 16  # 9 shards of 16 and a tail of 6
KW = dict(shuffle=4, shuffle_kind="block", shuffle_block_size=24)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    out = tmp_path_factory.mktemp("block") / "ds"
    write_batch(out, n=N, batch_size=PER_SHARD)
    return out


def order_of(path, world, workers, epoch=0, **kw):
    """The epoch's order as the ranks read it: position i is rank i % world's (i // world)-th
    sample (no padding: N is a multiple of every world size used)."""
    per_rank = []
    for r in range(world):
        ds = TensorIterableDataset(path, rank=r, world_size=world, **{**KW, **kw})
        ds.set_epoch(epoch)
        loader = DataLoader(ds, batch_size=None, num_workers=workers,
                            multiprocessing_context="fork" if workers else None)
        per_rank.append([int(s["idx"]) for s in loader])
    return [per_rank[i % world][i // world] for i in range(N)]


def test_a_permutation_of_shards_then_a_moving_window():
    sizes = [16] * 9 + [6]
    for seed, epoch, block in ((1, 0, 24), (2, 5, 7), (3, 1, 1000)):
        order = block_order(sizes, seed, epoch, block)
        assert sorted(order.tolist()) == list(range(N))
        stream = block_order(sizes, seed, epoch, 1)  # the shards in their permuted order
        shards = [int(s) // 16 for s in stream]
        runs = list(dict.fromkeys(shards))
        assert sorted(runs) == list(range(10)) and runs != list(range(10))  # permuted
        assert sum(a != b for a, b in zip(shards, shards[1:])) == 9  # each shard in one run
        place = {int(s): i for i, s in enumerate(stream)}
        moved = [abs(i - place[int(s)]) for i, s in enumerate(order)]
        assert max(moved) < block and (block < 2 or max(moved) > 0)


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("workers", [0, 2])
def test_one_order_for_every_rank_and_worker_count(path, world, workers):
    want = block_order([PER_SHARD] * 9 + [6], 4, 0, 24).tolist()
    assert order_of(path, world, workers) == want


def test_the_order_changes_with_the_epoch_and_the_seed(path):
    a = order_of(path, 1, 0, epoch=0)
    assert order_of(path, 1, 0, epoch=1) != a
    assert order_of(path, 1, 0, epoch=0, shuffle=5) != a
    # Not the global permutation of the same seed and epoch.
    g = TensorIterableDataset(path, shuffle=4)
    assert [int(s["idx"]) for s in g] != a


def test_bad_block_shuffles_are_refused(path):
    with pytest.raises(OptionError, match="needs a seed"):
        TensorIterableDataset(path, shuffle_kind="block")
    with pytest.raises(OptionError, match="shuffle_kind"):
        TensorIterableDataset(path, shuffle=1, shuffle_kind="blocks")
    with pytest.raises(OptionError, match="shuffle_block_size"):
        TensorIterableDataset(path, shuffle=1, shuffle_kind="block", shuffle_block_size=0)
    # A state of the global shuffle does not resume a block shuffle.
    g = TensorIterableDataset(path, shuffle=4, batch_size=5)
    next(iter(g))
    b = TensorIterableDataset(path, batch_size=5, **KW)
    with pytest.raises(OptionError, match="shuffle"):
        b.load_state_dict(g.state_dict())
    assert torch.is_tensor(b._perm())


def test_kv_names_are_shuffled_in_shard_groups(tmp_path):
    from test_torch_dataset import write_kv
    write_kv(tmp_path / "kv")
    ds = TensorIterableDataset(tmp_path / "kv", shuffle=2, shuffle_kind="block",
                               shuffle_block_size=1, columns=["b"])
    shard_of = {n: min(c.items())[1][1] for n, c in ds._s.by_name.items()}
    got = [int(s["b"][0]) for s in ds]
    assert sorted(got) == list(range(40))
    shards = [shard_of[ds._s.names[i]] for i in got]
    runs = [k for i, k in enumerate(shards) if i == 0 or shards[i - 1] != k]
    assert len(runs) == len(set(shards))  # each shard's names together (no window)
    wide = TensorIterableDataset(tmp_path / "kv", shuffle=2, shuffle_kind="block",
                                 shuffle_block_size=8, columns=["b"])
    assert sorted(int(s["b"][0]) for s in wide) == list(range(40))
