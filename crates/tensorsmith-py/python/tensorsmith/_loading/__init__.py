"""Loading models by parts: `get_slice` indexing rules, per-rank read plans, and the
loads onto CUDA devices through pinned buffers (`tensorsmith.torch.load_file`,
`load_sharded`)."""
