import common, collections
from torch.utils.data import DataLoader
from tensorsmith.torch import TensorIterableDataset, TensorDataset
from tensorsmith.torch_sampler import TensorSampler
if __name__ == "__main__":
    path, (rid, rx) = common.build("a", 1000, 64, nfiles=3)
    ds = TensorIterableDataset(path, shuffle=5, batch_size=16, rank=1, world_size=3, shuffle_kind="block", shuffle_block_size=100)
    ds.set_epoch(3)
    ref = [common.item_ids(b) for b in ds]
    out = list(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn", pin_memory=True))
    for b in out: common.check_values(b, rx)
    print("spawn+pin iterable same order:", [common.item_ids(b) for b in out] == ref)
    it = iter(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")); got = [common.item_ids(next(it)) for _ in range(5)]; del it
    st = ds.state_dict(consumed=5)
    ds2 = TensorIterableDataset(path, shuffle=5, batch_size=16, rank=1, world_size=3, shuffle_kind="block", shuffle_block_size=100); ds2.load_state_dict(st)
    rest = [common.item_ids(b) for b in DataLoader(ds2, batch_size=None, num_workers=2, multiprocessing_context="spawn")]
    print("spawn resume exact:", got + rest == ref)
    t = TensorDataset(path); s = TensorSampler(t, shuffle=9, rank=0, world_size=2); s.set_epoch(2)
    o = [i for b in DataLoader(t, sampler=s, batch_size=10, num_workers=2, multiprocessing_context="spawn", pin_memory=True) for i in common.item_ids(b)]
    print("map-style spawn+pin == sampler order:", o == list(s))
