"""`validate`, `verify` and the dataset commands (`dataset_info`, `dataset_verify`,
`dataset_clean`, `dataset_export`), with the CLI's semantics: a file or dataset that breaks a
rule is a result (`valid`/`ok` false, with the reasons), as the CLI's exit 1; one that cannot
be read raises (`FileNotFoundError`, `OSError`, ...), as its exit 2."""

from __future__ import annotations

import json
import os
from typing import Any

from . import _native
from ._options import Names, PathOrUrl, Source, StorageOptions
from ._options import storage_pairs as _storage


def validate(target: Source, *, packed_ints: bool = False, backend: str = "mmap",
             storage_options: StorageOptions = None) -> dict[str, Any]:
    """Every rule of the model's format (a file, a folder of shards, an index or a URL):
    `{"valid": bool, "tensors": int or None, "error": str or None}`.

    >>> tensorsmith.validate("model.safetensors")["valid"]  # doctest: +SKIP
    True"""
    return json.loads(_native.validate_json(os.fspath(target), packed_ints, backend,
                                            _storage(storage_options)))


def verify(target: Source, *, backend: str = "mmap",
           storage_options: StorageOptions = None) -> dict[str, Any]:
    """Every recorded digest and full-read data rule: `{"ok", "checked", "undigested",
    "failures"}` (`checked`: digests that matched; `undigested`: parts without one).

    >>> tensorsmith.verify("model.zt")["ok"]  # doctest: +SKIP
    True"""
    return json.loads(_native.verify_json(os.fspath(target), backend,
                                          _storage(storage_options)))


def dataset_info(path: PathOrUrl, *, storage_options: StorageOptions = None) -> dict[str, Any]:
    """`{"version", "manifest", "versions", "retired_shards"}` of the dataset in `path`.

    >>> tensorsmith.dataset_info("ds")["manifest"]["total_samples"]  # doctest: +SKIP
    8"""
    return json.loads(_native.dataset_info_json(os.fspath(path), _storage(storage_options)))


def dataset_verify(path: PathOrUrl, *, version: int | None = None, stale_after: str = "24h",
                   repair: bool = False,
                   storage_options: StorageOptions = None) -> dict[str, Any]:
    """The dataset's manifest, index and shards against each other: `{"ok", "shards",
    "tensors", "problems", "notes", "repaired"}` (notes: files beside the dataset that no
    version lists, which do not make it unsound); `version` checks an older version still kept.

    >>> tensorsmith.dataset_verify("ds")["problems"]  # doctest: +SKIP
    []"""
    return json.loads(_native.dataset_verify_json(os.fspath(path), version, stale_after, repair,
                                                  _storage(storage_options)))


def dataset_clean(path: PathOrUrl, *, older_than: str = "24h",
                  storage_options: StorageOptions = None) -> dict[str, Any]:
    """Removes versions superseded for longer than `older_than` and the shards only they
    list, shards of killed commits and stale staging folders; returns what was removed, and
    under "kept" what it left for now with "from_ms", when a clean of the same retention
    takes it.

    >>> tensorsmith.dataset_clean("ds", older_than="0")["versions"]  # doctest: +SKIP
    [1]"""
    return json.loads(_native.dataset_clean_json(os.fspath(path), older_than,
                                                 _storage(storage_options)))


def dataset_export(path: PathOrUrl, out: PathOrUrl, *, keys: Names = None,
                   kv_separator: str = "__", storage_options: StorageOptions = None,
                   columns: Names = None) -> int:
    """Writes the dataset to the Parquet file `out` (batch: a row per sample; KV: a row per
    tensor) and returns the rows written; `keys` (KV) are names or full tensor keys,
    `columns` (batch) the columns to write (on a store only theirs are read, by range).

    >>> tensorsmith.dataset_export("kv", "a.parquet", keys=["a"])  # doctest: +SKIP
    1"""
    if isinstance(columns, str):
        columns = [columns]
    return _native.dataset_export(os.fspath(path), os.fspath(out),
                                  None if keys is None else list(keys), kv_separator,
                                  _storage(storage_options),
                                  None if columns is None else list(columns))
