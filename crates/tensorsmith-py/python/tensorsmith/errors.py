"""Exceptions raised by tensorsmith. Every one derives from `TensorsmithError` and carries the
Rust error's message (which names the file, the tensor and the rule); where Python has a
built-in exception for the same situation, the class derives from it too, so code written
for the reference `safetensors` package (`except FileNotFoundError`, `except KeyError`) works."""


class TensorsmithError(Exception):
    """Base class of every tensorsmith error."""


class InvalidFile(TensorsmithError, ValueError):
    """The file breaks a rule of its format."""


class InvalidInput(TensorsmithError, ValueError):
    """Arguments or data handed to a writer are not acceptable."""


class OptionError(TensorsmithError, ValueError):
    """An option name or value is not valid."""


class FileNotFound(TensorsmithError, FileNotFoundError):
    """The file does not exist."""


class IOFailure(TensorsmithError, OSError):
    """Reading or writing failed (I/O or HTTP)."""


class AccessDenied(TensorsmithError, PermissionError):
    """An object store or the Hub refused the credentials (403), or wants some (401)."""


class TensorNotFound(TensorsmithError, KeyError):
    """No tensor of that name in the file."""

    def __str__(self):  # KeyError quotes its message; ours is a sentence
        return str(self.args[0]) if self.args else ""


class BadSlice(TensorsmithError, IndexError):
    """A slice does not fit the tensor's shape."""


class Unsupported(TensorsmithError, NotImplementedError):
    """The file is valid but this operation or dtype is not supported for it."""


class DatasetFailure(TensorsmithError):
    """A dataset could not be written or read."""


class DatasetExists(DatasetFailure, FileExistsError):
    """The folder already holds a dataset (mode='error')."""


class DatasetNotFound(DatasetFailure, FileNotFoundError):
    """The dataset folder, or a file it lists, does not exist."""


class DatasetKeyError(DatasetFailure, KeyError):
    """A KV dataset has no tensor of that key."""

    def __str__(self):  # KeyError quotes its message; ours is a sentence
        return str(self.args[0]) if self.args else ""


class DatasetInputError(DatasetFailure, ValueError):
    """The input cannot become a dataset: a column type, a row, a duplicate key, no rows."""


class DatasetCorrupt(DatasetFailure, ValueError):
    """A dataset or input file on disk breaks a rule of its format."""


class DatasetIOError(DatasetFailure, OSError):
    """Reading or writing a dataset failed."""


class CacheFull(DatasetFailure, OSError):
    """A local shard cache cannot hold what a read needs: a `cache_limit` smaller than a
    shard (or than the shards this node's readers hold at once), or a full disk."""


__all__ = [
    "TensorsmithError", "InvalidFile", "InvalidInput", "OptionError", "FileNotFound",
    "IOFailure", "AccessDenied", "TensorNotFound", "BadSlice", "Unsupported", "DatasetFailure",
    "DatasetExists", "DatasetNotFound", "DatasetKeyError", "DatasetInputError", "DatasetCorrupt", "DatasetIOError",
    "CacheFull",
]
