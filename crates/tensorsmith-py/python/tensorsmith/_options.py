"""Options as the Rust core takes them: dataset options (the safetensors-spark connector's
names, each value as the text Spark's `.option()` would carry) and `storage_options`."""

from __future__ import annotations

import json

import os
from typing import IO, Any, Mapping, Sequence, Union

from .errors import OptionError

# The shapes of the public API's arguments, for its annotations.
#: A local path, or a URL (http(s)://, s3://, az://, gs://, hf://) where one is read.
PathOrUrl = Union[str, "os.PathLike[str]"]
#: A path or URL, or an open binary file object (read by seek/read, or mapped by its fd).
Source = Union[str, "os.PathLike[str]", IO[bytes]]
#: Settings of object-store URLs: key, secret, token, endpoint_url, region, profile, ...
StorageOptions = Union[Mapping[str, Any], None]
#: A file's metadata: string keys to string values.
Metadata = Union[Mapping[str, str], None]
#: Tensors by name: NumPy arrays (or, through tensorsmith.torch, torch tensors).
Tensors = Mapping[str, Any]
#: Names or glob patterns.
Names = Union[Sequence[str], None]


def option_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps({k: list(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


# snake_case spellings of the connector's camelCase option names, so every option can be
# written as Python writes the others: `duplicates_strategy="lastWin"`.
_ALIASES = {"duplicates_strategy": "duplicatesStrategy"}


def option_texts(options: dict) -> dict:
    out = {}
    for k, v in options.items():
        if v is None:
            continue
        name = _ALIASES.get(k, k)
        if name in out:
            raise OptionError(f"{name} is given twice (as {name} and as {k})")
        out[name] = option_text(v)
    return out


def storage_pairs(storage_options) -> list:
    """`storage_options` (a dict, fsspec's convention) as the (key, value) text pairs the
    native layer checks: booleans as "true"/"false". Keys: key, secret, token, endpoint_url,
    region, profile, anon, the aws_* spellings, and the transfer settings (max_concurrency,
    part_size, max_attempts, timeout, connect_timeout); an unknown key is an OptionError."""
    if storage_options is None:
        return []
    if not isinstance(storage_options, dict):
        raise OptionError(f"storage_options must be a dict, not {type(storage_options).__name__}")

    def text(v):
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    return [(str(k), text(v)) for k, v in storage_options.items()]
