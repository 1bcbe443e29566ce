#!/usr/bin/env python3
"""Dataset metadata vectors: manifests as the safetensors-spark connector writes them (batch
and KV mode, per specs/safetensors-spark-format.md §2.2) and a `_tensor_index.parquet`
written by pyarrow with nullable columns, as Spark writes Parquet. Seeds for the `dataset`
fuzz target and inputs for the index reader's tests.

    .venv/bin/python tests/data/dataset/generate.py

Not generated here: `fuzz_*.bin`, inputs found by the `dataset` fuzz target (selector byte,
then the bytes). `fuzz_parquet_negative_column_start.bin` made the Parquet reader panic (now an
error, tests/read_write.rs); `fuzz_parquet_slow_thrift_skip.bin`, a 2 KiB index, cost the
Parquet reader (arrow-rs 60.1, which skips a bool element of a Thrift list as zero bytes)
about 2.8 s before it errored; the Thrift pre-check (src/parquet_guard/) now refuses it at
once (tests/read_write.rs); `fuzz_parquet_schema_children_oom.bin`, `..._oom2.bin` and
`..._oom3.bin` have a schema element claiming up to 2^31 children, for which arrow-rs reserved
6 / 15 / 2 GB before reading them (in the last two the count sits in a field whose header
declares another type, which arrow-rs reads as an i32 anyway); all refused by the pre-check.
`input_<codec>_<encoding>_v<1|2>.parquet` and `input_crc_plain_v1.parquet`: pyarrow's pages
of every codec and encoding, with page checksums, for tests/direct.rs, tests/bad_pages.rs and
the `dataset_write` fuzz target.
`fuzz_write_skip_spin.parquet` (raw input, no selector byte) came from the `dataset_write`
target: its repetition levels end before a page's value count, and skipping rows into it kept
arrow-rs 60.1 in an endless loop (reading them errors); the reader path no longer skips.
"""

import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq

HERE = pathlib.Path(__file__).resolve().parent
U = "550e8400-e29b-41d4-a716-446655440000"

batch = {
    "format_version": "1.0",
    "safetensors_version": "1.0",
    "total_samples": 2500,
    "total_bytes": 3 * 4096 + 2 * 100,
    "shards": [
        {"shard_path": f"part-00000-0000-{U}.safetensors", "samples_count": 1000, "bytes": 4096 + 100},
        {"shard_path": f"part-00000-0001-{U}.safetensors", "samples_count": 1000, "bytes": 4096 + 100},
        {"shard_path": f"part-00001-0000-{U}.safetensors", "samples_count": 500, "bytes": 4096},
    ],
    "schema": {"image": {"dtype": "F32", "shape": [1000, 3, 4, 4]}, "label": {"dtype": "I64", "shape": [1000]}},
}
kv = {
    "format_version": "1.0",
    "safetensors_version": "1.0",
    "total_samples": 2,
    "total_bytes": 256,
    "shards": [{"shard_path": f"part-00000-0000-{U}.safetensors", "samples_count": 2, "bytes": 256}],
    "schema": {"a__emb": {"dtype": "BF16", "shape": [8]}, "b__emb": {"dtype": "BF16", "shape": [8]}},
}
(HERE / "manifest_batch.json").write_text(json.dumps(batch, indent=2) + "\n")
(HERE / "manifest_kv.json").write_text(json.dumps(kv, indent=2) + "\n")

index = pa.table({
    "tensor_key": pa.array(["a__emb", "b__emb"], pa.string()),
    "file_name": pa.array([f"part-00000-0000-{U}.safetensors"] * 2, pa.string()),
    "shape": pa.array([[8], [8]], pa.list_(pa.int32())),
    "dtype": pa.array(["BF16", "BF16"], pa.string()),
})
pq.write_table(index, HERE / "index_kv.parquet")
# Inputs the batch-mode write copies straight from pages (PLAIN, uncompressed, no dictionary):
# list<float32> of 4 values per row, pages of 64 bytes (v1 splits rows between pages), row
# groups of 5 rows; seeds for the `dataset_write` fuzz target.
import numpy as np

vals = np.arange(13 * 4, dtype=np.float32).reshape(13, 4) / 4
col = pa.array(list(vals), type=pa.list_(pa.float32()))
for version in ["1.0", "2.0"]:
    pq.write_table(pa.table({"v": col}), HERE / f"input_plain_v{version[0]}.parquet", row_group_size=5,
                   compression="NONE", use_dictionary=False, data_page_size=64,
                   data_page_version=version, write_statistics=False)
# Inputs the write decodes straight from pages, as pyarrow writes them: every codec, PLAIN,
# dictionary-encoded, and a dictionary that overflows after a few values so that the rest of
# the chunk is PLAIN (pyarrow's fallback); data pages v1 and v2; page checksums (CRC-32) on.
# 13 rows of 4 float32 repeating 7 values, pages of 64 bytes, row groups of 5 rows.
rep = (np.arange(13 * 4) % 7).astype(np.float32).reshape(13, 4) - 2.5
rcol = pa.array(list(rep), type=pa.list_(pa.float32()))
encodings = {
    "plain": dict(use_dictionary=False),
    "dict": dict(use_dictionary=True),
    "fallback": dict(use_dictionary=True, dictionary_pagesize_limit=12),
}
for codec in ["snappy", "zstd", "gzip", "lz4"]:
    for enc, kw in encodings.items():
        for version in ["1.0", "2.0"]:
            pq.write_table(pa.table({"v": rcol}), HERE / f"input_{codec}_{enc}_v{version[0]}.parquet",
                           row_group_size=5, compression=codec, data_page_size=64,
                           data_page_version=version, write_statistics=False,
                           write_page_checksum=True, **kw)
# Uncompressed PLAIN pages with checksums: copied file to file, their CRCs checked first.
pq.write_table(pa.table({"v": col}), HERE / "input_crc_plain_v1.parquet", row_group_size=5,
               compression="NONE", use_dictionary=False, data_page_size=64,
               data_page_version="1.0", write_statistics=False, write_page_checksum=True)
print("wrote", sorted(p.name for p in HERE.iterdir()))
