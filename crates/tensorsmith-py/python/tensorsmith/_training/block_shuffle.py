"""The block shuffle of `tensorsmith.torch`'s datasets (`shuffle_kind="block"`): an epoch's
order of all samples that a reader streams shard by shard.

Algorithm (a shard-permuted windowed sort, "jittered sort"): the shards are permuted; their
samples, concatenated in that shard order, form a stream; sample p of the stream gets the key
p + u (u uniform in [0, shuffle_block_size)), and the order is the stream sorted by key. A
sample moves less than shuffle_block_size places from its place in the stream (a key below
p + B is below the key of every later sample from p + B on, and above none before p - B + 1),
so a reader at position t of the order needs only the shards covering the stream's
[t - B, t + B): about 2B / (samples per shard) + 1 shards at once, fetched in shard order;
any two samples less than B apart in the stream may come out in either order. One sort of n
keys (vectorised, O(n log n)), computed by every process alike.

Compared with MosaicML Streaming: `py1br` also permutes shards, then cuts the sample stream
into blocks of random sizes around shuffle_block_size and shuffles each block fully: a sample
mixes with every sample of its block and none of the next, and a block's shards are all needed
at its start (downloads come in bursts at block boundaries). `py1e` permutes shards, then
spreads each shard's samples over a range of about shuffle_block_size around the shard's place
and sorts by position (smoother downloads and a smaller cache than py1b/py1br, slightly weaker
mixing, as MosaicML says). Ours is py1e's idea applied per sample rather than per shard: the
window moves with every sample, no block boundaries, the displacement bound is exact (< B)
whatever the shard sizes. Both of MosaicML's also depend on `num_canonical_nodes` (the
order is the same across world sizes only while that is fixed); ours is a function of
(seed, epoch, the dataset version's shard sizes) only.
"""

import torch


def block_order(shard_sizes, seed, epoch, block_size):
    """The epoch's order of all samples (a LongTensor of sample indices), shards permuted
    then samples sorted by jittered stream position (window `block_size`)."""
    sizes = torch.as_tensor(list(shard_sizes), dtype=torch.long)
    n = int(sizes.sum()) if len(sizes) else 0
    g = torch.Generator()
    # Another stream than the global permutation's for the same seed and epoch.
    g.manual_seed((int(seed) * 1_000_003 + int(epoch) * 7919 + 0x5EED) & (2**63 - 1))
    if n == 0:
        return torch.empty(0, dtype=torch.long)
    starts = torch.cumsum(sizes, 0) - sizes
    shard_perm = torch.randperm(len(sizes), generator=g)
    psizes = sizes[shard_perm]
    pstarts = torch.cumsum(psizes, 0) - psizes  # each shard's place in the stream
    stream = (torch.repeat_interleave(starts[shard_perm] - pstarts, psizes)
              + torch.arange(n, dtype=torch.long))
    if block_size <= 1:
        return stream
    keys = torch.arange(n, dtype=torch.float64) + torch.rand(
        n, generator=g, dtype=torch.float64) * float(block_size)
    return stream[torch.argsort(keys, stable=True)]
