"""Feeding datasets to training loops (`tensorsmith.torch`'s datasets): the shards a
process holds, the node's shard cache for datasets on stores, read-ahead, and the block
shuffle."""
