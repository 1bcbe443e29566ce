"""TensorIterableDataset.state_dict()/load_state_dict(): exact mid-epoch resume on the same
world size, elastic resume on another (each sample not yet seen read once, the next epoch as
a fresh run on the new world size), with DataLoader workers (fork and spawn: fresh
processes) whose prefetching must not count, torchdata's StatefulDataLoader where it is
installed, and states of another dataset version or seed refused; for the global and the
block shuffle. Every case compares the sample ids read with those of an uninterrupted run."""

import json
from collections import Counter

import pytest
from torch.utils.data import DataLoader

from tensorsmith.errors import OptionError
from tensorsmith.torch import TensorIterableDataset

from test_torch_dataset import write_batch, write_kv

N = 103  # batch mode: 4 shards of 32 and a tail of 7; KV mode: 40 names


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    write_batch(root / "batch", n=N)
    write_kv(root / "kv")
    return {"batch": (root / "batch", None, N), "kv": (root / "kv", ["b"], 40)}


def ids(item):
    """The sample ids of an item (a sample or a batch): `idx` in batch mode, and in KV mode
    the first value of `b` (name i holds [i, -i])."""
    t = item["idx"] if "idx" in item else item["b"]
    t = t.reshape(-1, t.shape[-1])
    return [int(v) for v in t[:, 0]]


def make(datasets, mode, rank, world, **kw):
    path, columns, _ = datasets[mode]
    return TensorIterableDataset(path, columns=columns, rank=rank, world_size=world, **kw)


def run(ds, epoch=None, loader=None):
    """The items one iteration yields, as lists of sample ids."""
    if epoch is not None:
        ds.set_epoch(epoch)
    return [ids(b) for b in (loader if loader is not None else ds)]


def take(it, k):
    return [ids(next(it)) for _ in range(k)]


def check_elastic(before, after, n, new_world, drop_last):
    """Samples read before the state (by the old ranks) and after it (by the new ones, rest
    of the epoch): every sample read, none twice, apart from padding (< new_world repeats of
    the epoch's first samples) or a cut tail (< new_world samples unread) with drop_last."""
    a = [i for items in before for item in items for i in item]
    b = [i for items in after for item in items for i in item]
    assert len(a) == len(set(a)), "a sample read twice before the state"
    fresh = set(b) - set(a)
    extra = len(b) - len(fresh)  # reads of samples read before, or read twice: padding
    unread = set(range(n)) - set(a) - fresh
    if drop_last:
        assert extra == 0 and len(unread) < new_world
    else:
        assert not unread and extra < new_world
        if len(a) >= new_world:  # the padding (< new_world) repeats samples read before
            assert all(c == 1 for c in Counter(b).values())
    # Equal shares: every new rank reads as many items.
    assert len({len(items) for items in after}) == 1


def shuffle_kw(shuffle):
    """A case's shuffle: None, a seed (the global permutation), or "block:<seed>:<block
    size>" for the block shuffle."""
    if isinstance(shuffle, str):
        _, seed, size = shuffle.split(":")
        return dict(shuffle=int(seed), shuffle_kind="block", shuffle_block_size=int(size))
    return dict(shuffle=shuffle)


BLOCK_CASES = [
    ("batch", "block:5:20", 4, False), ("batch", "block:5:40", None, True),
    ("kv", "block:9:7", 3, False),
]
CASES = [  # mode, shuffle, batch_size, drop_last
    ("batch", None, 4, False), ("batch", 5, 4, False), ("batch", 5, None, True),
    ("batch", None, None, False), ("kv", None, 3, True), ("kv", 9, 3, False),
    ("kv", 9, None, False),
] + BLOCK_CASES


@pytest.mark.parametrize("mode,shuffle,batch_size,drop_last", CASES)
@pytest.mark.parametrize("world,steps", [(1, 5), (2, 3), (3, 1), (4, 6), (2, 0)])
def test_resume_in_one_process_on_every_world_size(datasets, mode, shuffle, batch_size,
                                                    drop_last, world, steps):
    n = datasets[mode][2]
    kw = dict(**shuffle_kw(shuffle), batch_size=batch_size, drop_last=drop_last)
    epoch = 3

    def full(w, e):
        return [run(make(datasets, mode, r, w, **kw), e) for r in range(w)]

    whole = full(world, epoch)
    # Interrupted: each rank takes `steps` items, then rank 0's state is saved.
    ranks = [make(datasets, mode, r, world, **kw) for r in range(world)]
    before = []
    for ds in ranks:
        ds.set_epoch(epoch)
        steps = min(steps, len(ds))  # up to the whole epoch
        before.append(take(iter(ds), steps))
    state = json.loads(json.dumps(ranks[0].state_dict()))  # plain values
    assert all(ds.state_dict() == state for ds in ranks)
    assert state["epoch"] == epoch and state["dataset_version"] == ranks[0].version
    assert before == [w[:steps] for w in whole]
    for new_world in (world, 1, 2, 3, 5):
        fresh = [make(datasets, mode, r, new_world, **kw) for r in range(new_world)]
        for ds in fresh:
            ds.load_state_dict(state)
        after = [run(ds, epoch) for ds in fresh]  # set_epoch(same epoch) keeps the position
        if new_world == world:
            assert after == [w[steps:] for w in whole]  # exact, rank by rank
        check_elastic(before, after, n, new_world, drop_last)
        # The next epoch is a fresh run's on the new world size.
        assert [run(ds, epoch + 1) for ds in fresh] == full(new_world, epoch + 1)


@pytest.mark.parametrize("mode,shuffle,batch_size,drop_last",
                         CASES[:3] + CASES[4:6] + BLOCK_CASES)
def test_a_resumed_job_resumes_again(datasets, mode, shuffle, batch_size, drop_last):
    # 2 ranks take 2 items, 3 ranks take 1 more, then 1 rank and 4 ranks finish the epoch.
    n = datasets[mode][2]
    kw = dict(**shuffle_kw(shuffle), batch_size=batch_size, drop_last=drop_last)
    state, before = None, []
    for world, steps in ((2, 2), (3, 1)):
        ranks = [make(datasets, mode, r, world, **kw) for r in range(world)]
        for ds in ranks:
            if state is not None:
                ds.load_state_dict(state)
            else:
                ds.set_epoch(1)
            before.append(take(iter(ds), steps))
        state = ranks[0].state_dict()
    for new_world in (1, 4, 3):
        fresh = [make(datasets, mode, r, new_world, **kw) for r in range(new_world)]
        for ds in fresh:
            ds.load_state_dict(state)
        after = [run(ds) for ds in fresh]
        check_elastic(before, after, n, new_world, drop_last)
        if new_world == 3:  # the world size of the last job: exact
            whole3 = [make(datasets, mode, r, 3, **kw) for r in range(3)]
            for ds in whole3:
                ds.load_state_dict(state)
            assert after == [run(ds) for ds in whole3]


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
@pytest.mark.parametrize("mode,shuffle,batch_size",
                         [("batch", 5, 4), ("kv", None, 3), ("batch", "block:5:20", 4)])
def test_resume_with_dataloader_workers(datasets, ctx, mode, shuffle, batch_size):
    # Workers prefetch ahead of the loop; the state counts the loop's steps only. The
    # workers split the rank's items in turn, so a loader yields the rank's order whatever
    # its num_workers, and the resumed loader may have another number of workers.
    kw = dict(**shuffle_kw(shuffle), batch_size=batch_size)
    world, steps, epoch = 2, 3, 2

    def loader(ds, workers):
        return DataLoader(ds, batch_size=None, num_workers=workers,
                          multiprocessing_context=ctx if workers else None)

    whole = [run(make(datasets, mode, r, world, **kw), epoch) for r in range(world)]
    ranks = [make(datasets, mode, r, world, **kw) for r in range(world)]
    before = []
    for ds in ranks:
        ds.set_epoch(epoch)
        it = iter(loader(ds, 2))
        before.append(take(it, steps))  # more than `steps` items are prefetched by now
        del it  # the workers stop: the job is gone
    assert before == [w[:steps] for w in whole]
    state = ranks[0].state_dict(consumed=steps)
    for new_world, workers in ((world, 0), (world, 2), (world, 3), (3, 2), (1, 2)):
        fresh = [make(datasets, mode, r, new_world, **kw) for r in range(new_world)]
        after = []
        for ds in fresh:
            ds.load_state_dict(state)
            ds.set_epoch(epoch)
            after.append(run(ds, loader=loader(ds, workers)))
        if new_world == world:
            assert after == [w[steps:] for w in whole]
        check_elastic(before, after, datasets[mode][2], new_world, False)


def test_samples_through_a_collating_loader_are_counted_in_the_main_process(datasets):
    # num_workers=0: the dataset counts what it handed out, which is what the loop took.
    ds = make(datasets, "batch", 0, 1, shuffle=3)
    whole = [i for b in DataLoader(ds, batch_size=10) for i in b["idx"].reshape(-1).tolist()]
    it = iter(DataLoader(ds, batch_size=10))
    first = [i for _ in range(4) for i in next(it)["idx"].reshape(-1).tolist()]
    state = ds.state_dict()
    assert state["position"] == 40
    again = make(datasets, "batch", 0, 1, shuffle=3)
    again.load_state_dict(state)
    rest = [i for b in DataLoader(again, batch_size=10) for i in b["idx"].reshape(-1).tolist()]
    assert first + rest == whole


@pytest.mark.parametrize("workers,batch,shuffle", [(2, 4, None), (3, 5, 7), (2, 3, "block:5:20")])
def test_a_batching_loader_with_workers_yields_the_ranks_order_and_resumes(
        datasets, workers, batch, shuffle):
    """The loader batches (batch_size=B), the dataset gives samples: each worker hands the
    loader runs of B samples of the rank's order in turn, so the loader's batches are the
    rank's order cut in B, and `state_dict(consumed=steps * B)` resumes it exactly (runs of
    one sample a worker lost samples and repeated others: 8 and 10 for 9 and 11)."""
    kw = dict(**shuffle_kw(shuffle))
    whole = [i for item in run(make(datasets, "batch", 0, 1, **kw)) for i in item]

    def loader(ds, k):
        return DataLoader(ds, batch_size=batch, num_workers=k,
                          multiprocessing_context="fork" if k else None)

    ds = make(datasets, "batch", 0, 1, **kw)
    assert [i for b in loader(ds, workers) for i in ids(b)] == whole
    it = iter(loader(ds, workers))
    first = [i for _ in range(3) for i in ids(next(it))]
    del it
    state = ds.state_dict(consumed=3 * batch)
    for k in (0, workers, workers + 1):
        again = make(datasets, "batch", 0, 1, **kw)
        again.load_state_dict(state)
        assert first + [i for b in loader(again, k) for i in ids(b)] == whole


@pytest.mark.parametrize("snapshot_every", [1, 2])
def test_torchdata_batching_loader_states_resume_on_other_workers(datasets, snapshot_every):
    """A StatefulDataLoader that batches (batch_size=B, two workers): its state loaded into
    the dataset resumes where it stopped, on another worker count; a state taken a step past
    a snapshot at the epoch's start cannot say B, and is refused rather than guessed."""
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    whole = [i for item in run(make(datasets, "batch", 0, 1, shuffle=4)) for i in item]

    def state_after(steps):
        dl = sdl.StatefulDataLoader(make(datasets, "batch", 0, 1, shuffle=4), batch_size=4,
                                    num_workers=2, multiprocessing_context="fork",
                                    snapshot_every_n_steps=snapshot_every)
        it = iter(dl)
        first = [i for _ in range(steps) for i in ids(next(it))]
        state = dl.state_dict()
        del it
        return first, state

    for steps in (3, 5):
        first, state = state_after(steps)
        assert first == whole[:4 * steps]
        again = make(datasets, "batch", 0, 1, shuffle=4)
        again.load_state_dict(state)
        rest = [i for b in DataLoader(again, batch_size=4, num_workers=3,
                                      multiprocessing_context="fork") for i in ids(b)]
        assert first + rest == whole
    if snapshot_every == 2:
        _, state = state_after(1)
        with pytest.raises(OptionError, match="does not say how many samples a batch held"):
            make(datasets, "batch", 0, 1, shuffle=4).load_state_dict(state)


def test_states_of_another_version_or_seed_are_refused(tmp_path):
    write_batch(tmp_path / "d", n=30)
    ds = TensorIterableDataset(tmp_path / "d", shuffle=1, batch_size=4)
    take(iter(ds), 2)
    state = ds.state_dict()
    with pytest.raises(OptionError, match="seed"):
        TensorIterableDataset(tmp_path / "d", shuffle=2, batch_size=4).load_state_dict(state)
    with pytest.raises(OptionError, match="seed"):
        TensorIterableDataset(tmp_path / "d", batch_size=4).load_state_dict(state)
    write_batch(tmp_path / "d", n=30, mode="overwrite")
    with pytest.raises(OptionError, match="dataset version"):
        TensorIterableDataset(tmp_path / "d", shuffle=1, batch_size=4).load_state_dict(state)
    with pytest.raises(OptionError, match="no TensorIterableDataset state"):
        ds.load_state_dict({"epoch": 1})
    # A damaged or edited state: refused, naming the field (-8 read the last 8 samples).
    fresh = TensorIterableDataset(tmp_path / "d", shuffle=1, batch_size=4)
    good = fresh.state_dict()
    for key, value in (("position", -8), ("position", 31), ("position", "7"), ("position", 3.7),
                       ("position", None), ("epoch", -1), ("epoch", "x"), ("epoch", True)):
        with pytest.raises(OptionError, match=f"the state's '{key}' is"):
            fresh.load_state_dict({**good, key: value})
    for key in ("position", "epoch"):
        with pytest.raises(OptionError, match=f"the state's '{key}' is None"):
            fresh.load_state_dict({k: v for k, v in good.items() if k != key})
    with pytest.raises(OptionError, match="2 different"):
        fresh.load_state_dict({"a": good, "b": {**good, "position": 4}})
    # The folder removed and written anew: version 1 and 30 samples again, other shards.
    import shutil
    write_batch(tmp_path / "e", n=30)
    good = TensorIterableDataset(tmp_path / "e", shuffle=1, batch_size=4).state_dict()
    shutil.rmtree(tmp_path / "e")
    write_batch(tmp_path / "e", n=30)
    anew = TensorIterableDataset(tmp_path / "e", shuffle=1, batch_size=4)
    assert anew.version == good["dataset_version"]
    with pytest.raises(OptionError, match="another dataset: same version number"):
        anew.load_state_dict(good)
    anew.load_state_dict({k: v for k, v in good.items() if k != "dataset"})  # older states
    with pytest.raises(OptionError, match="consumed"):
        ds.state_dict(consumed=-1)


def test_set_epoch_to_another_epoch_drops_the_loaded_position(datasets):
    ds = make(datasets, "batch", 0, 1, shuffle=4, batch_size=8)
    take(iter(ds), 3)
    again = make(datasets, "batch", 0, 1, shuffle=4, batch_size=8)
    again.load_state_dict(ds.state_dict())
    assert len(again) == -(-(N - 24) // 8)
    again.set_epoch(1)
    assert len(again) == -(-N // 8)
    assert run(again) == run(make(datasets, "batch", 0, 1, shuffle=4, batch_size=8), 1)


@pytest.mark.parametrize("ctx,shuffle", [("fork", 6), ("spawn", 6), ("fork", "block:6:20")])
def test_torchdata_stateful_dataloader(datasets, ctx, shuffle):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    kw = dict(**shuffle_kw(shuffle), batch_size=4)
    world, steps, epoch = 2, 5, 1

    def loader(ds, workers=2):
        return sdl.StatefulDataLoader(ds, batch_size=None, num_workers=workers,
                                      multiprocessing_context=ctx)

    whole = [run(make(datasets, "batch", r, world, **kw), epoch) for r in range(world)]
    states, before = [], []
    for r in range(world):
        ds = make(datasets, "batch", r, world, **kw)
        ds.set_epoch(epoch)
        dl = loader(ds)
        it = iter(dl)
        before.append(take(it, steps))
        states.append(dl.state_dict())  # the workers' states, as of the items yielded
        del it
    # The same loader shape: the loader hands each worker its own state back.
    for r in range(world):
        ds = make(datasets, "batch", r, world, **kw)
        ds.set_epoch(epoch)
        dl = loader(ds)
        dl.load_state_dict(states[r])
        assert run(ds, loader=dl) == whole[r][steps:]
    # Another world size and worker count: the dataset reads rank 0's loader state.
    after = []
    for r in range(3):
        ds = make(datasets, "batch", r, 3, **kw)
        ds.load_state_dict(states[0])
        after.append(run(ds, loader=loader(ds, 3)))
    check_elastic(before, after, N, 3, False)


def test_torchdata_stateful_dataloader_in_the_main_process(datasets):
    # num_workers=0, samples collated by the loader: the dataset's own count is the state.
    sdl = pytest.importorskip("torchdata.stateful_dataloader")

    def order(dl):
        return [i for b in dl for i in b["b"][:, 0].tolist()]

    ds = make(datasets, "kv", 0, 1, shuffle=2)
    whole = order(sdl.StatefulDataLoader(ds, batch_size=6))
    dl = sdl.StatefulDataLoader(ds, batch_size=6)
    it = iter(dl)
    first = [i for _ in range(3) for i in next(it)["b"][:, 0].tolist()]
    state = dl.state_dict()
    again = make(datasets, "kv", 0, 1, shuffle=2)
    dl = sdl.StatefulDataLoader(again, batch_size=6)
    dl.load_state_dict(state)
    assert first + order(dl) == whole
    # Two ranks read the rest from that loader's state.
    rest = []
    for r in range(2):
        d = make(datasets, "kv", r, 2, shuffle=2)
        d.load_state_dict(state)
        rest.append([order(sdl.StatefulDataLoader(d, batch_size=6))])
    check_elastic([[first]], rest, 40, 2, False)


def test_torchdata_snapshots_every_few_steps(datasets):
    # The loader's worker states are as of its last snapshot; the items since count too.
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    ds = make(datasets, "batch", 0, 1, shuffle=8, batch_size=5)
    whole = run(ds)
    dl = sdl.StatefulDataLoader(ds, batch_size=None, num_workers=2, snapshot_every_n_steps=3,
                                multiprocessing_context="fork")
    it = iter(dl)
    first = take(it, 5)
    state = dl.state_dict()
    del it
    again = make(datasets, "batch", 0, 1, shuffle=8, batch_size=5)
    again.load_state_dict(state)
    assert first + run(again) == whole


def _ddp_main(rank, world, init, path, steps, state_file, out):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        ds = TensorIterableDataset(path, shuffle=11, batch_size=4)  # rank from the group
        if steps is None:
            with open(state_file) as f:
                ds.load_state_dict(json.load(f))
        ds.set_epoch(1)
        it = iter(DataLoader(ds, batch_size=None, num_workers=2))
        got = [ids(b) for b in (it if steps is None else (next(it) for _ in range(steps)))]
        dist.barrier()
        if steps is not None and rank == 0:
            with open(state_file, "w") as f:
                json.dump(ds.state_dict(consumed=steps), f)
        with open(f"{out}.{rank}.json", "w") as f:
            json.dump(got, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("new_world", [2, 3])
def test_a_gloo_job_stopped_and_resumed_in_new_processes(datasets, tmp_path, new_world):
    import torch.multiprocessing as mp
    path, steps = str(datasets["batch"][0]), 4
    state_file = str(tmp_path / "state.json")
    whole = [run(make(datasets, "batch", r, 2, shuffle=11, batch_size=4), 1) for r in range(2)]

    def job(world, steps, out):
        mp.spawn(_ddp_main, args=(world, f"file://{tmp_path}/pg.{out}", path, steps,
                                  state_file, str(tmp_path / out)), nprocs=world, join=True)
        return [json.loads((tmp_path / f"{out}.{r}.json").read_text()) for r in range(world)]

    before = job(2, steps, "a")  # every process exits: only the state file is left
    after = job(new_world, None, "b")
    assert before == [w[:steps] for w in whole]
    if new_world == 2:
        assert after == [w[steps:] for w in whole]
    check_elastic(before, after, N, new_world, False)
