"""Importance-matrix files for the small models of ggml_mix_models.py, in llama-imatrix's two
layouts (its GGUF file and the legacy .dat), for `test_ggml_imatrix.py` and
`scripts/gen-ggml-imatrix-vectors`. Every value comes from the integer hash of
ggml_mix_models.py, so the same bytes come out everywhere.

Entries: every 2D/3D weight but the token embeddings (llama-imatrix sees matrix products'
inputs, `ne[0]` values per expert). Sums are positive; counts are 40 + the entry's index per
expert, with expert 1 of 3D tensors at 0 (llama-quantize's weights of 1).
"""

import struct

import numpy as np

import ggml_mix_models as models


def entries(model):
    """{name: (sums as (experts, ne0) float32, counts as (experts,) float32)}."""
    _, _, _, tensors = models.spec(model)
    out = {}
    for k, (name, shape) in enumerate(tensors):
        if len(shape) < 2 or name == "token_embd.weight":
            continue
        experts = shape[0] if len(shape) == 3 else 1
        ne0 = shape[-1]
        sums = np.abs(models.values(500 + k, (experts, ne0), np.float32)) * 50 + 0.25
        counts = np.full(experts, 40 + k, np.float32)
        if experts > 1:
            counts[1] = 0
        out[name] = (sums.astype(np.float32), counts)
    return out


def write_gguf(model, path, ents=None, keys=True):
    """llama-imatrix's GGUF layout: NAME.in_sum2 and NAME.counts (F32), imatrix.* keys."""
    import gguf

    ents = entries(model) if ents is None else ents
    w = gguf.GGUFWriter(str(path), "imatrix")
    w.add_type("imatrix")
    if keys:
        w.add_array("imatrix.datasets", ["hash-text.txt"])
        w.add_uint32("imatrix.chunk_count", 7)
        w.add_uint32("imatrix.chunk_size", 512)
    for name, (sums, counts) in ents.items():
        w.add_tensor(name + ".in_sum2", sums)
        w.add_tensor(name + ".counts", counts.reshape(-1, 1) if counts.ndim == 1 else counts)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_dat(model, path):
    """The legacy .dat layout: entry count; per entry name, ncall, nval, values; then the
    chunk count and the dataset name. ncall is the first expert's count."""
    b = bytearray()
    ents = entries(model)
    b += struct.pack("<i", len(ents))
    for name, (sums, counts) in ents.items():
        n = name.encode()
        b += struct.pack("<i", len(n)) + n
        b += struct.pack("<ii", int(counts[0]), sums.size) + sums.astype("<f4").tobytes()
    b += struct.pack("<i", 7) + struct.pack("<i", 13) + b"hash-text.txt"
    path.write_bytes(bytes(b))
    return path


def weights(model, legacy):
    """The weights llama-quantize hands llama_model_quantize for our files (float32 math as
    its loader does it: sums / count per expert, 1 where the count is 0; legacy: / ncall)."""
    out = {}
    for name, (sums, counts) in entries(model).items():
        if legacy:
            c = np.float32(int(counts[0]))
            w = sums.reshape(-1) / c if c > 0 else sums.reshape(-1)
        else:
            w = np.ones_like(sums)
            for j, c in enumerate(counts):
                c = np.float32(round(float(c)))
                if c > 0:
                    w[j] = sums[j] / c
            w = w.reshape(-1)
        out[name] = np.ascontiguousarray(w, dtype=np.float32)
    return out
